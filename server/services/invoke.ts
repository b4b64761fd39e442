import { ApiError, conflict, notFound } from '../errors';
import type { SnippetRecord, TenantRecord, VersionRecord, InvocationRecord } from '../storage/schema';
import type { CoreDeps } from '../core-deps';
import type { Executor, ExecutionResult, HostOp, RunLimits } from '../../executor';
import type { SnippetService } from './snippets';
import type { SecretService } from './secrets';
import type { StoreService } from './store';
import type { InvocationService } from './invocations';

export interface Resolved {
  snippet: SnippetRecord;
  version: VersionRecord;
  /** The environment that selected the version (explicit, or `prod`), null when pinned or latest. */
  env: string | null;
}

export interface InvokeRequest {
  tenant: TenantRecord;
  snippet: string;
  env?: string;
  version?: number;
  input: Record<string, unknown>;
  mode: InvocationRecord['mode'];
  /** Per-run limit overrides (X-Emu-Limits, admin only): applied to this run without a new version. */
  overrides?: Partial<RunLimits>;
  idempotencyKey?: string | null;
  signal?: AbortSignal;
  onChunk?: (data: unknown) => void;
}

export interface InvokeResult {
  record: InvocationRecord;
  /** Null when an earlier invocation with the same Idempotency-Key answered instead of a new run. */
  result: ExecutionResult | null;
  replayed: boolean;
}

/**
 * Runs snippets: resolves which version runs (version > env > prod > latest), enforces the tenant's
 * concurrency cap, records the invocation, and hands the job to the executor with the tenant's
 * secrets and a host-call handler scoped to the tenant.
 */
export class InvokeService {
  private readonly running = new Map<string, number>();
  private readonly controllers = new Map<string, AbortController>();

  constructor(
    private readonly deps: CoreDeps,
    private readonly executor: Executor,
    private readonly snippets: SnippetService,
    private readonly secrets: SecretService,
    private readonly store: StoreService,
    private readonly invocations: InvocationService,
  ) {}

  resolve(tenant: TenantRecord, name: string, env?: string, version?: number): Resolved {
    return this.deps.repo.read((db) => {
      const snippet = this.snippets.find(db, tenant, name);
      if (!snippet) throw notFound('snippet', name);
      const versionOf = (n: number) => db.versions.find((v) => v.snippet_id === snippet.id && v.version === n);
      if (env !== undefined && !db.environments.some((e) => e.tenant_id === tenant.id && e.name === env)) {
        throw notFound('environment', env);
      }
      if (version !== undefined) {
        const v = versionOf(version);
        if (!v) throw notFound('version', version);
        return { snippet, version: v, env: env ?? null };
      }
      if (env !== undefined) {
        const d = db.deployments.find((x) => x.snippet_id === snippet.id && x.env === env);
        if (!d) throw notFound('deployment', env);
        return { snippet, version: versionOf(d.version)!, env };
      }
      const prod = db.deployments.find((x) => x.snippet_id === snippet.id && x.env === 'prod');
      if (prod) return { snippet, version: versionOf(prod.version)!, env: 'prod' };
      const latest = versionOf(snippet.latest_version);
      if (!latest) throw notFound('version', 'latest');
      return { snippet, version: latest, env: null };
    });
  }

  /** Throws 429 when the tenant already runs `max_concurrency` invocations. */
  private admit(tenant: TenantRecord): () => void {
    const caps = this.deps.repo.read((db) => db.tenants.find((t) => t.id === tenant.id)?.caps ?? tenant.caps);
    const now = this.running.get(tenant.id) ?? 0;
    if (now >= caps.max_concurrency) {
      throw new ApiError(
        429,
        'rate_limited',
        'Too many requests',
        `the tenant already runs ${now} invocations (max_concurrency ${caps.max_concurrency}); retry shortly`,
        {},
        { 'Retry-After': '1' },
      );
    }
    this.running.set(tenant.id, now + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running.set(tenant.id, (this.running.get(tenant.id) ?? 1) - 1);
    };
  }

  async invoke(req: InvokeRequest): Promise<InvokeResult> {
    if (req.idempotencyKey) {
      const earlier = this.invocations.findByIdempotencyKey(req.tenant, req.idempotencyKey);
      if (earlier) {
        const named = this.deps.repo.read((db) => this.snippets.find(db, req.tenant, req.snippet));
        if (!named || named.id !== earlier.snippet_id) {
          throw new ApiError(422, 'idempotency_key_reused', 'Idempotency-Key reused', `this Idempotency-Key was used for another snippet (invocation ${earlier.id}); use a new key`);
        }
        if (earlier.status === 'running' || earlier.status === 'queued') {
          throw conflict(`the invocation ${earlier.id} with this Idempotency-Key is still running; ask again when it has finished`);
        }
        return { record: earlier, result: null, replayed: true };
      }
    }
    const resolved = this.resolve(req.tenant, req.snippet, req.env, req.version);
    const { snippet, version } = resolved;
    const limits: RunLimits = {
      timeout_ms: req.overrides?.timeout_ms ?? version.timeout_ms,
      max_memory_mb: req.overrides?.max_memory_mb ?? version.max_memory_mb,
      max_cpu_percent: req.overrides?.max_cpu_percent ?? version.max_cpu_percent,
    };
    const release = this.admit(req.tenant);
    try {
      const record = await this.invocations.start({
        tenant_id: req.tenant.id,
        snippet_id: snippet.id,
        snippet: snippet.name,
        version: version.version,
        env: resolved.env,
        mode: req.mode,
        limits,
        overridden: !!req.overrides && Object.keys(req.overrides).length > 0,
        parity: { ...this.executor.info.parity, reasons: [...this.executor.info.parity.reasons] },
        idempotency_key: req.idempotencyKey ?? null,
      });
      const controller = new AbortController();
      this.controllers.set(record.id, controller);
      const onAbort = () => controller.abort();
      req.signal?.addEventListener('abort', onAbort, { once: true });
      let result: ExecutionResult;
      try {
        result = await this.executor.run(
          {
            invocationId: record.id,
            tenantId: req.tenant.id,
            snippetId: snippet.id,
            version: version.version,
            runtime: snippet.runtime,
            bundle: {
              sha256: version.sha256,
              entrypoint: version.entrypoint,
              load: () => this.snippets.readFiles(version),
            },
            limits,
            input: req.input,
            env: {
              ...this.secrets.reveal(req.tenant),
              SVC_INVOCATION_ID: record.id,
              SVC_SNIPPET: snippet.name,
              SVC_VERSION: String(version.version),
              SVC_ENV: resolved.env ?? '',
            },
          },
          { onChunk: req.onChunk, onCall: (op, args) => this.hostCall(req.tenant, op, args) },
          controller.signal,
        );
      } finally {
        req.signal?.removeEventListener('abort', onAbort);
        this.controllers.delete(record.id);
      }
      const finished = await this.invocations.finish(record.id, result);
      return { record: finished, result, replayed: false };
    } finally {
      release();
    }
  }

  /** Cancels a running invocation of the tenant; false when it is not running (any more). */
  cancel(tenant: TenantRecord, id: string): boolean {
    const rec = this.invocations.find(tenant, id);
    const controller = this.controllers.get(rec.id);
    if (!controller) return false;
    controller.abort();
    return true;
  }

  /** The snippet libraries' calls, answered in the tenant's scope. */
  private async hostCall(tenant: TenantRecord, op: HostOp, args: Record<string, unknown>): Promise<unknown> {
    const key = () => {
      if (typeof args.key !== 'string' || !/^[\x21-\x7e]{1,512}$/.test(args.key)) {
        throw Object.assign(new Error('key must be 1–512 printable ASCII characters without spaces'), { code: 'validation_failed' });
      }
      return args.key;
    };
    switch (op) {
      case 'store.get':
        return (await this.store.get(tenant, key()))?.value ?? null;
      case 'store.set': {
        const ttl = args.ttl_seconds;
        if (ttl !== undefined && ttl !== null && (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 1)) {
          throw Object.assign(new Error('ttl_seconds must be a positive integer'), { code: 'validation_failed' });
        }
        await this.store.set(tenant, key(), args.value ?? null, (ttl as number | null | undefined) ?? null);
        return null;
      }
      case 'store.delete':
        return this.store.delete(tenant, key());
      case 'store.list': {
        const prefix = typeof args.prefix === 'string' ? args.prefix : '';
        const keys: unknown[] = [];
        let cursor: string | undefined;
        do {
          const page = this.store.list(tenant, prefix, { limit: 1000, cursor });
          keys.push(...page.data);
          cursor = page.next_cursor ?? undefined;
        } while (cursor);
        return keys;
      }
      case 'integrations.call':
        throw Object.assign(new Error('integrations arrive with the agents issue'), { code: 'not_implemented' });
    }
  }
}
