import { describe, expect, it } from 'vitest';
import { EventBus, EVENTS_KEPT, typeFilter } from '../../server/events/bus';
import type { EmuEvent } from '../../contract/schemas/events';
import { invocationSummary, SUMMARY_MESSAGE_MAX } from '../../server/services/invocations';
import type { InvocationRecord } from '../../server/storage/schema';

/** The core's event bus (server/events/bus.ts) on its own: ids, the ring of kept events, resume, listeners. */

const at = new Date('2026-11-27T10:00:00.000Z');
const env = (bus: EventBus, name: string) => bus.publish('environment.created', { tenant_id: 'ten_1', env: name });

describe('EventBus', () => {
  it('numbers events <boot>-<seq> from 1, stamps them with the clock, and hands them to every listener in order', () => {
    const bus = new EventBus(() => at, undefined, 'beef');
    const a: EmuEvent[] = [];
    const b: string[] = [];
    bus.subscribe((e) => a.push(e));
    bus.subscribe((e) => b.push(e.id));
    expect(bus.latest()).toBeNull();
    const first = env(bus, 'one');
    env(bus, 'two');
    expect(first).toEqual({ id: 'beef-1', type: 'environment.created', at: at.toISOString(), data: { tenant_id: 'ten_1', env: 'one' } });
    expect(a.map((e) => e.id)).toEqual(['beef-1', 'beef-2']);
    expect(b).toEqual(['beef-1', 'beef-2']);
    expect(bus.latest()).toBe('beef-2');
    expect(new EventBus(() => at).boot).toMatch(/^[0-9a-f]{8}$/);
  });

  it('replays what came after a Last-Event-ID of this boot, and nothing when the reader is up to date', () => {
    const bus = new EventBus(() => at, undefined, 'beef');
    for (const n of ['a', 'b', 'c', 'd']) env(bus, n);
    const sub = bus.subscribe(() => {}, 'beef-2');
    expect(sub.reset).toBeNull();
    expect(sub.replay.map((e) => e.id)).toEqual(['beef-3', 'beef-4']);
    expect(bus.subscribe(() => {}, 'beef-4').replay).toEqual([]);
    // The start of this boot (what a reset hands out before the first event) replays everything kept.
    expect(bus.subscribe(() => {}, 'beef-0').replay).toHaveLength(4);
    expect(new EventBus(() => at, undefined, 'beef').subscribe(() => {}, 'beef-0').reset).toBeNull();
  });

  it(`keeps the last ${EVENTS_KEPT} events: an id older than those gets a too_old reset`, () => {
    const bus = new EventBus(() => at, undefined, 'beef');
    for (let i = 0; i < EVENTS_KEPT + 10; i++) env(bus, `e${i}`);
    // The oldest kept is seq 11: resuming after 10 still misses nothing.
    const edge = bus.subscribe(() => {}, 'beef-10');
    expect(edge.reset).toBeNull();
    expect(edge.replay).toHaveLength(EVENTS_KEPT);
    expect(edge.replay[0]!.id).toBe('beef-11');
    const old = bus.subscribe(() => {}, 'beef-9');
    expect(old.reset).toEqual({ reason: 'too_old', latest: `beef-${EVENTS_KEPT + 10}` });
    expect(old.replay).toEqual([]);
  });

  it(`keeps exactly the last ${EVENTS_KEPT} after every publish, however many came before (the front is dropped in batches)`, () => {
    const bus = new EventBus(() => at, undefined, 'beef');
    const live: string[] = [];
    let seq = 0;
    // Past the first batch drop and the next one, checked at every step near them and at a sample of the rest.
    for (let round = 0; round < 3 * EVENTS_KEPT; round++) {
      env(bus, `e${++seq}`);
      if (seq > EVENTS_KEPT + 3 && seq % 97 !== 0 && seq % 256 > 2 && seq % 256 < 254) continue;
      const oldest = Math.max(1, seq - EVENTS_KEPT + 1);
      const all = bus.subscribe(() => {}, 'beef-0');
      if (oldest > 1) {
        expect(all.reset?.reason).toBe('too_old');
        const edge = bus.subscribe(() => {}, `beef-${oldest - 1}`);
        expect(edge.reset).toBeNull();
        expect(edge.replay.map((e) => e.id)).toEqual(Array.from({ length: seq - oldest + 1 }, (_, i) => `beef-${oldest + i}`));
        expect(bus.subscribe(() => {}, `beef-${oldest - 2}`).reset?.reason).toBe('too_old');
      } else expect(all.replay).toHaveLength(seq);
      expect(bus.latest()).toBe(`beef-${seq}`);
      expect(bus.subscribe(() => {}, `beef-${seq}`).replay).toEqual([]);
    }
    // A listener added mid-way gets every event from then on.
    bus.subscribe((e) => live.push(e.id));
    env(bus, 'late');
    expect(live).toEqual([`beef-${seq + 1}`]);
  });

  it('answers another boot’s id with other_boot and a malformed one with bad_id (and still listens)', () => {
    const bus = new EventBus(() => at, undefined, 'beef');
    env(bus, 'x');
    const got: string[] = [];
    const other = bus.subscribe((e) => got.push(e.id), 'cafe-1');
    expect(other.reset).toEqual({ reason: 'other_boot', latest: 'beef-1' });
    expect(bus.subscribe(() => {}, 'nonsense').reset).toEqual({ reason: 'bad_id', latest: 'beef-1' });
    env(bus, 'y');
    expect(got).toEqual(['beef-2']);
  });

  it('drops a listener that throws, reports it, and keeps delivering to the others', () => {
    const errors: unknown[] = [];
    const bus = new EventBus(
      () => at,
      (err) => errors.push(err),
      'beef',
    );
    const good: string[] = [];
    bus.subscribe(() => {
      throw new Error('listener bug');
    });
    bus.subscribe((e) => good.push(e.id));
    expect(bus.listenerCount).toBe(2);
    expect(() => env(bus, 'one')).not.toThrow();
    env(bus, 'two');
    expect(good).toEqual(['beef-1', 'beef-2']);
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toContain('listener bug');
    expect(bus.listenerCount).toBe(1);
  });

  it('close() lets go of the listener; listenerCount returns to zero', () => {
    const bus = new EventBus(() => at);
    const subs = [1, 2, 3].map(() => bus.subscribe(() => {}));
    expect(bus.listenerCount).toBe(3);
    for (const s of subs) s.close();
    subs[0]!.close(); // twice is harmless
    expect(bus.listenerCount).toBe(0);
  });

  it('typeFilter takes exact types and prefixes ending in *', () => {
    const keep = typeFilter('invocation.*,workspace.folder');
    expect(['invocation.created', 'invocation.finished', 'workspace.folder'].every(keep)).toBe(true);
    expect(['workspace.folders', 'store.changed', 'invocation'].some(keep)).toBe(false);
    expect(typeFilter(undefined)('anything')).toBe(true);
    expect(typeFilter('')('anything')).toBe(true);
  });
});

describe('invocationSummary (what invocation events carry)', () => {
  const rec = {
    id: 'inv_1',
    tenant_id: 'ten_1',
    snippet_id: 'snp_1',
    snippet: 'hello',
    version: 2,
    env: 'dev',
    mode: 'sync',
    status: 'failed',
    outcome: 'handler_error',
    error: { code: 'handler_error', message: 'x'.repeat(5_000), stack: 'at secret place' },
    usage: { duration_ms: 12.5, init_ms: 1, cpu_ms: 3, cpu_throttled_ms: 0, peak_memory_mb: 20 },
    input: { secret: 'input-value' },
    output: { secret: 'output-value' },
  } as unknown as InvocationRecord;

  it('names the run and its outcome, never its input, output or stack, and cuts a long message', () => {
    const s = invocationSummary(rec);
    expect(Object.keys(s).sort()).toEqual([
      'duration_ms',
      'env',
      'error',
      'id',
      'mode',
      'outcome',
      'snippet',
      'status',
      'tenant_id',
      'version',
    ]);
    expect(s).toMatchObject({ id: 'inv_1', snippet: 'hello', version: 2, status: 'failed', outcome: 'handler_error', duration_ms: 12.5 });
    expect(s.error!.message).toHaveLength(SUMMARY_MESSAGE_MAX);
    expect(s.error!.message.endsWith('…')).toBe(true);
    expect(JSON.stringify(s)).not.toMatch(/input-value|output-value|secret place/);
    expect(invocationSummary({ ...rec, error: null, usage: null })).toMatchObject({
      error: null,
      duration_ms: null,
    });
  });
});
