import { createHash, timingSafeEqual } from 'node:crypto';
import { conflict, notFound, unauthenticated } from '../domain/errors';
import type { z } from 'zod';
import type { TenantInfo } from '../../contract/schemas/emu';
import { newApiKey, newId, newWebhookSecret, sha256Hex } from '../ids';
import type { CapsRecord, TenantRecord, ApiKeyRecord } from '../storage/schema';
import { type CoreDeps, nowIso } from '../core-deps';

export const DEFAULT_TENANT_CAPS: CapsRecord = {
  timeout_ms: 900_000,
  max_memory_mb: 2048,
  max_cpu_percent: 100,
  max_concurrency: 10,
};
export const BUILTIN_ENVIRONMENTS = ['dev', 'staging', 'prod'] as const;
export const LOCAL_TENANT = 'local';

const keyContext = (k: { id: string; tenant_id: string }) => `api_key:${k.tenant_id}:${k.id}`;
const webhookContext = (t: { id: string }) => `webhook_secret:${t.id}`;
const previousContext = (t: { id: string }) => `previous_webhook_secret:${t.id}`;
/** How long a rotated-out webhook secret keeps signing. */
export const PREVIOUS_SECRET_GRACE_MS = 24 * 3600 * 1000;

/** A tenant as `/_emu/tenants` answers it (contract/schemas/emu.ts). */
export type TenantView = z.output<typeof TenantInfo>;

/** Tenants, their caps and API keys: the operator's side (production does this out of band). */
export class TenantService {
  constructor(private readonly deps: CoreDeps) {}

  list(): TenantRecord[] {
    return this.deps.repo.read((db) => [...db.tenants].sort((a, b) => a.name.localeCompare(b.name)));
  }

  find(name: string): TenantRecord | undefined {
    return this.deps.repo.read((db) => db.tenants.find((t) => t.name === name));
  }

  get(name: string): TenantRecord {
    const tenant = this.find(name);
    if (!tenant) throw notFound('tenant', name);
    return tenant;
  }

  byId(id: string): TenantRecord | undefined {
    return this.deps.repo.read((db) => db.tenants.find((t) => t.id === id));
  }

  view(tenant: TenantRecord): TenantView {
    const keys = this.deps.repo.read((db) =>
      db.api_keys.filter((k) => k.tenant_id === tenant.id).map((k) => ({ id: k.id, prefix: k.prefix, created_at: k.created_at })),
    );
    return { id: tenant.id, name: tenant.name, caps: { ...tenant.caps }, keys, created_at: tenant.created_at };
  }

  async create(name: string): Promise<TenantRecord> {
    const { secretBox, clock } = this.deps;
    const created = await this.deps.repo.mutate((db) => {
      if (db.tenants.some((t) => t.name === name)) throw conflict(`tenant '${name}' already exists`);
      const now = nowIso(clock);
      const id = newId('ten');
      const tenant: TenantRecord = {
        id,
        name,
        caps: { ...DEFAULT_TENANT_CAPS },
        webhook_secret: secretBox.seal(newWebhookSecret(), webhookContext({ id })),
        webhook_secret_created_at: now,
        previous_webhook_secret: null,
        previous_webhook_secret_expires_at: null,
        created_at: now,
      };
      db.tenants.push(tenant);
      for (const env of BUILTIN_ENVIRONMENTS) {
        db.environments.push({ tenant_id: id, name: env, builtin: true, created_at: now });
      }
      return tenant;
    });
    this.changed(created);
    return created;
  }

  /** The live feed's word that a tenant changed (created, caps, keys, webhook secret): names only, never a secret. */
  private changed(tenant: { id: string; name: string }): void {
    this.deps.events.publish('tenant.changed', { tenant_id: tenant.id, name: tenant.name });
  }

  async setCaps(name: string, patch: Partial<CapsRecord>): Promise<CapsRecord> {
    const { tenant, caps } = await this.deps.repo.mutate((db) => {
      const tenant = db.tenants.find((t) => t.name === name);
      if (!tenant) throw notFound('tenant', name);
      for (const [field, value] of Object.entries(patch)) {
        if (value !== undefined) tenant.caps[field as keyof CapsRecord] = value;
      }
      return { tenant, caps: { ...tenant.caps } };
    });
    this.changed(tenant);
    return caps;
  }

  /** A new key for the tenant. Only its SHA-256 is kept (plus, with `keepSealed`, an encrypted copy). */
  async createKey(name: string, opts: { keepSealed?: boolean } = {}): Promise<{ record: ApiKeyRecord; key: string }> {
    const key = newApiKey();
    const { secretBox, clock } = this.deps;
    const record = await this.deps.repo.mutate((db) => {
      const tenant = db.tenants.find((t) => t.name === name);
      if (!tenant) throw notFound('tenant', name);
      const rec: ApiKeyRecord = {
        id: newId('key'),
        tenant_id: tenant.id,
        hash: sha256Hex(key),
        prefix: key.slice(0, 8),
        created_at: nowIso(clock),
      };
      if (opts.keepSealed) rec.sealed = secretBox.seal(key, keyContext(rec));
      db.api_keys.push(rec);
      return { rec, tenant };
    });
    this.changed(record.tenant);
    return { record: record.rec, key };
  }

  /**
   * The tenant a bearer key acts for. Every stored hash is compared, in constant time, whatever
   * matches: the time taken says nothing about which key or how much of it was right.
   */
  authenticate(authorization: string | undefined): TenantRecord {
    const m = /^Bearer (\S+)$/i.exec(authorization ?? '');
    if (!m) throw unauthenticated('Send your API key as "Authorization: Bearer svc_…".');
    const presented = createHash('sha256').update(m[1]!).digest();
    const tenantId = this.deps.repo.read((db) => {
      let found: string | null = null;
      for (const k of db.api_keys) {
        const stored = this.storedDigest(k);
        if (timingSafeEqual(presented, stored.bytes) && stored.ok) found = k.tenant_id;
      }
      return found;
    });
    const tenant = tenantId ? this.byId(tenantId) : undefined;
    if (!tenant) throw unauthenticated('The API key is not valid.');
    return tenant;
  }

  /** A key's stored hash as bytes, decoded once per hash (each request compared it from hex twice). */
  private readonly digests = new WeakMap<ApiKeyRecord, { hex: string; bytes: Buffer; ok: boolean }>();
  private storedDigest(k: ApiKeyRecord): { bytes: Buffer; ok: boolean } {
    let d = this.digests.get(k);
    if (d?.hex !== k.hash) {
      const bytes = Buffer.from(k.hash, 'hex');
      // A malformed stored hash still costs a full comparison, and never matches.
      d = bytes.length === 32 ? { hex: k.hash, bytes, ok: true } : { hex: k.hash, bytes: Buffer.alloc(32), ok: false };
      this.digests.set(k, d);
    }
    return d;
  }

  /** Creates the `local` tenant and its first key on first start; afterwards returns that key again. */
  async ensureLocal(): Promise<{ tenant: TenantRecord; key: string | null; created: boolean }> {
    let tenant = this.find(LOCAL_TENANT);
    if (!tenant) {
      tenant = await this.create(LOCAL_TENANT);
      const { key } = await this.createKey(LOCAL_TENANT, { keepSealed: true });
      return { tenant, key, created: true };
    }
    return { tenant, key: this.localKey(), created: false };
  }

  localKey(): string | null {
    const tenant = this.find(LOCAL_TENANT);
    if (!tenant) return null;
    const rec = this.deps.repo.read((db) => db.api_keys.find((k) => k.tenant_id === tenant.id && k.sealed));
    if (!rec?.sealed) return null;
    try {
      return this.deps.secretBox.open(rec.sealed, keyContext(rec));
    } catch {
      return null; // the data dir was copied without its key file: the key still works, we just cannot show it
    }
  }

  webhookSecret(tenant: TenantRecord): { secret: string; created_at: string } {
    const current = this.byId(tenant.id) ?? tenant;
    return {
      secret: this.deps.secretBox.open(current.webhook_secret, webhookContext(current)),
      created_at: current.webhook_secret_created_at,
    };
  }

  /**
   * A new signing secret. The old one keeps signing (as a second `v1,` signature) for 24 h, so
   * receivers can switch over without dropping a delivery.
   */
  async rotateWebhookSecret(tenant: TenantRecord): Promise<{ secret: string; created_at: string }> {
    const secret = newWebhookSecret();
    const { secretBox, clock } = this.deps;
    const rotated = await this.deps.repo.mutate((db) => {
      const t = db.tenants.find((x) => x.id === tenant.id);
      if (!t) throw notFound('tenant', tenant.name);
      const now = clock();
      t.previous_webhook_secret = secretBox.seal(secretBox.open(t.webhook_secret, webhookContext(t)), previousContext(t));
      t.previous_webhook_secret_expires_at = new Date(now.getTime() + PREVIOUS_SECRET_GRACE_MS).toISOString();
      t.webhook_secret = secretBox.seal(secret, webhookContext(t));
      t.webhook_secret_created_at = now.toISOString();
      return { secret, created_at: t.webhook_secret_created_at };
    });
    this.changed(tenant);
    return rotated;
  }

  /** The secrets a callback is signed with now: the current one first, then the previous one during its grace. */
  signingSecrets(tenantId: string): string[] {
    const t = this.byId(tenantId);
    if (!t) return [];
    const { secretBox, clock } = this.deps;
    const secrets = [secretBox.open(t.webhook_secret, webhookContext(t))];
    const expires = t.previous_webhook_secret_expires_at;
    if (t.previous_webhook_secret && expires && Date.parse(expires) > clock().getTime()) {
      secrets.push(secretBox.open(t.previous_webhook_secret, previousContext(t)));
    }
    return secrets;
  }
}
