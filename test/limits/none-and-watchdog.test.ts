import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { NoLimitBackend } from '../../executor/limits/none';
import { MemoryWatchdog } from '../../executor/limits/watchdog';
import type { OomEvidence } from '../../executor/limits/watchdog';
import type { UsageSample } from '../../executor/limits/types';

/** Running (a zombie waiting for a reaper does not count: PID 1 on these hosts reaps slowly). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}

describe.skipIf(process.platform !== 'linux')('none backend', () => {
  it('says parity is degraded, wraps nothing, and killAll kills the tracked process group (children too)', async () => {
    const b = new NoLimitBackend();
    expect(b.degraded).toBe('no cgroup backend on this host: only the timeout is enforced');
    const g = await b.create('n1', { memoryMb: 64, pidsMax: 8 });
    const argv = g.wrap(['/bin/sh', '-c', 'sleep 30 & sleep 30 & echo $! ; wait']);
    expect(argv).toEqual(['/bin/sh', '-c', 'sleep 30 & sleep 30 & echo $! ; wait']);
    const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
    const grandchild = await new Promise<number>((resolve) => child.stdout!.once('data', (d) => resolve(Number(String(d).trim()))));
    g.track?.(child.pid!);
    await g.setCpuPercent(10); // accepted, not enforced
    const s = await g.sample();
    expect(s.memory_bytes).toBeGreaterThan(0); // /proc/<pid>/statm of the tracked shell
    expect(alive(grandchild)).toBe(true);
    const exited = new Promise((r) => child.once('exit', r));
    await g.killAll();
    await exited;
    await new Promise((r) => setTimeout(r, 50));
    expect(alive(grandchild)).toBe(false);
    await g.destroy();
  });
});

const MiB = 1024 * 1024;
function s(at: number, memory: number, hits: number, oom = 0, anon?: number): UsageSample {
  return { at_ms: at, memory_bytes: memory, memory_peak_bytes: memory, cpu_usage_ns: 0, cpu_throttled_ns: 0, oom_kills: oom, limit_hits: hits, ...(anon !== undefined ? { memory_anon_bytes: anon } : {}) };
}

describe('MemoryWatchdog rules', () => {
  const limit = 64 * MiB;
  const wd = () => new MemoryWatchdog({ sample: async () => s(0, 0, 0), limitBytes: limit, onOom: () => {} });

  it('trips on a kernel oom kill at once', () => {
    const w = wd();
    expect(w.observe(s(0, 10 * MiB, 0))).toBeNull();
    expect(w.observe(s(50, 1 * MiB, 5, 1))).toMatchObject({ reason: 'kernel_oom_kill', oom_kills: 1 });
    expect(w.observe(s(100, 1 * MiB, 5, 2))).toBeNull(); // reports once
  });

  it('trips after 2 samples at the limit with limit hits rising', () => {
    const w = wd();
    w.observe(s(0, 30 * MiB, 0, 0, 29 * MiB));
    expect(w.observe(s(50, limit, 100, 0, 63.5 * MiB))).toBeNull();
    const e = w.observe(s(100, limit, 180, 0, 63.5 * MiB));
    expect(e).toMatchObject({ reason: 'at_limit', usage: limit, limit, limit_hits: 180, oom_kills: 0, at_ms: 100 } satisfies Partial<OomEvidence>);
  });

  it('trips when stuck at the limit after hits even if the counter stalls (task blocked in the OOM path)', () => {
    const w = wd();
    w.observe(s(0, 11 * MiB, 0, 0, 3 * MiB));
    expect(w.observe(s(50, limit, 1914, 0, 63.8 * MiB))).toBeNull();
    expect(w.observe(s(100, limit, 1914, 0, 63.8 * MiB))?.reason).toBe('at_limit');
  });

  it('does not trip on page cache being reclaimed at the limit (anon well below the limit)', () => {
    const w = wd();
    w.observe(s(0, 20 * MiB, 0, 0, 5 * MiB));
    for (let i = 1; i < 20; i++) expect(w.observe(s(i * 50, limit, i * 500, 0, 20 * MiB))).toBeNull();
  });

  it('does not trip at the limit without any limit hit, nor on a single at-limit sample', () => {
    const w = wd();
    w.observe(s(0, limit, 7, 0, 63 * MiB));
    expect(w.observe(s(50, limit, 7, 0, 63 * MiB))).toBeNull();
    expect(w.observe(s(100, limit, 7, 0, 63 * MiB))).toBeNull();
    const w2 = wd();
    w2.observe(s(0, 10 * MiB, 0, 0, 9 * MiB));
    expect(w2.observe(s(50, limit, 9, 0, 63 * MiB))).toBeNull();
    expect(w2.observe(s(100, 40 * MiB, 12, 0, 39 * MiB))).toBeNull();
    expect(w2.observe(s(150, limit, 12, 0, 63 * MiB))).toBeNull();
  });

  it('a baseline makes counters that were already up not count', () => {
    const w = new MemoryWatchdog({ sample: async () => s(0, 0, 0), limitBytes: limit, onOom: () => {}, baseline: s(0, 0, 0, 3) });
    expect(w.observe(s(10, 1 * MiB, 0, 3))).toBeNull();
    expect(w.observe(s(20, 1 * MiB, 0, 4))?.reason).toBe('kernel_oom_kill');
  });

  it('polls, feeds every sample to onSample, and stops after reporting', async () => {
    const seq = [s(0, 1 * MiB, 0), s(1, limit, 10, 0, limit), s(2, limit, 20, 0, limit), s(3, limit, 30, 0, limit)];
    let i = 0;
    const seen: UsageSample[] = [];
    const hit = await new Promise<OomEvidence>((resolve) => {
      new MemoryWatchdog({ sample: async () => seq[Math.min(i++, seq.length - 1)]!, limitBytes: limit, intervalMs: 5, onSample: (x) => seen.push(x), onOom: resolve }).start();
    });
    expect(hit.reason).toBe('at_limit');
    await new Promise((r) => setTimeout(r, 30));
    expect(seen).toHaveLength(3);
  });
});
