#!/usr/bin/env node
// `npm start`: set up and build if needed, then open the desktop app (Electron) — or, where Electron
// cannot start (no binary, no display, CI), say why in one line and run the same core headless.
//
//   npm start [-- --port 8080 --workspace DIR --data-dir DIR --headless …]
//
// Extra arguments go to `svc-emu serve` (headless) or to the Electron main process (desktop); both print
// the same terminal lines, and take `--log-level error|warn|info|debug` and `--log-format pretty|json`.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT, runSetup, SetupError } from './setup.mjs';
import { CORE_NODE_FLAGS } from './core-node-flags.mjs';

/** An Electron that exits non-zero this soon after launch did not really start: fall back to headless. */
const EARLY_EXIT_MS = 4000;

/** Why Electron cannot be used here, or null when it can (a missing binary may still be fetchable). */
export function electronUnavailableReason(env = process.env, platform = process.platform, root = ROOT) {
  if (env.CI) return 'CI is set';
  if (platform === 'linux' && !env.DISPLAY && !env.WAYLAND_DISPLAY) return 'no display (DISPLAY and WAYLAND_DISPLAY are unset)';
  if (!existsSync(join(root, 'node_modules', 'electron', 'package.json'))) return 'the electron package is not installed';
  return null;
}

/**
 * Since Electron 42 the package fetches its binary on first use, not at install. Where a desktop can
 * run it, fetch it now (once; it is cached), so `npm start` opens the app on a fresh clone.
 */
function ensureElectronBinary(root = ROOT) {
  if (electronBinary(root)) return null;
  process.stdout.write('start: fetching the Electron binary (first desktop start)…\n');
  const result = spawnSync(process.execPath, [join(root, 'node_modules', 'electron', 'install.js')], {
    stdio: 'inherit',
    timeout: 300_000,
  });
  if (result.status === 0 && electronBinary(root)) return null;
  return 'the Electron binary could not be downloaded (node_modules/electron/path.txt missing)';
}

function electronBinary(root = ROOT) {
  try {
    const rel = readFileSync(join(root, 'node_modules', 'electron', 'path.txt'), 'utf8').trim();
    const bin = join(root, 'node_modules', 'electron', 'dist', rel);
    return rel && existsSync(bin) ? bin : null;
  } catch {
    return null;
  }
}

/** Adds the defaults of `npm start` (workspace, data dir) unless the user gave them. */
export function withDefaults(args, cwd = process.cwd(), root = ROOT) {
  const has = (flag) => args.some((a) => a === flag || a.startsWith(`${flag}=`));
  const out = [...args];
  if (!has('--workspace')) {
    const fixtures = join(root, 'fixtures', 'workspace');
    out.push('--workspace', existsSync(fixtures) ? fixtures : resolve(cwd));
  }
  if (!has('--data-dir')) out.push('--data-dir', resolve(cwd, '.svc-emu'));
  return out;
}

function forwardSignals(child) {
  const forward = (signal) => () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, forward(signal));
}

function exitLike(code, signal) {
  if (code !== null) return code;
  const num = signal ? osConstants.signals[signal] : undefined;
  return num ? 128 + num : 1;
}

/** The headless core's command line: node with the core's flags (scripts/core-node-flags.mjs), then `svc-emu serve`. */
export function headlessArgv(args, root = ROOT) {
  return [...CORE_NODE_FLAGS, join(root, 'bin', 'svc-emu.mjs'), 'serve', ...args];
}

function runHeadless(args) {
  const child = spawn(process.execPath, headlessArgv(args), { stdio: 'inherit' });
  forwardSignals(child);
  child.on('error', (error) => {
    process.stderr.write(`start: could not run svc-emu: ${error.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => process.exit(exitLike(code, signal)));
}

/** Resolves to true when Electron ran (its exit code becomes ours), false when it failed to start. */
function runElectron(args) {
  return new Promise((resolvePromise) => {
    const bin = electronBinary();
    if (!bin) return resolvePromise(false);
    const env = { ...process.env };
    delete env.ELECTRON_RUN_AS_NODE;
    const started = Date.now();
    const child = spawn(bin, [ROOT, ...args], { stdio: 'inherit', cwd: process.cwd(), env });
    forwardSignals(child);
    child.on('error', (error) => {
      process.stderr.write(`start: Electron failed to launch (${error.message}) — running headless\n`);
      resolvePromise(false);
    });
    child.on('exit', (code, signal) => {
      if (code !== 0 && signal === null && Date.now() - started < EARLY_EXIT_MS) {
        process.stderr.write(`start: Electron exited with ${code} right after launch — running headless\n`);
        return resolvePromise(false);
      }
      process.exit(exitLike(code, signal));
    });
  });
}

async function main() {
  let args = process.argv.slice(2);
  const forceHeadless = args.includes('--headless') || process.env.SVC_EMU_HEADLESS === '1';
  args = withDefaults(args.filter((a) => a !== '--headless'));

  try {
    await runSetup();
  } catch (error) {
    process.stderr.write(`setup failed: ${error instanceof SetupError ? error.message : (error?.stack ?? error)}\n`);
    process.exit(1);
  }

  const reason = forceHeadless ? 'headless requested' : (electronUnavailableReason() ?? ensureElectronBinary());
  if (reason === null) {
    if (await runElectron(args)) return;
  } else {
    process.stdout.write(`${reason} — running headless\n`);
  }
  runHeadless(args);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
