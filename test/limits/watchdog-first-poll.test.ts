/**
 * MemoryWatchdog's `firstAfterMs` (executor/limits/watchdog.ts): the executor hands it the sample it took
 * just before the run as the baseline, so the watchdog's first poll comes one period later instead of
 * reading the group again at once. Time is vitest's fake clock: the polls happen when it is advanced, never
 * because a real interval passed.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryWatchdog, type OomEvidence } from '../../executor/limits/watchdog';
import type { UsageSample } from '../../executor/limits/types';

const MB = 1024 * 1024;
const sample = (memoryMb: number, oomKills = 0): UsageSample => ({
  at_ms: 0,
  memory_bytes: memoryMb * MB,
  memory_peak_bytes: null,
  cpu_usage_ns: 0,
  cpu_throttled_ns: 0,
  oom_kills: oomKills,
  limit_hits: 0,
});

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('MemoryWatchdog first poll', () => {
  it('polls at once by default', () => {
    const read = vi.fn(async () => sample(1));
    const w = new MemoryWatchdog({ sample: read, limitBytes: 64 * MB, onOom: () => {} });
    w.start();
    expect(read).toHaveBeenCalledTimes(1);
    w.stop();
  });

  it('with firstAfterMs, polls first after that delay; the given baseline is what that poll is judged against', async () => {
    const read = vi.fn(async () => sample(1, 1)); // the kernel killed something since the baseline
    const trips: OomEvidence[] = [];
    const w = new MemoryWatchdog({
      sample: read,
      limitBytes: 64 * MB,
      onOom: (e) => trips.push(e),
      baseline: sample(1, 0),
      intervalMs: 50,
      firstAfterMs: 50,
    });
    w.start();
    expect(read).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(49);
    expect(read).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(read).toHaveBeenCalledTimes(1);
    expect(trips.map((t) => t.reason)).toEqual(['kernel_oom_kill']);
    w.stop();
  });

  it('stopped before its first poll, it never reads', async () => {
    const read = vi.fn(async () => sample(1));
    const w = new MemoryWatchdog({ sample: read, limitBytes: 64 * MB, onOom: () => {}, baseline: sample(1), firstAfterMs: 50 });
    w.start();
    w.stop();
    await vi.advanceTimersByTimeAsync(500);
    expect(read).not.toHaveBeenCalled();
  });

  it('keeps polling every interval after the first', async () => {
    const read = vi.fn(async () => sample(1));
    const w = new MemoryWatchdog({
      sample: read,
      limitBytes: 64 * MB,
      onOom: () => {},
      baseline: sample(1),
      intervalMs: 50,
      firstAfterMs: 20,
    });
    w.start();
    await vi.advanceTimersByTimeAsync(20);
    expect(read).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(read).toHaveBeenCalledTimes(3);
    w.stop();
  });
});
