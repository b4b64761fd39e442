import type { TenantSlots } from '../services/slots';

export interface AsyncQueueOptions {
  slots: TenantSlots;
  /** The tenant's `max_concurrency` now (caps can change while jobs wait). */
  capOf: (tenantId: string) => number;
  /** Jobs running at once on this host, all tenants together. */
  maxWorkers: number;
  /** Runs one job to its end; never rejects (the caller records failures). */
  run: (id: string) => Promise<void>;
}

/**
 * The scheduler of async jobs: which queued job runs next. The jobs themselves are invocation records
 * in `db.json` (status `queued`), so the queue is rebuilt from storage on start; this class only orders
 * them. Fair across tenants: one FIFO per tenant, and the next job comes from the tenant served least
 * recently (one never served first), so a tenant with 500 jobs waiting delays another tenant's job by
 * at most one job's run. Bounded twice: `maxWorkers` for the host, and each tenant's `max_concurrency`
 * through the slots it shares with sync and stream runs.
 */
export class AsyncQueue {
  /** Each tenant's waiting jobs, oldest first (a tenant without waiting jobs is not in it). */
  private readonly waiting = new Map<string, string[]>();
  private readonly tenantOf = new Map<string, string>();
  /** When each tenant was last served, as a sequence number. */
  private readonly lastServed = new Map<string, number>();
  private served = 0;
  private active = 0;
  private closed = false;
  private readonly idleWaiters: (() => void)[] = [];

  constructor(private readonly opts: AsyncQueueOptions) {
    opts.slots.onRelease(() => this.pump());
  }

  push(tenantId: string, id: string): void {
    if (this.closed || this.tenantOf.has(id)) return;
    const fifo = this.waiting.get(tenantId);
    if (fifo) fifo.push(id);
    else this.waiting.set(tenantId, [id]);
    this.tenantOf.set(id, tenantId);
    this.pump();
  }

  /** Takes a job out before it starts; false when it is not waiting (it started, or was never queued). */
  remove(id: string): boolean {
    const tenantId = this.tenantOf.get(id);
    if (tenantId === undefined) return false;
    this.tenantOf.delete(id);
    const fifo = this.waiting.get(tenantId)!;
    fifo.splice(fifo.indexOf(id), 1);
    if (!fifo.length) this.waiting.delete(tenantId);
    return true;
  }

  /** Starts waiting jobs while a worker and a tenant slot are free. */
  pump(): void {
    while (!this.closed && this.active < this.opts.maxWorkers && this.waiting.size) {
      const picked = this.pick();
      if (!picked) return; // every tenant with waiting jobs is at its cap
      this.start(picked.job, picked.release);
    }
  }

  stats(): { queued: number; running: number; max_workers: number; tenants_waiting: number } {
    return { queued: this.tenantOf.size, running: this.active, max_workers: this.opts.maxWorkers, tenants_waiting: this.waiting.size };
  }

  /** Resolves when nothing runs (jobs may still wait behind full tenants). */
  idle(): Promise<void> {
    if (this.active === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops starting jobs; running ones finish on their own. */
  close(): void {
    this.closed = true;
  }

  /** The least recently served tenant that has a free slot, and its oldest job. */
  private pick(): { job: string; release: () => void } | null {
    const order = [...this.waiting.keys()].sort((a, b) => (this.lastServed.get(a) ?? -1) - (this.lastServed.get(b) ?? -1));
    for (const tenantId of order) {
      const release = this.opts.slots.tryAcquire(tenantId, this.opts.capOf(tenantId));
      if (!release) continue;
      const fifo = this.waiting.get(tenantId)!;
      const job = fifo.shift()!;
      this.tenantOf.delete(job);
      if (!fifo.length) this.waiting.delete(tenantId);
      this.lastServed.set(tenantId, this.served++);
      return { job, release };
    }
    return null;
  }

  private start(job: string, release: () => void): void {
    this.active++;
    const done = () => {
      this.active--;
      if (this.active === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      release(); // pumps through the slots' listener
    };
    let running: Promise<void>;
    try {
      running = this.opts.run(job);
    } catch {
      running = Promise.resolve();
    }
    running.then(done, done);
  }
}
