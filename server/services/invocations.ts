import { notFound } from '../domain/errors';
import type { z } from 'zod';
import type { CallbackInfo, Invocation } from '../../contract/schemas/invocations';
import { newId, sha256Hex } from '../ids';
import type { CallbackRecord, DbData, InvocationRecord, TenantRecord } from '../storage/schema';
import { type CoreDeps, nowIso } from '../core-deps';
import { paginate, type PageRequest } from './pagination';
import type { ExecutionResult } from '../../executor';
import type { StoredInput } from './stored-input';
import type { EmuEventData } from '../../contract/schemas/events';
import { debugParityWarning, finishedDebug } from './debug-run';

/** Outputs, logs and timelines up to this size live in db.json; larger ones in blob files. */
const INLINE_MAX_BYTES = 8 * 1024;

export type NewInvocation = Pick<
  InvocationRecord,
  | 'tenant_id'
  | 'snippet_id'
  | 'snippet'
  | 'version'
  | 'env'
  | 'mode'
  | 'limits'
  | 'overridden'
  | 'parity'
  | 'idempotency_key'
  | 'egress'
  | 'debug'
> & {
  /** Async jobs: the handler's input, kept until the job has run (a restart runs it from here). */
  input?: Record<string, unknown>;
  /** The input kept for replay (services/stored-input.ts), and the run's X-Emu-Limits overrides. */
  storedInput?: StoredInput;
  overrides?: InvocationRecord['overrides'];
  callbackUrl?: string | null;
  parityWarnings?: string[];
};

/** The wire shapes of an invocation and its callback: contract/schemas/invocations.ts declares them once. */
export type CallbackView = z.output<typeof CallbackInfo>;

/** How long an Idempotency-Key names its invocation. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000;

export type InvocationView = z.output<typeof Invocation>;

/**
 * Invocation records: created when a run starts, finished with its outcome and evidence. History is
 * bounded per tenant (the oldest finished records go first, with their blobs collected on restart).
 */
export class InvocationService {
  /** Replay copies of inputs still being written, by invocation (sync and stream runs: see `create`). */
  private readonly storedPuts = new Map<string, Promise<string>>();
  /** The history's records per tenant as the last trim left them (`tenantCounts`). */
  private lastCount: { all: InvocationRecord[]; length: number; last: InvocationRecord | undefined; counts: Map<string, number> } | null =
    null;

  constructor(
    private readonly deps: CoreDeps,
    private readonly historyLimit = 1000,
  ) {}

  /**
   * Records a new invocation: `running` for sync and stream runs, `queued` for async jobs. With an
   * Idempotency-Key, the check for an earlier invocation and the insert happen in one step, so two
   * racing requests with the same key cannot both run. `durable`: resolve only once it is on disk (what
   * an async 202 promises); otherwise it reaches the journal within 50 ms (sync callers get their answer
   * directly: Repository.mutateRecordsLazy).
   */
  async create(
    input: NewInvocation,
    opts: { status: 'running' | 'queued'; durable: boolean },
  ): Promise<{ record: InvocationRecord; earlier: InvocationRecord | null }> {
    const { input: handlerInput, callbackUrl, parityWarnings, storedInput, overrides, ...fields } = input;
    const inputJson = handlerInput === undefined ? undefined : JSON.stringify(handlerInput);
    // The replay copy is written beside the run: awaited here only for a durable (async) record; a sync or
    // stream run's `finish` waits for it (`storedPuts`), so its code does not wait for a file's fsync.
    const storedText = storedInput && 'text' in storedInput ? storedInput.text : undefined;
    const storedHash = storedText === undefined ? undefined : sha256Hex(storedText);
    const storedPut = storedText === undefined ? undefined : this.deps.blobs.put(storedText, storedHash);
    storedPut?.catch(() => {}); // handled: a repeat with the same Idempotency-Key never names it
    const [inputBlob, storedBlob] = await Promise.all([
      inputJson !== undefined && Buffer.byteLength(inputJson) > INLINE_MAX_BYTES ? this.deps.blobs.put(inputJson) : undefined,
      // The blob's name is its content's hash; a failed write is read back as "not kept" (`stored`).
      storedText === undefined ? undefined : opts.durable ? storedPut!.catch(() => undefined) : storedHash,
    ]);
    const apply = (db: DbData) => {
      if (fields.idempotency_key) {
        const earlier = this.earlierWithKey(db, fields.tenant_id, fields.idempotency_key);
        if (earlier) return { record: earlier, earlier };
      }
      const now = nowIso(this.deps.clock);
      const id = newId('inv');
      const rec: InvocationRecord = {
        id,
        ...fields,
        status: opts.status,
        outcome: null,
        error: null,
        usage: null,
        warm: null,
        logs_blob: null,
        logs_truncated: false,
        timeline_blob: null,
        attempts: opts.status === 'running' ? 1 : 0,
        callback: callbackUrl
          ? { url: callbackUrl, webhook_id: `msg_${id.slice(4)}`, status: 'pending', deliveries: [], next_attempt_at: null }
          : null,
        parity_warnings: parityWarnings ?? [],
        created_at: now,
        started_at: opts.status === 'running' ? now : null,
        finished_at: null,
      };
      if (inputBlob) rec.input_blob = inputBlob;
      else if (inputJson !== undefined) rec.input = JSON.parse(inputJson) as Record<string, unknown>;
      if (storedBlob) rec.stored_input_blob = storedBlob;
      if (storedInput && 'truncated' in storedInput) rec.input_truncated = true;
      if (overrides && Object.keys(overrides).length) rec.overrides = { ...overrides };
      if (storedPut && !opts.durable) {
        this.storedPuts.set(id, storedPut);
        void storedPut.catch(() => {}).finally(() => this.storedPuts.delete(id));
      }
      db.invocations.push(rec);
      this.trimHistory(db, fields.tenant_id);
      return { record: rec, earlier: null };
    };
    const changed = (r: { record: InvocationRecord; earlier: InvocationRecord | null }) => (r.earlier ? [] : [r.record]);
    const result = opts.durable ? await this.deps.repo.mutateRecords(apply, changed) : this.deps.repo.mutateRecordsLazy(apply, changed);
    if (!result.earlier) {
      this.announce('invocation.created', result.record);
      if (result.record.status === 'running') this.announce('invocation.started', result.record);
    }
    return result;
  }

  /** The live feed's summary of a record as it is now (GET /_emu/events: contract/schemas/events.ts). */
  private announce(type: 'invocation.created' | 'invocation.started' | 'invocation.finished', rec: InvocationRecord): void {
    this.deps.events.publish(type, invocationSummary(rec));
  }

  /** Oldest finished records go first; never one that still has to run or to deliver its callback. */
  private trimHistory(db: DbData, tenantId: string): void {
    // This runs at every invocation's start: counted without a copy, and a full history (one over) loses
    // its oldest finished record in place instead of being copied whole.
    const all = db.invocations;
    const counts = this.tenantCounts(all);
    let excess = (counts.get(tenantId) ?? 0) - this.historyLimit;
    if (excess <= 0) return this.counted(all, counts);
    const drop: number[] = [];
    for (let at = 0; at < all.length && excess > 0; at++) {
      const i = all[at]!;
      if (i.tenant_id === tenantId && i.finished_at !== null && i.callback?.status !== 'pending') {
        drop.push(at);
        excess--;
      }
    }
    // The oldest is nearly always first: shift() there (O(1) in V8) where splice(0, 1) moved the whole history (~8 µs).
    for (let k = drop.length - 1; k >= 0; k--) {
      if (drop[k] === 0) all.shift();
      else all.splice(drop[k]!, 1);
    }
    counts.set(tenantId, (counts.get(tenantId) ?? 0) - drop.length);
    this.counted(all, counts);
  }

  /**
   * Records per tenant in `all`, which has just had one record pushed. Kept from the last trim and moved on by that
   * record when nothing else changed the history since (the same array, one longer, and the record last seen at its
   * end still just before the new one: an import pushes past it, a removal shortens it); else counted afresh. A full
   * count reads every record's tenant, ~30 µs of CPU per invoke with a 1,000-record history of mixed record shapes.
   */
  private tenantCounts(all: InvocationRecord[]): Map<string, number> {
    const c = this.lastCount;
    if (c && c.all === all && c.length === all.length - 1 && c.last === all[all.length - 2]) {
      const added = all[all.length - 1]!;
      c.counts.set(added.tenant_id, (c.counts.get(added.tenant_id) ?? 0) + 1);
      return c.counts;
    }
    const counts = new Map<string, number>();
    for (const i of all) counts.set(i.tenant_id, (counts.get(i.tenant_id) ?? 0) + 1);
    return counts;
  }

  private counted(all: InvocationRecord[], counts: Map<string, number>): void {
    this.lastCount = { all, length: all.length, last: all[all.length - 1], counts };
  }

  /** A queued async job starts: counted as an attempt, on disk before its code runs. */
  async markRunning(id: string): Promise<InvocationRecord> {
    const rec = await this.deps.repo.mutateRecords((db) => {
      const rec = db.invocations.find((i) => i.id === id);
      if (!rec) throw notFound('invocation', id);
      rec.status = 'running';
      rec.attempts += 1;
      rec.started_at = nowIso(this.deps.clock);
      return rec;
    }, one);
    this.announce('invocation.started', rec);
    return rec;
  }

  /**
   * Cancels a job that has not started: it never runs. False when it is no longer queued (it started,
   * or it has finished).
   */
  async cancelQueued(id: string): Promise<InvocationRecord | null> {
    const cancelled = await this.deps.repo.mutateRecords(
      (db) => {
        const rec = db.invocations.find((i) => i.id === id);
        if (!rec || rec.status !== 'queued') return null;
        rec.status = 'failed';
        rec.outcome = 'cancelled';
        rec.error = { code: 'cancelled', message: 'cancelled before it started' };
        delete rec.input; // the job's own copy (the replay copy stays)
        delete rec.input_blob;
        rec.finished_at = nowIso(this.deps.clock);
        if (rec.callback) rec.callback.next_attempt_at = rec.finished_at;
        return rec;
      },
      (rec) => (rec ? [rec] : []),
    );
    if (cancelled) this.announce('invocation.finished', cancelled);
    return cancelled;
  }

  /** Notes where production would behave differently for this invocation (each text once; at most 20). */
  addParityWarning(id: string, text: string): void {
    this.deps.repo.mutateLazy((db) => {
      const rec = db.invocations.find((i) => i.id === id);
      if (rec && !rec.parity_warnings.includes(text) && rec.parity_warnings.length < 20) rec.parity_warnings.push(text);
    });
  }

  /** The input an async job runs with. */
  async inputOf(rec: InvocationRecord): Promise<Record<string, unknown>> {
    if (rec.input_blob) return JSON.parse(await this.deps.blobs.getText(rec.input_blob)) as Record<string, unknown>;
    return rec.input ?? {};
  }

  async finish(id: string, result: ExecutionResult, durable = false, queueWaitMs?: number): Promise<InvocationRecord> {
    const { blobs } = this.deps;
    await this.storedPuts.get(id)?.catch(() => {});
    const big = (text: string | undefined) => text !== undefined && Buffer.byteLength(text) > INLINE_MAX_BYTES;
    const outputJson = result.output === undefined ? undefined : JSON.stringify(result.output);
    const timelineJson = JSON.stringify(result.timeline);
    const outputBlob = big(outputJson) ? await blobs.put(outputJson!) : undefined;
    const logsBlob = big(result.logs) ? await blobs.put(result.logs) : null;
    const timelineBlob = big(timelineJson) ? await blobs.put(timelineJson) : null;
    const apply = (db: DbData) => {
      const rec = db.invocations.findLast((i) => i.id === id); // a run just created is near the end of history
      if (!rec) throw notFound('invocation', id);
      rec.status = result.outcome === 'success' ? 'succeeded' : 'failed';
      rec.outcome = result.outcome;
      if (outputBlob) rec.output_blob = outputBlob;
      else if (outputJson !== undefined) rec.output = JSON.parse(outputJson) as unknown;
      rec.error = result.error ? { ...result.error } : null;
      rec.usage = { ...result.usage };
      rec.parity = { status: result.parity.status, reasons: [...result.parity.reasons] };
      rec.warm = result.warm;
      rec.logs_blob = logsBlob;
      if (!logsBlob && result.logs) rec.logs = result.logs;
      rec.logs_truncated = result.logs_truncated;
      rec.timeline_blob = timelineBlob;
      if (!timelineBlob && result.timeline.length) rec.timeline = result.timeline.map((p) => ({ ...p }));
      rec.finished_at = nowIso(this.deps.clock);
      if (rec.debug) {
        // A debug run (X-Emu-Debug): how long a debugger held it, and the parity warning naming what that relaxed.
        rec.debug = finishedDebug(rec.debug, result.debug);
        const warning = debugParityWarning(rec.debug, rec.limits);
        if (!rec.parity_warnings.includes(warning)) rec.parity_warnings.push(warning);
      }
      // An async job's own copy of its input (secrets included) is not needed once it has run: the replay copy stays.
      delete rec.input;
      delete rec.input_blob;
      if (queueWaitMs !== undefined) rec.queue_wait_ms = Math.round(queueWaitMs * 1000) / 1000;
      if (rec.callback) rec.callback.next_attempt_at = rec.finished_at; // the first delivery goes at once
      return rec;
    };
    const finished = durable ? await this.deps.repo.mutateRecords(apply, one) : this.deps.repo.mutateRecordsLazy(apply, one);
    this.announce('invocation.finished', finished);
    return finished;
  }

  find(tenant: TenantRecord, id: string): InvocationRecord {
    const rec = this.deps.repo.read((db) => db.invocations.find((i) => i.id === id && i.tenant_id === tenant.id));
    if (!rec) throw notFound('invocation', id);
    return rec;
  }

  /** The tenant's invocation made with this Idempotency-Key in the last 24 h, if any. */
  findByIdempotencyKey(tenant: TenantRecord, key: string): InvocationRecord | undefined {
    return this.deps.repo.read((db) => this.earlierWithKey(db, tenant.id, key) ?? undefined);
  }

  private earlierWithKey(db: Readonly<DbData>, tenantId: string, key: string): InvocationRecord | null {
    const since = this.deps.clock().getTime() - IDEMPOTENCY_WINDOW_MS;
    return (
      db.invocations.findLast((i) => i.tenant_id === tenantId && i.idempotency_key === key && Date.parse(i.created_at) >= since) ?? null
    );
  }

  /** Any tenant's invocation (the operator's view). */
  byId(id: string): InvocationRecord {
    const rec = this.deps.repo.read((db) => db.invocations.find((i) => i.id === id));
    if (!rec) throw notFound('invocation', id);
    return rec;
  }

  async view(rec: InvocationRecord): Promise<InvocationView> {
    const output: unknown = rec.output_blob ? JSON.parse(await this.deps.blobs.getText(rec.output_blob)) : (rec.output ?? null);
    return {
      id: rec.id,
      snippet: rec.snippet,
      version: rec.version,
      env: rec.env,
      mode: rec.mode,
      status: rec.status,
      outcome: rec.outcome,
      output,
      error: rec.error
        ? { code: rec.error.code, message: rec.error.message, ...(rec.error.stack ? { stack: rec.error.stack } : {}) }
        : null,
      usage: rec.usage,
      limits: rec.limits,
      parity: rec.parity,
      created_at: rec.created_at,
      started_at: rec.started_at,
      finished_at: rec.finished_at,
      attempts: rec.attempts,
      callback: rec.callback ? callbackView(rec.callback) : null,
      parity_warnings: [...rec.parity_warnings],
    };
  }

  async list(tenant: TenantRecord, filter: { snippet?: string; status?: string }, page: PageRequest) {
    const sorted = this.deps.repo.read((db) =>
      db.invocations
        .filter(
          (i) =>
            i.tenant_id === tenant.id &&
            (filter.snippet === undefined || i.snippet === filter.snippet || i.snippet_id === filter.snippet) &&
            (filter.status === undefined || i.status === filter.status),
        )
        .reverse(),
    );
    // Newest first: records are appended in creation order, so the cursor is the position-stable id.
    const order = new Map(sorted.map((r, i) => [r.id, i]));
    const result = paginate(
      sorted,
      (r) => r.id,
      page,
      (r) => r,
      (a, b) => (order.get(a) ?? -1) - (order.get(b) ?? -1),
      (k) => order.has(k),
    );
    return { data: await Promise.all(result.data.map((r) => this.view(r))), next_cursor: result.next_cursor };
  }

  async logs(rec: InvocationRecord): Promise<{ invocation_id: string; logs: string; truncated: boolean }> {
    return {
      invocation_id: rec.id,
      logs: rec.logs_blob ? await this.deps.blobs.getText(rec.logs_blob) : (rec.logs ?? ''),
      truncated: rec.logs_truncated,
    };
  }

  /** What the record kept for replay: the input (null when not kept), whether it was too large, the overrides. */
  async stored(rec: InvocationRecord): Promise<{
    input: Record<string, unknown> | null;
    input_truncated: boolean;
    overrides: InvocationRecord['overrides'] | null;
  }> {
    let input: Record<string, unknown> | null = null;
    if (rec.stored_input_blob) {
      await this.storedPuts.get(rec.id)?.catch(() => {});
      input = await this.deps.blobs.getText(rec.stored_input_blob).then(
        (t) => JSON.parse(t) as Record<string, unknown>,
        () => null, // never written (a crash, a full disk): shown as not kept
      );
    }
    return { input, input_truncated: rec.input_truncated ?? false, overrides: rec.overrides ? { ...rec.overrides } : null };
  }

  async timeline(rec: InvocationRecord): Promise<unknown[]> {
    return rec.timeline_blob ? (JSON.parse(await this.deps.blobs.getText(rec.timeline_blob)) as unknown[]) : (rec.timeline ?? []);
  }

  liveBlobs(db: { invocations: readonly InvocationRecord[] }): string[] {
    return db.invocations.flatMap((i) =>
      [i.output_blob, i.logs_blob, i.timeline_blob, i.input_blob, i.events_blob, i.stored_input_blob, i.agent_blob, i.egress_blob].filter(
        (b): b is string => !!b,
      ),
    );
  }

  /**
   * After a core died: a sync or stream run left `running` has lost its caller, so it failed; an async
   * job left `running` goes back to `queued` and runs again (at-least-once; its attempt was counted).
   * Returns the async jobs to queue, oldest first.
   */
  async recover(): Promise<{ requeued: number; failed: number; queued: { id: string; tenant_id: string }[] }> {
    const stale = this.deps.repo.read((db) => db.invocations.some((i) => i.status === 'running'));
    const counts = stale
      ? await this.deps.repo.mutate((db) => {
          const now = nowIso(this.deps.clock);
          let requeued = 0;
          let failed = 0;
          for (const rec of db.invocations) {
            if (rec.status !== 'running') continue;
            if (rec.mode === 'async') {
              rec.status = 'queued';
              requeued++;
              continue;
            }
            rec.status = 'failed';
            rec.outcome = 'failed';
            rec.error = { code: 'failed', message: 'the emulator stopped while this invocation ran' };
            rec.finished_at = now;
            failed++;
          }
          return { requeued, failed };
        })
      : { requeued: 0, failed: 0 };
    const queued = this.deps.repo.read((db) =>
      db.invocations.filter((i) => i.status === 'queued').map((i) => ({ id: i.id, tenant_id: i.tenant_id })),
    );
    return { ...counts, queued };
  }
}

const one = (rec: InvocationRecord) => [rec];

function callbackView(cb: CallbackRecord): CallbackView {
  const last = cb.deliveries.at(-1);
  return {
    url: cb.url,
    status: cb.status,
    attempts: cb.deliveries.length,
    webhook_id: cb.webhook_id,
    next_attempt_at: cb.next_attempt_at,
    last_attempt: last ? { at: last.at, status_code: last.status_code, error: last.error } : null,
  };
}

/** The longest error message an invocation event carries (GET /_emu/invocations/{id} has the whole one). */
export const SUMMARY_MESSAGE_MAX = 1_000;
const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** What the live feed says about an invocation: who, what, where it stands (never its input or output). */
export function invocationSummary(rec: InvocationRecord): EmuEventData<'invocation.created'> {
  return {
    id: rec.id,
    tenant_id: rec.tenant_id,
    snippet: rec.snippet,
    version: rec.version,
    env: rec.env,
    mode: rec.mode,
    status: rec.status,
    outcome: rec.outcome,
    // Events stay small: a long message (a handler may throw anything) is cut; the record has it whole.
    error: rec.error ? { code: rec.error.code, message: cut(rec.error.message, SUMMARY_MESSAGE_MAX) } : null,
    duration_ms: rec.usage?.duration_ms ?? null,
  };
}
