import { notFound } from '../domain/errors';
import type { TenantRecord } from '../storage/schema';
import { type CoreDeps, nowIso } from '../core-deps';
import { paginate, type PageRequest } from './pagination';

const context = (tenantId: string, name: string) => `secret:${tenantId}:${name}`;

/** Tenant secrets: sealed at rest, listed by name only, opened only to hand them to a run. */
export class SecretService {
  constructor(private readonly deps: CoreDeps) {}

  async put(tenant: TenantRecord, name: string, value: string): Promise<{ created: boolean; info: SecretInfo }> {
    const sealed = this.deps.secretBox.seal(value, context(tenant.id, name));
    const result = await this.deps.repo.mutate((db) => {
      const now = nowIso(this.deps.clock);
      const existing = db.secrets.find((s) => s.tenant_id === tenant.id && s.name === name);
      if (existing) {
        existing.sealed = sealed;
        existing.updated_at = now;
        return { created: false, info: info(existing) };
      }
      const rec = { tenant_id: tenant.id, name, sealed, created_at: now, updated_at: now };
      db.secrets.push(rec);
      return { created: true, info: info(rec) };
    });
    // The live feed names the secret, never its value.
    this.deps.events.publish('secret.changed', { tenant_id: tenant.id, name, deleted: false });
    return result;
  }

  list(tenant: TenantRecord, page: PageRequest) {
    const sorted = this.deps.repo.read((db) =>
      db.secrets.filter((s) => s.tenant_id === tenant.id).sort((a, b) => (a.name < b.name ? -1 : 1)),
    );
    return paginate(sorted, (s) => s.name, page, info);
  }

  has(tenant: TenantRecord, name: string): boolean {
    return this.deps.repo.read((db) => db.secrets.some((s) => s.tenant_id === tenant.id && s.name === name));
  }

  async delete(tenant: TenantRecord, name: string): Promise<void> {
    await this.deps.repo.mutate((db) => {
      const before = db.secrets.length;
      db.secrets = db.secrets.filter((s) => !(s.tenant_id === tenant.id && s.name === name));
      if (db.secrets.length === before) throw notFound('secret', name);
    });
    this.deps.events.publish('secret.changed', { tenant_id: tenant.id, name, deleted: true });
  }

  /** name → value, for the environment of a run. Never logged, never returned over HTTP. */
  reveal(tenant: TenantRecord): Record<string, string> {
    const sealed = this.deps.repo.read((db) => db.secrets.filter((s) => s.tenant_id === tenant.id));
    return Object.fromEntries(sealed.map((s) => [s.name, this.deps.secretBox.open(s.sealed, context(tenant.id, s.name))]));
  }
}

type SecretInfo = { name: string; created_at: string; updated_at: string };
const info = (s: SecretInfo): SecretInfo => ({ name: s.name, created_at: s.created_at, updated_at: s.updated_at });
