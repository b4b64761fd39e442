// BlobStore.sweep: while the core runs, blobs no record names any more go (a core that runs for weeks
// must not keep a file per invocation trimmed from the history), and a put of the same content racing a
// sweep never loses its file.
import { afterEach, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BlobStore } from '../../server/storage/blobs';
import { sha256Hex } from '../../server/ids';
import { startTestCore } from '../helpers/core';

let dir: string;
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const pathOf = (hash: string) => join(dir, hash.slice(0, 2), hash);
const age = async (hash: string, ms: number) => {
  const then = new Date(Date.now() - ms);
  await utimes(pathOf(hash), then, then);
};

describe('BlobStore.sweep', () => {
  it('deletes old blobs no record names, keeps named and young ones', async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-emu-blobs-'));
    const blobs = new BlobStore(dir);
    const named = await blobs.put('named');
    const gone = await blobs.put('trimmed from the history');
    const young = await blobs.put('just put, its record not written yet');
    await age(named, 120_000);
    await age(gone, 120_000);
    expect(await blobs.sweep(() => new Set([named]), 60_000)).toBe(1);
    expect(existsSync(pathOf(named))).toBe(true);
    expect(existsSync(pathOf(gone))).toBe(false);
    expect(existsSync(pathOf(young))).toBe(true);
  });

  it('makes an old unnamed blob young again when its content is put again, even while a sweep starts', async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-emu-blobs-'));
    const blobs = new BlobStore(dir);
    const hash = await blobs.put('the same 1 MB of logs, twice');
    await age(hash, 120_000);
    // The put starts first; the sweep, started before the put is done, waits for it and then sees a young file.
    const again = blobs.put('the same 1 MB of logs, twice');
    const swept = blobs.sweep(() => new Set(), 60_000);
    expect(await again).toBe(hash);
    expect(await swept).toBe(0);
    expect(existsSync(pathOf(hash))).toBe(true);
    // And a put that arrives during a sweep waits for it, then writes the file back if the sweep took it.
    await age(hash, 120_000);
    const sweep2 = blobs.sweep(() => new Set(), 60_000);
    const during = blobs.put('the same 1 MB of logs, twice');
    expect(await sweep2).toBe(1);
    expect(await during).toBe(hash);
    expect(existsSync(pathOf(hash))).toBe(true);
  });
});

describe('the running core', () => {
  it('sweeps the blob of an overwritten store value (config blobSweepMs), and keeps the current one', async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-emu-blobs-core-'));
    const core = await startTestCore({ dataDir: dir, config: { blobSweepMs: 20 } });
    try {
      const big = (c: string) => ({ text: c.repeat(20_000) });
      expect((await core.call('PUT', '/v1/store/k', { value: big('a') })).status).toBe(201);
      expect((await core.call('PUT', '/v1/store/k', { value: big('b') })).status).toBe(200);
      const file = (v: unknown) => {
        const hash = sha256Hex(JSON.stringify(v));
        return join(dir, 'blobs', hash.slice(0, 2), hash);
      };
      expect(existsSync(file(big('a'))), 'the old value is still on disk').toBe(true);
      const then = new Date(Date.now() - 120_000);
      await utimes(file(big('a')), then, then); // past the sweep's minimum age (60 s) without waiting for it
      const deadline = Date.now() + 10_000;
      while (existsSync(file(big('a'))) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(existsSync(file(big('a'))), 'swept while the core runs').toBe(false);
      expect(existsSync(file(big('b')))).toBe(true);
      expect((await core.call('GET', '/v1/store/k')).json.value).toEqual(big('b'));
    } finally {
      await core.stop();
    }
  });
});
