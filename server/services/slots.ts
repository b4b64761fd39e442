/**
 * How many invocations each tenant runs at once, whatever the mode: the one counter that
 * `max_concurrency` bounds. Sync and stream callers are refused (429) when their tenant is full; the
 * async queue instead leaves the job queued and tries again when a slot is released.
 */
export class TenantSlots {
  private readonly running = new Map<string, number>();
  private readonly listeners = new Set<() => void>();

  /** A release function when the tenant runs fewer than `cap` invocations; null when it is full. */
  tryAcquire(tenantId: string, cap: number): (() => void) | null {
    const now = this.running.get(tenantId) ?? 0;
    if (now >= cap) return null;
    this.running.set(tenantId, now + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.running.get(tenantId) ?? 1) - 1;
      if (left > 0) this.running.set(tenantId, left);
      else this.running.delete(tenantId);
      for (const listener of this.listeners) listener();
    };
  }

  inUse(tenantId: string): number {
    return this.running.get(tenantId) ?? 0;
  }

  /** Called after every release (the async queue pumps on it). */
  onRelease(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
