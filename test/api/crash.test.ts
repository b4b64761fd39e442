/**
 * Crash safety (issue 2): kill the core with SIGKILL during a burst of writes, restart it on the same
 * data dir, and every write that was acknowledged is there; db.json still parses. Also: a core in
 * another process owns its data dir, and a second core refuses to share it.
 */
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmulator, DataDirInUseError } from '../../server';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { killAll, spawnCore } from '../helpers/spawn-core';

const dirs: string[] = [];
const cores: TestCore[] = [];
afterAll(async () => {
  killAll();
  for (const c of cores) await c.stop().catch(() => {});
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('crash during a burst of writes', () => {
  it('SIGKILL mid-burst: db.json parses, the stale emulator.json is taken over, every acknowledged write is there', async () => {
    const dataDir = await tempDir();
    dirs.push(dataDir);
    const child = await spawnCore(dataDir);
    expect(child.pid).toBe(child.proc.pid);

    // While it runs, the data dir is its own: a core in this process refuses to share it.
    const refused = await startEmulator({ dataDir, port: 0 }).then(
      async (emu) => {
        await emu.stop();
        return null;
      },
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(DataDirInUseError);
    expect(String((refused as Error).message)).toContain(`pid ${child.pid}`);
    expect(String((refused as Error).message)).toContain('--data-dir');
    expect(JSON.parse(await readFile(join(dataDir, 'emulator.json'), 'utf8')).pid).toBe(child.pid); // untouched

    const TOTAL = 300;
    const KILL_AFTER = 100;
    const WORKERS = 32;
    const acked = new Map<string, unknown>();
    let next = 0;
    let killed = false;
    const valueOf = (i: number) => ({ i, text: `value-${i}-`.padEnd(64, 'x'), list: [i, i * 2, i * 3] });

    const worker = async () => {
      while (next < TOTAL && !killed) {
        const i = next++;
        const key = `k${i}`;
        try {
          const res = await fetch(`${child.url}/v1/store/${key}`, {
            method: 'PUT',
            headers: { authorization: `Bearer ${child.key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ value: valueOf(i) }),
          });
          await res.text();
          if (res.status >= 200 && res.status < 300) {
            acked.set(key, valueOf(i));
            if (acked.size >= KILL_AFTER && !killed) {
              killed = true;
              child.proc.kill('SIGKILL');
            }
          } // else refused: not acknowledged, so not expected back
        } catch {
          // the connection died with the process: not acknowledged
        }
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, worker));
    const exit = await child.exited;
    expect(exit.signal).toBe('SIGKILL');
    expect(acked.size).toBeGreaterThanOrEqual(KILL_AFTER);
    expect(acked.size).toBeLessThan(TOTAL); // it really died mid-burst

    // db.json is whole
    const text = await readFile(join(dataDir, 'db.json'), 'utf8');
    const db = JSON.parse(text) as { store: { key: string; value: unknown }[] };
    expect(Array.isArray(db.store)).toBe(true);

    // the stale lock is still there, naming the dead process…
    const stale = JSON.parse(await readFile(join(dataDir, 'emulator.json'), 'utf8'));
    expect(stale.pid).toBe(child.pid);

    // …and a new core takes it over without being told
    const core = await startTestCore({ dataDir });
    cores.push(core);
    const lock = JSON.parse(await readFile(join(dataDir, 'emulator.json'), 'utf8'));
    expect(lock.pid).toBe(process.pid);
    expect(core.key).toBe(child.key);

    const missing: string[] = [];
    const wrong: string[] = [];
    await Promise.all(
      [...acked].map(async ([key, value]) => {
        const r = await core.call('GET', `/v1/store/${key}`);
        if (r.status !== 200) missing.push(`${key}: ${r.status}`);
        else if (JSON.stringify(r.json.value) !== JSON.stringify(value)) wrong.push(key);
      }),
    );
    expect(missing).toEqual([]);
    expect(wrong).toEqual([]);
    // whatever else was written (in flight when it died) reads back whole too
    const list = await core.call('GET', '/v1/store?limit=1000');
    for (const e of list.json.data) {
      const i = Number(e.key.slice(1));
      const r = await core.call('GET', `/v1/store/${e.key}`);
      expect(r.json.value).toEqual(valueOf(i));
    }
    expect(list.json.data.length).toBeGreaterThanOrEqual(acked.size);

    // and it keeps working: a write after the restart lands
    expect((await core.call('PUT', '/v1/store/after-restart', { value: 1 })).status).toBe(201);
    await core.stop();
    expect(existsSync(join(dataDir, 'emulator.json'))).toBe(false);
  }, 60_000);
});
