/**
 * server/housekeeping.ts: which temp entries of the data dir are leftovers (their process is gone, or they
 * are old) and which are in use; the Housekeeper's timer (injected period), its `swept` event and its stop.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Housekeeper, sweepDataDir, type SweepReport } from '../../server/housekeeping';
import { silentLogger } from '../../server/logger';
import { tempDir } from '../helpers/core';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

const ME = 1000;
const LIVE = 2000;
const DEAD = 3000;
const NOW = Date.now();
const rules = { pid: ME, alive: (pid: number) => pid === ME || pid === LIVE, now: () => NOW, maxAgeMs: 10 * 60_000 };

describe('sweepDataDir', () => {
  it('removes temp files of dead processes and old ones; keeps ours and live ones in use, and everything else', async () => {
    const root = await tempDir('svc-emu-hk-');
    dirs.push(root);
    await mkdir(join(root, 'inbox'));
    await mkdir(join(root, 'quarantine'));
    const files = {
      deadDb: join(root, `.db.json.${DEAD}.0a1b2c3d.tmp`),
      deadInbox: join(root, 'inbox', `.hooks.jsonl.${DEAD}.deadbeef.tmp`),
      deadQuarantine: join(root, 'quarantine', `.report.json.${DEAD}.0000beef.tmp`),
      mineFresh: join(root, `.db.json.${ME}.11111111.tmp`),
      mineOld: join(root, `.emulator.json.${ME}.22222222.tmp`),
      liveFresh: join(root, `.db.json.${LIVE}.33333333.tmp`),
      liveOld: join(root, `.db.json.${LIVE}.44444444.tmp`),
      db: join(root, 'db.json'),
      notOurs: join(root, '.db.json.tmp'),
    };
    for (const f of Object.values(files)) await writeFile(f, 'x');
    const limaDead = join(root, `svc-emu-lima-${DEAD}-AbC123`);
    const limaMine = join(root, `svc-emu-lima-${ME}-XyZ789`);
    for (const d of [limaDead, limaMine]) await mkdir(d);
    await writeFile(join(limaDead, 'svc-emu.yaml'), 'x');
    const old = new Date(NOW - 11 * 60_000);
    for (const f of [files.mineOld, files.liveOld, limaMine]) await utimes(f, old, old);

    expect(await sweepDataDir(root, rules)).toBe(6);
    const left = (p: string) => existsSync(p);
    expect([files.deadDb, files.deadInbox, files.deadQuarantine, files.mineOld, files.liveOld, limaDead].filter(left)).toEqual([]);
    // in use (a write of ours or of a live process), not a temp file, or a Lima dir of a live core (however old)
    expect([files.mineFresh, files.liveFresh, files.db, files.notOurs, limaMine].every(left)).toBe(true);
  });

  it('a data dir without inbox or quarantine is fine', async () => {
    const root = await tempDir('svc-emu-hk-');
    dirs.push(root);
    expect(await sweepDataDir(root, rules)).toBe(0);
  });
});

describe('Housekeeper', () => {
  it('runs on its timer, emits swept with the sums, logs a failing sweep and goes on; stop clears the timer', async () => {
    let calls = 0;
    const logged: string[] = [];
    const hk = new Housekeeper({
      intervalMs: 10,
      logger: { ...silentLogger, log: (level, msg) => logged.push(`${level} ${msg}`) },
      sweeps: [
        async () => {
          calls++;
          return { files: 2 };
        },
        async () => {
          throw new Error('boom');
        },
        async () => ({ groups: 1, files: 1 }),
      ],
    });
    hk.start();
    const [report] = (await once(hk, 'swept')) as [SweepReport];
    expect(report).toEqual({ groups: 1, files: 3 });
    expect(logged).toContain('warn housekeeping sweep failed');
    await once(hk, 'swept'); // the timer goes on
    expect(calls).toBeGreaterThanOrEqual(2);
    await hk.stop();
  });

  it('start arms one timer of the given period; stop cancels it and waits for the round in progress', async () => {
    const armed: Array<{ ms: number; fn: () => void; cancelled: boolean }> = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let finished = false;
    const hk = new Housekeeper({
      intervalMs: 1234,
      logger: silentLogger,
      every: (fn, ms) => {
        const t = { ms, fn, cancelled: false };
        armed.push(t);
        return { cancel: () => void (t.cancelled = true) };
      },
      sweeps: [
        async () => {
          await gate;
          finished = true;
          return {};
        },
      ],
    });
    hk.start();
    hk.start();
    expect(armed.map((t) => t.ms)).toEqual([1234]);
    armed[0]!.fn(); // the timer fires: a round starts
    const stopped = hk.stop();
    expect(armed[0]!.cancelled).toBe(true);
    release();
    await stopped;
    expect(finished, 'stop waited for the round').toBe(true);
    hk.start();
    expect(armed.length, 'a stopped housekeeper does not start again').toBe(1);
  });
});
