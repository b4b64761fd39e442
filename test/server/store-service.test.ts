import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Repository } from '../../server/storage/repository';
import { BlobStore } from '../../server/storage/blobs';
import { aesGcmSecretBox } from '../../server/crypto/secret-box';
import { StoreService, STORE_INLINE_MAX_BYTES } from '../../server/services/store';
import { TenantService } from '../../server/services/tenants';
import { STORE_VALUE_MAX_BYTES } from '../../contract/schemas/tenant';
import { DomainError } from '../../server/domain/errors';
import { problemOfDomainError } from '../../server/http/problem';
import { sha256Hex } from '../../server/ids';
import type { CoreDeps } from '../../server/core-deps';
import { EventBus } from '../../server/events/bus';
import type { DbData, TenantRecord } from '../../server/storage/schema';

let dir: string;
let dbPath: string;
let blobDir: string;
let now: number;
let deps: CoreDeps;
let store: StoreService;
let alpha: TenantRecord;
let beta: TenantRecord;

const START = Date.parse('2026-03-01T12:00:00.000Z');
const advance = (ms: number) => {
  now += ms;
};

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-emu-store-'));
  dbPath = join(dir, 'db.json');
  blobDir = join(dir, 'blobs');
  now = START;
  deps = {
    repo: await Repository.open(dbPath),
    blobs: new BlobStore(blobDir),
    secretBox: aesGcmSecretBox(randomBytes(32)),
    clock: () => new Date(now),
    events: new EventBus(() => new Date()),
  };
  store = new StoreService(deps);
  const tenants = new TenantService(deps);
  alpha = await tenants.create('alpha');
  beta = await tenants.create('beta');
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const records = () => deps.repo.read((db) => db.store.map((r) => ({ ...r })));
const onDisk = async () => JSON.parse(await readFile(dbPath, 'utf8')) as DbData;
const listKeys = (t: TenantRecord, prefix = '') => store.list(t, prefix, { limit: 1000 }).data.map((e) => e.key);

/** A JSON string value whose serialisation is exactly `bytes` bytes long (the two quotes included). */
const stringOfJsonSize = (bytes: number) => 'x'.repeat(bytes - 2);

async function allBlobFiles(): Promise<string[]> {
  const shards = await readdir(blobDir).catch(() => [] as string[]);
  const out: string[] = [];
  for (const s of shards) for (const f of await readdir(join(blobDir, s))) out.push(f);
  return out.sort();
}

describe('StoreService basics', () => {
  it('sets, reads back, replaces and deletes a value, persisting each step', async () => {
    const first = await store.set(alpha, 'counter', { n: 1 });
    expect(first.created).toBe(true);
    expect(first.entry).toEqual({ key: 'counter', value: { n: 1 }, expires_at: null, updated_at: new Date(START).toISOString() });
    expect(await store.get(alpha, 'counter')).toEqual(first.entry);

    advance(1000);
    const second = await store.set(alpha, 'counter', [1, 'two', null, true]);
    expect(second.created).toBe(false);
    expect(await store.get(alpha, 'counter')).toMatchObject({
      value: [1, 'two', null, true],
      updated_at: new Date(START + 1000).toISOString(),
    });
    const rec = records().find((r) => r.key === 'counter')!;
    expect(rec.created_at).toBe(new Date(START).toISOString());
    expect(rec.updated_at).toBe(new Date(START + 1000).toISOString());

    const reopened = new StoreService({ ...deps, repo: await Repository.open(dbPath) });
    expect((await reopened.get(alpha, 'counter'))?.value).toEqual([1, 'two', null, true]);

    expect(await store.delete(alpha, 'counter')).toBe(true);
    expect(await store.get(alpha, 'counter')).toBeNull();
    expect(await store.delete(alpha, 'counter')).toBe(false);
    expect((await onDisk()).store).toEqual([]);
  });

  it('stores every kind of JSON value, including null and falsy ones', async () => {
    const values: unknown[] = [null, 0, false, '', [], {}, 'text', 3.25, { nested: { deep: [1, { x: null }] } }];
    for (const [i, v] of values.entries()) await store.set(alpha, `k${i}`, v);
    for (const [i, v] of values.entries()) {
      const entry = await store.get(alpha, `k${i}`);
      expect(entry, `k${i}`).not.toBeNull();
      expect(entry!.value).toEqual(v);
    }
  });

  it('getOrThrow answers 404 not_found for a missing key', async () => {
    const err = await store.getOrThrow(alpha, 'nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(problemOfDomainError(err as DomainError).status).toBe(404);
    expect((err as DomainError).code).toBe('not_found');
  });

  it('lists keys in order, by prefix, with sizes in bytes, paginated', async () => {
    for (const k of ['b:2', 'a:1', 'b:1', 'c', 'b:10']) await store.set(alpha, k, 'é');
    expect(listKeys(alpha)).toEqual(['a:1', 'b:1', 'b:10', 'b:2', 'c']);
    expect(listKeys(alpha, 'b:')).toEqual(['b:1', 'b:10', 'b:2']);
    expect(store.list(alpha, 'a:', {}).data).toEqual([
      { key: 'a:1', size: Buffer.byteLength('"é"'), expires_at: null, updated_at: new Date(START).toISOString() },
    ]);
    const p1 = store.list(alpha, '', { limit: 2 });
    expect(p1.data.map((e) => e.key)).toEqual(['a:1', 'b:1']);
    const p2 = store.list(alpha, '', { limit: 2, cursor: p1.next_cursor! });
    expect(p2.data.map((e) => e.key)).toEqual(['b:10', 'b:2']);
    const p3 = store.list(alpha, '', { limit: 2, cursor: p2.next_cursor! });
    expect(p3.data.map((e) => e.key)).toEqual(['c']);
    expect(p3.next_cursor).toBeNull();
  });
});

describe('TTL', () => {
  it('is honoured on read: alive until expires_at, then get is null, list omits it, and sweep removes it from db.json', async () => {
    const { entry } = await store.set(alpha, 'session', { user: 'u1' }, 60);
    expect(entry.expires_at).toBe(new Date(START + 60_000).toISOString());
    await store.set(alpha, 'forever', 1);

    advance(59_999);
    expect((await store.get(alpha, 'session'))?.value).toEqual({ user: 'u1' });
    expect(listKeys(alpha)).toEqual(['forever', 'session']);
    expect(await store.sweep()).toBe(0);

    advance(1); // exactly at expires_at: gone
    expect(await store.get(alpha, 'session')).toBeNull();
    const gone = await store.getOrThrow(alpha, 'session').catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(DomainError);
    expect(problemOfDomainError(gone as DomainError).status).toBe(404);
    expect(listKeys(alpha)).toEqual(['forever']);
    // Still in db.json until the sweep runs.
    expect(records().map((r) => r.key)).toContain('session');

    expect(await store.sweep()).toBe(1);
    expect(records().map((r) => r.key)).toEqual(['forever']);
    expect((await onDisk()).store.map((r) => r.key)).toEqual(['forever']);
    expect(await store.sweep()).toBe(0);
  });

  it('sweep writes nothing when nothing has expired', async () => {
    await store.set(alpha, 'k', 1, 3600);
    const before = await stat(dbPath);
    const text = await readFile(dbPath, 'utf8');
    advance(1000);
    expect(await store.sweep()).toBe(0);
    expect(await readFile(dbPath, 'utf8')).toBe(text);
    expect((await stat(dbPath)).mtimeMs).toBe(before.mtimeMs);
  });

  it('an expired key cannot be deleted (it is already missing) and setting it again creates it anew', async () => {
    await store.set(alpha, 'k', 'old', 1);
    advance(5_000);
    expect(await store.delete(alpha, 'k')).toBe(false);
    const again = await store.set(alpha, 'k', 'new');
    expect(again.created).toBe(true);
    expect(again.entry.expires_at).toBeNull();
    const rec = records().filter((r) => r.key === 'k');
    expect(rec).toHaveLength(1);
    expect(rec[0]!.created_at).toBe(new Date(START + 5_000).toISOString());
    advance(10 * 365 * 24 * 3600 * 1000);
    expect((await store.get(alpha, 'k'))?.value).toBe('new');
  });

  it('setting a value without a TTL clears an earlier TTL', async () => {
    await store.set(alpha, 'k', 1, 10);
    await store.set(alpha, 'k', 2);
    advance(60_000);
    expect((await store.get(alpha, 'k'))?.value).toBe(2);
  });

  it('sweep removes expired entries of every tenant and nothing else', async () => {
    await store.set(alpha, 'a-short', 1, 10);
    await store.set(beta, 'b-short', 1, 10);
    await store.set(alpha, 'a-long', 1, 1000);
    await store.set(beta, 'b-none', 1);
    advance(11_000);
    expect(await store.sweep()).toBe(2);
    expect(
      records()
        .map((r) => r.key)
        .sort(),
    ).toEqual(['a-long', 'b-none']);
  });
});

describe('large values', () => {
  it(`keeps values up to ${STORE_INLINE_MAX_BYTES} bytes inline and bigger ones in a blob file, read back identical`, async () => {
    const inline = stringOfJsonSize(STORE_INLINE_MAX_BYTES);
    await store.set(alpha, 'inline', inline);
    const inlineRec = records().find((r) => r.key === 'inline')!;
    expect(inlineRec.value).toBe(inline);
    expect(inlineRec.blob).toBeUndefined();
    expect(inlineRec.size).toBe(STORE_INLINE_MAX_BYTES);
    expect(await allBlobFiles()).toEqual([]);

    const big = { items: Array.from({ length: 400 }, (_, i) => ({ i, text: `row ${i} ✓ ${'z'.repeat(20)}` })) };
    const json = JSON.stringify(big);
    expect(Buffer.byteLength(json)).toBeGreaterThan(STORE_INLINE_MAX_BYTES);
    await store.set(alpha, 'big', big);

    const rec = records().find((r) => r.key === 'big')!;
    expect(rec.blob).toBe(sha256Hex(json));
    expect('value' in rec).toBe(false);
    expect(rec.size).toBe(Buffer.byteLength(json));
    expect(await allBlobFiles()).toEqual([sha256Hex(json)]);
    expect(await readFile(join(blobDir, rec.blob!.slice(0, 2), rec.blob!), 'utf8')).toBe(json);
    // db.json stays small: the big value is not in it.
    expect(await readFile(dbPath, 'utf8')).not.toContain('row 399');

    expect((await store.get(alpha, 'big'))?.value).toEqual(big);
    const reopened = new StoreService({ ...deps, repo: await Repository.open(dbPath) });
    expect((await reopened.get(alpha, 'big'))?.value).toEqual(big);
  });

  it('replacing a blob value with a small one stores it inline again', async () => {
    await store.set(alpha, 'k', stringOfJsonSize(STORE_INLINE_MAX_BYTES + 1));
    expect(records()[0]!.blob).toBeDefined();
    await store.set(alpha, 'k', 'small');
    const rec = records()[0]!;
    expect(rec.blob).toBeUndefined();
    expect(rec.value).toBe('small');
    expect((await store.get(alpha, 'k'))?.value).toBe('small');
  });

  it('accepts a value of exactly 1 MiB as JSON', async () => {
    const value = stringOfJsonSize(STORE_VALUE_MAX_BYTES);
    await store.set(alpha, 'max', value);
    expect((await store.get(alpha, 'max'))?.value).toBe(value);
  });

  it('refuses a value over 1 MiB with 413 payload_too_large, storing nothing', async () => {
    const err = await store.set(alpha, 'huge', stringOfJsonSize(STORE_VALUE_MAX_BYTES + 1)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(problemOfDomainError(err as DomainError).status).toBe(413);
    expect((err as DomainError).code).toBe('payload_too_large');
    expect(await store.get(alpha, 'huge')).toBeNull();
    expect(records()).toEqual([]);
    expect(await allBlobFiles()).toEqual([]);
  });

  it('measures the limit in UTF-8 bytes, not characters', async () => {
    // 'é' is 2 bytes: 600k of them is well under 1 MiB characters but over 1 MiB bytes.
    const err = await store.set(alpha, 'wide', 'é'.repeat(600_000)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(problemOfDomainError(err as DomainError).status).toBe(413);
  });
});

describe('tenant isolation', () => {
  it('keys of two tenants never mix: same key, separate values, lists, deletes and TTLs', async () => {
    await store.set(alpha, 'shared', 'alpha-value');
    await store.set(beta, 'shared', 'beta-value', 10);
    await store.set(alpha, 'only-alpha', 1);
    await store.set(beta, 'only-beta', stringOfJsonSize(STORE_INLINE_MAX_BYTES + 100));

    expect((await store.get(alpha, 'shared'))?.value).toBe('alpha-value');
    expect((await store.get(beta, 'shared'))?.value).toBe('beta-value');
    expect(await store.get(alpha, 'only-beta')).toBeNull();
    expect(await store.get(beta, 'only-alpha')).toBeNull();
    expect(listKeys(alpha)).toEqual(['only-alpha', 'shared']);
    expect(listKeys(beta)).toEqual(['only-beta', 'shared']);

    // Deleting in one tenant leaves the other's key alone; deleting the other's key is "missing".
    expect(await store.delete(alpha, 'only-beta')).toBe(false);
    expect(await store.get(beta, 'only-beta')).not.toBeNull();
    expect(await store.delete(alpha, 'shared')).toBe(true);
    expect((await store.get(beta, 'shared'))?.value).toBe('beta-value');

    // Beta's TTL does not touch alpha's key of the same name.
    await store.set(alpha, 'shared', 'alpha-again');
    advance(11_000);
    expect(await store.get(beta, 'shared')).toBeNull();
    expect((await store.get(alpha, 'shared'))?.value).toBe('alpha-again');

    // A replace in one tenant is a create, not a replace, when only the other tenant has the key.
    const created = await store.set(beta, 'only-alpha', 'beta-now');
    expect(created.created).toBe(true);
    expect((await store.get(alpha, 'only-alpha'))?.value).toBe(1);

    const byTenant = (t: TenantRecord) =>
      records()
        .filter((r) => r.tenant_id === t.id)
        .map((r) => r.key)
        .sort();
    expect(byTenant(alpha)).toEqual(['only-alpha', 'shared']);
    expect(byTenant(beta)).toEqual(['only-alpha', 'only-beta', 'shared']);
  });

  it('a cursor from one tenant’s listing pages only that tenant’s keys in another', async () => {
    for (const k of ['a', 'b', 'c']) await store.set(alpha, k, 1);
    for (const k of ['a', 'b', 'c', 'd']) await store.set(beta, k, 2);
    const p1 = store.list(alpha, '', { limit: 1 });
    const crossed = store.list(beta, '', { limit: 10, cursor: p1.next_cursor! });
    expect(crossed.data.map((e) => e.key)).toEqual(['b', 'c', 'd']);
  });
});
