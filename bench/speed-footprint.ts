import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { client, rssMb, serveCore, stats } from './lib';
import { adminToken, listedSpares, round, waitSparesReady, type SpeedCtx } from './speed-core';
import { ms } from './table';

/**
 * Memory and start-up: the core's VmRSS once it has run every part before this one and settled, its warm
 * sandboxes' RSS, and of fresh cores: spawn → first 200 from /readyz (Node's start included), the time
 * until /_emu/executor reports the spares ready, and each spare's RSS. A group's RSS is the sum of VmRSS
 * over the processes of its pids cgroup (/sys/fs/cgroup/pids/svc-emu/c<core pid>-…: cgroup v1 here).
 */
const PIDS_ROOT = '/sys/fs/cgroup/pids/svc-emu';

/** RSS (MB) of each limit group of the core `pid`, by the group's name. */
function groupRss(pid: number): Map<string, number> | null {
  if (!existsSync(PIDS_ROOT)) return null;
  const out = new Map<string, number>();
  for (const g of readdirSync(PIDS_ROOT, { withFileTypes: true })) {
    if (!g.isDirectory() || !g.name.startsWith(`c${pid}-`)) continue;
    let kb = 0;
    let procs: string[];
    try {
      procs = readFileSync(join(PIDS_ROOT, g.name, 'cgroup.procs'), 'utf8')
        .split('\n')
        .filter(Boolean);
    } catch {
      continue; // removed since the listing
    }
    for (const p of procs) {
      try {
        kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
      } catch {
        /* gone */
      }
    }
    if (kb) out.set(g.name, round(kb / 1024, 1));
  }
  return out;
}

export async function footprintPart(ctx: SpeedCtx): Promise<void> {
  // The loaded core: every part before this one ran on it.
  await waitSparesReady(ctx.asAdmin);
  await new Promise((res) => setTimeout(res, ctx.quick ? 500 : 3000)); // settle: lazy writes, GC, pool eviction timers
  const coreRss = rssMb(ctx.core.child.pid!);
  const loadedGroups = groupRss(ctx.core.child.pid!);
  const sandboxes = loadedGroups ? [...loadedGroups.values()].sort((a, b) => a - b) : [];

  // Fresh cores: start → /readyz, then the spares warming in the background, then each spare's RSS (a
  // claimed spare keeps its group's name, so only a core that has run nothing shows its spares alone).
  const ready: number[] = [ctx.core.readyMs];
  const sparesReady: number[] = [];
  const spareRss: Record<string, number[]> = {};
  /** The same spares' RSS as the core reports it (`rss_mb`), for comparison. */
  const spareRssByCore: Record<string, number[]> = {};
  const freshRss: number[] = [];
  for (let i = 0; i < (ctx.quick ? 1 : 4); i++) {
    const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-fresh-'));
    try {
      const core = await serveCore(dir);
      try {
        ready.push(core.readyMs);
        const waited = await waitSparesReady(client(core.url, adminToken(dir)));
        if (waited !== null) sparesReady.push(waited);
        await new Promise((res) => setTimeout(res, 300));
        freshRss.push(rssMb(core.child.pid!));
        // A spare's group is c<core pid>-<spare id>; /_emu/executor names each spare's runtime and import profile.
        const listed = listedSpares(JSON.parse((await client(core.url, adminToken(dir))('GET', '/_emu/executor')).body)) ?? [];
        for (const [name, mb] of groupRss(core.child.pid!) ?? []) {
          const spare = listed.find((s) => name.endsWith(`-${s.id}`));
          const kind = spare ? `${spare.runtime}/${spare.profile}` : (/-spare-([a-z]+)-/.exec(name)?.[1] ?? name);
          (spareRss[kind] ??= []).push(mb);
          if (spare?.rss_mb != null) (spareRssByCore[kind] ??= []).push(spare.rss_mb);
        }
      } finally {
        await core.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const r = stats(ready);
  const sr = sparesReady.length ? stats(sparesReady) : null;
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  ctx.detail.footprint = {
    loaded_core_rss_mb: coreRss,
    loaded_core_groups_rss_mb: loadedGroups ? Object.fromEntries(loadedGroups) : null,
    fresh_core_rss_mb: freshRss,
    fresh_spares_rss_mb: spareRss,
    fresh_spares_rss_mb_reported_by_core: spareRssByCore,
    spares_ready_after_readyz_ms: sr,
    start_to_readyz_ms: r,
  };
  ctx.add({
    key: 'rss.core_idle',
    figure: 'idle core RSS (after the parts above, settled)',
    emulator: `${coreRss} MB`,
    measured: { value: coreRss },
    note: `a fresh core, spares ready, nothing run: ${freshRss.join(' / ')} MB`,
  });
  ctx.add({
    key: 'rss.spares',
    figure: 'each spare’s RSS (fresh core, median)',
    emulator: loadedGroups
      ? Object.entries(spareRss)
          .map(([kind, mbs]) => `${kind} ${median(mbs)}`)
          .join(' · ') + ' MB'
      : 'n/a',
    measured: {},
    ...(loadedGroups ? {} : { note: `no cgroup v1 pids hierarchy (${PIDS_ROOT}) here: not measured` }),
  });
  ctx.add({
    key: 'rss.idle_sandbox',
    figure: 'idle warm sandboxes and spares of the loaded core',
    emulator: sandboxes.length ? `${sandboxes.length} groups, ${sandboxes[0]}–${sandboxes.at(-1)} MB` : 'none',
    measured: {},
  });
  ctx.add({
    key: 'start.readyz',
    figure: 'start → /readyz (fresh data dir)',
    emulator: ms(r),
    measured: { p50: r.p50_ms, p99: r.p99_ms },
    note: `${r.n} starts; spawn of \`svc-emu serve\` to the first 200, Node's start included`,
  });
  ctx.add({
    key: 'start.spares_ready',
    figure: 'spares ready after /readyz (background)',
    emulator: sr ? ms(sr) : 'not within 15 s',
    measured: sr ? { p50: sr.p50_ms, p99: sr.p99_ms } : {},
  });
}
