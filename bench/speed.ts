import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { isServed, startBunFloor, startMiniflare, type Served, type Unavailable } from './anchors';
import { client, serveCore, type ServedCore } from './lib';
import { adminToken, okCall, type SpeedCtx } from './speed-core';
import { coldAgentsPart, coldHelloPart } from './speed-cold';
import { durablePart } from './speed-durable';
import { fidelityPart } from './speed-fidelity';
import { footprintPart } from './speed-footprint';
import { livePart } from './speed-live';
import { throughputPart, warmPart } from './speed-warm';
import { loadBaseline, makeRow, renderTable, type Row } from './table';

/**
 * Issue 16's suite: one table of every speed figure with its floors (a bare Bun.serve, the core's
 * /healthz), its anchor (Miniflare, installed by the bench into bench/anchors/), the ratios, the target
 * (bench/targets.ts) and the figure before the issue (bench/baseline-issue16.json). Parts run in this
 * order against one core (`svc-emu serve`, its own process and temp data dir); `live` starts its own core
 * with a workspace. Each part can be run alone by name (`npm run bench -- warm cold`).
 */
export const SPEED_PARTS: Record<string, (ctx: SpeedCtx) => Promise<void>> = {
  warm: warmPart,
  throughput: throughputPart,
  cold: coldHelloPart,
  agents: coldAgentsPart,
  fidelity: fidelityPart,
  durability: durablePart,
  footprint: footprintPart,
  live: livePart,
};
/** Parts that need the anchors. */
const WITH_ANCHORS = new Set(['warm', 'throughput']);

export interface SpeedReport {
  parts: string[];
  quick: boolean;
  anchors: { miniflare: string; bun_serve: string };
  table: Row[];
  detail: Record<string, unknown>;
  errors: Record<string, string>;
  /** The 1-minute load average at the start and end of each part: how much else ran on these CPUs. */
  host_load: { cpus: number; load_1m: number[] };
}

export async function speedBench(opts: { parts: string[]; quick: boolean; log: (line: string) => void }): Promise<SpeedReport> {
  const baseline = loadBaseline();
  const rows: Row[] = [];
  const detail: Record<string, unknown> = {};
  const errors: Record<string, string> = {};
  const load: number[] = [loadavg()[0]!];
  const anchored = opts.parts.some((p) => WITH_ANCHORS.has(p));
  const none: Unavailable = { unavailable: 'not started (no part here needs it)' };
  const miniflare: Served | Unavailable = anchored ? await startMiniflare(opts.log) : none;
  const bunFloor: Served | Unavailable = anchored ? await startBunFloor() : none;
  if (anchored && !isServed(miniflare)) opts.log(`bench: no Miniflare anchor: ${miniflare.unavailable}`);
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-speed-'));
  let core: ServedCore | null = null;
  try {
    core = await serveCore(dataDir);
    const call = client(core.url, core.apiKey);
    const ctx: SpeedCtx = {
      quick: opts.quick,
      log: opts.log,
      core,
      dataDir,
      call,
      asAdmin: client(core.url, adminToken(dataDir)),
      ok: okCall(call),
      miniflare,
      bunFloor,
      add: (r) => rows.push(makeRow(r, baseline)),
      detail,
    };
    for (const name of Object.keys(SPEED_PARTS)) {
      if (!opts.parts.includes(name)) continue;
      const t = performance.now();
      opts.log(`bench: speed/${name}…`);
      try {
        await SPEED_PARTS[name]!(ctx);
      } catch (err) {
        errors[name] = err instanceof Error ? (err.stack ?? err.message) : String(err);
        opts.log(`bench: speed/${name} FAILED: ${errors[name]}`);
        process.exitCode = 1;
      }
      load.push(loadavg()[0]!);
      opts.log(`bench: speed/${name} took ${((performance.now() - t) / 1000).toFixed(1)} s`);
    }
  } finally {
    await core?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    if (isServed(miniflare)) await miniflare.close();
    if (isServed(bunFloor)) await bunFloor.close();
  }
  const what = (s: Served | Unavailable) => (isServed(s) ? s.what : `unavailable: ${s.unavailable}`);
  const hostLine =
    `host: ${cpus().length} CPUs; 1-minute load average ${load[0]!.toFixed(1)} before the run (other work), ` +
    `${Math.min(...load).toFixed(1)}–${Math.max(...load).toFixed(1)} during it (the bench's own processes included)`;
  opts.log(
    `\n${opts.quick ? '--quick: few iterations, to check the suite runs; not a measurement\n' : ''}${hostLine}\n${renderTable(rows)}\n${Object.keys(errors).length ? `\nparts that failed: ${Object.keys(errors).join(', ')}\n` : ''}`,
  );
  return {
    parts: opts.parts,
    quick: opts.quick,
    anchors: { miniflare: what(miniflare), bun_serve: what(bunFloor) },
    table: rows,
    detail,
    errors,
    host_load: { cpus: cpus().length, load_1m: load.map((x) => Math.round(x * 100) / 100) },
  };
}
