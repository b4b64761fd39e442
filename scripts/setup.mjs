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
// This file is the orchestrator: the steps, in order, and the command line. Each job is a module of
// scripts/setup/ (docs/architecture.md, "Set-up"): deps.mjs (npm), bun.mjs and python.mjs (the runtimes),
// system.mjs (apt: bubblewrap, chromium), runtime-lock.mjs (the record of what is installed), build.mjs
// (electron-vite + the CLI bundle), relock.mjs (--relock-runtimes), run.mjs (running the steps, their
// report, one set-up at a time via lock.mjs), schemathesis.mjs (--for=test's tools venv). To add a step
// (a runtime, a venv, a host tool), write its module and add it to STEPS.
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildStep } from './setup/build.mjs';
import { bunRuntimeStep } from './setup/bun.mjs';
import { installStep } from './setup/deps.mjs';
import { HOST_STAMP, RUNTIMES_DIR } from './setup/paths.mjs';
import { pythonDebuggerStep, pythonRuntimeStep, runnerBytecodeStep } from './setup/python.mjs';
import { pendingSteps as pending, runSteps } from './setup/run.mjs';
import { runtimeLockStep } from './setup/runtime-lock.mjs';
import { bubblewrapStep, chromiumStep, zshStep } from './setup/system.mjs';
import { SetupError } from './setup/tool.mjs';

export { BUILD_OUTPUTS, sourceHash } from './setup/build.mjs';
export { runtimePackageDependencies } from './setup/bun.mjs';
export { ROOT, RUNTIME_LOCK } from './setup/paths.mjs';
export { parseRequirementPins } from './setup/python.mjs';
export { SetupError } from './setup/tool.mjs';

/** In order. The runtime steps run for start, build and test alike (all of them run snippets). */
export const STEPS = [
  installStep,
  bunRuntimeStep,
  pythonRuntimeStep,
  pythonDebuggerStep,
  bubblewrapStep,
  runtimeLockStep,
  runnerBytecodeStep,
  buildStep,
  chromiumStep,
  zshStep,
];

/**
 * Runs every applicable step that is not done. Resolves to the names of the steps that ran.
 * @param {{ quiet?: boolean, forTest?: boolean, forVm?: boolean, build?: boolean, relockRuntimes?: boolean }} [options]
 */
export function runSetup(options = {}) {
  return runSteps(STEPS, options);
}

/** The steps that would run, without running them. */
export function pendingSteps(options = {}) {
  return pending(STEPS, options);
}

export function parseArgs(argv) {
  const opts = {
    quiet: false,
    forTest: false,
    forVm: false,
    build: true,
    check: false,
    retryHostTools: false,
    relockRuntimes: false,
    help: false,
  };
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
  if (opts.forTest) await (await import('./setup/schemathesis.mjs')).setupSchemathesis({ runtimesDir: RUNTIMES_DIR, quiet: opts.quiet });
  return 0;
}

const invokedDirectly = process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  cli().then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      const message = error instanceof SetupError ? error.message : (error?.stack ?? String(error));
      process.stderr.write(`setup failed: ${message}\n`);
      process.exitCode = 1;
    },
  );
}
