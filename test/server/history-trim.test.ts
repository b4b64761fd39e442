/**
 * The invocation history is bounded per tenant (server/services/invocations.ts, trimHistory): at each new
 * record the tenant's oldest finished records go until it holds `historyLimit`; a record still running or
 * queued, or one whose callback is still pending, stays (the history is then over the bound until it ends);
 * other tenants' records are never touched. The trim works in place on the live document.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Repository } from '../../server/storage/repository';
import { BlobStore } from '../../server/storage/blobs';
import { aesGcmSecretBox } from '../../server/crypto/secret-box';
import { InvocationService, type NewInvocation } from '../../server/services/invocations';
import type { CoreDeps } from '../../server/core-deps';
import { EventBus } from '../../server/events/bus';
import type { ExecutionResult } from '../../executor';

let dir: string;
let deps: CoreDeps;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-emu-history-'));
  deps = {
    repo: await Repository.open(join(dir, 'db.json')),
    blobs: new BlobStore(join(dir, 'blobs')),
    secretBox: aesGcmSecretBox(randomBytes(32)),
    clock: () => new Date('2026-03-01T12:00:00.000Z'),
    events: new EventBus(() => new Date()),
  };
});
afterEach(async () => {
  await deps.repo.close();
  await rm(dir, { recursive: true, force: true });
});

const fields = (tenant: string, callbackUrl?: string): NewInvocation => ({
  tenant_id: tenant,
  snippet_id: 'snp_1',
  snippet: 'hello',
  version: 1,
  env: null,
  mode: callbackUrl ? 'async' : 'sync',
  limits: { timeout_ms: 1000, max_memory_mb: 64, max_cpu_percent: 10 },
  overridden: false,
  parity: { status: 'full', reasons: [] },
  idempotency_key: null,
  ...(callbackUrl ? { callbackUrl } : {}),
});

const ok: ExecutionResult = {
  outcome: 'success',
  output: { ok: true },
  usage: { duration_ms: 1, init_ms: 0, cpu_ms: 0, cpu_throttled_ms: 0, peak_memory_mb: 1 },
  timeline: [],
  logs: '',
  logs_truncated: false,
  parity: { status: 'full', reasons: [] },
  warm: true,
};

async function run(svc: InvocationService, tenant: string, opts: { finish?: boolean; callbackUrl?: string } = {}): Promise<string> {
  const { record } = await svc.create(fields(tenant, opts.callbackUrl), { status: 'running', durable: false });
  if (opts.finish ?? true) await svc.finish(record.id, ok);
  return record.id;
}

const ids = (tenant: string) => deps.repo.read((db) => db.invocations.filter((i) => i.tenant_id === tenant).map((i) => i.id));

describe('invocation history bound', () => {
  it('keeps the newest `historyLimit` finished records of the tenant, oldest going first', async () => {
    const svc = new InvocationService(deps, 3);
    const made: string[] = [];
    for (let i = 0; i < 6; i++) made.push(await run(svc, 'ten_a'));
    // The trim runs as a record is created: the 6th creation left the 3 newest (the 6th still running then).
    expect(ids('ten_a')).toEqual(made.slice(3));
  });

  it('never drops a record that has not finished or whose callback is pending, nor another tenant’s', async () => {
    const svc = new InvocationService(deps, 2);
    const other = [await run(svc, 'ten_b'), await run(svc, 'ten_b')];
    const running = await run(svc, 'ten_a', { finish: false });
    const pending = await run(svc, 'ten_a', { callbackUrl: 'http://127.0.0.1:9/hook' });
    const a = await run(svc, 'ten_a');
    const b = await run(svc, 'ten_a');
    // Over the bound by what cannot go: the running one and the one whose callback waits; the finished a went.
    expect(ids('ten_a')).toEqual([running, pending, b]);
    expect(ids('ten_b')).toEqual(other);
    expect(ids('ten_a')).not.toContain(a);
  });

  it('counts right when the history changed between two trims: records removed, records pushed by an import, both', async () => {
    // The per-tenant counts are kept from one trim to the next (trimHistory's tenantCounts): each change here must
    // be seen, or the tenant would keep too many records or lose too many.
    const svc = new InvocationService(deps, 3);
    for (let i = 0; i < 4; i++) {
      await run(svc, 'ten_a');
      await run(svc, 'ten_b');
    }
    expect(ids('ten_a')).toHaveLength(3);
    const imported = (n: number) =>
      deps.repo.mutate((db) => {
        const model = db.invocations.find((i) => i.tenant_id === 'ten_a')!;
        for (let k = 0; k < n; k++) db.invocations.push({ ...model, id: `inv_imported_${db.invocations.length}_${k}` });
      });
    const removeA = (n: number, fromEnd = false) =>
      deps.repo.mutate((db) => {
        for (let k = 0; k < n; k++) {
          const at = fromEnd
            ? db.invocations.findLastIndex((i) => i.tenant_id === 'ten_a')
            : db.invocations.findIndex((i) => i.tenant_id === 'ten_a');
          db.invocations.splice(at, 1);
        }
      });

    await removeA(2); // 1 left
    const one = await run(svc, 'ten_a');
    expect(ids('ten_a')).toHaveLength(2);

    await imported(3); // 5
    const two = await run(svc, 'ten_a'); // 6 → the 3 newest
    const afterImport = ids('ten_a');
    expect(afterImport).toHaveLength(3);
    expect(afterImport.at(-1)).toBe(two);
    expect(afterImport).not.toContain(one);

    // Another tenant's newest record goes and an import brings one of ten_a's in its place: the same length.
    await deps.repo.mutate((db) => {
      db.invocations.splice(
        db.invocations.findLastIndex((i) => i.tenant_id === 'ten_b'),
        1,
      );
    });
    await imported(1); // ten_a: 4
    await run(svc, 'ten_a'); // 5 → 3
    expect(ids('ten_a')).toHaveLength(3);
    await run(svc, 'ten_b'); // 2 + 1
    expect(ids('ten_b')).toHaveLength(3);
    await run(svc, 'ten_b');
    expect(ids('ten_b')).toHaveLength(3);
  });

  it('drops several at once when the history is over by more than one (a lowered limit)', async () => {
    const made: string[] = [];
    const wide = new InvocationService(deps, 10);
    for (let i = 0; i < 6; i++) made.push(await run(wide, 'ten_a'));
    const narrow = new InvocationService(deps, 3);
    const next = await run(narrow, 'ten_a');
    expect(ids('ten_a')).toEqual([...made.slice(4), next]);
  });
});
