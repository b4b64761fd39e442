import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { leanClient } from './lean-http';
import { stats } from './lib';
import { ensureHello, invokeTarget, type SpeedCtx } from './speed-core';
import { ms } from './table';

/**
 * Durability, read from the data dir's files (server/storage: `journal/<generation>.jsonl` lines
 * `{seq, collection, record}` and `db.json`'s `invocations`), not from the API: an async 202 must find its
 * job already on disk when it arrives, and a sync invocation's finished record must be on disk within
 * 100 ms of its response (the delay is polled every ~1 ms).
 */

export interface OnDisk {
  status: string;
  /** `journal` or `db.json`. */
  source: string;
}

/** The states the data dir's files hold for invocation `id` (journal first, then db.json: see below). */
export function statesOnDisk(dataDir: string, id: string): OnDisk[] {
  const found: OnDisk[] = [];
  // The journal before db.json: a generation is deleted only once a db.json holding its lines is written,
  // so a line missed because its file went away is in the db.json read after.
  const journal = join(dataDir, 'journal');
  const files = existsSync(journal) ? readdirSync(journal).filter((f) => f.endsWith('.jsonl')) : [];
  for (const f of files) {
    let text: string;
    try {
      text = readFileSync(join(journal, f), 'utf8');
    } catch {
      continue; // sealed and removed since the listing
    }
    for (const line of text.split('\n')) {
      if (!line.includes(id)) continue;
      try {
        const rec = (JSON.parse(line) as { record?: { id?: string; status?: string } }).record;
        if (rec?.id === id && rec.status) found.push({ status: rec.status, source: 'journal' });
      } catch {
        /* a line still being written */
      }
    }
  }
  const db = readFileSync(join(dataDir, 'db.json'), 'utf8');
  if (db.includes(id)) {
    const rec = (JSON.parse(db) as { invocations?: { id: string; status: string }[] }).invocations?.find((r) => r.id === id);
    if (rec) found.push({ status: rec.status, source: 'db.json' });
  }
  return found;
}

export async function durablePart(ctx: SpeedCtx): Promise<void> {
  const name = 'hello-bun-10';
  await ensureHello(ctx, name, 'bun', {});
  const n = ctx.quick ? 10 : 50;
  const client = leanClient(invokeTarget(ctx.core, name, (s) => s === 200));
  let asyncOnDisk = 0;
  const sources: Record<string, number> = {};
  const seen = (states: OnDisk[], where: string) =>
    states.forEach((x) => (sources[`${where} ${x.status} in ${x.source}`] = (sources[`${where} ${x.status} in ${x.source}`] ?? 0) + 1));
  const acceptMs: number[] = [];
  const delays: number[] = [];
  let neverDurable = 0;
  try {
    await client.hit(); // warm
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      const r = await client.send({ 'x-invoke-mode': 'async' });
      acceptMs.push(performance.now() - t);
      if (r.status !== 202) throw new Error(`async invoke: ${r.status} ${r.body.slice(0, 300)}`);
      const id = (JSON.parse(r.body) as { invocation_id: string }).invocation_id;
      const states = statesOnDisk(ctx.dataDir, id);
      seen(states, 'async at 202:');
      if (states.length) asyncOnDisk++;
    }
    for (let i = 0; i < n; i++) {
      const r = await client.send();
      const answered = performance.now();
      const id = r.headers['x-invocation-id'];
      if (r.status !== 200 || typeof id !== 'string') throw new Error(`sync invoke: ${r.status} (x-invocation-id ${String(id)})`);
      for (;;) {
        const states = statesOnDisk(ctx.dataDir, id);
        if (states.some((x) => x.status === 'succeeded')) {
          seen(states, 'sync when found:');
          delays.push(performance.now() - answered);
          break;
        }
        if (performance.now() - answered > 5000) {
          neverDurable++;
          delays.push(5000);
          break;
        }
        await new Promise((res) => setTimeout(res, 1));
      }
    }
  } finally {
    client.close();
  }
  const d = stats(delays);
  const a = stats(acceptMs);
  ctx.detail.durability = {
    async_202_on_disk: `${asyncOnDisk}/${n}`,
    async_202_ms: a,
    sync_record_on_disk_delay_ms: d,
    never_durable_within_5s: neverDurable,
    where_found: sources,
  };
  ctx.add({
    key: 'durable.async_202',
    figure: 'async 202 only after a durable write',
    emulator: `${asyncOnDisk}/${n} on disk`,
    measured: { value: asyncOnDisk / n },
    note: `202 latency ${ms(a)}`,
  });
  ctx.add({
    key: 'durable.sync_record',
    figure: 'sync record on disk after its response',
    emulator: ms(d),
    measured: { p50: d.p50_ms, p99: d.p99_ms },
    ...(neverDurable ? { note: `${neverDurable} of ${n} not on disk within 5 s` } : {}),
  });
}
