#!/usr/bin/env node
// The build's own checks: the type check over the layer projects (`tsc -b`), ESLint (`eslint .`) and the Prettier
// check (`prettier --check .`), see docs/architecture.md.
//
//   node scripts/checks.mjs                      the three checks, one after another; exit 1 if any fails
//   node scripts/checks.mjs --beside-vitest ...  the same, beside `vitest run ...` (what `npm test` runs)
//
// Beside vitest the checks run niced, one at a time: the suite keeps the cores it needs for its timings, and the
// checks (about a minute of CPU) finish well inside its ~6 minutes. vitest's output streams as usual; each check
// prints one block when it ends (its full output only when it failed), and the run's exit code is non-zero when
// vitest or any check failed.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'node_modules', '.bin');

/** Quickest first: Prettier (seconds), the compiler, then ESLint (type-aware, the slowest). */
const CHECKS = [
  { name: 'format', cmd: 'prettier', args: ['--check', '.', '--log-level', 'warn'] },
  { name: 'typecheck', cmd: 'tsc', args: ['-b'] },
  { name: 'lint', cmd: 'eslint', args: ['.'] },
];

/** Runs one command with its output captured; resolves to its exit code, output and wall time. */
function run(cmd, args, { nice }) {
  const started = Date.now();
  const [file, argv] = nice ? ['nice', ['-n', '19', join(BIN, cmd), ...args]] : [join(BIN, cmd), args];
  return new Promise((resolve) => {
    const child = spawn(file, argv, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FORCE_COLOR: '0' } });
    const out = [];
    child.stdout.on('data', (b) => out.push(b));
    child.stderr.on('data', (b) => out.push(b));
    child.on('error', (err) => resolve({ code: 127, output: String(err), ms: Date.now() - started }));
    child.on('close', (code, signal) =>
      resolve({ code: code ?? (signal ? 128 : 1), output: Buffer.concat(out).toString('utf8'), ms: Date.now() - started }),
    );
  });
}

/** The checks, one after another; each prints one block as it ends. Resolves to the names of those that failed. */
async function runChecks({ nice }) {
  const failed = [];
  for (const check of CHECKS) {
    const { code, output, ms } = await run(check.cmd, check.args, { nice });
    const secs = (ms / 1000).toFixed(1);
    if (code === 0) {
      process.stdout.write(`\n[checks] ${check.name}: ok (${check.cmd} ${check.args.join(' ')}, ${secs} s)\n`);
    } else {
      failed.push(check.name);
      const body = output.trimEnd().replace(/^/gm, `[${check.name}] `);
      process.stdout.write(`\n[checks] ${check.name}: FAILED (${check.cmd} ${check.args.join(' ')}, exit ${code}, ${secs} s)\n${body}\n`);
    }
  }
  return failed;
}

/**
 * vitest run, its output passed through as it comes; resolves to its exit code, the time it ended and its summary line
 * (test/reporter.ts's `Tests: N passed, …`), which the run repeats last when a check ended after it.
 */
function runVitest(args) {
  return new Promise((resolve) => {
    const env = process.stdout.isTTY ? { ...process.env, FORCE_COLOR: '1' } : process.env;
    const child = spawn(join(BIN, 'vitest'), ['run', ...args], { cwd: ROOT, stdio: ['inherit', 'pipe', 'inherit'], env });
    let summary = null;
    let tail = '';
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk);
      const lines = (tail + chunk.toString('utf8')).split('\n');
      tail = lines.pop() ?? '';
      for (const line of lines) if (/^Tests: \d+ passed/.test(line)) summary = line;
    });
    const done = (code) => resolve({ code, endedAt: Date.now(), summary: summary ?? (/^Tests: \d+ passed/.test(tail) ? tail : null) });
    child.on('error', () => done(127));
    child.on('close', (code, signal) => done(code ?? (signal ? 128 : 1)));
  });
}

const argv = process.argv.slice(2);
if (argv[0] === '--beside-vitest') {
  const [vitest, failed] = await Promise.all([runVitest(argv.slice(1)), runChecks({ nice: true })]);
  const vitestCode = vitest.code;
  if (failed.length > 0) process.stdout.write(`\n[checks] failed: ${failed.join(', ')} (their output is above, each line prefixed)\n`);
  // The suite's summary stays the run's last line.
  if (vitest.summary && Date.now() - vitest.endedAt > 100) process.stdout.write(`\n${vitest.summary}\n`);
  process.exit(vitestCode !== 0 ? vitestCode : failed.length > 0 ? 1 : 0);
} else {
  const failed = await runChecks({ nice: false });
  process.exit(failed.length > 0 ? 1 : 0);
}
