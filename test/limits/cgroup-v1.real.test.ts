import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { CgroupV1Backend, CgroupV1Group } from '../../executor/limits/cgroup-v1';
import { parseCgroupMounts, v1MountFor } from '../../executor/limits/mountinfo';
import { MemoryWatchdog } from '../../executor/limits/watchdog';
import type { OomEvidence } from '../../executor/limits/watchdog';
import type { LimitGroup, UsageSample } from '../../executor/limits/types';
import { bwrapArgv, bwrapAvailable } from '../../executor/sandbox/bwrap';
import { limitBackendConformance, weightOf, type LimitHarness } from '../conformance/limit-backend';
import { TREE_ARGV, spawnTree } from '../conformance/processes';
import { cgroupV1Status, killedBySigkill, loudSkip, median, mountinfo, pythonBinds, pythonPath, run, uniqueId } from './host';

// Real cgroups (v1, as root): the test machines have them; elsewhere this file skips, loudly. The promises every
// limit backend keeps are test/conformance/limit-backend.ts's, run here on the real hierarchies; the measurements
// and v1's own behaviours follow.

const status = cgroupV1Status();
const PY = pythonPath();
const usable = status.ok && PY !== null;
if (!usable) loudSkip('cgroup v1 limit tests (real processes under real cgroups)', status.ok ? 'no python3' : status.reason);
const bw = usable ? await bwrapAvailable() : null;
if (usable && !bw?.ok) loudSkip('cgroup v1 + bubblewrap combination test', bw?.reason ?? 'bubblewrap unavailable');

const MiB = 1024 * 1024;
const ALLOC_300MB = 'b = bytearray(300 * 1024 * 1024); print("survived")';
const BUSY_1500MS = 'import time\nend = time.time() + 1.5\nwhile time.time() < end: pass';

/** Numbers this file measured, printed together at the end (the report's figures). */
const figures: string[] = [];

describe.skipIf(!usable)('cgroup-v1 backend on this host (real cgroups)', () => {
  let backend: CgroupV1Backend;
  const groups: LimitGroup[] = [];
  const py = PY ?? 'python3';

  async function group(memoryMb: number, pidsMax: number, prefix = 't'): Promise<CgroupV1Group> {
    const g = (await backend.create(uniqueId(prefix), { memoryMb, pidsMax })) as CgroupV1Group;
    groups.push(g);
    return g;
  }

  beforeAll(async () => {
    backend = await CgroupV1Backend.open({ mounts: parseCgroupMounts(mountinfo()) });
  });
  afterAll(async () => {
    for (const g of groups) await g.destroy().catch((e) => console.error(e));
    if (figures.length) console.warn(`\n[limits] measured on this host:\n  ${figures.join('\n  ')}\n`);
  });

  it('(e) a wrapper that cannot enter its group never runs the command', async () => {
    const g = await group(64, 16);
    const argv = g.wrap(['/bin/echo', 'ran']);
    argv[2] = argv[2]!.replace(`/${g.id}/cgroup.procs`, '/no-such-group/cgroup.procs');
    const r = await run(argv);
    expect(r.code).not.toBe(0);
    expect(r.stdout).not.toContain('ran');
  });

  it('(a) 300 MB under 64 MiB is killed (SIGKILL) and oom_kills rises by 1 (no CPU quota)', async () => {
    const g = await group(64, 32);
    const before = await g.sample();
    const r = await run(g.wrap([py, '-c', ALLOC_300MB]));
    expect(killedBySigkill(r), JSON.stringify(r)).toBe(true);
    expect(r.stdout).not.toContain('survived');
    const after = await g.sample();
    expect(after.oom_kills - before.oom_kills).toBe(1);
    expect(after.memory_peak_bytes).toBeGreaterThanOrEqual(60 * MiB);
    expect(after.memory_peak_bytes).toBeLessThanOrEqual(64 * MiB);
    // the group is reusable: the next small run under the same limit succeeds
    const ok = await run(g.wrap([py, '-c', 'print(sum(range(10)))']));
    expect(ok.stdout.trim()).toBe('45');
  });

  it('(b) pids.max 8 stops a fork loop (EAGAIN) and killAll then reaps everything', async () => {
    const g = await group(64, 8);
    let shellPid = 0;
    const r = run(g.wrap(['/bin/sh', '-c', 'for i in $(seq 50); do sleep 5 & done; echo forked; wait']), {
      onSpawn: (p) => (shellPid = p),
    });
    // let the loop hit the cap
    let current = 0;
    const deadline = performance.now() + 3000;
    while (performance.now() < deadline) {
      current = Number(readFileSync(`${g.dirs.pids}/pids.current`, 'utf8'));
      const refused = Number(/max (\d+)/.exec(readFileSync(`${g.dirs.pids}/pids.events`, 'utf8'))?.[1] ?? 0);
      if (refused > 0) break;
      await new Promise((res) => setTimeout(res, 20));
    }
    await new Promise((res) => setTimeout(res, 200));
    // fork refusals are counted, and the group never exceeded the cap (the shell may have exited on the
    // failed fork, leaving its 7 sleeps behind)
    expect(Number(/max (\d+)/.exec(readFileSync(`${g.dirs.pids}/pids.events`, 'utf8'))?.[1] ?? 0)).toBeGreaterThan(0);
    expect((await g.sample()).pids_limit_hits, 'the sample counts the refused forks').toBeGreaterThan(0);
    expect(current).toBeGreaterThanOrEqual(7);
    expect(current).toBeLessThanOrEqual(8);
    expect((await g.pids()).length).toBeGreaterThan(1);
    await g.killAll();
    expect(await g.pids()).toEqual([]);
    const done = await r;
    expect(done.stderr).toMatch(/fork|Resource temporarily unavailable/i);
    expect(shellPid).toBeGreaterThan(0);
  });

  async function cpuShare(percent: number | null): Promise<{ share: number; throttledMs: number; wallMs: number }> {
    const g = await group(128, 16, 'cpu');
    await g.setCpuPercent(percent);
    const before = await g.sample();
    const r = await run(g.wrap([py, '-c', BUSY_1500MS]));
    const after = await g.sample();
    expect(r.code, r.stderr).toBe(0);
    return {
      share: (after.cpu_usage_ns - before.cpu_usage_ns) / 1e6 / r.wallMs,
      throttledMs: (after.cpu_throttled_ns - before.cpu_throttled_ns) / 1e6,
      wallMs: r.wallMs,
    };
  }

  it('(c) a 1.5 s busy loop at 10% uses ≤ 20% of wall time and is throttled; uncapped it uses ~100%', async () => {
    const capped = await cpuShare(10);
    expect(capped.share).toBeLessThanOrEqual(0.2);
    expect(capped.throttledMs).toBeGreaterThan(0);
    const half = await cpuShare(50);
    expect(half.share).toBeGreaterThan(0.3);
    expect(half.share).toBeLessThanOrEqual(0.6);
    const free = await cpuShare(null);
    expect(free.share).toBeGreaterThan(0.75);
    expect(free.throttledMs).toBe(0);
    figures.push(
      `CPU share of a 1.5 s busy loop (cpu-ns / wall-ns, python start included): 10% → ${(capped.share * 100).toFixed(1)}% (throttled ${capped.throttledMs.toFixed(0)} ms, wall ${capped.wallMs.toFixed(0)} ms); ` +
        `50% → ${(half.share * 100).toFixed(1)}% (wall ${half.wallMs.toFixed(0)} ms); uncapped → ${(free.share * 100).toFixed(1)}% (wall ${free.wallMs.toFixed(0)} ms)`,
    );
  });

  it('(d) a group of low CPU weight (a warming spare) yields the CPU: two 1 s busy loops on one CPU, the default group takes ≥ 5× the low one’s', async () => {
    // Both pinned to the same CPU, each spinning over the same second of wall time (from `start`, given in argv, after
    // both have started: a low group's own start waits while the CPUs are busy) and reporting the CPU time it had in it:
    // the kernel shares that CPU by weight (cpu.shares 1024 against 2). Other work on the CPU takes from both alike.
    const loop =
      'import os, sys, time\nos.sched_setaffinity(0, {0})\nstart = float(sys.argv[1])\ntime.sleep(max(0, start - time.time()))\n' +
      'c = time.process_time()\nwhile time.time() < start + 1.0: pass\nprint(round((time.process_time() - c) * 1000))';
    const start = String(Date.now() / 1000 + 2);
    const low = (await backend.create(uniqueId('w'), { memoryMb: 64, pidsMax: 8, cpuWeight: 'low' })) as CgroupV1Group;
    groups.push(low);
    const dflt = await group(64, 8, 'w');
    expect(readFileSync(`${low.dirs.cpu}/cpu.shares`, 'utf8').trim()).toBe('2');
    expect(readFileSync(`${dflt.dirs.cpu}/cpu.shares`, 'utf8').trim()).toBe('1024');
    const [a, b] = await Promise.all([run(low.wrap([py, '-c', loop, start])), run(dflt.wrap([py, '-c', loop, start]))]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    const [lowMs, dfltMs] = [Number(a.stdout.trim()), Number(b.stdout.trim())];
    expect(dfltMs, `default ${dfltMs} ms of CPU, low ${lowMs} ms`).toBeGreaterThan(5 * lowMs);
    figures.push(`two 1 s busy loops on one CPU: cpu.shares 1024 → ${dfltMs} ms of CPU, cpu.shares 2 → ${lowMs} ms`);
  });

  /** Runs 300 MB under 64 MiB with the watchdog; returns when the watchdog tripped and when the process ended. */
  async function oomRace(
    percent: number | null,
    opts: { holdKernelOom?: boolean; killOnTrip?: boolean; liftOnKill?: boolean; wrapInner?: (argv: string[]) => string[] } = {},
  ) {
    const g = await group(64, 32, 'oom');
    if (opts.holdKernelOom) writeFileSync(`${g.dirs.memory}/memory.oom_control`, '1'); // simulate a kernel that never gets round to it
    await g.setCpuPercent(percent);
    const baseline = await g.sample();
    const samples: UsageSample[] = [];
    let trip: OomEvidence | null = null;
    let tripMs = -1;
    let killMs = -1;
    let t0 = 0;
    const wd = new MemoryWatchdog({
      sample: () => g.sample(),
      limitBytes: 64 * MiB,
      baseline,
      onSample: (x) => samples.push(x),
      onOom: (e) => {
        trip = e;
        tripMs = performance.now() - t0;
        if (opts.killOnTrip) {
          const k0 = performance.now();
          void (async () => {
            if (opts.liftOnKill) await g.setCpuPercent(null);
            await g.killAll();
            killMs = performance.now() - k0;
          })();
        }
      },
    });
    const inner = [py, '-c', ALLOC_300MB];
    const argv = g.wrap(opts.wrapInner ? opts.wrapInner(inner) : inner);
    t0 = performance.now();
    wd.start();
    const r = await run(argv, { timeoutMs: 60_000 });
    const exitMs = performance.now() - t0;
    await new Promise((res) => setTimeout(res, 60));
    wd.stop();
    const after = await g.sample();
    return { r, trip: trip as OomEvidence | null, tripMs, exitMs, killMs, after, baseline, samples };
  }

  it('OOM under a 10% CPU quota: kernel and watchdog, measured (5 runs each at 10% and uncapped)', async () => {
    const rows: Record<string, { trip: number[]; exit: number[]; reasons: string[] }> = {};
    for (const pct of [10, null] as const) {
      const key = pct === null ? 'uncapped' : `${pct}%`;
      rows[key] = { trip: [], exit: [], reasons: [] };
      for (let i = 0; i < 5; i++) {
        const o = await oomRace(pct);
        expect(killedBySigkill(o.r), JSON.stringify(o.r)).toBe(true);
        expect(o.after.oom_kills - o.baseline.oom_kills).toBe(1);
        rows[key].exit.push(o.exitMs);
        if (o.trip) {
          rows[key].trip.push(o.tripMs);
          rows[key].reasons.push(o.trip.reason);
        } else rows[key].reasons.push('exited before a sample saw it');
      }
    }
    for (const [k, v] of Object.entries(rows)) {
      figures.push(
        `300 MB under 64 MiB at ${k}: kernel OOM-killed it, exit after median ${median(v.exit).toFixed(0)} ms (max ${Math.max(...v.exit).toFixed(0)}); ` +
          `watchdog saw it at median ${v.trip.length ? median(v.trip).toFixed(0) : 'n/a'} ms [${v.reasons.join(', ')}]`,
      );
    }
  }, 120_000);

  it('watchdog vs a kernel that does not kill (OOM killer held off) at 10% CPU: detects at the limit, and killAll ends it', async () => {
    const runs: Array<{ trip: number; kill: number; exit: number; lift: boolean; ev: OomEvidence; sinceLimit: [number, number] }> = [];
    for (const lift of [false, true, false, true]) {
      const o = await oomRace(10, { holdKernelOom: true, killOnTrip: true, liftOnKill: lift });
      expect(o.trip?.reason).toBe('at_limit');
      expect(killedBySigkill(o.r), JSON.stringify(o.r)).toBe(true);
      expect(o.after.oom_kills - o.baseline.oom_kills).toBe(0); // the kernel never killed: we did
      expect(o.trip!.usage).toBeGreaterThanOrEqual(0.97 * 64 * MiB);
      // how long after memory reached the limit did it trip: between (trip − first sample at the limit) and
      // (trip − last sample below it)
      const first = o.samples.findIndex((x) => x.memory_bytes >= 0.97 * 64 * MiB);
      const sinceLimit: [number, number] = [
        o.trip!.at_ms - o.samples[first]!.at_ms,
        o.trip!.at_ms - (o.samples[first - 1]?.at_ms ?? o.samples[first]!.at_ms),
      ];
      runs.push({ trip: o.tripMs, kill: o.killMs, exit: o.exitMs, lift, ev: o.trip!, sinceLimit });
    }
    const ev = runs[0]!.ev;
    figures.push(
      `watchdog, kernel OOM killer held off, 10% CPU: tripped at median ${median(runs.map((x) => x.trip)).toFixed(0)} ms after spawn, ` +
        `${median(runs.map((x) => x.sinceLimit[0])).toFixed(0)}–${median(runs.map((x) => x.sinceLimit[1])).toFixed(0)} ms after usage reached the limit ` +
        `(evidence: usage ${(ev.usage / MiB).toFixed(1)} MiB of ${(ev.limit / MiB).toFixed(0)}, anon ${((ev.anon ?? 0) / MiB).toFixed(1)} MiB, limit_hits ${ev.limit_hits}, oom_kills ${ev.oom_kills}); ` +
        `killAll took median ${median(runs.filter((x) => !x.lift).map((x) => x.kill)).toFixed(0)} ms with the quota kept, ` +
        `${median(runs.filter((x) => x.lift).map((x) => x.kill)).toFixed(0)} ms with the quota lifted first`,
    );
  }, 120_000);

  it('watchdog does not trip on page cache filling the limit (a 96 MB file written and read under 16 MiB)', async () => {
    const g = await group(16, 16, 'cache');
    const dir = mkdtempSync(join('/var/tmp', 'svc-emu-cache-'));
    try {
      const samples: UsageSample[] = [];
      let tripped: OomEvidence | null = null;
      const wd = new MemoryWatchdog({
        sample: () => g.sample(),
        limitBytes: 16 * MiB,
        onSample: (x) => samples.push(x),
        onOom: (e) => (tripped = e),
      });
      wd.start();
      const r = await run(
        g.wrap([
          '/bin/sh',
          '-c',
          `dd if=/dev/zero of=${dir}/f bs=1M count=96 status=none && cat ${dir}/f ${dir}/f > /dev/null && echo done`,
        ]),
      );
      await new Promise((res) => setTimeout(res, 120));
      wd.stop();
      expect(r.stdout.trim(), r.stderr).toBe('done');
      expect(tripped).toBeNull();
      const after = await g.sample();
      expect(after.memory_peak_bytes).toBeGreaterThanOrEqual(15 * MiB); // it did sit at the limit
      expect(after.limit_hits).toBeGreaterThan(0);
      expect(after.oom_kills).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it.skipIf(!bw?.ok)(
    'bubblewrap inside a cgroup-v1 group is still OOM-killed (and CPU-capped)',
    async () => {
      const sandbox = (inner: string[]) => [
        ...bwrapArgv({
          runtimeBinds: pythonBinds(py),
          bundleDir: '/usr/share',
          tmpSizeMb: 16,
          env: { PATH: '/usr/bin:/bin' },
          ...(bw ? { features: bw.features } : {}),
        }),
        ...inner,
      ];
      const o = await oomRace(null, { wrapInner: sandbox });
      expect(killedBySigkill(o.r), JSON.stringify(o.r)).toBe(true);
      expect(o.after.oom_kills - o.baseline.oom_kills).toBe(1);
      const o10 = await oomRace(10, { wrapInner: sandbox });
      expect(killedBySigkill(o10.r)).toBe(true);
      figures.push(`bwrap + 300 MB under 64 MiB: exit after ${o.exitMs.toFixed(0)} ms uncapped, ${o10.exitMs.toFixed(0)} ms at 10% CPU`);
      // the busy loop inside bwrap is capped too
      const g = await group(64, 16, 'bwcpu');
      await g.setCpuPercent(10);
      const before = await g.sample();
      const r = await run(g.wrap(sandbox([py, '-c', BUSY_1500MS])));
      const after = await g.sample();
      expect(r.code, r.stderr).toBe(0);
      expect((after.cpu_usage_ns - before.cpu_usage_ns) / 1e6 / r.wallMs).toBeLessThanOrEqual(0.2);
    },
    120_000,
  );
});

/** The limit backend suite on this host's real v1 hierarchies, observed through their files. */
async function v1Harness(): Promise<LimitHarness> {
  const mounts = parseCgroupMounts(mountinfo());
  const backend = await CgroupV1Backend.open({ mounts });
  const py = PY ?? 'python3';
  const read = (path: string) => readFileSync(path, 'utf8').trim();
  return {
    backend,
    async applied(g) {
      const { dirs } = g as CgroupV1Group;
      const quota = Number(read(`${dirs.cpu}/cpu.cfs_quota_us`));
      return {
        memoryBytes: Number(read(`${dirs.memory}/memory.limit_in_bytes`)),
        pidsMax: Number(read(`${dirs.pids}/pids.max`)),
        cpuPercent: quota < 0 ? null : (quota / Number(read(`${dirs.cpu}/cpu.cfs_period_us`))) * 100,
        cpuWeight: weightOf(read(`${dirs.cpu}/cpu.shares`).trim(), { '2': 'low', '1024': 'default' }),
      };
    },
    probeArgv: (g) => [
      '/bin/sh',
      '-c',
      `for h in memory cpu cpuacct pids; do grep -Eq "^[0-9]+:([^:]*,)?$h(,[^:]*)?:/svc-emu/${g.id}$" /proc/self/cgroup || exit 1; done; echo in-group`,
    ],
    populate: (g) => spawnTree(g.wrap(TREE_ARGV)),
    async work(g) {
      const code = 'b = b"x" * (16 * 1024 * 1024)\nsum(range(3_000_000))\nprint("ready", flush=True)\nimport time\ntime.sleep(30)';
      const argv = g.wrap([py, '-c', code]);
      const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d: Buffer) => String(d).includes('ready') && resolve());
        child.once('exit', (code) => reject(new Error(`the workload exited (${code}) before it was ready`)));
      });
      return async () => {
        child.kill('SIGKILL');
        await exited;
      };
    },
    async oom(g) {
      const r = await run(g.wrap([py, '-c', ALLOC_300MB]));
      expect(killedBySigkill(r), JSON.stringify(r)).toBe(true);
    },
    async exists(id) {
      return ['memory', 'cpu', 'cpuacct', 'pids', 'freezer'].some((h) => {
        const m = v1MountFor(mounts, h);
        return m !== null && existsSync(`${m.mountPoint.replace(/\/$/, '')}/svc-emu/${id}`);
      });
    },
  };
}

limitBackendConformance(
  'cgroup-v1',
  v1Harness,
  { memory: true, cpu: true, weight: true, pids: true, placement: true, usage: true, oom: true, sweep: true, degraded: null },
  usable ? null : `cgroup v1: ${status.ok ? 'no python3' : status.reason}`,
);
