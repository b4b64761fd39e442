import { performance } from 'node:perf_hooks';
import { conflict } from '../domain/errors';
import { AsyncQueue } from '../queue/async-queue';
import type { Logger } from '../logger';
import type { InvocationRecord, TenantRecord } from '../storage/schema';
import type { ExecutionResult } from '../../executor';
import type { InvocationService } from './invocations';
import type { InvokeRequest, InvokeService } from './invoke';
import type { TenantService } from './tenants';
import type { CallbackService } from './callbacks';

export interface SubmitRequest extends Omit<InvokeRequest, 'mode' | 'signal' | 'onChunk'> {
  /** The body's `callback_url` as sent (checked here: absent, or an http(s) URL the egress profile allows). */
  callbackUrl: unknown;
}

export interface AsyncOptions {
  /** Async jobs running at once on this host, all tenants together. */
  maxWorkers: number;
  logger: Logger;
}

/**
 * Async mode: an invocation is stored as a `queued` record (durably, before the 202), run by a worker
 * when its tenant has a free slot, finished, and then its callback is delivered. The record is the
 * job: after a crash, `recover` puts `queued` and interrupted `running` jobs back in the queue.
 */
export class AsyncService {
  private readonly queue: AsyncQueue;
  /** Monotonic time each job was queued, for the enqueue-to-start measurement. */
  private readonly queuedAt = new Map<string, number>();
  /** The jobs a cancel can still stop: from the moment a worker takes one until its run has ended. */
  private readonly controllers = new Map<string, AbortController>();
  /** The jobs whose run has ended and whose record is being finished (large outputs and logs go to blobs first). */
  private readonly finishing = new Map<string, Promise<unknown>>();
  private closing = false;
  private recovered: { id: string; tenant_id: string }[] = [];

  constructor(
    private readonly invoke: InvokeService,
    private readonly invocations: InvocationService,
    private readonly tenants: TenantService,
    private readonly callbacks: CallbackService,
    private readonly opts: AsyncOptions,
  ) {
    this.queue = new AsyncQueue({
      slots: invoke.slots,
      capOf: (tenantId) => invoke.capOf(tenantId),
      maxWorkers: opts.maxWorkers,
      run: (id) => this.run(id),
    });
  }

  /**
   * Stores the job (on disk before this resolves) and queues it. An Idempotency-Key repeat returns the
   * first one, whatever its callback_url says; otherwise the callback URL is vetted first (422).
   */
  async submit(req: SubmitRequest): Promise<{ record: InvocationRecord; replayed: boolean }> {
    const resolved = this.invoke.resolve(req.tenant, req.snippet, req.env, req.version);
    const replay = (earlier: InvocationRecord) => {
      this.invoke.checkReplay(resolved.snippet.id, earlier);
      return { record: earlier, replayed: true };
    };
    const earlier = req.idempotencyKey ? this.invocations.findByIdempotencyKey(req.tenant, req.idempotencyKey) : undefined;
    if (earlier) return replay(earlier);
    const parityWarnings = req.callbackUrl === undefined ? [] : await this.callbacks.vet(req.callbackUrl);
    const { record, earlier: raced } = await this.invocations.create(
      {
        ...this.invoke.newInvocation({ ...req, mode: 'async' }, resolved),
        input: req.input,
        callbackUrl: req.callbackUrl as string | undefined,
        parityWarnings,
      },
      { status: 'queued', durable: true },
    );
    if (raced) return replay(raced); // a repeat with the same key got in between
    this.invoke.holdDebugRequest(record.id, req.debug); // a debug run's port and request id, until a worker runs it
    const submitted = { ...record }; // as stored: the live record moves on once a worker takes it
    this.enqueue(record);
    return { record: submitted, replayed: false };
  }

  /**
   * On start, before the core takes requests: sync and stream runs a dead core left `running` failed;
   * async jobs it left `running` are queued again (at-least-once).
   */
  async recover(): Promise<{ queued: number; requeued: number; failed: number }> {
    const { queued, requeued, failed } = await this.invocations.recover();
    this.recovered = queued;
    if (queued.length || failed) this.opts.logger.log('info', 'async jobs recovered', { queued: queued.length, requeued, failed });
    return { queued: queued.length, requeued, failed };
  }

  /** Once the core listens: the recovered jobs run, and callbacks still due go out (perhaps to our own inbox). */
  start(): void {
    for (const job of this.recovered.splice(0)) this.enqueue(job);
    this.callbacks.recover();
  }

  /**
   * Cancels the tenant's invocation: a queued job never runs (`cancelled` at once); a running one is
   * killed (`cancelling`, then outcome `cancelled`: a cancel answered so wins, see `run`). A finished one is
   * refused (conflict), also in the moment between its record being finished and its job letting go of its
   * abort controller, and in the one between its run ending and its record being finished (the refusal then
   * waits for that record, to name its outcome).
   */
  async cancel(tenant: TenantRecord, id: string): Promise<'cancelled' | 'cancelling'> {
    const rec = this.invocations.find(tenant, id);
    if (rec.status !== 'queued' && rec.status !== 'running') throw this.finished(tenant, id);
    if (this.queue.remove(rec.id)) {
      this.queuedAt.delete(rec.id);
      this.invoke.dropDebugRequest(rec.id);
      const cancelled = await this.invocations.cancelQueued(rec.id);
      if (cancelled?.callback) this.callbacks.schedule(cancelled.id);
      return 'cancelled';
    }
    const controller = this.controllers.get(rec.id);
    if (controller) {
      controller.abort();
      return 'cancelling';
    }
    const ending = this.finishing.get(rec.id);
    if (ending) {
      await ending.catch(() => {}); // a failed finish is logged by `run`; the record says what it is
      throw this.finished(tenant, id);
    }
    if (this.invoke.abort(rec.id)) return 'cancelling';
    throw this.finished(tenant, id);
  }

  private finished(tenant: TenantRecord, id: string) {
    const current = this.invocations.find(tenant, id);
    return conflict(`invocation '${id}' has finished (${current.outcome ?? current.status}); there is nothing to cancel`);
  }

  stats() {
    return this.queue.stats();
  }

  /** Resolves when no job runs. */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  /**
   * Stops starting jobs. A job the shutdown interrupts is left `running` on disk, so the next start
   * runs it again instead of recording the shutdown as its outcome.
   */
  close(): void {
    this.closing = true;
    this.queue.close();
  }

  private enqueue(job: { id: string; tenant_id: string }): void {
    this.queuedAt.set(job.id, performance.now());
    this.queue.push(job.tenant_id, job.id);
  }

  /** One job, start to finish. Never rejects: a fault of ours leaves the record for the next start. */
  private async run(id: string): Promise<void> {
    const controller = new AbortController();
    this.controllers.set(id, controller);
    try {
      const queued = this.invocations.byId(id);
      const tenant = this.tenants.byId(queued.tenant_id);
      if (queued.status !== 'queued' || !tenant) return;
      const record = await this.invocations.markRunning(id);
      const input = await this.invocations.inputOf(record);
      const waited = performance.now() - (this.queuedAt.get(id) ?? performance.now());
      const ran = await this.invoke.execute(tenant, record, input, { signal: controller.signal });
      // From here on a cancel is refused: the run has ended. One that came before was answered 202 `cancelling`,
      // and that answer holds even when the run's own end beat the kill (the executor had its verdict).
      this.controllers.delete(id);
      const result = controller.signal.aborted ? cancelledAtTheEnd(ran) : ran;
      // Interrupted by our own shutdown, not cancelled by a user: leave it `running` to run again. The shutdown shows
      // as `failed` or `cancelled`, or as `handler_error` when it killed the runner first (the process exited
      // mid-run): any end but success during a shutdown runs again (at least once: `attempts` says so).
      if (this.closing && result.outcome !== 'success' && !controller.signal.aborted) return;
      const ending = this.invocations.finish(id, result, true, waited);
      this.finishing.set(id, ending);
      const finished = await ending;
      if (finished.callback) this.callbacks.schedule(id);
    } catch (err) {
      this.opts.logger.log('error', 'async job failed inside the emulator; it runs again on the next start', {
        invocation_id: id,
        error: String(err),
      });
    } finally {
      this.controllers.delete(id);
      this.finishing.delete(id);
      this.queuedAt.delete(id); // on every way out: a job that did not run (gone, or failed to start) must not stay here
    }
  }
}

/**
 * A run a user cancelled (answered 202 `cancelling`) whose own end came first: its outcome is `cancelled` all the same,
 * as that answer promised. What it measured stays (usage, logs, timeline); its output or error does not.
 */
function cancelledAtTheEnd(result: ExecutionResult): ExecutionResult {
  if (result.outcome === 'cancelled') return result;
  const { output: _output, error: _error, ...kept } = result;
  return {
    ...kept,
    outcome: 'cancelled',
    error: { code: 'cancelled', message: `the invocation was cancelled as its run ended (${result.outcome}); that result is not kept` },
  };
}
