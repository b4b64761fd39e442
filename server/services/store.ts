import { z } from 'zod';
import { notFound, payloadTooLarge, validationFailed } from '../domain/errors';
import { StoreRecord, type DbData, type TenantRecord } from '../storage/schema';
import { fieldErrors } from './field-errors';
import { type CoreDeps } from '../core-deps';
import { paginate, type PageRequest } from './pagination';
import { STORE_VALUE_MAX_BYTES, StoreTtlSeconds, StoreValue, type StoreEntry } from '../../contract/schemas/tenant';

/** Values up to this size live in db.json; larger ones in a blob file, to keep every db write small. */
export const STORE_INLINE_MAX_BYTES = 8 * 1024;

/** A store entry as the API answers it (contract/schemas/tenant.ts). */
export type StoreEntryView = z.output<typeof StoreEntry>;

/**
 * The tenant store behind `@svc/store` / `svc.store` and `/v1/store`. Expired entries read as missing
 * at once and are removed by `sweep`, which the core runs on a timer.
 */
export class StoreService {
  constructor(private readonly deps: CoreDeps) {}

  private live(db: Readonly<DbData>, tenant: TenantRecord, key: string): StoreRecord | undefined {
    const rec = db.store.find((r) => r.tenant_id === tenant.id && r.key === key);
    return rec && !this.expired(rec) ? rec : undefined;
  }

  private expired(rec: StoreRecord, now = this.deps.clock().getTime()): boolean {
    return rec.expires_at !== null && Date.parse(rec.expires_at) <= now;
  }

  async get(tenant: TenantRecord, key: string): Promise<StoreEntryView | null> {
    const rec = this.deps.repo.read((db) => this.live(db, tenant, key));
    if (!rec) return null;
    const value: unknown = rec.blob !== undefined ? JSON.parse(await this.deps.blobs.getText(rec.blob)) : rec.value;
    return { key: rec.key, value, expires_at: rec.expires_at, updated_at: rec.updated_at };
  }

  async getOrThrow(tenant: TenantRecord, key: string): Promise<StoreEntryView> {
    const entry = await this.get(tenant, key);
    if (!entry) throw notFound('store key', key);
    return entry;
  }

  async set(
    tenant: TenantRecord,
    key: string,
    value: unknown,
    ttlSeconds?: number | null,
  ): Promise<{ created: boolean; entry: StoreEntryView }> {
    // The routes and the host calls parse with these already; checked here too, so no caller of the
    // service can store a record that the next start would have to quarantine.
    const checked = z
      .object({ value: StoreValue, ttl_seconds: StoreTtlSeconds.nullable().optional() })
      .safeParse({ value, ttl_seconds: ttlSeconds });
    if (!checked.success) throw validationFailed(fieldErrors(checked.error, 'store'));
    const json = JSON.stringify(value);
    const size = Buffer.byteLength(json, 'utf8');
    if (size > STORE_VALUE_MAX_BYTES) {
      throw payloadTooLarge(`the value is ${size} bytes as JSON; a store value may be at most ${STORE_VALUE_MAX_BYTES} (1 MiB)`);
    }
    const blob = size > STORE_INLINE_MAX_BYTES ? await this.deps.blobs.put(json) : undefined;
    const result = await this.deps.repo.mutate((db) => {
      const now = this.deps.clock();
      const nowText = now.toISOString();
      const expires_at = ttlSeconds ? new Date(now.getTime() + ttlSeconds * 1000).toISOString() : null;
      const fields = blob !== undefined ? { blob, value: undefined } : { value: JSON.parse(json) as unknown, blob: undefined };
      const index = db.store.findIndex((r) => r.tenant_id === tenant.id && r.key === key);
      const existing = index >= 0 ? db.store[index]! : undefined;
      const created = !existing || this.expired(existing, now.getTime());
      const rec: StoreRecord = {
        tenant_id: tenant.id,
        key,
        ...fields,
        size,
        expires_at,
        created_at: created ? nowText : existing.created_at,
        updated_at: nowText,
      };
      if (rec.value === undefined) delete rec.value;
      if (rec.blob === undefined) delete rec.blob;
      if (!StoreRecord.safeParse(rec).success) throw new Error(`store record for ${key} does not fit the db.json schema`);
      if (index >= 0) db.store[index] = rec;
      else db.store.push(rec);
      return { created, entry: { key, value, expires_at, updated_at: nowText } };
    });
    // The live feed names the key, never its value (REST and snippets' host calls both land here).
    this.deps.events.publish('store.changed', { tenant_id: tenant.id, key, deleted: false });
    return result;
  }

  async delete(tenant: TenantRecord, key: string): Promise<boolean> {
    const deleted = await this.deps.repo.mutate((db) => {
      const rec = this.live(db, tenant, key);
      if (!rec) return false;
      db.store = db.store.filter((r) => r !== rec);
      return true;
    });
    if (deleted) this.deps.events.publish('store.changed', { tenant_id: tenant.id, key, deleted: true });
    return deleted;
  }

  list(tenant: TenantRecord, prefix: string, page: PageRequest) {
    const now = this.deps.clock().getTime();
    const sorted = this.deps.repo.read((db) =>
      db.store
        .filter((r) => r.tenant_id === tenant.id && r.key.startsWith(prefix) && !this.expired(r, now))
        .sort((a, b) => (a.key < b.key ? -1 : 1)),
    );
    return paginate(
      sorted,
      (r) => r.key,
      page,
      (r) => ({
        key: r.key,
        size: r.size,
        expires_at: r.expires_at,
        updated_at: r.updated_at,
      }),
    );
  }

  /** Removes expired entries; returns how many. Writes only when there is something to remove. */
  async sweep(): Promise<number> {
    const now = this.deps.clock().getTime();
    const count = this.deps.repo.read((db) => db.store.filter((r) => this.expired(r, now)).length);
    if (count === 0) return 0;
    const gone = await this.deps.repo.mutate((db) => {
      const expired = db.store.filter((r) => this.expired(r, now));
      db.store = db.store.filter((r) => !this.expired(r, now));
      return expired.map((r) => ({ tenant_id: r.tenant_id, key: r.key }));
    });
    for (const r of gone) this.deps.events.publish('store.changed', { ...r, deleted: true });
    return gone.length;
  }

  liveBlobs(db: Readonly<DbData>): string[] {
    return db.store.flatMap((r) => (r.blob ? [r.blob] : []));
  }
}
