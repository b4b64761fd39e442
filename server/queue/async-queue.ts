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
 * them. Fair across tenants: one FIFO per tenant, served round-robin, so a tenant with 500 jobs waiting
 * delays another tenant's job by at most one job's run. Bounded twice: `maxWorkers` for the host, and
 * each tenant's `max_concurrency` through the slots it shares with sync and stream runs.
 */
export class AsyncQueue {
  private readonly fifos = new Map<string, string[]>();
  private readonly tenantOf = new Map<string, string>();
  /** Tenants with jobs waiting, in round-robin order; `next` is where the next search starts. */
  private ring: string[] = [];
  private next = 0;
  private active = 0;
  private closed = false;
  private readonly idleWaiters: (() => void)[] = [];

  constructor(private readonly opts: AsyncQueueOptions) {
    opts.slots.onRelease(() => this.pump());
  }

  push(tenantId: string, id: string): void {
    if (this.closed || this.tenantOf.has(id)) return;
    let fifo = this.fifos.get(tenantId);
    if (!fifo) {
      fifo = [];
      this.fifos.set(tenantId, fifo);
      this.ring.push(tenantId);
    }
    fifo.push(id);
    this.tenantOf.set(id, tenantId);
    this.pump();
  }

  /** Takes a job out before it starts; false when it is not waiting (it started, or was never queued). */
  remove(id: string): boolean {
    const tenantId = this.tenantOf.get(id);
    if (tenantId === undefined) return false;
    this.tenantOf.delete(id);
    const fifo = this.fifos.get(tenantId)!;
    fifo.splice(fifo.indexOf(id), 1);
    if (!fifo.length) this.dropTenant(tenantId);
    return true;
  }

  /** Starts waiting jobs while a worker and a tenant slot are free. */
  pump(): void {
    while (!this.closed && this.active < this.opts.maxWorkers && this.ring.length) {
      const picked = this.pick();
      if (!picked) return; // every tenant with waiting jobs is at its cap
      this.start(picked.job, picked.release);
    }
  }

  stats(): { queued: number; running: number; max_workers: number; tenants_waiting: number } {
    return { queued: this.tenantOf.size, running: this.active, max_workers: this.opts.maxWorkers, tenants_waiting: this.ring.length };
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

  /** The next tenant in round-robin order that has a free slot, and its oldest job. */
  private pick(): { job: string; release: () => void } | null {
    for (let tried = 0; tried < this.ring.length; tried++) {
      const index = (this.next + tried) % this.ring.length;
      const tenantId = this.ring[index]!;
      const release = this.opts.slots.tryAcquire(tenantId, this.opts.capOf(tenantId));
      if (!release) continue;
      const fifo = this.fifos.get(tenantId)!;
      const job = fifo.shift()!;
      this.tenantOf.delete(job);
      if (fifo.length) this.next = (index + 1) % this.ring.length;
      else {
        this.dropTenant(tenantId);
        this.next = this.ring.length ? index % this.ring.length : 0;
      }
      return { job, release };
    }
    return null;
  }

  private dropTenant(tenantId: string): void {
    this.fifos.delete(tenantId);
    const at = this.ring.indexOf(tenantId);
    this.ring.splice(at, 1);
    if (at < this.next) this.next--;
    if (this.next >= this.ring.length) this.next = 0;
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
