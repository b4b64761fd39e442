import { utimesSync } from 'node:fs';
import { readFile, readdir, stat, unlink, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex } from '../ids';
import { writeFileAtomic } from './atomic-file';

/**
 * Content-addressed files beside `db.json` (version code, large store values): `blobs/ab/abcdef…`.
 * Written before the record that names them, so a crash leaves at worst an unreferenced blob, which
 * `collectGarbage` removes on the next start. While the core runs, `sweep` removes the blobs of records
 * that went (invocations trimmed from the history, overwritten store values, deleted versions).
 */
export class BlobStore {
  /** Puts in flight, and a sweep in progress: the two never overlap (see `sweep`). */
  private readonly puts = new Set<Promise<string>>();
  private sweeping: Promise<number> | null = null;
  /** Blobs a state export is copying (server/state/service.ts): no sweep removes them until unpinned. */
  private readonly pinned = new Map<string, number>();

  constructor(private readonly dir: string) {}

  private pathOf(hash: string): string {
    if (!/^[0-9a-f]{64}$/.test(hash)) throw new Error(`bad blob hash ${hash}`);
    return join(this.dir, hash.slice(0, 2), hash);
  }

  /** `hash`: the content's sha256 when the caller has it already (it is not computed twice). */
  async put(content: string | Uint8Array, hash?: string): Promise<string> {
    while (this.sweeping) await this.sweeping.catch(() => {});
    const put = this.write(content, hash ?? sha256Hex(content));
    this.puts.add(put);
    try {
      return await put;
    } finally {
      this.puts.delete(put);
    }
  }

  private async write(content: string | Uint8Array, hash: string): Promise<string> {
    const path = this.pathOf(hash);
    // The same content again: its file is made young, so a sweep leaves it until the new record names it.
    // Synchronous: one utimes(2) of a few µs, where the thread pool's round trip cost ~45 µs of CPU, and a sync
    // run puts its input's replay copy at every call, nearly always the same content again (bench/results/profile-warm-path.md).
    let exists = true;
    try {
      const now = new Date();
      utimesSync(path, now, now);
    } catch {
      exists = false;
    }
    if (!exists) await writeFileAtomic(path, content, 0o600);
    return hash;
  }

  /**
   * `collectGarbage` while the core runs: `live()` is read once no put is in flight, and puts wait until
   * the sweep is done, so content put again just as its old copy is judged unreferenced is never lost
   * (a put makes its file young, and young files stay). A sweep already running is joined.
   */
  sweep(live: () => Set<string>, minAgeMs = 60_000): Promise<number> {
    this.sweeping ??= (async () => {
      await Promise.allSettled([...this.puts]);
      return this.collectGarbage(live(), minAgeMs);
    })().finally(() => {
      this.sweeping = null;
    });
    return this.sweeping;
  }

  /** Keeps `hashes` from every sweep until the returned function is called (counted: pins may overlap). */
  pin(hashes: Iterable<string>): () => void {
    const held = [...new Set(hashes)];
    for (const h of held) this.pinned.set(h, (this.pinned.get(h) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const h of held) {
        const n = (this.pinned.get(h) ?? 1) - 1;
        if (n > 0) this.pinned.set(h, n);
        else this.pinned.delete(h);
      }
    };
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
        if (live.has(name) || this.pinned.has(name)) continue;
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
