/**
 * The code checkers behind version creation: the runtime's own compiler, in one long-lived process per
 * runtime, one request at a time; a checker that dies is replaced by the next check.
 */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { createCodeChecker } from '../../executor/validate';
import { PROJECT_ROOT } from '../helpers/core';

const lockPath = join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json');
const lock = existsSync(lockPath) ? JSON.parse(readFileSync(lockPath, 'utf8')) : null;
if (!lock) console.warn('SKIPPING code checker tests: runtimes not installed (run npm run build)');

describe.skipIf(!lock)('code checker', () => {
  const check = createCodeChecker({
    bunBin: lock?.bun.bin,
    pythonBin: lock?.python.bin,
    runtimesDir: join(PROJECT_ROOT, 'executor', 'runtimes'),
  });
  afterAll(() => check.close());

  it('answers concurrent checks of both runtimes, each with its own problems', async () => {
    const jobs = Array.from({ length: 12 }, (_, i) =>
      i % 2
        ? check({
            runtime: 'bun',
            entrypoint: 'index.ts',
            files: { 'index.ts': i % 4 === 1 ? `export default async () => ({ i: ${i} })\n` : `export default async () => ({ i: \n` },
          })
        : check({
            runtime: 'python',
            entrypoint: 'main.py',
            files: { 'main.py': i % 4 === 0 ? `def handler(input):\n    return {"i": ${i}}\n` : `def handler(input):\n    return (\n` },
          }),
    );
    const results = await Promise.all(jobs);
    results.forEach((problems, i) => {
      const good = i % 2 ? i % 4 === 1 : i % 4 === 0;
      if (good) expect(problems, `job ${i}`).toEqual([]);
      else expect(problems[0], `job ${i}`).toMatchObject({ file: i % 2 ? 'index.ts' : 'main.py', line: expect.any(Number) });
    });
  });

  it('a checker that dies is replaced on the next check', async () => {
    expect(await check({ runtime: 'python', entrypoint: 'main.py', files: { 'main.py': 'def handler(i):\n    return {}\n' } })).toEqual([]);
    // Kill our own python checker (a child of this process: other test files' checkers are left alone).
    const pids = execFileSync('pgrep', ['-P', String(process.pid), '-f', 'runtimes/python/check.py'])
      .toString()
      .trim()
      .split('\n')
      .map(Number);
    expect(pids.length).toBe(1);
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    // Until the killed checker is gone (reaped: its exit has reached this process), not for a fixed time.
    await vi.waitFor(() => {
      for (const pid of pids) expect(() => process.kill(pid, 0), `checker ${pid} still there`).toThrow();
    });
    expect(await check({ runtime: 'python', entrypoint: 'main.py', files: { 'main.py': 'x = 1\n' } })).toEqual([
      { file: 'main.py', message: expect.stringContaining('no top-level handler') },
    ]);
  });
});
