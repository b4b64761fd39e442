/**
 * The export's snapshot while the core works (docs/state.md, "Export from a running emulator"): archives
 * taken while runs keep finishing (each writing records and blobs) are each whole — parseArchive checks every
 * part against the manifest and every blob the db names — and import into a working state; and a pinned blob
 * survives a sweep that would otherwise remove it.
 */
import { utimes, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startTestCore, tempDir } from '../helpers/core';
import { runCli } from '../helpers/cli';
import { parseArchive } from '../../server/state/archive';
import { BlobStore } from '../../server/storage/blobs';

// Big enough output and logs to go to blobs (over 8 KiB), so every run writes blobs while the exports copy.
const CODE = `export default async function handler(input) {
  console.log('x'.repeat(9000));
  return { n: input.n, pad: 'y'.repeat(9000) };
}
`;

describe('a running core’s export', () => {
  it('is whole and loadable while runs keep finishing', async () => {
    const core = await startTestCore();
    const dir = await tempDir();
    try {
      expect((await core.call('POST', '/v1/snippets', { name: 'busy', runtime: 'bun' })).status).toBe(201);
      expect((await core.call('POST', '/v1/snippets/busy/versions', { code: CODE })).status).toBe(201);
      let stop = false;
      let runs = 0;
      const load = Promise.all(
        Array.from({ length: 4 }, async (_, w) => {
          for (let i = 0; !stop; i++) {
            const r = await core.call('POST', '/v1/invoke/busy', { n: w * 1000 + i });
            expect(r.status, r.text).toBe(200);
            runs++;
          }
        }),
      );
      const archives: Buffer[] = [];
      try {
        while (runs < 5) await new Promise((r) => setTimeout(r, 20));
        for (let i = 0; i < 5; i++) {
          const res = await fetch(`${core.url}/_emu/state/export`, {
            method: 'POST',
            headers: { authorization: `Bearer ${core.admin}`, 'content-type': 'application/json' },
            body: '{}',
          });
          expect(res.status).toBe(200);
          archives.push(Buffer.from(await res.arrayBuffer()));
        }
      } finally {
        stop = true;
        await load;
      }
      const counts: number[] = [];
      for (const a of archives) {
        const parsed = await parseArchive(a, undefined); // throws if any part or named blob is missing or wrong
        counts.push(parsed.db.invocations.length);
        expect(parsed.db.invocations.every((i) => i.status === 'succeeded' || i.status === 'running')).toBe(true);
      }
      expect(counts.at(-1)!).toBeGreaterThan(0);
      // The last one, imported on the files, is a state a core starts on and serves.
      const file = join(dir, 'last.svcemu');
      await writeFile(file, archives.at(-1)!);
      const target = join(dir, 'target');
      const imp = await runCli(['import', file, '--data-dir', target, '--json']);
      expect(imp.code, imp.stdout + imp.stderr).toBe(0);
      const b = await startTestCore({ dataDir: target });
      try {
        const list = await b.call('GET', '/v1/invocations?limit=100', undefined, { key: core.key });
        expect(list.status).toBe(200);
        const first = list.json.data.find((i: { status: string }) => i.status === 'succeeded');
        const logs = await b.call('GET', `/v1/invocations/${first.id}/logs`, undefined, { key: core.key });
        expect(logs.text).toContain('x'.repeat(9000)); // a log blob came along
      } finally {
        await b.stop();
      }
    } finally {
      await core.stop();
    }
  }, 120_000);

  it('keeps pinned blobs from the sweep until unpinned', async () => {
    const dir = await tempDir();
    const blobs = new BlobStore(join(dir, 'blobs'));
    const a = await blobs.put('pinned content');
    const b = await blobs.put('unpinned content');
    const old = new Date(Date.now() - 3_600_000);
    for (const h of [a, b]) await utimes(join(dir, 'blobs', h.slice(0, 2), h), old, old);
    const unpin = blobs.pin([a]);
    expect(await blobs.sweep(() => new Set(), 1000)).toBe(1);
    expect(existsSync(join(dir, 'blobs', a.slice(0, 2), a))).toBe(true);
    expect(existsSync(join(dir, 'blobs', b.slice(0, 2), b))).toBe(false);
    unpin();
    expect(await blobs.sweep(() => new Set(), 1000)).toBe(1);
    expect(existsSync(join(dir, 'blobs', a.slice(0, 2), a))).toBe(false);
  });
});
