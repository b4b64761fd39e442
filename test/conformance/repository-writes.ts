// The storage conformance suite. server/storage has one store (Repository over db.json, server/storage/repository.ts)
// and three ways to write to it that all promise durability: `mutate` (db.json, group commit), `mutateRecords` (the
// journal, server/storage/journal.ts; db.json later) and `mutateLazy` + `flush` (db.json later). The promises a
// write makes are declared once here and run against each way from test/server/repository.test.ts; a new way to
// write (or a second store behind the same `read`/write/`open` surface) must pass it too.
import { describe, expect, it } from 'vitest';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Repository } from '../../server/storage/repository';
import { DbData, type InvocationRecord } from '../../server/storage/schema';

/** One way to write: runs `fn` on the live document and resolves once that change is durable. */
export type DurableWrite = <T>(repo: Repository, fn: (db: DbData) => T, changed: (result: T) => readonly InvocationRecord[]) => Promise<T>;

export interface WriteModeExpectations {
  /** What the data directory holds after writes and a close (db.json, the journal directory). */
  leaves: string[];
}

const T0 = '2026-01-01T00:00:00.000Z';

export function invocation(id: string, status: InvocationRecord['status']): InvocationRecord {
  return {
    id,
    tenant_id: 'ten_1',
    snippet_id: 'snp_1',
    snippet: 'hello',
    version: 1,
    env: null,
    mode: 'async',
    status,
    outcome: null,
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
    attempts: 0,
    callback: null,
    parity_warnings: [],
    created_at: T0,
    started_at: null,
    finished_at: null,
  };
}

const push = (id: string, status: InvocationRecord['status']) => (db: DbData) => {
  db.invocations.push(invocation(id, status));
  return db.invocations.at(-1)!;
};
const setStatus = (id: string, status: InvocationRecord['status']) => (db: DbData) => {
  const r = db.invocations.find((i) => i.id === id)!;
  r.status = status;
  return r;
};
const one = (r: InvocationRecord) => [r];

export function durableWriteConformance(mode: string, write: DurableWrite, expected: WriteModeExpectations): void {
  describe(`storage write conformance: ${mode}`, () => {
    const withDir = async (body: (dbPath: string, dir: string) => Promise<void>) => {
      const dir = await mkdtemp(join(tmpdir(), 'svc-emu-conf-repo-'));
      try {
        await body(join(dir, 'db.json'), dir);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    };
    const statuses = (repo: Repository) => repo.read((db) => db.invocations.map((i) => [i.id, i.status]));

    it('returns what fn returns, and the change is visible to read at once', async () => {
      await withDir(async (dbPath) => {
        const repo = await Repository.open(dbPath);
        const pending = write(repo, push('inv_1', 'queued'), one);
        expect(statuses(repo)).toEqual([['inv_1', 'queued']]); // before the disk has it
        expect((await pending).id).toBe('inv_1');
        await repo.close();
      });
    });

    it('once it resolves the change is durable: an open after a crash (no close) reads it back', async () => {
      await withDir(async (dbPath) => {
        const repo = await Repository.open(dbPath);
        await write(repo, push('inv_1', 'queued'), one);
        const after = await Repository.open(dbPath); // as if the first process had been killed here
        expect(statuses(after)).toEqual([['inv_1', 'queued']]);
        await repo.close();
        await after.close();
      });
    });

    it('a burst of 100 concurrent writes: every change is durable', async () => {
      await withDir(async (dbPath) => {
        const repo = await Repository.open(dbPath);
        const ids = Array.from({ length: 100 }, (_, i) => `inv_${i}`);
        const results = await Promise.all(ids.map((id) => write(repo, push(id, 'queued'), one)));
        expect(results.map((r) => r.id)).toEqual(ids);
        const after = await Repository.open(dbPath);
        expect(after.read((db) => db.invocations.map((i) => i.id))).toEqual(ids);
        await repo.close();
        await after.close();
      });
    });

    it("a record's last change wins, after a crash too", async () => {
      await withDir(async (dbPath) => {
        const repo = await Repository.open(dbPath);
        await write(repo, push('inv_1', 'queued'), one);
        await write(repo, setStatus('inv_1', 'running'), one);
        await write(repo, setStatus('inv_1', 'succeeded'), one);
        const after = await Repository.open(dbPath);
        expect(statuses(after)).toEqual([['inv_1', 'succeeded']]);
        await repo.close();
        await after.close();
      });
    });

    it('a fn that throws rejects with its error and changes nothing, in memory or on disk', async () => {
      await withDir(async (dbPath) => {
        const repo = await Repository.open(dbPath);
        await write(repo, push('inv_1', 'queued'), one);
        const boom = new Error('refused');
        await expect(
          write(
            repo,
            () => {
              throw boom;
            },
            () => [],
          ),
        ).rejects.toBe(boom);
        expect(statuses(repo)).toEqual([['inv_1', 'queued']]);
        await repo.close();
        const after = await Repository.open(dbPath);
        expect(statuses(after)).toEqual([['inv_1', 'queued']]);
        await after.close();
      });
    });

    it('leaves only its own files (no temp file) after many writes, and db.json holds a valid document', async () => {
      await withDir(async (dbPath, dir) => {
        const repo = await Repository.open(dbPath);
        for (let round = 0; round < 5; round++) {
          await Promise.all(Array.from({ length: 20 }, (_, i) => write(repo, push(`inv_${round}_${i}`, 'queued'), one)));
        }
        await repo.close();
        expect((await readdir(dir)).sort()).toEqual([...expected.leaves].sort());
        const journal = await readdir(join(dir, 'journal')).catch(() => [] as string[]);
        expect(journal.filter((n) => !/^\d+\.jsonl$/.test(n))).toEqual([]);
        const parsed = DbData.safeParse(JSON.parse(await readFile(dbPath, 'utf8')));
        expect(parsed.success, parsed.error?.message).toBe(true);
        expect(parsed.data?.invocations).toHaveLength(100);
      });
    });
  });
}
