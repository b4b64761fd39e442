import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Runtime } from './types';

export interface CodeProblem {
  file: string;
  line?: number;
  column?: number;
  message: string;
}

export interface CodeCheckerPaths {
  bunBin: string | null;
  pythonBin: string | null;
  /** executor/runtimes, where check.ts and check.py live. */
  runtimesDir: string;
}

/**
 * Checks code with the runtime's own compiler (Bun's transpiler, CPython's `compile`) in a short-lived
 * process, so a version that cannot load is refused at creation with the file and line.
 */
export function createCodeChecker(paths: CodeCheckerPaths, timeoutMs = 15_000) {
  return async (input: { runtime: Runtime; entrypoint: string; files: Record<string, string> }): Promise<CodeProblem[]> => {
    const argv =
      input.runtime === 'bun'
        ? paths.bunBin && [paths.bunBin, join(paths.runtimesDir, 'bun', 'check.ts')]
        : paths.pythonBin && [paths.pythonBin, '-I', join(paths.runtimesDir, 'python', 'check.py')];
    if (!argv) return []; // the runtime is not installed: nothing to check with (parity is reported degraded)
    const [cmd, ...args] = argv;
    return new Promise((resolve, reject) => {
      const child = spawn(cmd!, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp' } });
      let out = '';
      let err = '';
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
      child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        try {
          if (code !== 0) throw new Error(`exit ${code}`);
          resolve(JSON.parse(out) as CodeProblem[]);
        } catch (e) {
          reject(new Error(`the ${input.runtime} code check failed (${(e as Error).message}): ${err.slice(0, 500)}`));
        }
      });
      child.stdin.end(JSON.stringify({ entrypoint: input.entrypoint, files: input.files }));
    });
  };
}
