import { notFound } from '../errors';
import { newId } from '../ids';
import type { DbData, InvocationRecord, TenantRecord } from '../storage/schema';
import { type CoreDeps, nowIso } from '../core-deps';
import { paginate, type PageRequest } from './pagination';
import type { ExecutionResult } from '../../executor';

/** Outputs, logs and timelines up to this size live in db.json; larger ones in blob files. */
const INLINE_MAX_BYTES = 8 * 1024;

export type NewInvocation = Pick<
  InvocationRecord,
  'tenant_id' | 'snippet_id' | 'snippet' | 'version' | 'env' | 'mode' | 'limits' | 'overridden' | 'parity' | 'idempotency_key'
>;

export interface InvocationView {
  id: string;
  snippet: string;
  version: number;
  env: string | null;
  mode: InvocationRecord['mode'];
  status: InvocationRecord['status'];
  outcome: InvocationRecord['outcome'];
  output: unknown;
  error: { code: string; message: string; stack?: string } | null;
  usage: InvocationRecord['usage'];
  limits: InvocationRecord['limits'];
  parity: InvocationRecord['parity'];
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  callback: null;
}

/**
 * Invocation records: created when a run starts, finished with its outcome and evidence. History is
 * bounded per tenant (the oldest finished records go first, with their blobs collected on restart).
 */
export class InvocationService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly historyLimit = 1000,
  ) {}

  /**
   * Records a starting invocation. `durable`: wait until it is on disk (async mode promises that);
   * otherwise it is written with the next write (sync and stream callers get their answer directly).
   */
  async start(input: NewInvocation, durable = false): Promise<InvocationRecord> {
    const apply = (db: DbData) => {
      const now = nowIso(this.deps.clock);
      const rec: InvocationRecord = {
        id: newId('inv'),
        ...input,
        status: 'running',
        outcome: null,
        error: null,
        usage: null,
        warm: null,
        logs_blob: null,
        logs_truncated: false,
        timeline_blob: null,
        created_at: now,
        started_at: now,
        finished_at: null,
      };
      db.invocations.push(rec);
      const mine = db.invocations.filter((i) => i.tenant_id === input.tenant_id);
      if (mine.length > this.historyLimit) {
        const drop = new Set(mine.filter((i) => i.status !== 'running' && i.status !== 'queued').slice(0, mine.length - this.historyLimit));
        db.invocations = db.invocations.filter((i) => !drop.has(i));
      }
      return rec;
    };
    return durable ? this.deps.repo.mutate(apply) : this.deps.repo.mutateLazy(apply);
  }

  async finish(id: string, result: ExecutionResult, durable = false): Promise<InvocationRecord> {
    const { blobs } = this.deps;
    const big = (text: string | undefined) => text !== undefined && Buffer.byteLength(text) > INLINE_MAX_BYTES;
    const outputJson = result.output === undefined ? undefined : JSON.stringify(result.output);
    const timelineJson = JSON.stringify(result.timeline);
    const outputBlob = big(outputJson) ? await blobs.put(outputJson!) : undefined;
    const logsBlob = big(result.logs) ? await blobs.put(result.logs) : null;
    const timelineBlob = big(timelineJson) ? await blobs.put(timelineJson) : null;
    const apply = (db: DbData) => {
      const rec = db.invocations.find((i) => i.id === id);
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
      return rec;
    };
    return durable ? this.deps.repo.mutate(apply) : this.deps.repo.mutateLazy(apply);
  }

  find(tenant: TenantRecord, id: string): InvocationRecord {
    const rec = this.deps.repo.read((db) => db.invocations.find((i) => i.id === id && i.tenant_id === tenant.id));
    if (!rec) throw notFound('invocation', id);
    return rec;
  }

  /** The tenant's invocation made with this Idempotency-Key in the last 24 h, if any. */
  findByIdempotencyKey(tenant: TenantRecord, key: string): InvocationRecord | undefined {
    const since = this.deps.clock().getTime() - 24 * 3600 * 1000;
    return this.deps.repo.read((db) =>
      db.invocations.findLast((i) => i.tenant_id === tenant.id && i.idempotency_key === key && Date.parse(i.created_at) >= since),
    );
  }

  /** Any tenant's invocation (the operator's view). */
  byId(id: string): InvocationRecord {
    const rec = this.deps.repo.read((db) => db.invocations.find((i) => i.id === id));
    if (!rec) throw notFound('invocation', id);
    return rec;
  }

  async view(rec: InvocationRecord): Promise<InvocationView> {
    const output = rec.output_blob ? JSON.parse(await this.deps.blobs.getText(rec.output_blob)) : (rec.output ?? null);
    return {
      id: rec.id,
      snippet: rec.snippet,
      version: rec.version,
      env: rec.env,
      mode: rec.mode,
      status: rec.status,
      outcome: rec.outcome,
      output,
      error: rec.error ? { code: rec.error.code, message: rec.error.message, ...(rec.error.stack ? { stack: rec.error.stack } : {}) } : null,
      usage: rec.usage,
      limits: rec.limits,
      parity: rec.parity,
      created_at: rec.created_at,
      started_at: rec.started_at,
      finished_at: rec.finished_at,
      callback: null,
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
    const result = paginate(sorted, (r) => r.id, page, (r) => r, (a, b) => (order.get(a) ?? -1) - (order.get(b) ?? -1), (k) => order.has(k));
    return { data: await Promise.all(result.data.map((r) => this.view(r))), next_cursor: result.next_cursor };
  }

  async logs(rec: InvocationRecord): Promise<{ invocation_id: string; logs: string; truncated: boolean }> {
    return {
      invocation_id: rec.id,
      logs: rec.logs_blob ? await this.deps.blobs.getText(rec.logs_blob) : (rec.logs ?? ''),
      truncated: rec.logs_truncated,
    };
  }

  async timeline(rec: InvocationRecord): Promise<unknown[]> {
    return rec.timeline_blob ? (JSON.parse(await this.deps.blobs.getText(rec.timeline_blob)) as unknown[]) : (rec.timeline ?? []);
  }

  liveBlobs(db: { invocations: readonly InvocationRecord[] }): string[] {
    return db.invocations.flatMap((i) => [i.output_blob, i.logs_blob, i.timeline_blob].filter((b): b is string => !!b));
  }

  /** Records left `running` by a core that died: they will never finish, so they failed. */
  async failOrphans(): Promise<number> {
    const orphans = this.deps.repo.read((db) => db.invocations.filter((i) => i.status === 'running').length);
    if (!orphans) return 0;
    return this.deps.repo.mutate((db) => {
      const now = nowIso(this.deps.clock);
      let n = 0;
      for (const rec of db.invocations) {
        if (rec.status !== 'running') continue;
        rec.status = 'failed';
        rec.outcome = 'failed';
        rec.error = { code: 'failed', message: 'the emulator stopped while this invocation ran' };
        rec.finished_at = now;
        n++;
      }
      return n;
    });
  }
}
