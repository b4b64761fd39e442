import { mkdir, open, readdir, readFile, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { syncDir } from './atomic-file';

/** A journal line that could not be replayed: reported and kept aside (storage/quarantine.ts), never fatal. */
export interface DamagedLine {
  /** The file's name inside the journal directory. */
  file: string;
  /** 1-based. */
  line: number;
  problem: string;
  /** The line's JSON when it parsed (absent when it did not). */
  value?: unknown;
}

/** One line of the journal: a record as it now is, in the collection it belongs to. */
export interface JournalEntry {
  seq: number;
  collection: 'invocations';
  record: unknown;
}

/**
 * An append-only log beside `db.json` for records that must be durable at once but are small next to
 * the whole document: writing one line costs the same with 10 records in `db.json` as with 10 000.
 * Every line carries a sequence number; each `db.json` write records the last number it includes
 * (`journal_seq`), so on open only newer lines are replayed, whatever files a crash left behind.
 *
 * Files are `journal/<generation>.jsonl`. `seal()` (at each `db.json` write) starts a new generation;
 * once that write is durable the older files are deleted. Appends arriving together share one fsync.
 */
export class Journal {
  private buffer: string[] = [];
  private writing: Promise<void> = Promise.resolve();
  private batch: Promise<void> | null = null;
  private readonly handles = new Map<number, Promise<FileHandle>>();

  private constructor(
    private readonly dir: string,
    private seq: number,
    private generation: number,
  ) {}

  /**
   * Reads what a previous run left (lines newer than `afterSeq`, in order) and opens the journal for
   * appending. The caller applies the entries, writes `db.json`, then calls `seal()` and its `done()`.
   */
  static async open(
    dir: string,
    afterSeq: number,
  ): Promise<{ journal: Journal; entries: (JournalEntry & { file: string; line: number })[]; damaged: DamagedLine[] }> {
    const generations = (await readdir(dir).catch(() => [] as string[]))
      .map((f) => /^(\d+)\.jsonl$/.exec(f)?.[1])
      .filter((g): g is string => g !== undefined)
      .map(Number)
      .sort((a, b) => a - b);
    const entries: (JournalEntry & { file: string; line: number })[] = [];
    const damaged: DamagedLine[] = [];
    let maxSeq = afterSeq;
    for (const g of generations) {
      const file = `${g}.jsonl`;
      const lines = (await readFile(join(dir, file), 'utf8')).split('\n');
      lines.forEach((line, i) => {
        if (!line) return;
        let entry: JournalEntry;
        try {
          entry = JSON.parse(line) as JournalEntry;
        } catch {
          // A crash can cut the last line short; anywhere else it is damage, reported (never papered over).
          if (i === lines.length - 1 || (i === lines.length - 2 && lines[i + 1] === '')) return;
          damaged.push({ file, line: i + 1, problem: 'is not valid JSON' });
          return;
        }
        if (
          typeof entry !== 'object' ||
          entry === null ||
          !Number.isSafeInteger(entry.seq) ||
          entry.seq < 0 ||
          entry.collection !== 'invocations'
        ) {
          damaged.push({ file, line: i + 1, problem: 'is not a journal entry ({seq, collection: "invocations", record})', value: entry });
          return;
        }
        maxSeq = Math.max(maxSeq, entry.seq);
        if (entry.seq > afterSeq) entries.push({ ...entry, file, line: i + 1 });
      });
    }
    entries.sort((a, b) => a.seq - b.seq);
    const journal = new Journal(dir, maxSeq, (generations.at(-1) ?? 0) + 1);
    return { journal, entries, damaged };
  }

  get lastSeq(): number {
    return this.seq;
  }

  /** Writes a record's current state (serialised now); resolves when it is on disk. */
  append(collection: JournalEntry['collection'], record: unknown): Promise<void> {
    this.buffer.push(JSON.stringify({ seq: ++this.seq, collection, record }) + '\n');
    if (!this.batch) {
      const previous = this.writing;
      this.batch = (async () => {
        await previous.catch(() => {});
        this.batch = null; // appends from here on go into the next batch
        const text = this.buffer.splice(0).join('');
        const write = this.write(this.generation, text);
        this.writing = write;
        await write;
      })();
    }
    return this.batch;
  }

  /**
   * Called as `db.json` is snapshotted: later appends go to a new file. `done()`, once that snapshot
   * is durable, deletes the files it covers.
   */
  seal(): { done: () => Promise<void> } {
    const covered = this.generation;
    this.generation++;
    return {
      done: async () => {
        await this.writing.catch(() => {});
        for (const g of [...this.handles.keys()].filter((x) => x <= covered)) {
          const fh = this.handles.get(g)!;
          this.handles.delete(g);
          await (await fh).close().catch(() => {});
        }
        for (const f of await readdir(this.dir).catch(() => [] as string[])) {
          const g = Number(/^(\d+)\.jsonl$/.exec(f)?.[1] ?? NaN);
          if (g <= covered) await unlink(join(this.dir, f)).catch(() => {});
        }
      },
    };
  }

  async close(): Promise<void> {
    await this.writing.catch(() => {});
    for (const fh of this.handles.values()) await (await fh).close().catch(() => {});
    this.handles.clear();
  }

  private async write(generation: number, text: string): Promise<void> {
    let fh = this.handles.get(generation);
    if (!fh) {
      // A new file: its directory entry must be durable too, or a power cut could lose the whole file.
      fh = (async () => {
        await mkdir(this.dir, { recursive: true, mode: 0o700 });
        const handle = await open(join(this.dir, `${generation}.jsonl`), 'a', 0o600);
        await syncDir(this.dir);
        return handle;
      })();
      this.handles.set(generation, fh);
    }
    const handle = await fh;
    await handle.write(text);
    await handle.datasync();
  }
}
