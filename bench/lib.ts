import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createClient } from '../contract/client';
import { CORE_NODE_FLAGS } from '../scripts/core-node-flags.mjs';

export const ROOT = join(__dirname, '..');

export interface Stats {
  n: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  mean_ms: number;
  max_ms: number;
}

export function stats(samples: number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  const r = (x: number) => Math.round(x * 1000) / 1000;
  return {
    n: s.length,
    p50_ms: r(q(0.5)),
    p90_ms: r(q(0.9)),
    p99_ms: r(q(0.99)),
    mean_ms: r(s.reduce((a, b) => a + b, 0) / s.length),
    max_ms: r(s[s.length - 1]!),
  };
}

/**
 * The one client (contract/client.ts) over loopback, by method and path: what a real client of the emulator
 * does (fetch keeps connections alive). `key` is the bearer credential (a tenant key or the admin token).
 */
export function client(base: string, key?: string) {
  const c = createClient({ baseUrl: base });
  return async (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: string }> => {
    const r = await c.sendPath(method, path, { credential: key ?? null, body, headers });
    return { status: r.status, body: r.text };
  };
}

export async function timeEach(n: number, fn: (i: number) => Promise<void>, warmup = Math.min(50, n)): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn(-1 - i);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn(i);
    out.push(performance.now() - t);
  }
  return out;
}

export interface ServedCore {
  child: ChildProcess;
  url: string;
  apiKey: string;
  /** ms from spawn to the first 200 from /readyz. */
  readyMs: number;
  stop(): Promise<void>;
}

/**
 * Starts the built headless core (`svc-emu serve`) as a real process, as a user would. `nodeFlags` go to
 * node itself (the soak suite's `--expose-gc`, for /_emu/memory?gc=1; the profile's `--cpu-prof`), `args`
 * to `svc-emu serve` (`--workspace DIR`).
 */
export async function serveCore(dataDir: string, opts: { nodeFlags?: string[]; args?: string[] } = {}): Promise<ServedCore> {
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [
      // As a user's `svc-emu serve` runs (bin/svc-emu.mjs's first line), then the caller's.
      ...CORE_NODE_FLAGS,
      ...(opts.nodeFlags ?? []),
      join(ROOT, 'bin', 'svc-emu.mjs'),
      'serve',
      '--port',
      '0',
      '--json',
      '--data-dir',
      dataDir,
      ...(opts.args ?? []),
    ],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  const line = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout });
    rl.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`svc-emu serve exited with ${code}`)));
  });
  const info = JSON.parse(line) as { url: string; api_key: string };
  const get = client(info.url);
  for (;;) {
    const r = await get('GET', '/readyz').catch(() => ({ status: 0 }));
    if (r.status === 200) break;
    await new Promise((r) => setTimeout(r, 2));
  }
  const readyMs = performance.now() - t0;
  return {
    child,
    url: info.url,
    apiKey: info.api_key,
    readyMs,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return Math.round((kb / 1024) * 10) / 10;
}
