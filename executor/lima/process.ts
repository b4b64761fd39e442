import { spawn } from 'node:child_process';

/**
 * Runs a command to its end, handing each line of its output to `onLine` as it comes (stdout and
 * stderr alike) and collecting both. Never rejects: a command that cannot start answers `code: null`
 * with `error` saying why. An aborted signal kills it (SIGTERM, then SIGKILL after 5 s).
 */
export type ProcessRunner = (argv: string[], opts?: RunOptions) => Promise<RunResult>;

export interface RunOptions {
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

export interface RunResult {
  /** Exit code; null when it could not start or died of a signal. */
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** Why it could not start (ENOENT, EACCES…). */
  error?: string;
}

/** What one command may keep of each stream (limactl list prints a few KiB; create and start stream). */
const KEEP_BYTES = 1024 * 1024;

export const spawnRunner: ProcessRunner = (argv, opts = {}) =>
  new Promise((resolve) => {
    const [cmd, ...args] = argv;
    if (!cmd) return resolve({ code: null, signal: null, stdout: '', stderr: '', error: 'no command' });
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env });
    const kept = { stdout: '', stderr: '' };
    const splitters = {
      stdout: lineSplitter((l) => opts.onLine?.(l, 'stdout')),
      stderr: lineSplitter((l) => opts.onLine?.(l, 'stderr')),
    };
    for (const stream of ['stdout', 'stderr'] as const) {
      child[stream].setEncoding('utf8');
      child[stream].on('data', (text: string) => {
        if (kept[stream].length < KEEP_BYTES) kept[stream] += text.slice(0, KEEP_BYTES - kept[stream].length);
        splitters[stream].push(text);
      });
    }
    let killTimer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      child.kill('SIGTERM');
      killTimer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      killTimer.unref();
    };
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort, { once: true });
    let startError: string | undefined;
    child.on('error', (err) => {
      startError = err.message;
    });
    child.on('close', (code, signal) => {
      clearTimeout(killTimer);
      opts.signal?.removeEventListener('abort', onAbort);
      splitters.stdout.end();
      splitters.stderr.end();
      resolve({
        code: startError ? null : code,
        signal,
        stdout: kept.stdout,
        stderr: kept.stderr,
        ...(startError ? { error: startError } : {}),
      });
    });
  });

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;

/**
 * Text in, whole lines out: colour codes stripped, and a line redrawn with carriage returns (a progress
 * bar) reduced to what it last showed.
 */
export function lineSplitter(emit: (line: string) => void): { push(text: string): void; end(): void } {
  let buf = '';
  const flush = (raw: string) => {
    const parts = raw
      .replace(ANSI, '')
      .split('\r')
      .filter((p) => p.trim() !== '');
    const line = parts.at(-1)?.trimEnd();
    if (line) emit(line);
  };
  return {
    push(text) {
      buf += text;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        flush(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
    },
    end() {
      if (buf) flush(buf);
      buf = '';
    },
  };
}
