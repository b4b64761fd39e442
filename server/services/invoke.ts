import { conflict, DomainError, notFound, RateLimitedError, ValidationError } from '../domain/errors';
import type { TenantSlots } from './slots';
import type { SnippetRecord, TenantRecord, VersionRecord, InvocationRecord } from '../storage/schema';
import type { CoreDeps } from '../core-deps';
import type { DebugEvent, Executor, ExecutionResult, HostOp, Outcome, RunLimits, RunSignal } from '../../executor';
import type { SnippetService } from './snippets';
import type { SecretService } from './secrets';
import type { StoreService } from './store';
import type { IntegrationService } from './integrations';
import type { InvocationService, NewInvocation } from './invocations';
import { jsonValueProblem, parseHostCall } from './host-calls';
import { BODY_LIMIT_BYTES } from '../json-text';
import { storedInputOf } from './stored-input';
import type { AgentStepService } from './agent-steps';
import type { EgressSessions, RunEgress } from './egress-sessions';
import type { DebugSessions } from './debug-sessions';
import { pendingDebug, type DebugRunRequest } from './debug-run';

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
  /** The run's egress mode and cassette (X-Emu-Egress-Mode, X-Emu-Cassette; admin only): services/egress-sessions.ts. */
  egress?: RunEgress;
  /** A debug run (X-Emu-Debug, admin only): services/debug-run.ts. Never combined with an Idempotency-Key. */
  debug?: DebugRunRequest;
  idempotencyKey?: string | null;
  signal?: AbortSignal;
  onChunk?: (data: unknown) => void;
  /** Called once the run is recorded, before its code starts (stream mode sends `start` then). */
  onStart?: (record: InvocationRecord) => void;
}

export interface InvokeResult {
  record: InvocationRecord;
  /** Null when an earlier invocation with the same Idempotency-Key answered instead of a new run. */
  result: ExecutionResult | null;
  replayed: boolean;
}

/** What a run needs besides its record: the caller's signal and where yielded chunks go. */
export interface RunHooks {
  signal?: AbortSignal;
  onChunk?: (data: unknown) => void;
}

/**
 * Runs snippets: resolves which version runs (version > env > prod > latest), enforces the tenant's
 * concurrency cap, records the invocation, and hands the job to the executor with the tenant's
 * secrets and a host-call handler scoped to the tenant. Async jobs are recorded by the async service
 * and run here through `execute`.
 */
export class InvokeService {
  private readonly controllers = new Map<string, RunCancel>();
  /** Debug runs recorded and not yet running (an async job's port and request id), by invocation id. */
  private readonly debugRequests = new Map<string, DebugRunRequest>();

  constructor(
    private readonly deps: CoreDeps,
    private readonly executor: Executor,
    private readonly snippets: SnippetService,
    private readonly secrets: SecretService,
    private readonly store: StoreService,
    private readonly invocations: InvocationService,
    private readonly integrations: IntegrationService,
    readonly slots: TenantSlots,
    /** Keeps and announces the agent steps the runners report (null: they are not kept). */
    private readonly agentSteps: AgentStepService | null = null,
    /** Opens and closes each run's egress session (live, record, replay); null: calls just go out. */
    private readonly egressSessions: EgressSessions | null = null,
    /** Debug runs in progress (X-Emu-Debug): their sessions are announced there; null: debug runs are refused. */
    private readonly debugSessions: DebugSessions | null = null,
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

  /** The tenant's current `max_concurrency` (caps change while the emulator runs). */
  capOf(tenantId: string): number {
    return this.deps.repo.read((db) => db.tenants.find((t) => t.id === tenantId)?.caps.max_concurrency ?? 1);
  }

  /** Refuses (rate limited) when the tenant already runs `max_concurrency` invocations. */
  private admit(tenant: TenantRecord): () => void {
    const cap = this.capOf(tenant.id);
    const release = this.slots.tryAcquire(tenant.id, cap);
    if (!release) {
      throw new RateLimitedError(
        `the tenant already runs ${this.slots.inUse(tenant.id)} invocations (max_concurrency ${cap}); retry shortly`,
        1,
      );
    }
    return release;
  }

  /**
   * An earlier invocation with this Idempotency-Key answers instead of a new run: the same key for
   * another snippet is a client bug (refused as `idempotency_key_reused`).
   */
  checkReplay(snippetId: string, earlier: InvocationRecord): void {
    if (earlier.snippet_id !== snippetId) {
      throw new ValidationError(
        [],
        `this Idempotency-Key was used for another snippet (invocation ${earlier.id}); use a new key`,
        'idempotency_key_reused',
      );
    }
  }

  /** A sync or stream replay can only answer with an outcome: while the first run goes on, that is a 409. */
  private syncReplay(earlier: InvocationRecord): InvokeResult {
    if (earlier.status === 'running' || earlier.status === 'queued') {
      throw conflict(`the invocation ${earlier.id} with this Idempotency-Key is still running; ask again when it has finished`);
    }
    return { record: earlier, result: null, replayed: true };
  }

  private limitsFor(version: VersionRecord, overrides?: Partial<RunLimits>): RunLimits {
    return {
      timeout_ms: overrides?.timeout_ms ?? version.timeout_ms,
      max_memory_mb: overrides?.max_memory_mb ?? version.max_memory_mb,
      max_cpu_percent: overrides?.max_cpu_percent ?? version.max_cpu_percent,
    };
  }

  /** The record fields every mode shares (with the input kept for replay, secrets' values redacted). */
  newInvocation(
    req: Pick<InvokeRequest, 'tenant' | 'overrides' | 'idempotencyKey' | 'mode' | 'input' | 'egress' | 'debug'>,
    resolved: Resolved,
  ): NewInvocation {
    if (req.debug && req.idempotencyKey) {
      // A debug run is a session a person attaches to: an earlier run's answer is never what they asked for.
      throw new ValidationError(
        [{ location: 'header.idempotency-key', message: 'not allowed with X-Emu-Debug' }],
        'a debug run (X-Emu-Debug) never answers from an Idempotency-Key: send one or the other',
      );
    }
    if (req.debug && !this.debugSessions) throw conflict('debug runs are not available on this emulator');
    const secrets = this.secrets.reveal(req.tenant);
    return {
      tenant_id: req.tenant.id,
      snippet_id: resolved.snippet.id,
      snippet: resolved.snippet.name,
      storedInput: storedInputOf(req.input, secrets),
      ...(req.overrides && Object.keys(req.overrides).length ? { overrides: { ...req.overrides } } : {}),
      version: resolved.version.version,
      env: resolved.env,
      mode: req.mode,
      limits: this.limitsFor(resolved.version, req.overrides),
      overridden: !!req.overrides && Object.keys(req.overrides).length > 0,
      parity: { ...this.executor.info.parity, reasons: [...this.executor.info.parity.reasons] },
      idempotency_key: req.idempotencyKey ?? null,
      // Decided now, so an async job keeps the mode it was submitted with.
      ...(this.egressSessions ? { egress: this.egressSessions.decide(resolved.version, req.egress) } : {}),
      // Marked from the start (the GUI shows a debug run as one while it waits for a debugger); executed as one in `execute`.
      ...(req.debug ? { debug: pendingDebug(resolved.snippet.runtime) } : {}),
    };
  }

  /** A recorded debug run's port and request id, until `execute` runs it (an async job's wait in the queue). */
  holdDebugRequest(id: string, debug: DebugRunRequest | undefined): void {
    if (debug) this.debugRequests.set(id, debug);
  }

  /** A recorded debug run that will not run (an async job cancelled in the queue). */
  dropDebugRequest(id: string): void {
    this.debugRequests.delete(id);
  }

  /** A sync or stream run: the caller waits for the outcome (stream callers get chunks on the way). */
  async invoke(req: InvokeRequest): Promise<InvokeResult> {
    const resolved = this.resolve(req.tenant, req.snippet, req.env, req.version);
    if (req.idempotencyKey && !req.debug) {
      const earlier = this.invocations.findByIdempotencyKey(req.tenant, req.idempotencyKey);
      if (earlier) {
        this.checkReplay(resolved.snippet.id, earlier);
        return this.syncReplay(earlier);
      }
    }
    const release = this.admit(req.tenant);
    try {
      const { record, earlier } = await this.invocations.create(this.newInvocation(req, resolved), { status: 'running', durable: false });
      if (earlier) {
        this.checkReplay(resolved.snippet.id, earlier); // lost a race with the same key
        return this.syncReplay(earlier);
      }
      this.holdDebugRequest(record.id, req.debug);
      req.onStart?.(record);
      const result = await this.execute(req.tenant, record, req.input, req);
      const finished = await this.invocations.finish(record.id, result);
      return { record: finished, result, replayed: false };
    } finally {
      release();
    }
  }

  /**
   * Runs a recorded invocation's code (the caller holds the tenant's slot). Cancellable through
   * `cancel` from the moment it is called, even before the sandbox is ready.
   */
  async execute(
    tenant: TenantRecord,
    record: InvocationRecord,
    input: Record<string, unknown>,
    hooks: RunHooks = {},
  ): Promise<ExecutionResult> {
    const controller = new RunCancel();
    this.controllers.set(record.id, controller);
    const onAbort = () => controller.abort();
    hooks.signal?.addEventListener('abort', onAbort, { once: true });
    if (hooks.signal?.aborted) controller.abort();
    const [runtime, version] = this.deps.repo.read((db) => [
      db.snippets.find((s) => s.id === record.snippet_id)?.runtime,
      db.versions.find((v) => v.snippet_id === record.snippet_id && v.version === record.version),
    ]);
    // A chunk the API could not carry stops the run (as a handler_error saying why) instead of reaching
    // the SSE response and the stored transcript.
    let chunks = 0;
    let refusedChunk: string | null = null;
    const onChunk =
      hooks.onChunk &&
      ((data: unknown) => {
        chunks++;
        if (refusedChunk) return;
        const problem = jsonValueProblem(data, BODY_LIMIT_BYTES);
        if (!problem) return hooks.onChunk!(data);
        refusedChunk = `chunk ${chunks} ${problem}`;
        controller.abort();
      });
    let stepsDropped = 0;
    let egressOpen = false;
    const debugRequest = this.debugRequests.get(record.id);
    this.debugRequests.delete(record.id);
    try {
      if (!runtime || !version)
        return notRun(record, 'failed', `${record.snippet} version ${record.version} was deleted before this invocation ran`);
      // Before any code runs: the proxy and integrations.call find the run's mode (and tape) here.
      if (this.egressSessions) {
        await this.egressSessions.open(tenant, record, version);
        egressOpen = true;
      }
      const result = await this.executor.run(
        {
          invocationId: record.id,
          tenantId: tenant.id,
          snippetId: record.snippet_id,
          version: version.version,
          runtime,
          bundle: {
            sha256: version.sha256,
            entrypoint: version.entrypoint,
            load: () => this.snippets.readFiles(version),
          },
          limits: record.limits,
          input,
          ...(record.debug ? { debug: debugRequest?.port === undefined ? {} : { port: debugRequest.port } } : {}),
          env: {
            ...this.secrets.reveal(tenant),
            SVC_INVOCATION_ID: record.id,
            SVC_SNIPPET: record.snippet,
            SVC_VERSION: String(version.version),
            SVC_ENV: record.env ?? '',
          },
        },
        {
          onChunk,
          ...this.agentSteps?.observer(record.id),
          onCall: (op, args, log) => this.hostCall(tenant, record.id, op, args, log).catch(asHostCallError),
          ...(record.debug && this.debugSessions ? { onDebug: this.debugObserver(tenant, record, runtime, debugRequest) } : {}),
        },
        controller,
      );
      stepsDropped = result.steps_dropped ?? 0;
      return boundResult(result, refusedChunk);
    } finally {
      hooks.signal?.removeEventListener('abort', onAbort);
      this.controllers.delete(record.id);
      // Always, however the run ended: a debug run's session never outlives it.
      this.debugSessions?.end(record.id);
      // Awaited: the run's calls are in its blob (and a record run's in the cassette) before its record is finished.
      if (egressOpen) await this.egressSessions!.close(record.id, tenant);
      // Not awaited: the steps stay readable from memory until their blob is written (server/services/agent-steps.ts).
      void this.agentSteps?.close(record.id, stepsDropped);
    }
  }

  /** A debug run's executor events → its session (GET /_emu/debug/sessions, the `debug.session` event). */
  private debugObserver(
    tenant: TenantRecord,
    record: InvocationRecord,
    runtime: 'bun' | 'python',
    req: DebugRunRequest | undefined,
  ): (e: DebugEvent) => void {
    let startedAt: string | null = null;
    return (e) => {
      startedAt ??= this.deps.clock().toISOString();
      this.debugSessions!.update({
        invocation_id: record.id,
        request_id: req?.requestId ?? null,
        tenant_id: tenant.id,
        snippet: record.snippet,
        version: record.version,
        runtime,
        protocol: e.protocol,
        host: e.host,
        port: e.port,
        url: e.url,
        state: e.state,
        held_ms: Math.max(0, Math.round(e.heldMs)),
        remote_root: e.remoteRoot,
        started_at: startedAt,
      });
    };
  }

  /** Aborts a run in progress; false when none runs under this id. */
  abort(id: string): boolean {
    const controller = this.controllers.get(id);
    if (!controller) return false;
    controller.abort();
    return true;
  }

  /**
   * The snippet libraries' calls, answered in the tenant's scope. Arguments pass the same schemas as the
   * REST routes (services/host-calls.ts) and the same services, so a snippet cannot store what a client could not.
   */
  private async hostCall(
    tenant: TenantRecord,
    invocationId: string,
    op: HostOp,
    args: Record<string, unknown>,
    log: (line: string) => void,
  ): Promise<unknown> {
    switch (op) {
      case 'store.get':
        return (await this.store.get(tenant, parseHostCall(op, args).key))?.value ?? null;
      case 'store.set': {
        const a = parseHostCall(op, args);
        await this.store.set(tenant, a.key, a.value, a.ttl_seconds ?? null);
        return null;
      }
      case 'store.delete':
        return this.store.delete(tenant, parseHostCall(op, args).key);
      case 'store.list': {
        const prefix = parseHostCall(op, args).prefix ?? '';
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
        return this.integrations.call(tenant, invocationId, parseHostCall(op, args), log);
    }
  }
}

/**
 * A refusal from a service (a DomainError: `validation_failed`, `payload_too_large`, `not_found`) reaches the
 * snippet as its code and message only: the status the HTTP edge would give it is not an integration's answer (which carries
 * `status` and `body` on purpose, see IntegrationService.call).
 */
function asHostCallError(err: unknown): never {
  if (err instanceof DomainError) throw Object.assign(new Error(err.message), { code: err.code });
  throw err;
}

/** Longest error message or stack kept from a run (a runner may send up to a frame's 8 MiB). */
export const ERROR_TEXT_MAX_CHARS = 64 * 1024;

const clip = (text: string) =>
  text.length <= ERROR_TEXT_MAX_CHARS
    ? text
    : `${text.slice(0, ERROR_TEXT_MAX_CHARS)}\n…[${text.length - ERROR_TEXT_MAX_CHARS} more characters cut]`;

/**
 * What a run hands back, held to what the API carries: an output nested deeper than a body may be or
 * larger than a body (6 MiB) is the handler's error, not a record the next db.json write (or start)
 * would choke on; a refused stream chunk likewise; error texts are clipped.
 */
export function boundResult(result: ExecutionResult, refusedChunk: string | null = null): ExecutionResult {
  const handlerError = (message: string): ExecutionResult => {
    const { output: _dropped, ...rest } = result;
    return { ...rest, outcome: 'handler_error', error: { code: 'handler_error', message } };
  };
  if (refusedChunk) return handlerError(`the stream was stopped: ${refusedChunk} (the limit of what the API carries)`);
  if (result.outcome === 'success') {
    const problem = jsonValueProblem(result.output ?? null, BODY_LIMIT_BYTES);
    if (problem) return handlerError(`the handler's return value ${problem} (the limit of what the API carries)`);
  }
  if (result.error && (result.error.message.length > ERROR_TEXT_MAX_CHARS || (result.error.stack?.length ?? 0) > ERROR_TEXT_MAX_CHARS)) {
    const { stack, ...error } = result.error;
    return { ...result, error: { ...error, message: clip(error.message), ...(stack === undefined ? {} : { stack: clip(stack) }) } };
  }
  return result;
}

/** The result of a run that never reached a sandbox. */
function notRun(record: InvocationRecord, outcome: Outcome, message: string): ExecutionResult {
  return {
    outcome,
    error: { code: outcome, message },
    usage: { duration_ms: 0, init_ms: 0, cpu_ms: 0, cpu_throttled_ms: 0, peak_memory_mb: 0 },
    timeline: [],
    logs: '',
    logs_truncated: false,
    parity: { status: record.parity.status, reasons: [...record.parity.reasons] },
    warm: false,
  };
}

/**
 * A run's cancellation (`InvokeService.abort`, the caller's signal, a refused chunk), as the executor reads it
 * (executor/types.ts RunSignal): what an AbortController's signal did here, without its cost (~7 µs of CPU to make
 * one, and its listeners' bookkeeping, at every invoke). Each listener is called once, at the first abort; one added
 * after it is not called (the executor checks `aborted` after adding its own).
 */
class RunCancel implements RunSignal {
  aborted = false;
  private listeners: (() => void)[] = [];

  addEventListener(_type: 'abort', listener: () => void): void {
    if (!this.aborted) this.listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const at = this.listeners.indexOf(listener);
    if (at >= 0) this.listeners.splice(at, 1);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listeners = this.listeners;
    this.listeners = [];
    for (const listener of listeners) {
      try {
        listener();
      } catch (err) {
        // As an AbortSignal does: the other listeners still run, and the error is not the aborter's.
        process.nextTick(() => {
          throw err;
        });
      }
    }
  }
}
