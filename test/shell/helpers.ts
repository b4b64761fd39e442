// Child-process helpers for the shell tests (setup, build, start run as real processes).
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The core's entries exist (another engineer writes server/; until then build-dependent tests skip). */
export const coreReady = existsSync(`${ROOT}server/index.ts`) && existsSync(`${ROOT}server/cli/main.ts`);

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs `node ...args` to completion, stdin closed. */
export function runNode(args: string[], options: SpawnOptions & { timeoutMs?: number } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], ...options });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 240_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - started });
    });
  });
}

/** A long-running child whose output can be awaited line by line. */
export class Proc {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(args: string[], options: SpawnOptions = {}) {
    this.child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], ...options });
    this.child.stdout?.setEncoding('utf8').on('data', (d: string) => (this.stdout += d));
    this.child.stderr?.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  /** Resolves to the first match of `pattern` in stdout; rejects if the process exits or time runs out. */
  async waitFor(pattern: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    let exited = false;
    void this.exited.then(() => (exited = true));
    for (;;) {
      const match = this.stdout.match(pattern);
      if (match) return match;
      if (exited || Date.now() > deadline) {
        throw new Error(`${exited ? 'exited' : 'timed out'} before ${pattern}\n--- stdout\n${this.stdout}\n--- stderr\n${this.stderr}`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** Sends `signal` and waits for the exit (SIGKILL after `graceMs`). */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000) {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}
