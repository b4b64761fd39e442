import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { client, rssMb, serveCore, stats, timeEach } from './lib';

/**
 * Issue 2's figures: version creation and the runtime-limits read over loopback (p50/p99, with
 * /healthz in the same run as the floor to compare against), start-to-ready and idle RSS of the core.
 */
export async function controlPlane(opts: { iterations: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-'));
  try {
    const firstStart = await serveCore(dir);
    const call = client(firstStart.url, firstStart.apiKey);
    await new Promise((r) => setTimeout(r, 1000));
    const idleRss = rssMb(firstStart.child.pid!);

    // Interleaved, so both see the same machine state: the ratio is what to compare across runs.
    const healthz: number[] = [];
    const limits: number[] = [];
    await timeEach(opts.iterations, async (i) => {
      let t = performance.now();
      await call('GET', '/healthz');
      if (i >= 0) healthz.push(performance.now() - t);
      t = performance.now();
      const r = await call('GET', '/v1/tenant/runtime-limits');
      if (r.status !== 200) throw new Error(`runtime-limits: ${r.status}`);
      if (i >= 0) limits.push(performance.now() - t);
    });
    const created = await call('POST', '/v1/snippets', { name: 'bench', runtime: 'bun' });
    if (created.status !== 201) throw new Error(`create snippet: ${created.status} ${created.body}`);
    const versions = await timeEach(
      Math.min(opts.iterations, 500),
      async (i) => {
        const r = await call('POST', '/v1/snippets/bench/versions', {
          code: `export default async function handler(input) { return { i: ${i}, input }; }\n`,
          max_memory_mb: 128,
        });
        if (r.status !== 201) throw new Error(`create version: ${r.status} ${r.body}`);
      },
      20,
    );
    const loadedRss = rssMb(firstStart.child.pid!);
    await firstStart.stop();

    const restarts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const core = await serveCore(dir);
      restarts.push(core.readyMs);
      await core.stop();
    }
    const fresh: number[] = [firstStart.readyMs];
    for (let i = 0; i < 4; i++) {
      const freshDir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-fresh-'));
      const core = await serveCore(freshDir);
      fresh.push(core.readyMs);
      await core.stop();
      rmSync(freshDir, { recursive: true, force: true });
    }

    const h = stats(healthz);
    const l = stats(limits);
    const v = stats(versions);
    return {
      healthz: h,
      get_runtime_limits: { ...l, p50_ratio_to_healthz: round(l.p50_ms / h.p50_ms) },
      post_version: { ...v, p50_ratio_to_healthz: round(v.p50_ms / h.p50_ms) },
      start_to_ready_ms: {
        first_start: stats(fresh),
        restart_with_state: stats(restarts),
        note: 'spawn of `svc-emu serve` to the first 200 from /readyz, Node start-up included',
      },
      idle_rss_mb: idleRss,
      rss_after_versions_mb: loadedRss,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (x: number) => Math.round(x * 100) / 100;
