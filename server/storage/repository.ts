import { Low } from 'lowdb';
import { readFile } from 'node:fs/promises';
import { DbData, emptyDb } from './schema';
import { checkDb, checkRecord, recordLabel, type QuarantineItem } from './db-check';
import { keepAside, type QuarantineCopy, type QuarantineReport } from './quarantine';
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
  /** Records changed by mutateRecordsLazy and not yet in the journal (or in a db.json write), by id. */
  private readonly lazyRecords = new Map<string, InvocationRecord>();
  private lazyRecordsTimer: NodeJS.Timeout | null = null;
  private lazyRecordsWrite: Promise<void> = Promise.resolve();
  /** Journal lines written by mutateRecordsLazy since the last db.json write began. */
  private lazyLines = 0;

  private constructor(
    private readonly low: Low<DbData>,
    private readonly journal: Journal,
    private readonly lazyDelayMs = 100,
    /** db.json is rewritten once mutateRecordsLazy has put this many lines in the journal (bounds a start's replay). */
    private readonly compactAfterLines = 2000,
    /**
     * mutateRecordsLazy's delay: half the 100 ms a sync record may take to be on disk after its response, so
     * the append and its fsync fit in the rest (at 100 ms the bench measured 101 / 107 ms p50 / p99).
     */
    private readonly lazyRecordsDelayMs = 50,
  ) {}

  /**
   * Opens `db.json`, replaying journal entries a previous run wrote after its last `db.json` write. What
   * does not pass the load check (storage/db-check.ts) is kept aside in `quarantineDir` (a report and
   * copies of the files as they were), then `db.json` is rewritten without it: never a failed start.
   */
  static async open(
    path: string,
    opts: { quarantineDir?: string; now?: () => Date; compactAfterLines?: number } = {},
  ): Promise<Repository> {
    const dir = dirname(path);
    const bytes = await readFile(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    });
    const checked = bytes === null ? { data: emptyDb(), items: [], whole: false } : checkDb(bytes.toString('utf8'), path);
    const low = new Low<DbData>(new ValidatedJsonFile(path, DbData), emptyDb());
    low.data = checked.data;
    const journalDir = join(dir, 'journal');
    const { journal, entries, damaged } = await Journal.open(journalDir, low.data.journal_seq);
    const repo = new Repository(low, journal, 100, opts.compactAfterLines);
    const items: QuarantineItem[] = [...checked.items];
    const journalFiles = new Set<string>();
    for (const d of damaged) {
      journalFiles.add(d.file);
      items.push({
        source: `journal/${d.file}`,
        collection: 'invocations',
        index: d.line,
        label: `journal line ${d.line}`,
        problems: [d.problem],
        ...('value' in d ? { record: d.value } : {}),
      });
    }
    const invocations = low.data.invocations;
    for (const entry of entries) {
      const rec = checkRecord('invocations', entry.record);
      if (!('parsed' in rec)) {
        journalFiles.add(entry.file);
        items.push({
          source: `journal/${entry.file}`,
          collection: 'invocations',
          index: entry.line,
          label: recordLabel('invocations', entry.record),
          problems: rec.problems,
          record: entry.record,
        });
        continue;
      }
      const parsed = rec.parsed as InvocationRecord;
      const at = invocations.findIndex((i) => i.id === parsed.id);
      if (at >= 0) invocations[at] = parsed;
      else invocations.push(parsed);
    }
    if (items.length) {
      const copies: QuarantineCopy[] = [];
      if (bytes !== null && checked.items.length) copies.push({ name: 'db.json', content: bytes });
      for (const f of journalFiles) copies.push({ name: `journal-${f}`, content: await readFile(join(journalDir, f)) });
      // Kept before db.json is rewritten without them: a failure here stops the start with nothing lost.
      repo.quarantined = await keepAside(opts.quarantineDir ?? join(dir, 'quarantine'), (opts.now ?? (() => new Date()))(), items, copies);
    }
    if (entries.length || items.length) await repo.flush(); // db.json now holds the replayed records, and not the quarantined ones
    return repo;
  }

  /** What this open set aside (null when everything loaded); older starts' reports are in the quarantine directory. */
  quarantined: (QuarantineReport & { file: string }) | null = null;

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

  /**
   * Like `mutateRecords`, but does not wait for the disk, and costs no db.json write: the new states of the
   * records `changed` names are appended to the journal at the latest `lazyRecordsDelayMs` from now, every record
   * changed meanwhile in one write (a record changed twice in that time is written once, as it then is).
   * db.json is rewritten only once the journal holds `compactAfterLines` such lines. For a sync invocation's
   * record: its caller already has the answer, and the whole document (~0.8 MB with a full history, ~4 ms
   * to serialise) is not rewritten ten times a second under load (docs/architecture.md, "The warm path").
   */
  mutateRecordsLazy<T>(fn: (db: DbData) => T, changed: (result: T) => readonly InvocationRecord[]): T {
    const result = fn(this.low.data);
    for (const r of changed(result)) this.lazyRecords.set(r.id, r);
    if (this.lazyRecords.size) {
      this.lazyRecordsTimer ??= setTimeout(() => {
        this.writeLazyRecords().catch(() => {}); // the error is kept in writeError (readiness reports it)
      }, this.lazyRecordsDelayMs);
    }
    return result;
  }

  /** Appends what mutateRecordsLazy changed so far to the journal now; resolves once it is on disk. */
  writeLazyRecords(): Promise<void> {
    if (this.lazyRecordsTimer) {
      clearTimeout(this.lazyRecordsTimer);
      this.lazyRecordsTimer = null;
    }
    if (!this.lazyRecords.size) return this.lazyRecordsWrite;
    // A record trimmed from the history since it changed stays out (a journal line would bring it back at the next start).
    const all = this.low.data.invocations;
    const changed = [...this.lazyRecords.values()];
    // A few records (a batch under load): each is looked for from the end, where a record changed in the last
    // 50 ms nearly always is; a Set of the whole history (1,000 records) per batch cost more than the batch.
    const live = changed.length > 8 ? new Set(all) : null;
    const records = changed.filter((r) => (live ? live.has(r) : all.lastIndexOf(r) >= 0));
    this.lazyRecords.clear();
    this.lazyLines += records.length;
    const appended = Promise.all(records.map((r) => this.journal.append('invocations', r)));
    if (this.lazyLines >= this.compactAfterLines) this.scheduleLazyWrite();
    this.lazyRecordsWrite = appended.then(
      () => {},
      (err: unknown) => {
        this.lastWriteError = err as Error;
        throw err;
      },
    );
    return this.lazyRecordsWrite;
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
        // The snapshot is taken synchronously inside write(): it includes every journal entry so far, and
        // every record mutateRecordsLazy still held (their journal lines are not needed any more).
        if (this.lazyRecordsTimer) {
          clearTimeout(this.lazyRecordsTimer);
          this.lazyRecordsTimer = null;
        }
        this.lazyRecords.clear();
        this.lazyLines = 0;
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

  /**
   * A state import into the running core (server/state/service.ts): the whole document replaced in one
   * synchronous step, durable when this resolves. Records still waiting for a lazy journal line belong to
   * the old state and are dropped; the journal restarts after the write (its older lines are sealed).
   */
  async replace(doc: DbData): Promise<void> {
    this.lazyRecords.clear();
    this.low.data = doc;
    await this.flush();
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
