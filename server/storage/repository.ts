import { Low } from 'lowdb';
import { DataDirError } from '../errors';
import { DbData, emptyDb, InvocationRecord as InvocationRecordSchema } from './schema';
import { ValidatedJsonFile } from './json-adapter';
import { Journal } from './journal';
import { dirname, join } from 'node:path';
import type { InvocationRecord } from './schema';

/**
 * The one owner of `db.json`: one lowdb `Low` instance, in-memory reads, and group commit for writes.
 *
 * `mutate(fn)` runs `fn` on the live document synchronously, then resolves once a write that includes
 * the change is durable. Writes arriving while one is in flight share the next one, so a burst of N
 * requests costs about two file writes, not N. `fn` must do every check before its first change (throw
 * first, then mutate): that is what keeps a refused request from leaving a partial change behind.
 */
export class Repository {
  private next: Promise<void> | null = null;
  private inflight: Promise<void> = Promise.resolve();
  private lastWriteError: Error | null = null;
  private lazyTimer: NodeJS.Timeout | null = null;

  private constructor(
    private readonly low: Low<DbData>,
    private readonly journal: Journal,
    private readonly lazyDelayMs = 100,
  ) {}

  /** Opens `db.json`, replaying journal entries a previous run wrote after its last `db.json` write. */
  static async open(path: string): Promise<Repository> {
    const low = new Low<DbData>(new ValidatedJsonFile(path, DbData), emptyDb());
    await low.read();
    const { journal, entries } = await Journal.open(join(dirname(path), 'journal'), low.data.journal_seq);
    const repo = new Repository(low, journal);
    if (entries.length) {
      const invocations = low.data.invocations;
      for (const entry of entries) {
        const parsed = InvocationRecordSchema.safeParse(entry.record);
        if (!parsed.success) {
          throw new DataDirError(join(dirname(path), 'journal'), `entry ${entry.seq} is not an invocation record: ${parsed.error.issues[0]?.message}`, 'Move the journal directory aside to start from db.json alone.');
        }
        const rec = parsed.data;
        const at = invocations.findIndex((i) => i.id === rec.id);
        if (at >= 0) invocations[at] = rec;
        else invocations.push(rec);
      }
      await repo.flush(); // db.json now holds them; the journal files it covers go
    }
    return repo;
  }

  /** Synchronous read of the current state. Do not keep references past the call; do not mutate. */
  read<T>(fn: (db: Readonly<DbData>) => T): T {
    return fn(this.low.data);
  }

  async mutate<T>(fn: (db: DbData) => T): Promise<T> {
    const result = fn(this.low.data);
    await this.flush();
    return result;
  }

  /**
   * Like `mutate` for changes to a few invocation records: durable once those records' new states are
   * appended to the journal (one small fsync'd write), with `db.json` written lazily after. `changed`
   * names the records `fn` changed, from its result.
   */
  async mutateRecords<T>(fn: (db: DbData) => T, changed: (result: T) => readonly InvocationRecord[]): Promise<T> {
    const result = fn(this.low.data);
    const records = changed(result);
    if (!records.length) return result;
    const appended = records.map((r) => this.journal.append('invocations', r));
    this.scheduleLazyWrite();
    await Promise.all(appended);
    return result;
  }

  /**
   * Like `mutate`, but does not wait for the disk: the change is written with the next write, at the
   * latest `lazyDelayMs` from now. For records whose loss in a crash costs nothing the caller was
   * promised (a sync invocation's record: its caller already has the answer).
   */
  mutateLazy<T>(fn: (db: DbData) => T): T {
    const result = fn(this.low.data);
    this.scheduleLazyWrite();
    return result;
  }

  private scheduleLazyWrite(): void {
    this.lazyTimer ??= setTimeout(() => {
      this.lazyTimer = null;
      this.flush().catch(() => {}); // the error is kept in writeError (readiness reports it)
    }, this.lazyDelayMs);
  }

  /** Resolves when everything changed so far is on disk. */
  flush(): Promise<void> {
    if (!this.next) {
      const previous = this.inflight;
      this.next = (async () => {
        await previous.catch(() => {});
        this.next = null; // changes from here on go into the write after this one
        if (this.lazyTimer) {
          clearTimeout(this.lazyTimer); // this write carries the lazy changes too
          this.lazyTimer = null;
        }
        // The snapshot is taken synchronously inside write(): it includes every journal entry so far.
        this.low.data.journal_seq = this.journal.lastSeq;
        const sealed = this.journal.seal();
        const write = this.low.write();
        this.inflight = write;
        try {
          await write;
          this.lastWriteError = null;
          await sealed.done();
        } catch (err) {
          this.lastWriteError = err as Error;
          throw err;
        }
      })();
    }
    return this.next;
  }

  /** Writes what is pending and releases the journal's files. */
  async close(): Promise<void> {
    await this.flush().catch(() => {});
    await this.journal.close();
  }

  /** Null while the last write succeeded; readiness reports it. */
  get writeError(): Error | null {
    return this.lastWriteError;
  }
}
