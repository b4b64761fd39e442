#!/usr/bin/env node
// Project set-up: install dependencies, build, and (for tests) host tools. Idempotent and quick when
// there is nothing to do. Node built-ins ONLY: this runs before node_modules exists.
//
//   node scripts/setup.mjs [--quiet] [--for=test] [--no-build] [--check] [--relock-runtimes]
//
// Besides the project's own dependencies and build, it prepares the snippet runtimes in .runtimes/
// (Bun + shared node_modules, a Python 3.11 venv made with uv, bubblewrap when apt-get can install it)
// from executor/runtimes/manifest.json, and records what it installed in .runtimes/runtime-lock.json.
//
// Each step is { name, title, applies(ctx), isDone(ctx), run(ctx) }: a step that applies and is not done
// runs, and prints one short line when it did work. To add a step (a runtime, a venv, a host tool), add an
// object to STEPS; keep isDone() cheap (stat a stamp, hash a small file), since it runs on every start.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

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
/** After a failed apt-get install (chromium, bubblewrap), wait this long before trying again (apt can be slow when offline). */
const HOST_TOOL_RETRY_MS = 6 * 60 * 60 * 1000;

// Runtimes (DESIGN.md "Runtimes"). Sources live in executor/runtimes; what setup installs lives in .runtimes/
// (gitignored, machine-local). executor/runtimes/manifest.json is the single source of truth; the Bun
// package.json + lock and the Python requirements derive from it (`--relock-runtimes` regenerates them).
// SVC_EMU_RUNTIMES_DIR: elsewhere (a Lima VM installs its own Linux runtimes beside the host's mounted checkout).
const RUNTIMES_DIR = process.env.SVC_EMU_RUNTIMES_DIR ? resolve(process.env.SVC_EMU_RUNTIMES_DIR) : join(ROOT, '.runtimes');
const MANIFEST = join(ROOT, 'executor', 'runtimes', 'manifest.json');
const RUNTIME_PACKAGE = join(ROOT, 'executor', 'runtimes', 'bun', 'runtime-package.json');
const RUNTIME_PACKAGE_LOCK = join(ROOT, 'executor', 'runtimes', 'bun', 'runtime-package-lock.json');
/** Our Bun libraries: installed as real copies (not symlinks) so they resolve from inside .runtimes/bun. */
const SVC_BUN_PACKAGES = {
  '@svc/store': 'executor/runtimes/bun/packages/svc-store',
  '@svc/integrations': 'executor/runtimes/bun/packages/svc-integrations',
};
const REQUIREMENTS = join(ROOT, 'executor', 'runtimes', 'python', 'requirements.txt');
const SVC_PYTHON = join(ROOT, 'executor', 'runtimes', 'python', 'svc');
const BUN_DIR = join(RUNTIMES_DIR, 'bun');
const BUN_STAMP = join(BUN_DIR, '.svc-emu-stamp.json');
const UV_DIR = join(RUNTIMES_DIR, 'uv');
const UV_STAMP = join(UV_DIR, '.svc-emu-stamp.json');
const VENV = join(RUNTIMES_DIR, 'python');
const PYTHON_STAMP = join(VENV, '.svc-emu-stamp.json');
export const RUNTIME_LOCK = join(RUNTIMES_DIR, 'runtime-lock.json');
const RELOCK_COMMAND = 'node scripts/setup.mjs --relock-runtimes';

// ---------------------------------------------------------------------------------------------------
// Steps

/** @typedef {{ root: string, quiet: boolean, forTest: boolean, forVm?: boolean, build: boolean, log: (line: string) => void, notice: (line: string) => void, aptUpdated?: boolean }} Ctx */
/** @typedef {{ name: string, title: string, applies?: (ctx: Ctx) => boolean, isDone: (ctx: Ctx) => boolean, run: (ctx: Ctx) => Promise<string | void> }} Step */

/** @type {Step} */
const installStep = {
  name: 'deps',
  applies: (ctx) => !ctx.forVm,
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
  applies: (ctx) => ctx.build && !ctx.forVm,
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
/**
 * A host tool from apt-get that the project can do without (degraded): installed where apt can, never
 * failing the set-up; a failed install is remembered for a while (retry with --retry-host-tools).
 * @param {{ name: string, pkg: string, find: () => string | null | undefined, timeoutMs: number, without: string, applies?: (ctx: Ctx) => boolean }} tool
 * @returns {Step}
 */
function hostToolStep(tool) {
  const failedKey = `${tool.name}FailedAt`;
  return {
    name: tool.name,
    title: `installing ${tool.pkg} (apt-get)`,
    ...(tool.applies ? { applies: tool.applies } : {}),
    isDone(ctx) {
      if (tool.find()) return true;
      const why = aptUnavailableReason(tool.pkg);
      if (why) {
        ctx.notice(`setup: ${why} — ${tool.without}`);
        return true;
      }
      const failed = readJson(HOST_STAMP)?.[failedKey];
      if (typeof failed === 'number' && Date.now() - failed < HOST_TOOL_RETRY_MS) {
        ctx.notice(`setup: ${tool.pkg} is not installed (apt-get failed recently; retry with --retry-host-tools) — ${tool.without}`);
        return true;
      }
      return false;
    },
    async run(ctx) {
      try {
        await aptGetInstall(ctx, [tool.pkg], tool.timeoutMs);
      } catch (error) {
        writeJson(HOST_STAMP, { ...readJson(HOST_STAMP), [failedKey]: Date.now() });
        ctx.notice(`setup: could not install ${tool.pkg} (${error instanceof Error ? error.message.split('\n')[0] : error}) — ${tool.without}`);
        return;
      }
      const bin = tool.find();
      if (!bin) {
        ctx.notice(`setup: apt-get installed ${tool.pkg} but it is not where it should be — ${tool.without}`);
        return;
      }
      return `installed ${tool.pkg} (${bin})`;
    },
  };
}

const chromiumStep = hostToolStep({
  name: 'chromium',
  pkg: 'chromium',
  applies: (ctx) => ctx.forTest,
  find: () => chromiumPath(),
  timeoutMs: 900_000,
  without: 'the GUI tests will skip',
});

/** @type {Step} */
const bunRuntimeStep = {
  name: 'bun-runtime',
  title: 'installing the Bun runtime (.runtimes/bun)',
  isDone() {
    const stamp = readJson(BUN_STAMP);
    return stamp !== null && stamp.depsHash === bunDepsHash() && stamp.svcHash === bunSvcHash() && typeof stamp.bin === 'string' && existsSync(stamp.bin);
  },
  async run(ctx) {
    const manifest = readManifest();
    const disagreement = runtimePackageDisagreement(manifest, readJson(RUNTIME_PACKAGE), readJson(RUNTIME_PACKAGE_LOCK));
    if (disagreement) throw new SetupError(`${disagreement}: run \`${RELOCK_COMMAND}\``);
    const depsHash = bunDepsHash();
    const svcHash = bunSvcHash();
    const stamp = readJson(BUN_STAMP);
    rmSync(BUN_STAMP, { force: true });
    let how = 'libraries updated';
    if (stamp?.depsHash !== depsHash || !existsSync(join(BUN_DIR, 'node_modules', '.package-lock.json'))) {
      prepareBunDir();
      if (installedTreeMatchesLock(BUN_DIR)) {
        how = 'node_modules already matched its lock'; // only the stamp was stale
      } else {
        // npm ci: exactly the committed lock, so every machine (and the Lima VM) gets the same tree.
        // --ignore-scripts: the only install script in the tree is bun's postinstall, which just moves the
        // binary out of @oven/bun-<platform> (denied in allowScripts too; the flag also covers npm 10).
        // --install-links: `file:` deps are copied in, not symlinked (see syncSvcBunPackages).
        await runTool(ctx, 'npm ci (.runtimes/bun)', npmCommand(['ci', '--prefix', BUN_DIR, ...BUN_NPM_FLAGS]), {
          cwd: BUN_DIR,
          env: NESTED_NPM_ENV,
          timeoutMs: 600_000,
        });
        how = 'npm ci';
      }
    }
    syncSvcBunPackages();
    const bin = findBunBinary();
    if (!bin) throw new SetupError(`npm ci finished but no Bun binary was found under ${relative(ROOT, join(BUN_DIR, 'node_modules', '@oven'))}`);
    const version = toolVersion(bin, ['--version']);
    if (version !== manifest.bun.version) throw new SetupError(`${relative(ROOT, bin)} --version says ${version}, the manifest pins ${manifest.bun.version}`);
    writeJson(BUN_STAMP, { depsHash, svcHash, bin, version, at: new Date().toISOString() });
    return `Bun ${version} runtime ready in .runtimes/bun (${how})`;
  },
};

/** @type {Step} */
const pythonRuntimeStep = {
  name: 'python-runtime',
  title: 'installing the Python runtime (.runtimes/python, uv)',
  isDone() {
    const stamp = readJson(PYTHON_STAMP);
    return (
      stamp !== null &&
      stamp.hash === pythonHash() &&
      existsSync(join(VENV, 'bin', 'python')) &&
      typeof stamp.basePython === 'string' &&
      existsSync(stamp.basePython)
    );
  },
  async run(ctx) {
    const manifest = readManifest();
    const disagreement = requirementsDisagreement(manifest, readText(REQUIREMENTS));
    if (disagreement) throw new SetupError(`${disagreement}: run \`${RELOCK_COMMAND}\``);
    const hash = pythonHash();
    rmSync(PYTHON_STAMP, { force: true });
    const base = findBasePython(manifest.python.version);
    const uv = await ensureUv(ctx, manifest, base);
    const uvEnv = { UV_PYTHON_DOWNLOADS: 'never', VIRTUAL_ENV: undefined, PYTHONPATH: undefined };
    const python = join(VENV, 'bin', 'python');
    if (!venvMatches(base)) {
      rmSync(VENV, { recursive: true, force: true });
      await runTool(ctx, 'uv venv', [uv, 'venv', '--no-project', '--python', base.executable, VENV], { env: uvEnv });
    }
    // One `uv pip sync` of the locked requirements plus our `svc` package: the venv then holds exactly
    // these (a package dropped from the lock goes), and svc is never missing in between. svc is
    // installed non-editable (a sandbox sees site-packages, not the source tree) and rebuilt every time
    // this step runs, which is whenever its sources change (they are in pythonHash()).
    const wanted = join(RUNTIMES_DIR, 'python-sync.txt');
    writeFileSync(wanted, `-r ${REQUIREMENTS}\nsvc @ ${pathToFileURL(SVC_PYTHON).href}\n`);
    await runTool(ctx, 'uv pip sync', [uv, 'pip', 'sync', '--python', python, '--compile-bytecode', '--reinstall-package', 'svc', wanted], {
      env: uvEnv,
      timeoutMs: 600_000,
    });
    writeJson(PYTHON_STAMP, { hash, basePython: base.executable, version: base.version, at: new Date().toISOString() });
    return `Python ${base.version} runtime ready in .runtimes/python (uv ${manifest.tools.uv})`;
  },
};

/** @type {Step} */
const bubblewrapStep = hostToolStep({
  name: 'bubblewrap',
  pkg: 'bubblewrap',
  find: () => findOnPath('bwrap'),
  timeoutMs: 300_000,
  without: 'snippets will run without the parity sandbox (parity degraded)',
});

/** @type {Step} */
const runtimeLockStep = {
  name: 'runtime-lock',
  title: 'recording the installed runtimes (.runtimes/runtime-lock.json)',
  isDone() {
    return readJson(RUNTIME_LOCK)?.inputsHash === runtimeLockInputsHash();
  },
  async run(ctx) {
    const inputsHash = runtimeLockInputsHash();
    const lock = collectRuntimeLock(readManifest());
    writeJson(RUNTIME_LOCK, { ...lock, inputsHash });
    const wrong = lockMismatches(readManifest(), lock);
    if (wrong.length > 0) ctx.notice(`setup: installed runtimes differ from the manifest: ${wrong.join('; ')}`);
    return `recorded the installed runtimes in .runtimes/runtime-lock.json`;
  },
};

const RUNNER_PY_DIR = join(ROOT, 'executor', 'runtimes', 'python');
const RUNNER_BYTECODE_STAMP = join(RUNTIMES_DIR, 'runner-bytecode.json');
const runnerSourcesHash = () =>
  createHash('sha256')
    .update(readdirSync(RUNNER_PY_DIR).filter((f) => f.endsWith('.py')).sort().map((f) => f + readFileSync(join(RUNNER_PY_DIR, f), 'utf8')).join('\0'))
    .digest('hex');

/**
 * The Python runner's bytecode, compiled ahead: the sandbox binds executor/runtimes read-only, so a
 * runner could never cache it itself and would recompile on every cold start (~3 ms).
 * @type {Step}
 */
const runnerBytecodeStep = {
  name: 'runner-bytecode',
  title: 'compiling the Python runner',
  isDone: () => readJson(RUNNER_BYTECODE_STAMP)?.hash === runnerSourcesHash(),
  async run(ctx) {
    const python = readJson(RUNTIME_LOCK)?.python?.bin;
    if (!python) throw new SetupError('no Python runtime recorded in the runtime lock: the python-runtime step did not finish');
    await runTool(ctx, 'python -m compileall (runner)', [python, '-m', 'compileall', '-q', RUNNER_PY_DIR]);
    writeJson(RUNNER_BYTECODE_STAMP, { hash: runnerSourcesHash() });
    return 'compiled the Python runner';
  },
};

/** In order. The runtime steps run for start, build and test alike (all of them run snippets). */
export const STEPS = [installStep, bunRuntimeStep, pythonRuntimeStep, bubblewrapStep, runtimeLockStep, runnerBytecodeStep, buildStep, chromiumStep];

// ---------------------------------------------------------------------------------------------------
// Running the steps

export class SetupError extends Error {}

/**
 * Runs every applicable step that is not done. Resolves to the names of the steps that ran.
 * @param {{ quiet?: boolean, forTest?: boolean, forVm?: boolean, build?: boolean, relockRuntimes?: boolean }} [options]
 */
export async function runSetup(options = {}) {
  const quiet = options.quiet ?? false;
  const noticed = new Set();
  /** @type {Ctx} */
  const ctx = {
    root: ROOT,
    quiet,
    forTest: options.forTest ?? false,
    forVm: options.forVm ?? false,
    build: options.build ?? true,
    aptUpdated: false,
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
  if (!options.relockRuntimes && applicable.every((s) => s.isDone(ctx))) return [];

  const release = await acquireLock(ctx);
  const ran = [];
  try {
    if (options.relockRuntimes) await relockRuntimes(ctx);
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
 * @param {{ env?: Record<string, string | undefined>, timeoutMs?: number, cwd?: string }} [opts] env: a value of undefined removes the variable
 */
function runTool(ctx, label, argv, opts = {}) {
  return new Promise((resolvePromise, reject) => {
    const [cmd, ...args] = argv;
    // Output is captured and shown only on failure: keep it free of colour codes unless it goes to a terminal.
    const colour = process.stderr.isTTY ? {} : { NO_COLOR: '1', FORCE_COLOR: '0' };
    const env = { ...process.env, ...colour, ...opts.env };
    for (const [key, value] of Object.entries(env)) if (value === undefined) delete env[key];
    const child = spawn(cmd, args, {
      cwd: opts.cwd ?? ROOT,
      env,
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
function installedTreeMatchesLock(dir = ROOT) {
  const lock = readJson(join(dir, 'package-lock.json'));
  const installed = readJson(join(dir, 'node_modules', '.package-lock.json'));
  if (!lock?.packages || !installed?.packages) return false;
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '' || entry.link) continue;
    const have = installed.packages[path];
    if (!have) {
      if (entry.optional || entry.devOptional || entry.peer) continue;
      return false;
    }
    if (have.version !== entry.version) return false;
    if (!existsSync(join(dir, path))) return false;
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
// Runtimes: Bun (npm package `bun` + a shared node_modules) and Python (a uv-made venv)

/** npm flags for the runtime's node_modules (install and relock alike; .npmrc there repeats them). */
const BUN_NPM_FLAGS = ['--install-links', '--ignore-scripts', '--no-audit', '--no-fund', '--include=optional'];
/**
 * A nested npm must not inherit the outer `npm test`'s idea of where the project is: npm exports
 * npm_config_local_prefix=<repo root> to scripts, and npm ci would then install into the repo's own
 * node_modules. Also drop the outer run's allow-scripts setting (the runtime declares its own).
 */
const NESTED_NPM_ENV = {
  npm_config_local_prefix: undefined,
  npm_config_prefix: undefined,
  npm_config_allow_scripts: undefined,
  npm_config_update_notifier: 'false',
  CI: process.env.CI ?? 'true',
};

function readText(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function sha256(...parts) {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part ?? '\0missing\0').update('\0');
  return hash.digest('hex');
}

/** The manifest, checked just enough that the steps can rely on its shape (runtime-info.ts has the zod schema). */
function readManifest() {
  const manifest = readJson(MANIFEST);
  const ok =
    manifest &&
    typeof manifest.bun?.version === 'string' &&
    manifest.bun.packages &&
    typeof manifest.python?.version === 'string' &&
    manifest.python.packages &&
    typeof manifest.tools?.uv === 'string';
  if (!ok) throw new SetupError(`${relative(ROOT, MANIFEST)} is missing or malformed (bun.version, bun.packages, python.version, python.packages, tools.uv)`);
  return manifest;
}

/** Content hash of every file under `dirs` (small trees: our own libraries), skipping build litter. */
function hashTree(dirs) {
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
        if (name.startsWith('.') || SKIP_DIRS.has(name) || name === 'build' || name.endsWith('.egg-info')) continue;
        visit(join(abs, name));
      }
    } else if (st.isFile()) {
      hash.update(`${relative(ROOT, abs).split(sep).join('/')}\0`).update(readFileSync(abs)).update('\0');
    }
  };
  for (const dir of dirs) visit(join(ROOT, dir));
  return hash.digest('hex');
}

// ---- Bun

/** What `npm ci` in .runtimes/bun depends on (the platform too: it picks @oven/bun-<platform>). */
function bunDepsHash() {
  return sha256(manifestSection('bun'), readText(RUNTIME_PACKAGE), readText(RUNTIME_PACKAGE_LOCK), `${process.platform}-${process.arch}`);
}

/** One part of the manifest as text, for a step's hash (an edit elsewhere in the manifest does not re-run it). */
function manifestSection(...keys) {
  const text = readText(MANIFEST);
  try {
    const manifest = JSON.parse(text);
    return JSON.stringify(keys.map((k) => manifest[k] ?? null));
  } catch {
    return text; // malformed: the step runs and readManifest() says what is wrong
  }
}

function bunSvcHash() {
  return hashTree(Object.values(SVC_BUN_PACKAGES));
}

/** The dependencies runtime-package.json must declare for `manifest` (bun itself, the frameworks, our libraries). */
export function runtimePackageDependencies(manifest) {
  const deps = { bun: manifest.bun.version, ...manifest.bun.packages };
  // runtime-package.json is installed as .runtimes/bun/package.json: file: paths are relative to that dir.
  for (const [name, dir] of Object.entries(SVC_BUN_PACKAGES)) deps[name] = `file:../../${dir}`;
  return Object.fromEntries(Object.entries(deps).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Why runtime-package.json or its lock does not match the manifest, or null when they agree. */
function runtimePackageDisagreement(manifest, pkg, lock) {
  const rel = (f) => relative(ROOT, f);
  if (!pkg) return `${rel(RUNTIME_PACKAGE)} is missing`;
  if (!lock) return `${rel(RUNTIME_PACKAGE_LOCK)} is missing`;
  const want = runtimePackageDependencies(manifest);
  const have = pkg.dependencies ?? {};
  for (const name of new Set([...Object.keys(want), ...Object.keys(have)])) {
    if (want[name] !== have[name]) return `${rel(RUNTIME_PACKAGE)} has ${name}@${have[name] ?? '(none)'}, the manifest wants ${want[name] ?? '(none)'}`;
  }
  const root = lock.packages?.[''];
  if (JSON.stringify(root?.dependencies ?? {}) !== JSON.stringify(Object.fromEntries(Object.entries(have).sort(([a], [b]) => (a < b ? -1 : 1))))) {
    return `${rel(RUNTIME_PACKAGE_LOCK)} is out of date with ${rel(RUNTIME_PACKAGE)}`;
  }
  for (const [name, version] of Object.entries({ bun: manifest.bun.version, ...manifest.bun.packages })) {
    const locked = lock.packages?.[`node_modules/${name}`]?.version;
    if (locked !== version) return `${rel(RUNTIME_PACKAGE_LOCK)} locks ${name}@${locked ?? '(none)'}, the manifest wants ${version}`;
  }
  return null;
}

/** .runtimes/bun: package.json and package-lock.json from the committed sources, and an .npmrc for hand-run npm. */
function prepareBunDir() {
  mkdirSync(BUN_DIR, { recursive: true });
  copyFileSync(RUNTIME_PACKAGE, join(BUN_DIR, 'package.json'));
  if (existsSync(RUNTIME_PACKAGE_LOCK)) copyFileSync(RUNTIME_PACKAGE_LOCK, join(BUN_DIR, 'package-lock.json'));
  writeFileSync(
    join(BUN_DIR, '.npmrc'),
    '# Written by scripts/setup.mjs: the Bun runtime\'s node_modules (see executor/runtimes/bun/runtime-package.json).\ninstall-links=true\nignore-scripts=true\naudit=false\nfund=false\n',
  );
}

/**
 * Copies our libraries into node_modules/@svc/*. npm's `file:` deps are symlinks by default, and a
 * symlinked package resolves its imports from its real path (executor/runtimes/…, whose parents hold
 * the repo's own node_modules, not the runtime's), and a sandbox would have to bind the source tree.
 * Copies resolve from inside .runtimes/bun like every other package. npm ci --install-links copies them
 * too; this re-copies after an edit without a full npm ci.
 */
function syncSvcBunPackages() {
  for (const [name, dir] of Object.entries(SVC_BUN_PACKAGES)) {
    const dest = join(BUN_DIR, 'node_modules', ...name.split('/'));
    rmSync(dest, { recursive: true, force: true });
    cpSync(join(ROOT, dir), dest, {
      recursive: true,
      filter: (src) => {
        const base = src.slice(src.lastIndexOf(sep) + 1);
        return !(base === 'node_modules' || (base.startsWith('.') && src !== join(ROOT, dir)));
      },
    });
  }
}

/**
 * The Bun binary from the platform's optional dependency (@oven/bun-linux-x64 here). Install scripts
 * are off, so bun's postinstall never moves it into node_modules/bun/bin/bun.exe (a placeholder then);
 * if someone ran npm with scripts on, that is where it is instead.
 */
function findBunBinary() {
  const oven = join(BUN_DIR, 'node_modules', '@oven');
  const os = process.platform === 'win32' ? 'windows' : process.platform;
  const arch = process.arch === 'arm64' ? 'aarch64' : process.arch;
  const exe = process.platform === 'win32' ? 'bun.exe' : 'bun';
  const names = [`bun-${os}-${arch}`, `bun-${os}-${arch}-musl`, `bun-${os}-${arch}-baseline`, `bun-${os}-${arch}-musl-baseline`];
  for (const name of names) {
    const bin = join(oven, name, 'bin', exe);
    if (existsSync(bin)) return bin;
  }
  const moved = join(BUN_DIR, 'node_modules', 'bun', 'bin', 'bun.exe');
  try {
    if (statSync(moved).size > 1_000_000) return moved;
  } catch {
    // not there either
  }
  return null;
}

/** First line of `bin ...args` (a version), or a SetupError. */
function toolVersion(bin, args) {
  const result = spawnSync(bin, args, { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.status !== 0) {
    const why = result.error ? result.error.message : `exit ${result.status}${result.signal ? ` (${result.signal})` : ''}: ${(result.stderr ?? '').trim().split('\n').slice(-3).join(' ')}`;
    throw new SetupError(`${bin} ${args.join(' ')} failed: ${why}`);
  }
  return result.stdout.trim().split('\n')[0].trim();
}

// ---- Python

/** PEP 503 name normalisation: `Langchain_Core` and `langchain-core` are one package. */
function normalisePyName(name) {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

/** name → pinned version for every `name==version` line of a requirements file. */
export function parseRequirementPins(text) {
  const pins = {};
  for (const line of (text ?? '').split('\n')) {
    const match = /^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)/.exec(line.trim());
    if (match) pins[normalisePyName(match[1])] = match[2];
  }
  return pins;
}

function requirementsDisagreement(manifest, text) {
  if (text === null) return `${relative(ROOT, REQUIREMENTS)} is missing`;
  const pins = parseRequirementPins(text);
  for (const [name, version] of Object.entries(manifest.python.packages)) {
    const pinned = pins[normalisePyName(name)];
    if (pinned !== version) return `${relative(ROOT, REQUIREMENTS)} pins ${name}==${pinned ?? '(none)'}, the manifest wants ${version}`;
  }
  return null;
}

/** What the venv depends on: the manifest (python, uv), the locked requirements and our `svc` sources. */
function pythonHash() {
  return sha256(manifestSection('python', 'tools'), readText(REQUIREMENTS), hashTree([relative(ROOT, SVC_PYTHON)]));
}

/**
 * A CPython `want` (e.g. "3.11") already on this machine: uv runs with UV_PYTHON_DOWNLOADS=never, and a
 * sandbox must bind this install read-only (the venv's python is a symlink into it). Order: $SVC_EMU_PYTHON,
 * python3.11 on PATH (a pyenv shim resolves to the real one), pyenv's versions, the system's.
 * @returns {{ executable: string, version: string, basePrefix: string }}
 */
function findBasePython(want) {
  const exe = `python${want}`;
  const candidates = [];
  if (process.env.SVC_EMU_PYTHON) candidates.push(process.env.SVC_EMU_PYTHON);
  candidates.push(exe);
  const pyenvRoot = process.env.PYENV_ROOT ?? join(homedir(), '.pyenv');
  try {
    const patch = (v) => Number(v.split('.')[2]);
    const versions = readdirSync(join(pyenvRoot, 'versions')).filter((v) => v.startsWith(`${want}.`) && /^\d+\.\d+\.\d+$/.test(v));
    for (const v of versions.sort((a, b) => patch(b) - patch(a))) candidates.push(join(pyenvRoot, 'versions', v, 'bin', exe));
  } catch {
    // no pyenv
  }
  candidates.push(`/usr/local/bin/${exe}`, `/usr/bin/${exe}`);
  const probe = 'import json, sys; print(json.dumps({"executable": sys.executable, "prefix": sys.prefix, "basePrefix": sys.base_prefix, "version": "%d.%d.%d" % sys.version_info[:3]}))';
  const tried = [];
  for (const candidate of candidates) {
    const result = spawnSync(candidate, ['-I', '-c', probe], { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
    if (result.status !== 0) {
      tried.push(candidate);
      continue;
    }
    let info;
    try {
      info = JSON.parse(result.stdout);
    } catch {
      continue;
    }
    if (!info.version.startsWith(`${want}.`)) {
      tried.push(`${candidate} (${info.version})`);
      continue;
    }
    // A venv's python stands for its base install: use the base, as uv and a sandbox need the real one.
    const executable = info.prefix === info.basePrefix ? realpathSync(info.executable) : realpathSync(join(info.basePrefix, 'bin', exe));
    return { executable, version: info.version, basePrefix: realpathSync(info.basePrefix) };
  }
  throw new SetupError(
    `no Python ${want} found (tried ${tried.join(', ')}). Install it (Debian: apt-get install python${want}; or pyenv install ${want}) or point SVC_EMU_PYTHON at one; setup never downloads a Python (UV_PYTHON_DOWNLOADS=never)`,
  );
}

/** uv from PyPI, pinned: a venv of its own in .runtimes/uv with `pip install uv==<manifest>`. Returns uv's path. */
async function ensureUv(ctx, manifest, base) {
  const uv = join(UV_DIR, 'bin', 'uv');
  const stamp = readJson(UV_STAMP);
  if (stamp?.version === manifest.tools.uv && stamp.basePython === base.executable && existsSync(uv)) return uv;
  rmSync(UV_DIR, { recursive: true, force: true });
  await runTool(ctx, 'python -m venv .runtimes/uv', [base.executable, '-m', 'venv', UV_DIR]);
  await runTool(ctx, `pip install uv==${manifest.tools.uv}`, [join(UV_DIR, 'bin', 'python'), '-m', 'pip', 'install', '--no-input', '--disable-pip-version-check', `uv==${manifest.tools.uv}`], {
    env: { PIP_REQUIRE_VIRTUALENV: undefined, VIRTUAL_ENV: undefined },
    timeoutMs: 300_000,
  });
  const version = toolVersion(uv, ['--version']).split(/\s+/)[1];
  if (version !== manifest.tools.uv) throw new SetupError(`.runtimes/uv/bin/uv is ${version}, the manifest pins ${manifest.tools.uv}`);
  writeJson(UV_STAMP, { version, basePython: base.executable, at: new Date().toISOString() });
  return uv;
}

/** The venv exists and was made from `base` (pyvenv.cfg's home and version). */
function venvMatches(base) {
  const cfg = readText(join(VENV, 'pyvenv.cfg'));
  if (!cfg || !existsSync(join(VENV, 'bin', 'python'))) return false;
  const get = (key) => new RegExp(`^${key}\\s*=\\s*(.*)$`, 'm').exec(cfg)?.[1]?.trim();
  const home = get('home');
  return home !== undefined && realpathSafe(home) === dirname(base.executable) && get('version_info') === base.version;
}

function realpathSafe(path) {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

// ---- The record of what is installed (.runtimes/runtime-lock.json, read by executor/runtime-info.ts)

function runtimeLockInputsHash() {
  return sha256(readText(MANIFEST), readText(BUN_STAMP), readText(PYTHON_STAMP), readText(UV_STAMP), findOnPath('bwrap'));
}

const PYTHON_INFO = `
import importlib.metadata as md, json, sys, sysconfig
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
print(json.dumps({
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "sysVersion": sys.version,
    "basePrefix": sys.base_prefix,
    "prefix": sys.prefix,
    "baseExecutable": getattr(sys, "_base_executable", None),
    "sitePackages": sysconfig.get_paths()["purelib"],
    "packages": {name: version(name) for name in json.loads(sys.argv[1])},
}))
`;

/** What is actually installed, asked of the installed things themselves (not of the stamps). */
function collectRuntimeLock(manifest) {
  const bin = findBunBinary();
  if (!bin) throw new SetupError('no Bun binary in .runtimes/bun: the bun-runtime step did not finish');
  const nodeModules = join(BUN_DIR, 'node_modules');
  const bunPackages = {};
  for (const name of [...Object.keys(manifest.bun.packages), ...Object.keys(SVC_BUN_PACKAGES)]) {
    bunPackages[name] = readJson(join(nodeModules, ...name.split('/'), 'package.json'))?.version ?? null;
  }
  const python = join(VENV, 'bin', 'python');
  const names = [...Object.keys(manifest.python.packages), 'svc'];
  const probe = spawnSync(python, ['-I', '-c', PYTHON_INFO, JSON.stringify(names)], { encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] });
  if (probe.status !== 0) throw new SetupError(`${relative(ROOT, python)} could not describe itself: ${probe.error?.message ?? probe.stderr.trim()}`);
  const info = JSON.parse(probe.stdout);
  const uvBin = join(UV_DIR, 'bin', 'uv');
  const bwrapBin = findOnPath('bwrap');
  let bwrap = null;
  if (bwrapBin) {
    try {
      bwrap = { bin: bwrapBin, version: toolVersion(bwrapBin, ['--version']).replace(/^bubblewrap\s+/, '') };
    } catch {
      bwrap = null; // present but broken: the sandbox is off, as if absent
    }
  }
  const basePrefix = realpathSafe(info.basePrefix);
  return {
    schema: 1,
    generatedAt: new Date().toISOString(),
    platform: `${process.platform}-${process.arch}`,
    manifestSha256: sha256(readText(MANIFEST)),
    bun: {
      bin,
      version: toolVersion(bin, ['--version']),
      nodeModules,
      packages: bunPackages,
      // Everything Bun needs at run time is under .runtimes/bun (the binary is inside node_modules).
      bindReadOnly: [BUN_DIR],
    },
    python: {
      bin: python,
      version: info.version,
      sysVersion: info.sysVersion,
      basePrefix,
      baseExecutable: info.baseExecutable ? realpathSafe(info.baseExecutable) : null,
      venv: VENV,
      sitePackages: info.sitePackages,
      packages: info.packages,
      // The venv's bin/python is a symlink into basePrefix (stdlib there too): a sandbox binds both.
      bindReadOnly: [VENV, basePrefix],
    },
    uv: { bin: uvBin, version: existsSync(uvBin) ? toolVersion(uvBin, ['--version']).split(/\s+/)[1] : null },
    bwrap,
  };
}

/** Human-readable differences between the manifest and a collected lock (runtime-info.ts does the typed version). */
function lockMismatches(manifest, lock) {
  const out = [];
  if (lock.bun.version !== manifest.bun.version) out.push(`bun ${lock.bun.version} (manifest ${manifest.bun.version})`);
  for (const [name, v] of Object.entries(manifest.bun.packages)) if (lock.bun.packages[name] !== v) out.push(`${name} ${lock.bun.packages[name]} (manifest ${v})`);
  if (!lock.python.version.startsWith(`${manifest.python.version}.`)) out.push(`python ${lock.python.version} (manifest ${manifest.python.version})`);
  for (const [name, v] of Object.entries(manifest.python.packages)) if (lock.python.packages[name] !== v) out.push(`${name} ${lock.python.packages[name]} (manifest ${v})`);
  return out;
}

// ---- Relocking: regenerate the derived files from the manifest

/**
 * `--relock-runtimes`: writes runtime-package.json from the manifest, resolves its lock with npm, and
 * compiles requirements.txt with uv (universal: the same file serves Linux hosts and the Lima VM).
 * Existing locks act as preferences, so an unchanged pin keeps its transitive versions.
 * @param {Ctx} ctx
 */
async function relockRuntimes(ctx) {
  const manifest = readManifest();
  const previous = readJson(RUNTIME_PACKAGE) ?? {};
  const pkg = {
    name: 'svc-emu-bun-runtime',
    version: '0.0.0',
    private: true,
    description: 'The Bun runtime of the snippet service: installed by scripts/setup.mjs as .runtimes/bun/package.json. Generated from executor/runtimes/manifest.json by `node scripts/setup.mjs --relock-runtimes`.',
    ...previous,
    dependencies: runtimePackageDependencies(manifest),
    // bun's postinstall only moves its binary out of @oven/bun-<platform>; we use it where it is.
    allowScripts: { ...(previous.allowScripts ?? {}), bun: false },
  };
  writeFileSync(RUNTIME_PACKAGE, `${JSON.stringify(pkg, null, 2)}\n`);
  prepareBunDir();
  await runTool(ctx, 'npm install --package-lock-only (.runtimes/bun)', npmCommand(['install', '--package-lock-only', '--prefix', BUN_DIR, ...BUN_NPM_FLAGS]), {
    cwd: BUN_DIR,
    env: NESTED_NPM_ENV,
    timeoutMs: 600_000,
  });
  copyFileSync(join(BUN_DIR, 'package-lock.json'), RUNTIME_PACKAGE_LOCK);

  const base = findBasePython(manifest.python.version);
  const uv = await ensureUv(ctx, manifest, base);
  const input = join(RUNTIMES_DIR, 'requirements.in');
  writeFileSync(input, `${Object.entries(manifest.python.packages).map(([n, v]) => `${n}==${v}`).join('\n')}\n`);
  const args = [uv, 'pip', 'compile', '--universal', '--python-version', manifest.python.version, '--custom-compile-command', RELOCK_COMMAND, '--output-file', REQUIREMENTS];
  const overrides = Object.entries(manifest.python.overrides ?? {});
  if (overrides.length > 0) {
    const file = join(RUNTIMES_DIR, 'overrides.txt');
    writeFileSync(file, `${overrides.map(([n, v]) => `${n}==${v}`).join('\n')}\n`);
    args.push('--override', 'overrides.txt');
  }
  args.push('requirements.in');
  await runTool(ctx, 'uv pip compile', args, { cwd: RUNTIMES_DIR, env: { UV_PYTHON_DOWNLOADS: 'never' }, timeoutMs: 300_000 });
  ctx.log(`setup: relocked ${relative(ROOT, RUNTIME_PACKAGE)}, ${relative(ROOT, RUNTIME_PACKAGE_LOCK)} and ${relative(ROOT, REQUIREMENTS)} from the manifest`);
}

// ---------------------------------------------------------------------------------------------------
// Host tools

function chromiumPath() {
  const override = process.env.SVC_EMU_CHROMIUM;
  if (override && existsSync(override)) return override;
  return existsSync(CHROMIUM) ? CHROMIUM : null;
}

/** Why `pkg` cannot be installed here with apt-get, or null when it can. */
function aptUnavailableReason(pkg) {
  if (process.platform !== 'linux') return `${pkg} is not installed (automatic install is for Debian only; this is ${process.platform})`;
  if (!existsSync('/etc/debian_version') || !existsSync('/usr/bin/apt-get')) return `${pkg} is not installed (automatic install is for Debian only)`;
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    return `${pkg} is not installed and setup is not root (run: sudo apt-get install --no-install-recommends ${pkg})`;
  }
  return null;
}

/**
 * `apt-get install -y --no-install-recommends PACKAGES`, after one `apt-get update` per set-up run
 * (shared by every step that installs a host tool). Rejects with the output's tail.
 * @param {Ctx} ctx
 * @param {string[]} packages
 * @param {number} timeoutMs
 */
async function aptGetInstall(ctx, packages, timeoutMs) {
  const env = { DEBIAN_FRONTEND: 'noninteractive' };
  if (!ctx.aptUpdated) {
    await runTool(ctx, 'apt-get update', ['apt-get', 'update'], { env, timeoutMs: 180_000 });
    ctx.aptUpdated = true;
  }
  await runTool(ctx, `apt-get install ${packages.join(' ')}`, ['apt-get', 'install', '-y', '--no-install-recommends', ...packages], { env, timeoutMs });
}

/** An executable named `name` on PATH (or in the usual system dirs), or null. Stat only: cheap. */
function findOnPath(name) {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/bin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      if (statSync(file).isFile()) return file;
    } catch {
      // not here
    }
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
  const opts = { quiet: false, forTest: false, forVm: false, build: true, check: false, retryHostTools: false, relockRuntimes: false, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quiet' || arg === '-q') opts.quiet = true;
    else if (arg === '--no-build') opts.build = false;
    else if (arg === '--check') opts.check = true;
    else if (arg === '--retry-host-tools') opts.retryHostTools = true;
    else if (arg === '--relock-runtimes') opts.relockRuntimes = true;
    else if (arg === '--help' || arg === '-h') opts.help = true;
    else if (arg.startsWith('--for=') || arg === '--for') {
      const value = arg === '--for' ? argv[++i] : arg.slice('--for='.length);
      if (value === 'test') opts.forTest = true;
      else if (value === 'vm') opts.forVm = true;
      else if (value !== 'dev' && value !== 'start') throw new SetupError(`unknown --for value: ${value} (expected test or vm)`);
    } else throw new SetupError(`unknown option: ${arg}`);
  }
  return opts;
}

const USAGE = `usage: node scripts/setup.mjs [--quiet] [--for=test] [--no-build] [--check] [--relock-runtimes]
  --quiet        print nothing unless something fails
  --for=test     also prepare what the tests need (chromium for the GUI tests)
  --for=vm       only the snippet runtimes (inside the Lima VM; with SVC_EMU_RUNTIMES_DIR)
  --no-build     install only, do not build
  --check        run nothing; list the steps that would run and exit 1 if any would
  --retry-host-tools  retry host tool installs that failed recently
  --relock-runtimes   after editing executor/runtimes/manifest.json: regenerate the Bun package.json and
                      lock and the Python requirements.txt from it, then install`;

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
