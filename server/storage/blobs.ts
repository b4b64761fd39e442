import { readFile, readdir, stat, unlink, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex } from '../ids';
import { writeFileAtomic } from './atomic-file';

/**
 * Content-addressed files beside `db.json` (version code, large store values): `blobs/ab/abcdef…`.
 * Written before the record that names them, so a crash leaves at worst an unreferenced blob, which
 * `collectGarbage` removes on the next start.
 */
export class BlobStore {
  constructor(private readonly dir: string) {}

  private pathOf(hash: string): string {
    if (!/^[0-9a-f]{64}$/.test(hash)) throw new Error(`bad blob hash ${hash}`);
    return join(this.dir, hash.slice(0, 2), hash);
  }

  async put(content: string | Uint8Array): Promise<string> {
    const hash = sha256Hex(content);
    const path = this.pathOf(hash);
    const exists = await stat(path).then(() => true, () => false);
    if (!exists) await writeFileAtomic(path, content, 0o600);
    return hash;
  }

  async get(hash: string): Promise<Buffer> {
    return readFile(this.pathOf(hash));
  }

  async getText(hash: string): Promise<string> {
    return (await this.get(hash)).toString('utf8');
  }

  /** Deletes blobs not in `live` and older than `minAgeMs` (younger ones may belong to a write in flight). */
  async collectGarbage(live: Set<string>, minAgeMs = 60_000, now = Date.now()): Promise<number> {
    await mkdir(this.dir, { recursive: true });
    let removed = 0;
    for (const shard of await readdir(this.dir)) {
      const shardDir = join(this.dir, shard);
      const names = await readdir(shardDir).catch(() => [] as string[]);
      for (const name of names) {
        if (live.has(name)) continue;
        const path = join(shardDir, name);
        const info = await stat(path).catch(() => null);
        if (info && now - info.mtimeMs >= minAgeMs) {
          await unlink(path).catch(() => {});
          removed++;
        }
      }
    }
    return removed;
  }
}
