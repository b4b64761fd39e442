// The Export / import page's look at an archive before it is uploaded (renderer/src/pages/state-manifest.ts):
// the manifest of a gzip'd tar whose first part is manifest.json, read by inflating only the first blocks;
// anything else is said in words. Built with the core's own tar writer (server/state/tar.ts).
import { gzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { writeTar } from '../../server/state/tar';
import { readManifest } from '../../renderer/src/pages/state-manifest';

const manifest = { format: 'svc-emu-state', format_version: 1, secrets: { mode: 'left_out', left_out: ['secret local/A'] }, parts: [] };
const blob = (b: Buffer) => new Blob([new Uint8Array(b)]);

describe('readManifest', () => {
  it('reads the first part of a big archive without inflating the rest', async () => {
    const big = randomBytes(4 * 1024 * 1024); // incompressible: the whole archive is over 4 MiB
    const tar = writeTar([
      { name: 'manifest.json', data: Buffer.from(JSON.stringify(manifest)) },
      { name: 'blobs/x', data: big },
    ]);
    const m = await readManifest(blob(gzipSync(tar)));
    expect(m.format).toBe('svc-emu-state');
    expect(m.secrets.left_out).toEqual(['secret local/A']);
  });

  it('says what is wrong with what is not an archive', async () => {
    await expect(readManifest(blob(Buffer.from('plain text')))).rejects.toThrow(/not gzip/);
    const other = writeTar([{ name: 'db.json', data: Buffer.from('{}') }]);
    await expect(readManifest(blob(gzipSync(other)))).rejects.toThrow(/first part is "db.json"/);
    const foreign = writeTar([{ name: 'manifest.json', data: Buffer.from(JSON.stringify({ format: 'something-else' })) }]);
    await expect(readManifest(blob(gzipSync(foreign)))).rejects.toThrow(/not an svc-emu state manifest/);
    const cut = gzipSync(writeTar([{ name: 'manifest.json', data: Buffer.from(JSON.stringify(manifest).repeat(200)) }]));
    await expect(readManifest(blob(cut.subarray(0, 60)))).rejects.toThrow();
  });
});
