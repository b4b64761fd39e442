import { notFound } from '../errors';
import type { IntegrationRecord, TenantRecord } from '../storage/schema';
import { type CoreDeps, nowIso } from '../core-deps';
import { paginate, type PageRequest } from './pagination';

export const PROVIDER_DEFAULT_BASE_URL: Record<string, string | null> = {
  http: null,
  openai: 'https://api.openai.com/v1',
};

export interface IntegrationInput {
  provider: string;
  base_url?: string;
  auth: { type: 'bearer' | 'header' | 'basic' | 'none'; secret?: string; header?: string };
}

/**
 * Integration records: which provider, where, and which tenant secret holds the credential. The
 * credential itself stays a secret; calls through `@svc/integrations` resolve it at call time.
 */
export class IntegrationService {
  constructor(private readonly deps: CoreDeps) {}

  private view(rec: IntegrationRecord) {
    const secretPresent =
      rec.auth.secret === null ||
      this.deps.repo.read((db) => db.secrets.some((s) => s.tenant_id === rec.tenant_id && s.name === rec.auth.secret));
    return {
      name: rec.name,
      provider: rec.provider,
      base_url: rec.base_url,
      auth: { ...rec.auth },
      secret_present: secretPresent,
      created_at: rec.created_at,
      updated_at: rec.updated_at,
    };
  }

  async put(tenant: TenantRecord, name: string, input: IntegrationInput) {
    const rec = await this.deps.repo.mutate((db) => {
      const now = nowIso(this.deps.clock);
      const existing = db.integrations.find((i) => i.tenant_id === tenant.id && i.name === name);
      const next: IntegrationRecord = {
        tenant_id: tenant.id,
        name,
        provider: input.provider,
        base_url: input.base_url ?? PROVIDER_DEFAULT_BASE_URL[input.provider] ?? null,
        auth: { type: input.auth.type, secret: input.auth.secret ?? null, header: input.auth.header ?? null },
        created_at: existing?.created_at ?? now,
        updated_at: now,
      };
      if (existing) Object.assign(existing, next);
      else db.integrations.push(next);
      return { created: !existing, rec: next };
    });
    return { created: rec.created, view: this.view(rec.rec) };
  }

  get(tenant: TenantRecord, name: string) {
    const rec = this.deps.repo.read((db) => db.integrations.find((i) => i.tenant_id === tenant.id && i.name === name));
    if (!rec) throw notFound('integration', name);
    return this.view(rec);
  }

  list(tenant: TenantRecord, page: PageRequest) {
    const sorted = this.deps.repo.read((db) =>
      db.integrations.filter((i) => i.tenant_id === tenant.id).sort((a, b) => (a.name < b.name ? -1 : 1)),
    );
    return paginate(sorted, (i) => i.name, page, (i) => this.view(i));
  }

  async delete(tenant: TenantRecord, name: string) {
    await this.deps.repo.mutate((db) => {
      const before = db.integrations.length;
      db.integrations = db.integrations.filter((i) => !(i.tenant_id === tenant.id && i.name === name));
      if (db.integrations.length === before) throw notFound('integration', name);
    });
  }
}
