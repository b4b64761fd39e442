import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type Client } from '../contract/client';
import { operations as ops } from '../contract';
import { client, serveCore, stats } from './lib';

/**
 * Issue 6's figures, against the built core as a separate process: warm first-event latency (request
 * sent → `start`, → first `chunk`) for both runtimes, and chunks per second from a tight generator.
 */
const FIRST = {
  bun: 'export default async function* handler() { yield { n: 1 }; }\n',
  python: 'def handler(input):\n    yield {"n": 1}\n',
};
const TIGHT = {
  bun: 'export default async function* handler(input) { for (let i = 0; i < input.n; i++) yield i; }\n',
  python: 'def handler(input):\n    for i in range(input["n"]):\n        yield i\n',
};

/** One stream-mode request through the one client: ms to the first `start` event and to the first `chunk`, and chunks seen. */
async function streamOnce(
  c: Client,
  snippet: string,
  body: Record<string, unknown>,
): Promise<{ start: number; chunk: number; chunks: number; total: number }> {
  const t0 = performance.now();
  let start = NaN;
  let chunk = NaN;
  let chunks = 0;
  const events = await c.stream(ops.invoke, { params: { snippet }, body, headers: { 'x-invoke-mode': 'stream' } });
  for await (const e of events) {
    if (e.event === 'start' && Number.isNaN(start)) start = performance.now() - t0;
    if (e.event === 'chunk') {
      if (Number.isNaN(chunk)) chunk = performance.now() - t0;
      chunks++;
    }
  }
  return { start, chunk, chunks, total: performance.now() - t0 };
}

export async function streamBench(opts: { iterations: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-stream-'));
  const core = await serveCore(dir);
  const call = client(core.url, core.apiKey);
  const typed = createClient({ baseUrl: core.url, key: core.apiKey });
  const out: Record<string, unknown> = {};
  try {
    for (const runtime of ['bun', 'python'] as const) {
      for (const [name, code] of [
        [`first-${runtime}`, FIRST[runtime]],
        [`tight-${runtime}`, TIGHT[runtime]],
      ] as const) {
        await call('POST', '/v1/snippets', { name, runtime });
        const v = await call('POST', `/v1/snippets/${name}/versions`, { code, max_cpu_percent: 100 });
        if (v.status !== 201) throw new Error(`version ${name}: ${v.status} ${v.body}`);
      }
      const start: number[] = [];
      const chunk: number[] = [];
      for (let i = -20; i < opts.iterations; i++) {
        const r = await streamOnce(typed, `first-${runtime}`, {});
        if (r.chunks !== 1) throw new Error(`first-${runtime}: ${r.chunks} chunks`);
        if (i >= 0) {
          start.push(r.start);
          chunk.push(r.chunk);
        }
      }
      const n = 20_000;
      await streamOnce(typed, `tight-${runtime}`, { n: 100 }); // warm
      const tight = await streamOnce(typed, `tight-${runtime}`, { n });
      if (tight.chunks !== n) throw new Error(`tight-${runtime}: ${tight.chunks} of ${n} chunks`);
      out[runtime] = {
        warm_to_start: stats(start),
        warm_to_first_chunk: stats(chunk),
        tight_generator: { chunks: n, ms: Math.round(tight.total), chunks_per_second: Math.round(n / (tight.total / 1000)) },
      };
    }
    return out;
  } finally {
    await core.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
