import { stats } from './lib';
import { round, type SpeedCtx } from './speed-core';
import { ms } from './table';

/**
 * Limit fidelity, kept from the executor suite so speed work cannot buy its figures with the limits:
 * the timeout's overshoot (a 1 s timeout against a spinning handler), the CPU share at 10/50/100% (cpu_ms
 * over duration_ms of a 1.5 s spin) and whether a 400 MB allocation under 64 MB is named oom_killed.
 */
const SPIN = (seconds: string) =>
  `import time\ndef handler(input):\n    end = time.time() + ${seconds}\n    while time.time() < end:\n        pass\n    return {}\n`;

export async function fidelityPart(ctx: SpeedCtx): Promise<void> {
  const n = ctx.quick ? 5 : 20;
  await ctx.ok('POST', '/v1/snippets', { name: 'spin', runtime: 'python' });
  await ctx.ok('POST', '/v1/snippets/spin/versions', { code: SPIN('input.get("s", 100)'), timeout_ms: 1000, max_cpu_percent: 100 });
  const overshoot: number[] = [];
  // Each timeout run is a cold start (its sandbox is destroyed): its init_ms (the claim of a spare and the load) is part
  // of the overshoot, kept beside it (read after the timing) so a slow sample shows whether the start or the kill was slow.
  const initMs: (number | null)[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = await ctx.call('POST', '/v1/invoke/spin', {});
    if (r.status !== 504) throw new Error(`timeout run: ${r.status} ${r.body.slice(0, 300)}`);
    overshoot.push(performance.now() - t - 1000);
    const last = (await ctx.ok('GET', '/v1/invocations?snippet=spin&limit=1')) as { data: { usage?: { init_ms?: number } }[] };
    initMs.push(last.data[0]?.usage?.init_ms ?? null);
  }
  const share: Record<string, number> = {};
  const errors: number[] = [];
  for (const pct of [10, 50, 100]) {
    await ctx.ok('POST', '/v1/snippets/spin/versions', { code: SPIN('1.5'), max_cpu_percent: pct });
    await ctx.call('POST', '/v1/invoke/spin', {}); // the cold start, outside the measurement
    const r = await ctx.call('POST', '/v1/invoke/spin', {});
    if (r.status !== 200) throw new Error(`cpu run: ${r.status} ${r.body.slice(0, 300)}`);
    const page = (await ctx.ok('GET', '/v1/invocations?snippet=spin&limit=1')) as {
      data: { usage: { cpu_ms: number; duration_ms: number } }[];
    };
    const u = page.data[0]!.usage;
    share[`${pct}%`] = round((u.cpu_ms / u.duration_ms) * 100, 1);
    errors.push(Math.abs(share[`${pct}%`]! - pct) / pct);
  }
  await ctx.ok('POST', '/v1/snippets', { name: 'hog', runtime: 'python' });
  await ctx.ok('POST', '/v1/snippets/hog/versions', {
    code: 'def handler(input):\n    b = bytearray(400 * 1024 * 1024)\n    return {"n": len(b)}\n',
    max_memory_mb: 64,
  });
  let oom = 0;
  const oomMs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = await ctx.call('POST', '/v1/invoke/hog', {});
    oomMs.push(performance.now() - t);
    if (r.status === 500 && (JSON.parse(r.body) as { code?: string }).code === 'oom_killed') oom++;
  }
  const o = stats(overshoot);
  const worst = Math.max(...errors);
  ctx.detail.limit_fidelity = {
    timeout_overshoot_ms: { ...o, samples: overshoot.map((x) => Math.round(x)), init_ms: initMs },
    cpu_share_percent_of_wall: share,
    oom_classified: `${oom}/${n}`,
    oom_invoke_ms: stats(oomMs),
  };
  ctx.add({
    key: 'limits.timeout_overshoot',
    figure: 'timeout overshoot (1 s timeout)',
    emulator: ms(o),
    measured: { p50: o.p50_ms, p99: o.p99_ms },
  });
  ctx.add({
    key: 'limits.cpu_share',
    figure: 'CPU share at 10 / 50 / 100%',
    emulator: `${Object.values(share).join(' / ')} %`,
    ratio: `worst ${round(worst * 100, 1)}% off`,
    measured: { value: worst },
  });
  ctx.add({
    key: 'limits.oom',
    figure: 'OOM named oom_killed',
    emulator: `${oom}/${n}`,
    measured: { value: oom / n },
    note: `a 400 MB allocation under 64 MB: invoke p50 ${stats(oomMs).p50_ms} ms`,
  });
}
