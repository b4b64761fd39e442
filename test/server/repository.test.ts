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
import { DbData, SCHEMA_VERSION, emptyDb, type InvocationRecord, type TenantRecord } from '../../server/storage/schema';
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

  it('reports corrupt JSON as a DataDirError naming the file, the line and the column', async () => {
    await writeFile(dbPath, '{"schema_version": 1, "tenants": [}');
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    const message = (err as Error).message;
    expect(message).toContain(dbPath);
    expect(message).toContain('not valid JSON');
    // The stray `}` is the 35th character of line 1.
    expect(message).toMatch(/line 1, column 35/);
  });

  it('reports the line and column of a syntax error on a later line', async () => {
    await writeFile(dbPath, '{\n  "schema_version": 1,\n  "tenants": [}\n}\n');
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toContain(dbPath);
    expect((err as Error).message).toMatch(/line 3, column 15/);
  });

  it('converts a reported position into the right line and column', async () => {
    // V8 reports "at position 12" here: the `x` that should be a quoted property name (line 3, column 2).
    await writeFile(dbPath, '{\n "a": 1,\n x}');
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toMatch(/line 3, column 2\b/);
    expect((err as Error).message).not.toMatch(/position \d+/);
  });

  it('reports a truncated file (unexpected end of input) with where it ends', async () => {
    await writeFile(dbPath, '{\n  "schema_version": 1,\n  "tenants": [');
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toContain(dbPath);
    expect((err as Error).message).toMatch(/line \d+, column \d+/);
  });

  it('reports valid JSON that is not an object', async () => {
    await writeFile(dbPath, '[1, 2, 3]');
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toContain(dbPath);
    expect((err as Error).message).toContain('must hold a JSON object');
  });

  it('reports valid JSON of the wrong shape field by field', async () => {
    const doc = emptyDb() as unknown as Record<string, unknown>;
    const bad = { ...tenant(1), caps: { ...tenant(1).caps, timeout_ms: 'x' } };
    doc.tenants = [bad];
    await writeFile(dbPath, JSON.stringify(doc));
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toContain(dbPath);
    expect((err as Error).message).toContain('tenants.0.caps.timeout_ms');
  });

  it('refuses a document written by a newer emulator', async () => {
    await writeFile(dbPath, JSON.stringify({ ...emptyDb(), schema_version: 99 }));
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toContain(dbPath);
    expect((err as Error).message).toMatch(/schema_version 99 was written by a newer emulator/);
    expect((err as Error).message).toContain(`up to ${SCHEMA_VERSION}`);
  });

  it('refuses a schema_version that is not a non-negative integer', async () => {
    await writeFile(dbPath, JSON.stringify({ ...emptyDb(), schema_version: '1' }));
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toMatch(/schema_version must be a non-negative integer/);
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
      id, tenant_id: 'ten_3', snippet_id: 'snp_1', snippet: 'hello', version: 1, env: null, mode: 'sync', status,
      outcome: status === 'succeeded' ? 'success' : null, error: null, usage: null,
      limits: { timeout_ms: 1000, max_memory_mb: 64, max_cpu_percent: 10 }, overridden: false,
      parity: { status: 'full', reasons: [] }, warm: null, logs_blob: null, logs_truncated: false, timeline_blob: null,
      idempotency_key: null, created_at: T0, started_at: null, finished_at: null,
    });
    await writeFile(dbPath, JSON.stringify({ ...emptyDb(), schema_version: 2, tenants: [oldTenant], invocations: [invocation('inv_1', 'succeeded'), invocation('inv_2', 'queued')] }));
    const repo = await Repository.open(dbPath);
    expect(repo.read((db) => db.tenants[0])).toEqual(tenant(3));
    expect(repo.read((db) => db.invocations.map((i) => [i.attempts, i.callback, i.parity_warnings]))).toEqual([
      [1, null, []],
      [0, null, []],
    ]);
  });
});

describe('Repository.mutate', () => {
  it('returns what fn returns and persists the change (re-open reads it back)', async () => {
    const repo = await Repository.open(dbPath);
    const result = await repo.mutate((db) => {
      db.tenants.push(tenant(1));
      return 'done';
    });
    expect(result).toBe('done');
    const again = await Repository.open(dbPath);
    expect(again.read((db) => db.tenants)).toEqual([tenant(1)]);
    expect(DbData.safeParse(await onDisk()).success).toBe(true);
  });

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
    await expect(
      repo.mutate(() => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    await new Promise((r) => setTimeout(r, 20));
    // A refused change is not even written: no write was scheduled for it.
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

  it('leaves no temp files behind after many writes', async () => {
    const repo = await Repository.open(dbPath);
    for (let round = 0; round < 5; round++) {
      await Promise.all(Array.from({ length: 20 }, (_, i) => repo.mutate((db) => void db.tenants.push(tenant(round * 20 + i)))));
    }
    const names = await readdir(dir);
    expect(names.filter((n) => n.endsWith('.tmp'))).toEqual([]);
    expect(names).toEqual(['db.json']);
  });
});

describe('Repository.mutateRecords (the journal)', () => {
  const inv = (id: string, status: InvocationRecord['status']): InvocationRecord => ({
    id, tenant_id: 'ten_1', snippet_id: 'snp_1', snippet: 'hello', version: 1, env: null, mode: 'async', status,
    outcome: null, error: null, usage: null, limits: { timeout_ms: 1000, max_memory_mb: 64, max_cpu_percent: 10 },
    overridden: false, parity: { status: 'full', reasons: [] }, warm: null, logs_blob: null, logs_truncated: false,
    timeline_blob: null, idempotency_key: null, attempts: 0, callback: null, parity_warnings: [], created_at: T0,
    started_at: null, finished_at: null,
  });
  const journalFiles = async () => (await readdir(join(dir, 'journal')).catch(() => [] as string[])).sort();

  it('is durable through the journal alone: a second open (after a crash) replays it into db.json', async () => {
    const repo = await Repository.open(dbPath);
    await repo.mutateRecords((db) => {
      db.invocations.push(inv('inv_1', 'queued'));
      return db.invocations.at(-1)!;
    }, (r) => [r]);
    await repo.mutateRecords((db) => {
      const r = db.invocations.find((i) => i.id === 'inv_1')!;
      r.status = 'running';
      return r;
    }, (r) => [r]);
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
    await repo.mutateRecords((db) => {
      db.invocations.push(inv('inv_2', 'queued'));
      return db.invocations.at(-1)!;
    }, (r) => [r]);
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
    await repo.mutateRecords((db) => {
      db.invocations.push(inv('inv_3', 'queued'));
      return db.invocations.at(-1)!;
    }, (r) => [r]);
    await repo.close();
    const file = join(dir, 'journal', '9.jsonl');
    const line = JSON.stringify({ seq: 99, collection: 'invocations', record: inv('inv_4', 'queued') });
    await writeFile(file, line + '\n' + line.slice(0, 40));
    const ok = await Repository.open(dbPath);
    expect(ok.read((db) => db.invocations.map((i) => i.id))).toEqual(['inv_3', 'inv_4']);
    await ok.close();
    await writeFile(join(dir, 'journal', '10.jsonl'), '{"seq": 200, "coll\n' + line.replace('"seq":99', '"seq":201') + '\n');
    const err = await Repository.open(dbPath).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toMatch(/10\.jsonl.*line 1 is not valid JSON/);
  });
});
