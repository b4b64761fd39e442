import { isServed } from './anchors';
import { helloAnswer, leanClient, type LeanClient, type Target } from './lean-http';
import { stats, type Stats } from './lib';
import { ensureHello, invokeTarget, RUNTIMES, type SpeedCtx } from './speed-core';
import { ms, ratio } from './table';

/**
 * Warm sync hello (Bun and Python, at max_cpu_percent 100 and at the default 10) and throughput with 8
 * clients, each against Miniflare (the anchor) and a bare Bun.serve (the floor), with the core's /healthz
 * as the other floor. Every target is driven by the same lean client (bench/lean-http.ts), round-robin,
 * so all see the same noise: what to compare is the ratio within one run.
 */

/** Warm snippets: `hello-<runtime>-<cpu>`; the default-limits ones (cpu 10) also serve the throughput. */
const WARM = RUNTIMES.flatMap((runtime) => [100, 10].map((cpu) => ({ runtime, cpu, name: `hello-${runtime}-${cpu}` })));

export async function warmPart(ctx: SpeedCtx): Promise<void> {
  for (const w of WARM) await ensureHello(ctx, w.name, w.runtime, w.cpu === 100 ? { max_cpu_percent: 100 } : {});
  const targets: { key: string; target: Target }[] = WARM.map((w) => ({
    key: w.name,
    target: invokeTarget(ctx.core, w.name, helloAnswer),
  }));
  if (isServed(ctx.miniflare)) targets.push({ key: 'miniflare', target: helloTarget('miniflare', ctx.miniflare.url) });
  if (isServed(ctx.bunFloor)) targets.push({ key: 'bun_serve', target: helloTarget('Bun.serve', ctx.bunFloor.url) });
  targets.push({
    key: 'healthz',
    target: { name: 'healthz', url: ctx.core.url, method: 'GET', path: '/healthz', expect: (s) => s === 200 },
  });
  const clients = targets.map((t) => ({ key: t.key, client: leanClient(t.target) }));
  const rounds = ctx.quick ? 200 : 1000;
  const samples = new Map<string, number[]>(clients.map((c) => [c.key, []]));
  try {
    for (let i = -50; i < rounds; i++) {
      for (const c of clients) {
        const t = performance.now();
        await c.client.hit();
        if (i >= 0) samples.get(c.key)!.push(performance.now() - t);
      }
    }
  } finally {
    clients.forEach((c) => c.client.close());
  }
  const s = new Map<string, Stats>([...samples].map(([k, v]) => [k, stats(v)]));
  const mf = s.get('miniflare');
  const bun = s.get('bun_serve');
  const hz = s.get('healthz')!;
  ctx.detail.warm = { rounds, order: clients.map((c) => c.key), stats: Object.fromEntries(s) };

  const anchorCell = mf ? `Miniflare ${ms(mf)}` : `n/a`;
  const floorCell = `${bun ? `Bun.serve ${bun.p50_ms.toFixed(2)}` : 'Bun.serve n/a'} · healthz ${hz.p50_ms.toFixed(2)}`;
  for (const w of WARM) {
    const e = s.get(w.name)!;
    ctx.add({
      key: `warm.${w.runtime}.cpu${w.cpu}`,
      figure: `warm sync hello, ${w.runtime === 'bun' ? 'Bun' : 'Python'}, cpu ${w.cpu}%${w.cpu === 10 ? ' (default)' : ''}`,
      emulator: ms(e),
      floor: floorCell,
      anchor: anchorCell,
      ratio: `${ratio(e.p50_ms, mf?.p50_ms)} mf · ${ratio(e.p50_ms, bun?.p50_ms)} bun · ${ratio(e.p50_ms, hz.p50_ms)} hz`,
      measured: { p50: e.p50_ms, p99: e.p99_ms, anchor: mf?.p50_ms ?? null },
    });
  }
  ctx.add({
    key: 'anchor.miniflare',
    figure: 'anchor: Miniflare hello (same client)',
    emulator: '—',
    anchor: mf ? ms(mf) : 'n/a',
    measured: { p50: mf?.p50_ms, p99: mf?.p99_ms },
    note: isServed(ctx.miniflare) ? ctx.miniflare.what : unavailableNote(ctx),
  });
  ctx.add({
    key: 'floor.bun_serve',
    figure: 'floor: bare Bun.serve hello',
    emulator: '—',
    floor: bun ? ms(bun) : 'n/a',
    measured: { p50: bun?.p50_ms, p99: bun?.p99_ms },
    ...(isServed(ctx.bunFloor) ? {} : { note: ctx.bunFloor.unavailable }),
  });
  ctx.add({
    key: 'floor.healthz',
    figure: 'floor: core GET /healthz',
    emulator: '—',
    floor: ms(hz),
    measured: { p50: hz.p50_ms, p99: hz.p99_ms },
  });
}

export async function throughputPart(ctx: SpeedCtx): Promise<void> {
  const name = 'hello-bun-10';
  await ensureHello(ctx, name, 'bun', {});
  await ctx.asAdmin('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 16 });
  const targets: { key: string; target: Target }[] = [{ key: 'emulator', target: invokeTarget(ctx.core, name, helloAnswer) }];
  if (isServed(ctx.miniflare)) targets.push({ key: 'miniflare', target: helloTarget('miniflare', ctx.miniflare.url) });
  if (isServed(ctx.bunFloor)) targets.push({ key: 'bun_serve', target: helloTarget('Bun.serve', ctx.bunFloor.url) });
  const CLIENTS = 8;
  const windowMs = ctx.quick ? 1000 : 4000;
  const rounds = ctx.quick ? 1 : 3;
  const clients = targets.map((t) => ({ key: t.key, client: leanClient(t.target, CLIENTS) }));
  const windows: { key: string; round: number; requests_per_s: number; failed: number }[] = [];
  try {
    // Untimed: the emulator's pool grows to one sandbox per client, every target's sockets open.
    for (const c of clients) await drive(c.client, CLIENTS, ctx.quick ? 300 : 1000);
    for (let r = 0; r < rounds; r++) {
      for (const c of clients) {
        const w = await drive(c.client, CLIENTS, windowMs);
        windows.push({ key: c.key, round: r, requests_per_s: Math.round(w.done / (windowMs / 1000)), failed: w.failed });
      }
    }
  } finally {
    clients.forEach((c) => c.client.close());
  }
  const rate = (key: string) => {
    const ws = windows.filter((w) => w.key === key);
    return ws.length ? Math.round(ws.reduce((a, w) => a + w.requests_per_s, 0) / ws.length) : null;
  };
  const emu = rate('emulator')!;
  const mf = rate('miniflare');
  const bun = rate('bun_serve');
  const failed = windows.reduce((a, w) => a + w.failed, 0);
  const pool = JSON.parse((await ctx.asAdmin('GET', '/_emu/executor')).body) as { pool: unknown };
  ctx.detail.throughput = { clients: CLIENTS, window_ms: windowMs, rounds, windows, pool: pool.pool };
  ctx.add({
    key: 'throughput',
    figure: `throughput, ${CLIENTS} clients, hello Bun, default limits (req/s)`,
    emulator: `${emu.toLocaleString('en-US')} req/s`,
    floor: bun === null ? 'Bun.serve n/a' : `Bun.serve ${bun.toLocaleString('en-US')}`,
    anchor: mf === null ? 'n/a' : `Miniflare ${mf.toLocaleString('en-US')}`,
    ratio: `${ratio(emu, mf)} mf · ${ratio(emu, bun)} bun`,
    measured: { value: emu, anchor: mf },
    note: `mean of ${rounds} alternating ${windowMs / 1000} s windows per target${failed ? `; ${failed} requests failed` : ''}${mf === null ? `; ${unavailableNote(ctx)}` : ''}`,
  });
}

/** `clients` loops sending requests for `ms`: completed and failed counts. */
async function drive(client: LeanClient, clients: number, ms: number): Promise<{ done: number; failed: number }> {
  const until = performance.now() + ms;
  let done = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until) {
        try {
          await client.hit();
          done++;
        } catch {
          failed++;
        }
      }
    }),
  );
  return { done, failed };
}

function helloTarget(name: string, url: string): Target {
  return { name, url, method: 'POST', path: '/', body: { name: 'bench' }, expect: helloAnswer };
}

function unavailableNote(ctx: SpeedCtx): string {
  return isServed(ctx.miniflare) ? '' : `no anchor: ${ctx.miniflare.unavailable}`;
}
