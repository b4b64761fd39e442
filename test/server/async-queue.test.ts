/** The async scheduler alone: round-robin across tenants, both bounds, removal, idle. */
import { describe, expect, it } from 'vitest';
import { AsyncQueue } from '../../server/queue/async-queue';
import { TenantSlots } from '../../server/services/slots';

/** A queue whose jobs run until `finish(id)` is called; `started` lists them in start order. */
function harness(opts: { maxWorkers: number; caps?: Record<string, number> }) {
  const slots = new TenantSlots();
  const started: string[] = [];
  const pending = new Map<string, () => void>();
  const queue = new AsyncQueue({
    slots,
    capOf: (t) => opts.caps?.[t] ?? 100,
    maxWorkers: opts.maxWorkers,
    run: (id) =>
      new Promise<void>((resolve) => {
        started.push(id);
        pending.set(id, resolve);
      }),
  });
  const finish = async (id: string) => {
    pending.get(id)!();
    pending.delete(id);
    await new Promise((r) => setImmediate(r));
  };
  return { queue, slots, started, finish };
}

describe('AsyncQueue', () => {
  it('serves tenants round-robin, each in FIFO order', async () => {
    const { queue, started, finish } = harness({ maxWorkers: 1 });
    for (let i = 1; i <= 3; i++) queue.push('a', `a${i}`);
    queue.push('b', 'b1');
    queue.push('c', 'c1');
    queue.push('b', 'b2');
    expect(started).toEqual(['a1']);
    for (const id of ['a1', 'b1', 'c1', 'a2', 'b2', 'a3']) {
      expect(started.at(-1)).toBe(id);
      await finish(id);
    }
    expect(started).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
    expect(queue.stats()).toEqual({ queued: 0, running: 0, max_workers: 1, tenants_waiting: 0 });
  });

  it('never runs more than maxWorkers, nor more than a tenant’s cap (skipping it for others)', async () => {
    const { queue, started, finish } = harness({ maxWorkers: 3, caps: { a: 1 } });
    queue.push('a', 'a1');
    queue.push('a', 'a2');
    queue.push('b', 'b1');
    queue.push('b', 'b2');
    queue.push('b', 'b3');
    expect(started).toEqual(['a1', 'b1', 'b2']); // a2 waits for a's slot, b3 for a worker
    await finish('b1');
    expect(started).toEqual(['a1', 'b1', 'b2', 'b3']);
    await finish('a1');
    expect(started.at(-1)).toBe('a2');
  });

  it('a slot released by a sync run lets a waiting job start', async () => {
    const { queue, slots, started } = harness({ maxWorkers: 4, caps: { a: 1 } });
    const sync = slots.tryAcquire('a', 1)!;
    queue.push('a', 'a1');
    expect(started).toEqual([]);
    sync();
    expect(started).toEqual(['a1']);
  });

  it('remove takes a waiting job out; a started one cannot be removed', async () => {
    const { queue, started, finish } = harness({ maxWorkers: 1 });
    queue.push('a', 'a1');
    queue.push('a', 'a2');
    queue.push('b', 'b1');
    expect(queue.remove('a1')).toBe(false);
    expect(queue.remove('b1')).toBe(true);
    expect(queue.remove('b1')).toBe(false);
    await finish('a1');
    expect(started).toEqual(['a1', 'a2']);
    expect(queue.stats().tenants_waiting).toBe(0);
  });

  it('idle resolves when nothing runs; close stops starting jobs', async () => {
    const { queue, started, finish } = harness({ maxWorkers: 1 });
    await queue.idle();
    queue.push('a', 'a1');
    queue.push('a', 'a2');
    let idle = false;
    void queue.idle().then(() => (idle = true));
    queue.close();
    await finish('a1');
    expect(idle).toBe(true);
    expect(started).toEqual(['a1']);
  });
});
