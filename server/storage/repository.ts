import { Low } from 'lowdb';
import { DbData, emptyDb } from './schema';
import { ValidatedJsonFile } from './json-adapter';

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
    private readonly lazyDelayMs = 100,
  ) {}

  static async open(path: string): Promise<Repository> {
    const low = new Low<DbData>(new ValidatedJsonFile(path, DbData), emptyDb());
    await low.read();
    return new Repository(low);
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
   * Like `mutate`, but does not wait for the disk: the change is written with the next write, at the
   * latest `lazyDelayMs` from now. For records whose loss in a crash costs nothing the caller was
   * promised (a sync invocation's record: its caller already has the answer).
   */
  mutateLazy<T>(fn: (db: DbData) => T): T {
    const result = fn(this.low.data);
    this.lazyTimer ??= setTimeout(() => {
      this.lazyTimer = null;
      this.flush().catch(() => {}); // the error is kept in writeError (readiness reports it)
    }, this.lazyDelayMs);
    return result;
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
        const write = this.low.write();
        this.inflight = write;
        try {
          await write;
          this.lastWriteError = null;
        } catch (err) {
          this.lastWriteError = err as Error;
          throw err;
        }
      })();
    }
    return this.next;
  }

  /** Null while the last write succeeded; readiness reports it. */
  get writeError(): Error | null {
    return this.lastWriteError;
  }
}
