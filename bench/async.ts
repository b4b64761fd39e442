import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { client, serveCore, stats } from './lib';

/**
 * Issue 5's figures, against the built core as a separate process: the 202 of an async invoke (the
 * job is on disk when it arrives), enqueue-to-start with an idle worker (the record's queue_wait_ms:
 * from queued to handed to the executor, which includes the durable `running` mark), and jobs per
 * second for a warm Bun hello with 16 clients submitting.
 */
const HELLO = 'export default async function handler(input) { return { hello: input.name ?? "world" }; }\n';

export async function asyncBench(opts: { jobs: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-async-'));
  const core = await serveCore(dir);
  const call = client(core.url, core.apiKey);
  const admin = client(core.url, JSON.parse(readFileSync(join(dir, 'emulator.json'), 'utf8')).admin_token as string);
  const ok = async (m: string, p: string, b?: unknown, want = [200, 201, 202]) => {
    const r = await call(m, p, b);
    if (!want.includes(r.status)) throw new Error(`${m} ${p}: ${r.status} ${r.body}`);
    return JSON.parse(r.body || 'null');
  };
  const submit = async () => {
    const t = performance.now();
    const r = await call('POST', '/v1/invoke/hello', { name: 'bench' }, { 'x-invoke-mode': 'async' });
    const ms = performance.now() - t;
    if (r.status !== 202) throw new Error(`async invoke: ${r.status} ${r.body}`);
    return { ms, id: JSON.parse(r.body).invocation_id as string };
  };
  const idle = async () => {
    for (;;) {
      const q = JSON.parse((await admin('GET', '/_emu/info')).body).async_queue;
      if (q.queued === 0 && q.running === 0) return;
      await new Promise((r) => setTimeout(r, 1));
    }
  };
  try {
    await ok('POST', '/v1/snippets', { name: 'hello', runtime: 'bun' });
    await ok('POST', '/v1/snippets/hello/versions', { code: HELLO });
    for (let i = 0; i < 20; i++) await ok('POST', '/v1/invoke/hello', {}); // warm sandbox

    // One at a time, each after the previous finished: the 202 and the idle worker's pick-up.
    const accepted: number[] = [];
    const waits: number[] = [];
    for (let i = 0; i < 300; i++) {
      const { ms, id } = await submit();
      await idle();
      const rec = JSON.parse((await admin('GET', `/_emu/invocations/${id}`)).body);
      if (rec.status !== 'succeeded') throw new Error(`job ${id}: ${rec.status} ${JSON.stringify(rec.error)}`);
      if (i >= 20) {
        accepted.push(ms);
        waits.push(rec.queue_wait_ms);
      }
    }

    // Throughput: 16 clients submit `jobs` jobs as fast as they can; until the queue is empty.
    const t0 = performance.now();
    let next = 0;
    const burst202: number[] = [];
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next++ < opts.jobs) burst202.push((await submit()).ms);
      }),
    );
    const submittedMs = performance.now() - t0;
    await idle();
    const totalMs = performance.now() - t0;
    return {
      accepted_202: stats(accepted),
      enqueue_to_start: stats(waits),
      throughput: {
        jobs: opts.jobs,
        clients: 16,
        jobs_per_second: Math.round((opts.jobs / totalMs) * 1000 * 10) / 10,
        submitted_in_ms: Math.round(submittedMs),
        drained_in_ms: Math.round(totalMs),
        accepted_202_under_load: stats(burst202),
      },
    };
  } finally {
    await core.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
