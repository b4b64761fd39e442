import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

/** One stream-mode request: ms to the first `start` frame and to the first `chunk` frame, and chunks seen. */
function streamOnce(url: URL, key: string, agent: Agent, path: string, body: string): Promise<{ start: number; chunk: number; chunks: number; total: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let start = NaN;
    let chunk = NaN;
    let chunks = 0;
    let buf = '';
    const req = httpRequest(
      {
        agent, host: url.hostname, port: url.port, method: 'POST', path,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-invoke-mode': 'stream' },
      },
      (res) => {
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          buf += text;
          for (let end = buf.indexOf('\n\n'); end >= 0; end = buf.indexOf('\n\n')) {
            const frame = buf.slice(0, end);
            buf = buf.slice(end + 2);
            if (frame.includes('event: start') && Number.isNaN(start)) start = performance.now() - t0;
            if (frame.includes('event: chunk')) {
              if (Number.isNaN(chunk)) chunk = performance.now() - t0;
              chunks++;
            }
          }
        });
        res.on('end', () => resolve({ start, chunk, chunks, total: performance.now() - t0 }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export async function streamBench(opts: { iterations: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-stream-'));
  const core = await serveCore(dir);
  const call = client(core.url, core.apiKey);
  const agent = new Agent({ keepAlive: true });
  const url = new URL(core.url);
  const out: Record<string, unknown> = {};
  try {
    for (const runtime of ['bun', 'python'] as const) {
      for (const [name, code] of [[`first-${runtime}`, FIRST[runtime]], [`tight-${runtime}`, TIGHT[runtime]]] as const) {
        await call('POST', '/v1/snippets', { name, runtime });
        const v = await call('POST', `/v1/snippets/${name}/versions`, { code, max_cpu_percent: 100 });
        if (v.status !== 201) throw new Error(`version ${name}: ${v.status} ${v.body}`);
      }
      const start: number[] = [];
      const chunk: number[] = [];
      for (let i = -20; i < opts.iterations; i++) {
        const r = await streamOnce(url, core.apiKey, agent, `/v1/invoke/first-${runtime}`, '{}');
        if (r.chunks !== 1) throw new Error(`first-${runtime}: ${r.chunks} chunks`);
        if (i >= 0) {
          start.push(r.start);
          chunk.push(r.chunk);
        }
      }
      const n = 20_000;
      await streamOnce(url, core.apiKey, agent, `/v1/invoke/tight-${runtime}`, JSON.stringify({ n: 100 })); // warm
      const tight = await streamOnce(url, core.apiKey, agent, `/v1/invoke/tight-${runtime}`, JSON.stringify({ n }));
      if (tight.chunks !== n) throw new Error(`tight-${runtime}: ${tight.chunks} of ${n} chunks`);
      out[runtime] = {
        warm_to_start: stats(start),
        warm_to_first_chunk: stats(chunk),
        tight_generator: { chunks: n, ms: Math.round(tight.total), chunks_per_second: Math.round(n / (tight.total / 1000)) },
      };
    }
    return out;
  } finally {
    agent.destroy();
    await core.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
