import { notFound } from '../domain/errors';
import type { IntegrationRecord, TenantRecord } from '../storage/schema';
import { type CoreDeps, nowIso } from '../core-deps';
import { paginate, type PageRequest } from './pagination';
import { EgressError, type EgressService } from './egress';
import type { SecretService } from './secrets';
import type { IntegrationCallArgs } from './host-calls';

/** The providers, as data: where each one is unless `base_url` says otherwise. */
export const PROVIDER_DEFAULT_BASE_URL: Record<string, string | null> = {
  http: null,
  openai: 'https://api.openai.com/v1',
};

/** How long the core waits for an integration's answer. */
export const INTEGRATION_TIMEOUT_MS = 30_000;

/** An error the snippet sees as an exception with this `code` (and, for an HTTP error, `status` and `body`). */
const callError = (code: string, message: string, extra: { status?: number; body?: unknown } = {}) =>
  Object.assign(new Error(message), { code, ...extra });

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
]);

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
  constructor(
    private readonly deps: CoreDeps,
    private readonly secrets: SecretService,
    private readonly egress: EgressService,
  ) {}

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
    return paginate(
      sorted,
      (i) => i.name,
      page,
      (i) => this.view(i),
    );
  }

  async delete(tenant: TenantRecord, name: string) {
    await this.deps.repo.mutate((db) => {
      const before = db.integrations.length;
      db.integrations = db.integrations.filter((i) => !(i.tenant_id === tenant.id && i.name === name));
      if (db.integrations.length === before) throw notFound('integration', name);
    });
  }

  /**
   * `integrations.call` from a snippet: the core adds the credential from the named secret, sends the
   * request through the egress path (profile, faults, log) with a deadline, and writes one line about
   * it (never the credential) to the invocation's logs. A non-2xx answer is an error carrying status
   * and body. `args` passed IntegrationCallArgs (services/host-calls.ts) on the way in.
   */
  async call(tenant: TenantRecord, invocationId: string, args: IntegrationCallArgs, log: (line: string) => void) {
    const rec = this.deps.repo.read((db) => db.integrations.find((i) => i.tenant_id === tenant.id && i.name === args.name));
    if (!rec) throw callError('not_found', `no integration named '${args.name}': create it with PUT /v1/integrations/${args.name}`);
    if (!rec.base_url)
      throw callError('validation_failed', `integration '${rec.name}' has no base_url: set one with PUT /v1/integrations/${rec.name}`);
    const url = new URL(`${rec.base_url.replace(/\/+$/, '')}/${args.path.replace(/^\/+/, '')}`);
    for (const [k, v] of Object.entries(args.query ?? {}))
      for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(k, String(one));

    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(args.headers ?? {})) if (!HOP_BY_HOP.has(k.toLowerCase())) headers[k.toLowerCase()] = v;
    let body: Buffer | undefined;
    if (args.body !== undefined) {
      body = Buffer.from(typeof args.body === 'string' ? args.body : JSON.stringify(args.body));
      headers['content-type'] ??= typeof args.body === 'string' ? 'text/plain; charset=utf-8' : 'application/json';
    }
    /** The headers the core adds (the credential): redacted on the run's tape whatever their value, never matched in replay. */
    const hostAdded: string[] = [];
    if (rec.auth.type !== 'none') {
      const secret = rec.auth.secret ? this.secrets.reveal(tenant)[rec.auth.secret] : undefined;
      if (secret === undefined)
        throw callError(
          'secret_missing',
          `integration '${rec.name}' needs the secret ${rec.auth.secret}, which is not set: PUT /v1/secrets/${rec.auth.secret}`,
        );
      if (rec.auth.type === 'bearer') headers.authorization = `Bearer ${secret}`;
      else if (rec.auth.type === 'basic') headers.authorization = `Basic ${Buffer.from(secret).toString('base64')}`;
      else headers[rec.auth.header!.toLowerCase()] = secret;
      hostAdded.push(rec.auth.type === 'header' ? rec.auth.header!.toLowerCase() : 'authorization');
    }

    const method = args.method.toUpperCase();
    const what = `${rec.name} ${method} ${url.pathname}${url.search}`;
    const started = performance.now();
    let res;
    try {
      res = await this.egress.send({
        identity: { tenant: tenant.name, invocation_id: invocationId },
        integration: rec.name,
        method,
        url,
        headers,
        body,
        timeoutMs: INTEGRATION_TIMEOUT_MS,
        hostAdded,
      });
    } catch (err) {
      if (!(err instanceof EgressError)) throw err;
      log(`[integration] ${what} → ${err.code}: ${err.message}`);
      throw callError(err.code, err.message);
    }
    log(`[integration] ${what} → ${res.status} (${Math.round(performance.now() - started)} ms)`);
    const text = res.body.toString('utf8');
    const isJson = /\bjson\b/i.test(String(res.headers['content-type'] ?? ''));
    let value: unknown = text;
    if (isJson) {
      try {
        value = JSON.parse(text);
      } catch {
        /* not JSON after all: the text */
      }
    }
    const flat: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
    if (res.status < 200 || res.status > 299)
      throw callError('integration_error', `${what} answered ${res.status}`, { status: res.status, body: value });
    return { status: res.status, headers: flat, body: value };
  }
}
