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

async function until<T>(fn: () => Promise<T | null | false>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

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
            if (r.status !== 200) throw new Error(`invoke answered ${r.status}: ${r.text.slice(0, 600)}`);
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
          if (res.status !== 200)
            throw new Error(
              `export answered ${res.status}: ${await res.text()}\n${core.logs.filter((l) => l.includes('"error"')).join('\n')}`,
            );
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

  it('a replace forgets the replaced state’s planned callbacks (no delivery of a record that is gone)', async () => {
    const source = await startTestCore();
    const core = await startTestCore({ config: { callbackRetryScale: 0.1 } });
    try {
      const res = await fetch(`${source.url}/_emu/state/export`, {
        method: 'POST',
        headers: { authorization: `Bearer ${source.admin}`, 'content-type': 'application/json' },
        body: '{}',
      });
      const archive = Buffer.from(await res.arrayBuffer());
      // The old state: a finished job whose callback failed once (the inbox answers 500) and is planned ~0.5 s out.
      expect((await core.call('POST', '/v1/snippets', { name: 'old', runtime: 'bun' })).status).toBe(201);
      expect((await core.call('POST', '/v1/snippets/old/versions', { code: 'export default async () => ({});\n' })).status).toBe(201);
      const hook = `${core.url}/_emu/inbox/old?status=500`;
      const job = await core.call('POST', '/v1/invoke/old', { callback_url: hook }, { headers: { 'x-invoke-mode': 'async' } });
      const id = job.json.invocation_id as string;
      const planned = await until(async () => {
        const r = await core.call('GET', `/v1/invocations/${id}`);
        return r.json.callback?.attempts === 1 && r.json.callback.status === 'pending' ? r.json.callback.next_attempt_at : null;
      });
      const ok = await core.call('POST', '/_emu/state/import?replace=true', undefined, {
        key: core.admin,
        raw: archive,
        headers: { 'content-type': 'application/vnd.svc-emu.state+gzip' },
      });
      expect(ok.status, ok.text).toBe(200);
      // Past the old plan's time (and then some): nothing tried to deliver a record that is no longer there.
      await until(async () => Date.now() > Date.parse(planned as string) + 1000);
      expect(core.logs.filter((l) => l.includes('callback delivery failed inside the emulator'))).toEqual([]);
      const inbox = await core.call('GET', '/_emu/inbox/old', undefined, { key: core.admin });
      expect(inbox.json.data).toEqual([]); // the inbox is the archive's now (the old one kept aside), and nothing came
    } finally {
      await core.stop();
      await source.stop();
    }
  }, 60_000);

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
