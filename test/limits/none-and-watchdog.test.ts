import { describe, expect, it, vi, type TestContext } from 'vitest';
import { spawn } from 'node:child_process';
import { NONE_NO_SWEEP, NoLimitBackend } from '../../executor/limits/none';
import { MemoryWatchdog } from '../../executor/limits/watchdog';
import type { OomEvidence } from '../../executor/limits/watchdog';
import type { UsageSample } from '../../executor/limits/types';
import { limitBackendConformance, type LimitHarness } from '../conformance/limit-backend';
import { TREE_ARGV, spawnTree } from '../conformance/processes';
import { pythonPath } from './host';

// The promises every limit backend keeps are test/conformance/limit-backend.ts's, run here for none (timeout only:
// no memory, CPU or process cap, nothing on the host to sweep: the suite tests those lacks as declared below);
// none's own behaviours and the watchdog's rules follow.

const NOT_LINUX =
  process.platform !== 'linux' ? `none tracks processes through /proc and process groups: this is ${process.platform}` : null;
const PY = pythonPath();

/** The suite for none: processes it tracks are spawned detached (their own process group), as the executor does. */
async function noneHarness(): Promise<LimitHarness> {
  const backend = new NoLimitBackend();
  return {
    backend,
    applied: () => Promise.reject(new Error('none applies no limits')),
    probeArgv: () => ['/bin/false'],
    async populate(g) {
      const tree = await spawnTree(g.wrap(TREE_ARGV), { detached: true });
      g.track?.(tree.child.pid!);
      return tree;
    },
    async work(g) {
      const code = 'b = b"x" * (16 * 1024 * 1024)\nsum(range(3_000_000))\nprint("ready", flush=True)\nimport time\ntime.sleep(30)';
      const argv = g.wrap([PY ?? 'python3', '-c', code]);
      const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      g.track?.(child.pid!);
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d: Buffer) => String(d).includes('ready') && resolve());
        child.once('exit', (code) => reject(new Error(`the workload exited (${code}) before it was ready`)));
      });
      return async () => {
        child.kill('SIGKILL');
        await exited;
      };
    },
    oom: () => Promise.reject(new Error('none has no memory cap')),
    exists: async () => false,
  };
}

limitBackendConformance(
  'none',
  noneHarness,
  {
    memory: 'only the timeout is enforced',
    cpu: 'only the timeout is enforced',
    weight: 'no cgroup to weigh (a nice value an unprivileged core raised could not be lowered again at the claim)',
    pids: 'the sandbox sets RLIMIT_NPROC where it can: docs/security.md',
    placement: "it tracks the runner's process group instead",
    usage: true,
    oom: 'it has no memory cap',
    sweep: NONE_NO_SWEEP,
    degraded: /^no cgroup backend on this host: only the timeout is enforced$/,
  },
  NOT_LINUX ?? (PY ? null : 'no python3 for the workload'),
);

describe('none backend: its own behaviours', () => {
  it('wraps nothing, and accepts a CPU quota and a memory limit it does not enforce', async (ctx: TestContext) => {
    if (NOT_LINUX) ctx.skip(NOT_LINUX);
    const g = await new NoLimitBackend().create('n1', { memoryMb: 64, pidsMax: 8 });
    const argv = ['/bin/sh', '-c', 'sleep 30 & sleep 30 & echo $! ; wait'];
    expect(g.wrap(argv)).toEqual(argv);
    await expect(g.setCpuPercent(10)).resolves.toBeUndefined();
    await expect(g.setMemoryMb(32)).resolves.toBeUndefined();
    await g.destroy();
  });
});

const MiB = 1024 * 1024;
function s(at: number, memory: number, hits: number, oom = 0, anon?: number): UsageSample {
  return {
    at_ms: at,
    memory_bytes: memory,
    memory_peak_bytes: memory,
    cpu_usage_ns: 0,
    cpu_throttled_ns: 0,
    oom_kills: oom,
    limit_hits: hits,
    ...(anon !== undefined ? { memory_anon_bytes: anon } : {}),
  };
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
    expect(e).toMatchObject({
      reason: 'at_limit',
      usage: limit,
      limit,
      limit_hits: 180,
      oom_kills: 0,
      at_ms: 100,
    } satisfies Partial<OomEvidence>);
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
    const hits: OomEvidence[] = [];
    // The test's clock, not a fixed wait: "stops" is no timer left and no sample in twenty more intervals.
    vi.useFakeTimers();
    try {
      new MemoryWatchdog({
        sample: async () => seq[Math.min(i++, seq.length - 1)]!,
        limitBytes: limit,
        intervalMs: 5,
        onSample: (x) => seen.push(x),
        onOom: (e) => hits.push(e),
      }).start();
      for (let t = 0; t < 20 && hits.length === 0; t++) await vi.advanceTimersByTimeAsync(5);
      expect(hits.map((h) => h.reason)).toEqual(['at_limit']);
      expect(vi.getTimerCount(), 'timers left after reporting').toBe(0);
      await vi.advanceTimersByTimeAsync(100);
      expect(seen).toHaveLength(3);
      expect(hits).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
  });
});
