#!/usr/bin/env node
// Project set-up: install dependencies, build, and (for tests) host tools. Idempotent and quick when
// there is nothing to do. Node built-ins ONLY: this runs before node_modules exists.
//
//   node scripts/setup.mjs [--quiet] [--for=test] [--no-build] [--check]
//
// Each step is { name, title, applies(ctx), isDone(ctx), run(ctx) }: a step that applies and is not done
// runs, and prints one short line when it did work. To add a step (a runtime, a venv, a host tool), add an
// object to STEPS; keep isDone() cheap (stat a stamp, hash a small file), since it runs on every start.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const INSTALL_STAMP = join(ROOT, 'node_modules', '.svc-emu-setup.json');
const BUILD_STAMP = join(ROOT, 'out', '.build-stamp');
const HOST_STAMP = join(ROOT, 'out', '.host-setup.json');
const LOCK_DIR = join(ROOT, 'out', '.setup.lock');

/** Sources whose change means a rebuild (directories are walked; missing entries are fine). */
const BUILD_INPUTS = [
  'main',
  'renderer',
  'server',
  'executor',
  'electron.vite.config.ts',
  'vite.cli.config.ts',
  'tsconfig.json',
  'package.json',
  'package-lock.json',
];
/** What a finished build leaves behind; a missing one means a rebuild even when sources did not change. */
export const BUILD_OUTPUTS = ['out/main/index.js', 'out/preload/index.js', 'out/renderer/index.html', 'out/cli/svc-emu.mjs'];
const SKIP_DIRS = new Set(['node_modules', '__pycache__', '.venv', '.git', 'out', 'dist']);

const CHROMIUM = '/usr/bin/chromium';
/** After a failed chromium install, wait this long before trying again (apt can be slow when offline). */
const CHROMIUM_RETRY_MS = 6 * 60 * 60 * 1000;

// ---------------------------------------------------------------------------------------------------
// Steps

/** @typedef {{ root: string, quiet: boolean, forTest: boolean, build: boolean, log: (line: string) => void, notice: (line: string) => void }} Ctx */
/** @typedef {{ name: string, title: string, applies?: (ctx: Ctx) => boolean, isDone: (ctx: Ctx) => boolean, run: (ctx: Ctx) => Promise<string | void> }} Step */

/** @type {Step} */
const installStep = {
  name: 'deps',
  title: 'installing dependencies',
  isDone() {
    if (!existsSync(join(ROOT, 'node_modules'))) return false;
    const stamp = readJson(INSTALL_STAMP);
    return stamp !== null && stamp.lockHash === lockHash();
  },
  async run(ctx) {
    const hash = lockHash();
    // node_modules may already match the lockfile (someone ran `npm ci`/`npm install` by hand): then
    // only write the stamp instead of reinstalling everything.
    if (existsSync(join(ROOT, 'package-lock.json')) && installedTreeMatchesLock()) {
      writeJson(INSTALL_STAMP, { lockHash: hash, at: new Date().toISOString(), by: 'check' });
      return;
    }
    const hasLock = existsSync(join(ROOT, 'package-lock.json'));
    // --include=dev: the build needs the dev dependencies even when NODE_ENV=production.
    const args = [hasLock ? 'ci' : 'install', '--include=dev', '--no-audit', '--no-fund'];
    await runTool(ctx, `npm ${args[0]}`, npmCommand(args), {
      env: {
        CI: process.env.CI ?? 'true',
        // Electron fetches its binary lazily since v42; make sure no older path tries to download it.
        ELECTRON_SKIP_BINARY_DOWNLOAD: '1',
        npm_config_update_notifier: 'false',
      },
    });
    writeJson(INSTALL_STAMP, { lockHash: hash, at: new Date().toISOString(), by: `npm ${args[0]}` });
    return `dependencies installed (npm ${args[0]})`;
  },
};

/** @type {Step} */
const buildStep = {
  name: 'build',
  title: 'building (electron-vite + CLI bundle)',
  applies: (ctx) => ctx.build,
  isDone() {
    if (!BUILD_OUTPUTS.every((p) => existsSync(join(ROOT, p)))) return false;
    const stamp = readJson(BUILD_STAMP);
    return stamp !== null && stamp.hash === sourceHash();
  },
  async run(ctx) {
    const hash = sourceHash();
    rmSync(BUILD_STAMP, { force: true });
    const bin = (pkg, file) => join(ROOT, 'node_modules', pkg, 'bin', file);
    const env = { NODE_ENV: 'production' };
    // The two builds are independent: run them side by side.
    const results = await Promise.allSettled([
      runTool(ctx, 'electron-vite build', [process.execPath, bin('electron-vite', 'electron-vite.js'), 'build'], { env }),
      runTool(ctx, 'CLI bundle (vite build -c vite.cli.config.ts)', [process.execPath, bin('vite', 'vite.js'), 'build', '-c', 'vite.cli.config.ts'], { env }),
    ]);
    const failures = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
    if (failures.length > 0) throw new SetupError(failures.map((e) => (e instanceof Error ? e.message : String(e))).join('\n\n'));
    const missing = BUILD_OUTPUTS.filter((p) => !existsSync(join(ROOT, p)));
    if (missing.length > 0) throw new SetupError(`the build finished but did not produce ${missing.join(', ')}`);
    writeJson(BUILD_STAMP, { hash, at: new Date().toISOString() });
    return 'built out/main, out/preload, out/renderer and out/cli/svc-emu.mjs';
  },
};

/** @type {Step} */
const chromiumStep = {
  name: 'chromium',
  title: 'installing chromium (apt-get)',
  applies: (ctx) => ctx.forTest,
  isDone(ctx) {
    if (chromiumPath()) return true;
    const why = chromiumUnavailableReason();
    if (why) {
      ctx.notice(`setup: ${why} — the GUI tests will skip`);
      return true;
    }
    const failed = readJson(HOST_STAMP)?.chromiumFailedAt;
    if (typeof failed === 'number' && Date.now() - failed < CHROMIUM_RETRY_MS) {
      ctx.notice(`setup: chromium is not installed (apt-get failed recently; retry with --retry-host-tools) — the GUI tests will skip`);
      return true;
    }
    return false;
  },
  async run(ctx) {
    const env = { DEBIAN_FRONTEND: 'noninteractive' };
    try {
      await runTool(ctx, 'apt-get update', ['apt-get', 'update'], { env, timeoutMs: 180_000 });
      await runTool(ctx, 'apt-get install chromium', ['apt-get', 'install', '-y', '--no-install-recommends', 'chromium'], { env, timeoutMs: 900_000 });
    } catch (error) {
      // Never fail the set-up for a GUI-test tool: say so, remember, and let the GUI tests skip.
      writeJson(HOST_STAMP, { ...readJson(HOST_STAMP), chromiumFailedAt: Date.now() });
      ctx.notice(`setup: could not install chromium (${error instanceof Error ? error.message.split('\n')[0] : error}) — the GUI tests will skip`);
      return;
    }
    if (!chromiumPath()) {
      ctx.notice(`setup: apt-get installed chromium but ${CHROMIUM} is missing — the GUI tests will skip`);
      return;
    }
    return `installed chromium (${CHROMIUM})`;
  },
};

/** In order. Later issues add the Bun runtime, the Python venv (uv) and bubblewrap here. */
export const STEPS = [installStep, buildStep, chromiumStep];

// ---------------------------------------------------------------------------------------------------
// Running the steps

export class SetupError extends Error {}

/**
 * Runs every applicable step that is not done. Resolves to the names of the steps that ran.
 * @param {{ quiet?: boolean, forTest?: boolean, build?: boolean }} [options]
 */
export async function runSetup(options = {}) {
  const quiet = options.quiet ?? false;
  const noticed = new Set();
  /** @type {Ctx} */
  const ctx = {
    root: ROOT,
    quiet,
    forTest: options.forTest ?? false,
    build: options.build ?? true,
    log: (line) => {
      if (!quiet) process.stdout.write(`${line}\n`);
    },
    notice: (line) => {
      if (quiet || noticed.has(line)) return;
      noticed.add(line);
      process.stderr.write(`${line}\n`);
    },
  };
  const applicable = STEPS.filter((s) => !s.applies || s.applies(ctx));
  // Fast path: nothing to do, no lock, no output (beyond a step's notice).
  if (applicable.every((s) => s.isDone(ctx))) return [];

  const release = await acquireLock(ctx);
  const ran = [];
  try {
    for (const step of applicable) {
      // Checked again under the lock: another set-up may have done it meanwhile.
      if (step.isDone(ctx)) continue;
      const started = Date.now();
      const live = !quiet && process.stdout.isTTY;
      if (live) process.stdout.write(`setup: ${step.title}…`);
      let summary;
      try {
        summary = await step.run(ctx);
      } catch (error) {
        if (live) process.stdout.write('\n');
        throw error;
      }
      const took = `${((Date.now() - started) / 1000).toFixed(1)}s`;
      if (live) process.stdout.write(summary ? ` done (${took})\n` : ` done\n`);
      else if (summary) ctx.log(`setup: ${summary} (${took})`);
      ran.push(step.name);
    }
  } finally {
    release();
  }
  return ran;
}

/** The steps that would run, without running them. */
export function pendingSteps(options = {}) {
  const ctx = { root: ROOT, quiet: true, forTest: options.forTest ?? false, build: options.build ?? true, log() {}, notice() {} };
  return STEPS.filter((s) => (!s.applies || s.applies(ctx)) && !s.isDone(ctx)).map((s) => s.name);
}

/**
 * Runs a command (argv array, no shell), stdin closed, output captured; rejects with the output's tail.
 * @param {Ctx} ctx
 * @param {string} label
 * @param {string[]} argv
 * @param {{ env?: Record<string, string>, timeoutMs?: number }} [opts]
 */
function runTool(ctx, label, argv, opts = {}) {
  return new Promise((resolvePromise, reject) => {
    const [cmd, ...args] = argv;
    // Output is captured and shown only on failure: keep it free of colour codes unless it goes to a terminal.
    const colour = process.stderr.isTTY ? {} : { NO_COLOR: '1', FORCE_COLOR: '0' };
    const child = spawn(cmd, args, {
      cwd: ROOT,
      env: { ...process.env, ...colour, ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      shell: process.platform === 'win32' && !cmd.endsWith('.exe') && cmd !== process.execPath,
      windowsHide: true,
    });
    let output = '';
    const keep = (chunk) => {
      output += chunk;
      if (output.length > 200_000) output = output.slice(-100_000);
    };
    child.stdout.setEncoding('utf8').on('data', keep);
    child.stderr.setEncoding('utf8').on('data', keep);
    const timer = opts.timeoutMs ? setTimeout(() => child.kill('SIGTERM'), opts.timeoutMs) : undefined;
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new SetupError(`${label} could not start: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolvePromise(output);
      const tail = output.trim().split('\n').slice(-40).join('\n');
      const how = signal ? `was killed (${signal})` : `exited with ${code}`;
      reject(new SetupError(`${label} ${how}${tail ? `:\n${tail}` : ''}`));
    });
  });
}

/** npm as an argv: the npm that runs us (npm_execpath) when there is one, else `npm` on PATH. */
function npmCommand(args) {
  const execPath = process.env.npm_execpath;
  if (execPath && /npm-cli\.[cm]?js$/.test(execPath) && existsSync(execPath)) return [process.execPath, execPath, ...args];
  return [process.platform === 'win32' ? 'npm.cmd' : 'npm', ...args];
}

// ---------------------------------------------------------------------------------------------------
// Stamps and hashes

function lockHash() {
  const lock = join(ROOT, 'package-lock.json');
  const file = existsSync(lock) ? lock : join(ROOT, 'package.json');
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/**
 * True when node_modules/.package-lock.json (npm's record of what it installed) has every package of
 * package-lock.json at the locked version; packages npm may skip (optional, other platforms) may be absent.
 */
function installedTreeMatchesLock() {
  const lock = readJson(join(ROOT, 'package-lock.json'));
  const installed = readJson(join(ROOT, 'node_modules', '.package-lock.json'));
  if (!lock?.packages || !installed?.packages) return false;
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '' || entry.link) continue;
    const have = installed.packages[path];
    if (!have) {
      if (entry.optional || entry.devOptional || entry.peer) continue;
      return false;
    }
    if (have.version !== entry.version) return false;
    if (!existsSync(join(ROOT, path))) return false;
  }
  return true;
}

/** A hash of the path, size and mtime of every build input: cheap (stat only) and catches any edit. */
export function sourceHash() {
  const hash = createHash('sha256');
  const visit = (abs) => {
    let st;
    try {
      st = statSync(abs);
    } catch {
      return;
    }
    if (st.isDirectory()) {
      for (const name of readdirSync(abs).sort()) {
        if (name.startsWith('.') || SKIP_DIRS.has(name)) continue;
        visit(join(abs, name));
      }
    } else if (st.isFile()) {
      hash.update(`${relative(ROOT, abs).split(sep).join('/')}\0${st.size}\0${st.mtimeMs}\n`);
    }
  };
  for (const input of BUILD_INPUTS) visit(join(ROOT, input));
  return hash.digest('hex');
}

function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

function writeJson(file, value) {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(tmp, file);
}

// ---------------------------------------------------------------------------------------------------
// Host tools

function chromiumPath() {
  const override = process.env.SVC_EMU_CHROMIUM;
  if (override && existsSync(override)) return override;
  return existsSync(CHROMIUM) ? CHROMIUM : null;
}

/** Why chromium cannot be installed here, or null when apt-get can do it. */
function chromiumUnavailableReason() {
  if (process.platform !== 'linux') return `chromium is not installed (automatic install is for Debian only; this is ${process.platform})`;
  if (!existsSync('/etc/debian_version') || !existsSync('/usr/bin/apt-get')) return 'chromium is not installed (automatic install is for Debian only)';
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    return `chromium is not installed and setup is not root (run: sudo apt-get install --no-install-recommends chromium)`;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------
// One set-up at a time (two `npm test` runs must not run `npm ci` into the same node_modules)

async function acquireLock(ctx) {
  mkdirSync(dirname(LOCK_DIR), { recursive: true });
  const deadline = Date.now() + 20 * 60 * 1000;
  let said = false;
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      writeFileSync(join(LOCK_DIR, 'pid'), String(process.pid));
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        rmSync(LOCK_DIR, { recursive: true, force: true });
      };
      process.once('exit', release);
      return release;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
    }
    if (lockIsStale()) {
      rmSync(LOCK_DIR, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new SetupError(`another set-up holds ${relative(ROOT, LOCK_DIR)}; remove it if none runs`);
    if (!said) {
      ctx.log('setup: waiting for another set-up to finish…');
      said = true;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

function lockIsStale() {
  let pid;
  try {
    pid = Number(readFileSync(join(LOCK_DIR, 'pid'), 'utf8'));
  } catch {
    // Created but no pid yet: stale only if it is old.
    try {
      return Date.now() - statSync(LOCK_DIR).mtimeMs > 10_000;
    } catch {
      return false;
    }
  }
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return error.code === 'ESRCH';
  }
}

// ---------------------------------------------------------------------------------------------------
// CLI

export function parseArgs(argv) {
  const opts = { quiet: false, forTest: false, build: true, check: false, retryHostTools: false, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quiet' || arg === '-q') opts.quiet = true;
    else if (arg === '--no-build') opts.build = false;
    else if (arg === '--check') opts.check = true;
    else if (arg === '--retry-host-tools') opts.retryHostTools = true;
    else if (arg === '--help' || arg === '-h') opts.help = true;
    else if (arg.startsWith('--for=') || arg === '--for') {
      const value = arg === '--for' ? argv[++i] : arg.slice('--for='.length);
      if (value === 'test') opts.forTest = true;
      else if (value !== 'dev' && value !== 'start') throw new SetupError(`unknown --for value: ${value} (expected test)`);
    } else throw new SetupError(`unknown option: ${arg}`);
  }
  return opts;
}

const USAGE = `usage: node scripts/setup.mjs [--quiet] [--for=test] [--no-build] [--check]
  --quiet        print nothing unless something fails
  --for=test     also prepare what the tests need (chromium for the GUI tests)
  --no-build     install only, do not build
  --check        run nothing; list the steps that would run and exit 1 if any would
  --retry-host-tools  retry host tool installs that failed recently`;

async function cli() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (opts.retryHostTools) rmSync(HOST_STAMP, { force: true });
  if (opts.check) {
    const pending = pendingSteps(opts);
    if (!opts.quiet) process.stdout.write(pending.length ? `setup: would run ${pending.join(', ')}\n` : 'setup: nothing to do\n');
    return pending.length ? 1 : 0;
  }
  await runSetup(opts);
  return 0;
}

const invokedDirectly = process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  cli().then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      const message = error instanceof SetupError ? error.message : error?.stack ?? String(error);
      process.stderr.write(`setup failed: ${message}\n`);
      process.exitCode = 1;
    },
  );
}
