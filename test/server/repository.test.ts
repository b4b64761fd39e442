import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Count (and optionally fail) the real atomic writes the repository makes, without changing what they do.
const io = vi.hoisted(() => ({
  writes: [] as { path: string; data: string }[],
  failNext: null as Error | null,
}));

vi.mock('../../server/storage/atomic-file', async (importOriginal) => {
  const orig = await importOriginal<typeof import('../../server/storage/atomic-file')>();
  return {
    ...orig,
    writeFileAtomic: async (path: string, data: string | Uint8Array, mode?: number) => {
      if (io.failNext) {
        const err = io.failNext;
        io.failNext = null;
        throw err;
      }
      await orig.writeFileAtomic(path, data, mode);
      io.writes.push({ path, data: typeof data === 'string' ? data : Buffer.from(data).toString('utf8') });
    },
  };
});

import { Repository } from '../../server/storage/repository';
import { durableWriteConformance, invocation as inv } from '../conformance/repository-writes';
import { DbData, SCHEMA_VERSION, emptyDb, type TenantRecord } from '../../server/storage/schema';
import { DataDirError } from '../../server/errors';

let dir: string;
let dbPath: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-emu-repo-'));
  dbPath = join(dir, 'db.json');
  io.writes.length = 0;
  io.failNext = null;
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const T0 = '2026-01-01T00:00:00.000Z';

function tenant(i: number): TenantRecord {
  return {
    id: `ten_${i}`,
    name: `t-${i}`,
    caps: { timeout_ms: 1000, max_memory_mb: 64, max_cpu_percent: 10, max_concurrency: 2 },
    webhook_secret: 'v1.sealed',
    webhook_secret_created_at: T0,
    previous_webhook_secret: null,
    previous_webhook_secret_expires_at: null,
    created_at: T0,
  };
}

const dbWrites = () => io.writes.filter((w) => w.path === dbPath);
const onDisk = async () => JSON.parse(await readFile(dbPath, 'utf8')) as DbData;

describe('Repository.open', () => {
  it('gives the empty state when db.json does not exist, and creates nothing until a write', async () => {
    const repo = await Repository.open(dbPath);
    expect(repo.read((db) => db)).toEqual(emptyDb());
    expect(await readdir(dir)).toEqual([]);
    expect(repo.writeError).toBeNull();
  });

  // Issue 14: a db.json the core cannot use never stops the start. The file is kept aside byte for byte
  // (storage/quarantine.ts), the problem is reported with where it is, and the state starts empty.
  /** Opens a db.json holding `text`; returns the repository and the one quarantined item's problem. */
  async function openSetAside(text: string) {
    await writeFile(dbPath, text);
    const repo = await Repository.open(dbPath, { now: () => new Date(T0) });
    const q = repo.quarantined!;
    expect(q, 'something was quarantined').not.toBeNull();
    expect(q.items).toHaveLength(1);
    expect(q.items[0]).toMatchObject({ source: 'db.json', collection: null, label: 'the whole document' });
    // The file as it was, byte for byte, next to the report; db.json itself now holds the empty state.
    expect(q.copies).toEqual(['2026-01-01T00-00-00-000Z.db.json']);
    expect(await readFile(join(dir, 'quarantine', q.copies[0]!), 'utf8')).toBe(text);
    expect(JSON.parse(await readFile(join(dir, 'quarantine', q.file), 'utf8')).items[0].problems).toEqual(q.items[0]!.problems);
    expect(repo.read((db) => db)).toEqual(emptyDb());
    expect(await onDisk()).toEqual(emptyDb());
    return { repo, problem: q.items[0]!.problems.join('; ') };
  }

  it('sets corrupt JSON aside, naming the line and the column, and starts empty', async () => {
    const { problem } = await openSetAside('{"schema_version": 1, "tenants": [}');
    expect(problem).toContain('not valid JSON');
    // The stray `}` is the 35th character of line 1.
    expect(problem).toMatch(/line 1, column 35/);
  });

  it('reports the line and column of a syntax error on a later line', async () => {
    const { problem } = await openSetAside('{\n  "schema_version": 1,\n  "tenants": [}\n}\n');
    expect(problem).toMatch(/line 3, column 15/);
  });

  it('converts a reported position into the right line and column', async () => {
    // V8 reports "at position 12" here: the `x` that should be a quoted property name (line 3, column 2).
    const { problem } = await openSetAside('{\n "a": 1,\n x}');
    expect(problem).toMatch(/line 3, column 2\b/);
    expect(problem).not.toMatch(/position \d+/);
  });

  it('reports a truncated file (unexpected end of input) with where it ends', async () => {
    const { problem } = await openSetAside('{\n  "schema_version": 1,\n  "tenants": [');
    expect(problem).toMatch(/line \d+, column \d+/);
  });

  it('sets aside valid JSON that is not an object', async () => {
    const { problem } = await openSetAside('[1, 2, 3]');
    expect(problem).toContain('must hold a JSON object, found an array');
  });

  it('quarantines a record of the wrong shape alone, field by field, and keeps the rest', async () => {
    const doc = emptyDb() as unknown as Record<string, unknown>;
    const bad = { ...tenant(1), caps: { ...tenant(1).caps, timeout_ms: 'x' } };
    doc.tenants = [tenant(0), bad, tenant(2)];
    const text = JSON.stringify(doc);
    await writeFile(dbPath, text);
    const repo = await Repository.open(dbPath, { now: () => new Date(T0) });
    expect(repo.read((db) => db.tenants.map((t) => t.id))).toEqual(['ten_0', 'ten_2']);
    const q = repo.quarantined!;
    expect(q.items).toEqual([
      {
        source: 'db.json',
        collection: 'tenants',
        index: 1,
        label: 'tenant "t-1"',
        problems: [expect.stringContaining('caps.timeout_ms')],
        record: bad,
      },
    ]);
    expect(await readFile(join(dir, 'quarantine', q.copies[0]!), 'utf8')).toBe(text);
    expect((await onDisk()).tenants.map((t) => t.id)).toEqual(['ten_0', 'ten_2']);
    // The next open finds nothing more to set aside: db.json was rewritten without it.
    const again = await Repository.open(dbPath);
    expect(again.quarantined).toBeNull();
    expect(again.read((db) => db.tenants.length)).toBe(2);
  });

  it('refuses a document written by a newer emulator', async () => {
    await writeFile(dbPath, JSON.stringify({ ...emptyDb(), schema_version: 99 }));
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toContain(dbPath);
    expect((err as Error).message).toMatch(/schema_version 99 was written by a newer emulator/);
    expect((err as Error).message).toContain(`up to ${SCHEMA_VERSION}`);
  });

  it('sets aside a document whose schema_version is not a non-negative integer', async () => {
    const { problem } = await openSetAside(JSON.stringify({ ...emptyDb(), schema_version: '1' }));
    expect(problem).toMatch(/schema_version must be a non-negative integer/);
  });

  it('migrates a version-0 document (no schema_version, no integrations) and loads it', async () => {
    const v0 = emptyDb() as Partial<DbData>;
    delete v0.schema_version;
    delete v0.integrations;
    v0.tenants = [tenant(7)];
    await writeFile(dbPath, JSON.stringify(v0));
    const repo = await Repository.open(dbPath);
    expect(repo.read((db) => db.schema_version)).toBe(SCHEMA_VERSION);
    expect(repo.read((db) => db.integrations)).toEqual([]);
    expect(repo.read((db) => db.tenants)).toEqual([tenant(7)]);
    // The migration is written back with the next change, and the result re-opens as the current version.
    await repo.mutate((db) => void db.tenants.push(tenant(8)));
    const disk = await onDisk();
    expect(disk.schema_version).toBe(SCHEMA_VERSION);
    expect(disk.integrations).toEqual([]);
    expect(DbData.safeParse(disk).success).toBe(true);
  });
  it('migrates a version-2 document: webhook rotation fields on tenants; attempts, callback and parity warnings on invocations', async () => {
    const { previous_webhook_secret: _p, previous_webhook_secret_expires_at: _e, ...oldTenant } = tenant(3);
    const invocation = (id: string, status: string) => ({
      id,
      tenant_id: 'ten_3',
      snippet_id: 'snp_1',
      snippet: 'hello',
      version: 1,
      env: null,
      mode: 'sync',
      status,
      outcome: status === 'succeeded' ? 'success' : null,
      error: null,
      usage: null,
      limits: { timeout_ms: 1000, max_memory_mb: 64, max_cpu_percent: 10 },
      overridden: false,
      parity: { status: 'full', reasons: [] },
      warm: null,
      logs_blob: null,
      logs_truncated: false,
      timeline_blob: null,
      idempotency_key: null,
      created_at: T0,
      started_at: null,
      finished_at: null,
    });
    await writeFile(
      dbPath,
      JSON.stringify({
        ...emptyDb(),
        schema_version: 2,
        tenants: [oldTenant],
        invocations: [invocation('inv_1', 'succeeded'), invocation('inv_2', 'queued')],
      }),
    );
    const repo = await Repository.open(dbPath);
    expect(repo.read((db) => db.tenants[0])).toEqual(tenant(3));
    expect(repo.read((db) => db.invocations.map((i) => [i.attempts, i.callback, i.parity_warnings]))).toEqual([
      [1, null, []],
      [0, null, []],
    ]);
  });
});

describe('Repository.mutate', () => {
  it('writes db.json with mode 0600', async () => {
    const repo = await Repository.open(dbPath);
    await repo.mutate((db) => void db.tenants.push(tenant(1)));
    const { stat } = await import('node:fs/promises');
    expect((await stat(dbPath)).mode & 0o777).toBe(0o600);
  });

  it('coalesces a burst of 200 concurrent mutations into a few writes, every change on disk', async () => {
    const repo = await Repository.open(dbPath);
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        repo.mutate((db) => {
          db.tenants.push(tenant(i));
          return i;
        }),
      ),
    );
    expect(results).toEqual(Array.from({ length: 200 }, (_, i) => i));
    const disk = await onDisk();
    expect(disk.tenants.map((t) => t.id)).toEqual(Array.from({ length: 200 }, (_, i) => `ten_${i}`));
    // Group commit: a synchronous burst shares one write (two at most if a write were already in flight).
    expect(dbWrites().length).toBeGreaterThanOrEqual(1);
    expect(dbWrites().length).toBeLessThanOrEqual(2);
    const reopened = await Repository.open(dbPath);
    expect(reopened.read((db) => db.tenants.length)).toBe(200);
  });

  it('coalesces mutations arriving while a write is in flight into the next write', async () => {
    const repo = await Repository.open(dbPath);
    const pending: Promise<unknown>[] = [];
    // 10 waves of 20, each wave issued a few event-loop turns after the previous one.
    for (let wave = 0; wave < 10; wave++) {
      for (let j = 0; j < 20; j++) {
        const i = wave * 20 + j;
        pending.push(repo.mutate((db) => void db.tenants.push(tenant(i))));
      }
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(pending);
    expect((await onDisk()).tenants).toHaveLength(200);
    // At most one write per wave plus one, and never one per call.
    expect(dbWrites().length).toBeLessThanOrEqual(11);
  });

  it('resolves each mutate only once a write that includes its change has completed', async () => {
    const repo = await Repository.open(dbPath);
    const checks: Promise<void>[] = [];
    for (let i = 0; i < 60; i++) {
      const id = `ten_${i}`;
      checks.push(
        repo
          .mutate((db) => void db.tenants.push(tenant(i)))
          .then(() => {
            const last = dbWrites().at(-1);
            expect(last, `no write completed before mutate ${i} resolved`).toBeDefined();
            expect((JSON.parse(last!.data) as DbData).tenants.some((t) => t.id === id)).toBe(true);
          }),
      );
      if (i % 7 === 0) await new Promise((r) => setImmediate(r));
    }
    await Promise.all(checks);
  });

  it('a mutate whose fn throws rejects with that error and changes nothing, in memory or on disk', async () => {
    const repo = await Repository.open(dbPath);
    await repo.mutate((db) => void db.tenants.push(tenant(1)));
    const before = await readFile(dbPath, 'utf8');
    const writesBefore = dbWrites().length;
    const boom = new Error('refused');
    // A refused change is not even written: no write started, and none was scheduled for later (a timer).
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      await expect(
        repo.mutate(() => {
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(vi.getTimerCount(), 'a write scheduled for later').toBe(0);
    } finally {
      vi.useRealTimers();
    }
    expect(dbWrites().length).toBe(writesBefore);
    expect(await readFile(dbPath, 'utf8')).toBe(before);
    expect(repo.read((db) => db.tenants)).toEqual([tenant(1)]);
  });

  it('a failed write rejects the mutations that shared it and is reported by writeError until a write succeeds', async () => {
    const repo = await Repository.open(dbPath);
    io.failNext = Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    const a = repo.mutate((db) => void db.tenants.push(tenant(1)));
    const b = repo.mutate((db) => void db.tenants.push(tenant(2)));
    await expect(a).rejects.toThrow(/ENOSPC/);
    await expect(b).rejects.toThrow(/ENOSPC/);
    expect(repo.writeError?.message).toMatch(/ENOSPC/);
    await repo.mutate((db) => void db.tenants.push(tenant(3)));
    expect(repo.writeError).toBeNull();
    expect((await onDisk()).tenants.map((t) => t.id)).toContain('ten_3');
  });
});

describe('Repository.mutateRecords (the journal)', () => {
  const journalFiles = async () => (await readdir(join(dir, 'journal')).catch(() => [] as string[])).sort();

  it('is durable through the journal alone: a second open (after a crash) replays it into db.json', async () => {
    const repo = await Repository.open(dbPath);
    await repo.mutateRecords(
      (db) => {
        db.invocations.push(inv('inv_1', 'queued'));
        return db.invocations.at(-1)!;
      },
      (r) => [r],
    );
    await repo.mutateRecords(
      (db) => {
        const r = db.invocations.find((i) => i.id === 'inv_1')!;
        r.status = 'running';
        return r;
      },
      (r) => [r],
    );
    expect(dbWrites()).toHaveLength(0); // nothing but the journal was written yet
    expect(await journalFiles()).toEqual(['1.jsonl']);

    const after = await Repository.open(dbPath); // as if the first process had been killed here
    expect(after.read((db) => db.invocations.map((i) => [i.id, i.status]))).toEqual([['inv_1', 'running']]);
    expect((await onDisk()).journal_seq).toBe(2);
    expect(await journalFiles()).toEqual([]);
    await repo.close();
    await after.close();
  });

  it('a lazy db.json write takes the journal with it; older journal lines never overwrite newer state', async () => {
    const repo = await Repository.open(dbPath);
    await repo.mutateRecords(
      (db) => {
        db.invocations.push(inv('inv_2', 'queued'));
        return db.invocations.at(-1)!;
      },
      (r) => [r],
    );
    const stale = await readFile(join(dir, 'journal', '1.jsonl'), 'utf8');
    // A full write (as recovery does) changes the record without the journal.
    await repo.mutate((db) => void (db.invocations[0]!.status = 'succeeded'));
    expect(await journalFiles()).toEqual([]);
    // A crash between that write and deleting the journal would leave the old line behind:
    await writeFile(join(dir, 'journal', '1.jsonl'), stale);
    const again = await Repository.open(dbPath);
    expect(again.read((db) => db.invocations[0]!.status)).toBe('succeeded');
    await repo.close();
    await again.close();
  });

  it('ignores a last line a crash cut short, and reports damage anywhere else', async () => {
    const repo = await Repository.open(dbPath);
    await repo.mutateRecords(
      (db) => {
        db.invocations.push(inv('inv_3', 'queued'));
        return db.invocations.at(-1)!;
      },
      (r) => [r],
    );
    await repo.close();
    const file = join(dir, 'journal', '9.jsonl');
    const line = JSON.stringify({ seq: 99, collection: 'invocations', record: inv('inv_4', 'queued') });
    await writeFile(file, line + '\n' + line.slice(0, 40));
    const ok = await Repository.open(dbPath);
    expect(ok.read((db) => db.invocations.map((i) => i.id))).toEqual(['inv_3', 'inv_4']);
    await ok.close();
    const damaged = '{"seq": 200, "coll\n' + line.replace('"seq":99', '"seq":201') + '\n';
    await writeFile(join(dir, 'journal', '10.jsonl'), damaged);
    // Damage in the middle is reported and kept aside (the file, byte for byte); the good line still replays.
    const after = await Repository.open(dbPath, { now: () => new Date(T0) });
    expect(after.quarantined!.items).toEqual([
      { source: 'journal/10.jsonl', collection: 'invocations', index: 1, label: 'journal line 1', problems: ['is not valid JSON'] },
    ]);
    expect(after.quarantined!.copies).toEqual(['2026-01-01T00-00-00-000Z.journal-10.jsonl']);
    expect(await readFile(join(dir, 'quarantine', after.quarantined!.copies[0]!), 'utf8')).toBe(damaged);
    expect(after.read((db) => db.invocations.map((i) => i.id))).toEqual(['inv_3', 'inv_4']);
    await after.close();
  });
});

describe('Repository.mutateRecordsLazy (the journal, within 50 ms)', () => {
  const journalText = async () => {
    const files = await readdir(join(dir, 'journal')).catch(() => [] as string[]);
    return (await Promise.all(files.map((f) => readFile(join(dir, 'journal', f), 'utf8')))).join('');
  };
  const push = (id: string, status: 'running' | 'succeeded') => (db: DbData) => {
    db.invocations.push(inv(id, status));
    return db.invocations.at(-1)!;
  };
  const finish = (id: string) => (db: DbData) => {
    const r = db.invocations.find((i) => i.id === id)!;
    r.status = 'succeeded';
    return r;
  };
  afterEach(() => {
    vi.useRealTimers();
  });

  it('reaches the journal when the 50 ms delay is up (a fake clock), once per record, as it then is; no db.json write', async () => {
    const repo = await Repository.open(dbPath);
    vi.useFakeTimers();
    repo.mutateRecordsLazy(push('inv_1', 'running'), (r) => [r]);
    repo.mutateRecordsLazy(finish('inv_1'), (r) => [r]);
    await vi.advanceTimersByTimeAsync(49);
    expect(await journalText()).toBe('');
    await vi.advanceTimersByTimeAsync(1);
    await repo.writeLazyRecords(); // the write the timer started
    const lines = (await journalText()).trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { record: { id: string; status: string } }).record)).toMatchObject([
      { id: 'inv_1', status: 'succeeded' },
    ]);
    vi.useRealTimers();
    expect(dbWrites()).toHaveLength(0);
    const after = await Repository.open(dbPath); // as if the first process had been killed here
    expect(after.read((db) => db.invocations.map((i) => [i.id, i.status]))).toEqual([['inv_1', 'succeeded']]);
    await repo.close();
    await after.close();
  });

  it('a record trimmed from the history before its line was written is not brought back by the journal', async () => {
    const repo = await Repository.open(dbPath);
    repo.mutateRecordsLazy(push('inv_1', 'succeeded'), (r) => [r]);
    repo.mutateRecordsLazy(push('inv_2', 'succeeded'), (r) => [r]);
    repo.mutateRecordsLazy(
      (db) => void db.invocations.splice(0, 1),
      () => [],
    );
    await repo.writeLazyRecords();
    const after = await Repository.open(dbPath);
    expect(after.read((db) => db.invocations.map((i) => i.id))).toEqual(['inv_2']);
    await repo.close();
    await after.close();
  });

  it('in a batch of many changed records too (looked up another way), the trimmed ones stay out and the rest are kept', async () => {
    const repo = await Repository.open(dbPath);
    const ids = Array.from({ length: 12 }, (_, i) => `inv_${i + 1}`);
    for (const id of ids) repo.mutateRecordsLazy(push(id, 'succeeded'), (r) => [r]);
    repo.mutateRecordsLazy(
      (db) => void db.invocations.splice(0, 3),
      () => [],
    );
    await repo.writeLazyRecords();
    const after = await Repository.open(dbPath);
    expect(after.read((db) => db.invocations.map((i) => i.id))).toEqual(ids.slice(3));
    await repo.close();
    await after.close();
  });

  it('db.json is rewritten once the journal holds compactAfterLines lazy lines, and a db.json write covers what is pending', async () => {
    const repo = await Repository.open(dbPath, { compactAfterLines: 3 });
    for (const id of ['inv_1', 'inv_2']) {
      repo.mutateRecordsLazy(push(id, 'succeeded'), (r) => [r]);
      await repo.writeLazyRecords();
    }
    expect(dbWrites()).toHaveLength(0);
    repo.mutateRecordsLazy(push('inv_3', 'succeeded'), (r) => [r]);
    await repo.writeLazyRecords(); // the third line: db.json's write is scheduled (the lazy delay)
    await repo.flush();
    expect((await onDisk()).invocations.map((i) => i.id)).toEqual(['inv_1', 'inv_2', 'inv_3']);
    // Pending when db.json is written: that write has it, and no journal line follows.
    repo.mutateRecordsLazy(push('inv_4', 'succeeded'), (r) => [r]);
    await repo.flush();
    await repo.writeLazyRecords();
    expect(await journalText()).toBe('');
    expect((await onDisk()).invocations.map((i) => i.id)).toEqual(['inv_1', 'inv_2', 'inv_3', 'inv_4']);
    await repo.close();
  });
});

// The ways to write against the storage write conformance suite (test/conformance/repository-writes.ts).
durableWriteConformance('mutate (db.json, group commit)', (repo, fn) => repo.mutate(fn), { leaves: ['db.json'] });
durableWriteConformance('mutateRecords (the journal, db.json later)', (repo, fn, changed) => repo.mutateRecords(fn, changed), {
  leaves: ['db.json', 'journal'],
});
durableWriteConformance(
  'mutateRecordsLazy + writeLazyRecords (the journal, db.json later)',
  async (repo, fn, changed) => {
    const result = repo.mutateRecordsLazy(fn, changed);
    await repo.writeLazyRecords();
    return result;
  },
  { leaves: ['db.json', 'journal'] },
);
durableWriteConformance(
  'mutateLazy + flush (db.json later)',
  async (repo, fn) => {
    const result = repo.mutateLazy(fn);
    await repo.flush();
    return result;
  },
  { leaves: ['db.json'] },
);
