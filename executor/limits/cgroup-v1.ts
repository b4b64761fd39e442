import type { CgroupFs, KillFn } from './cgroupfs';
import { errnoOf, nodeCgroupFs, nodeKill } from './cgroupfs';
import { CFS_PERIOD_US, PARENT_GROUP, enterGroupsArgv, killLoop, mib, monoMs, parseIntOr, parseKeyedInts, parsePids, quotaUs, rmdirRetry, validateCpuPercent, validateGroupId, validateLimits } from './common';
import type { CgroupMount } from './mountinfo';
import { v1MountFor } from './mountinfo';
import type { GroupLimits, LimitBackend, LimitGroup, UsageSample } from './types';

/**
 * cgroup v1 (root). One group `svc-emu/<id>` in each hierarchy we need: memory, cpu, cpuacct, pids
 * (cpu and cpuacct are one directory when mounted together as "cpu,cpuacct").
 *
 *   memory:  memory.limit_in_bytes; swap 0 via memory.memsw.limit_in_bytes = the same when the host has
 *            swap and the kernel accounts it, plus memory.swappiness 0 otherwise (noted; see open()). Kernel OOM kills counted in
 *            memory.oom_control `oom_kill` (kernels < 4.13 lack the line: then 0, and the executor relies on
 *            memory.failcnt and its own watchdog).
 *   cpu:     cpu.cfs_period_us 100000, cpu.cfs_quota_us from percent (-1 = none); throttling in cpu.stat.
 *   cpuacct: cpuacct.usage (ns).
 *   pids:    pids.max.
 *
 * killAll is a SIGKILL loop over cgroup.procs (no freezer: a fork racing the loop joins the same group and
 * dies in the next round; pids.max bounds how many can appear).
 */

export type V1Hierarchy = 'memory' | 'cpu' | 'cpuacct' | 'pids';
const NEEDED: V1Hierarchy[] = ['memory', 'cpu', 'cpuacct', 'pids'];

export interface CgroupV1Options {
  mounts: CgroupMount[];
  /** Prefix for every path (tests point it at a fake tree); '' in production. */
  fsRoot?: string;
  fs?: CgroupFs;
  kill?: KillFn;
  parent?: string;
}

export class CgroupV1Backend implements LimitBackend {
  readonly name = 'cgroup-v1' as const;
  readonly degraded: string | null = null;

  private constructor(
    /** hierarchy → parent group dir (…/memory/svc-emu). cpu and cpuacct may be the same dir. */
    readonly parents: Record<V1Hierarchy, string>,
    readonly notes: string[],
    /** Set memory.memsw.limit_in_bytes = limit (swap present and accounted). */
    private readonly useMemsw: boolean,
    private readonly fs: CgroupFs,
    private readonly kill: KillFn,
  ) {}

  /** Finds the hierarchies, creates the parent groups (once; existing ones are fine). Throws with the reason. */
  static async open(opts: CgroupV1Options): Promise<CgroupV1Backend> {
    const fs = opts.fs ?? nodeCgroupFs;
    const fsRoot = opts.fsRoot ?? '';
    const parentName = opts.parent ?? PARENT_GROUP;
    const missing = NEEDED.filter((h) => !v1MountFor(opts.mounts, h));
    if (missing.length) throw new Error(`cgroup v1: no hierarchy for ${missing.join(', ')}`);
    const parents = {} as Record<V1Hierarchy, string>;
    for (const h of NEEDED) {
      const m = v1MountFor(opts.mounts, h)!;
      const mountDir = fsRoot + m.mountPoint.replace(/\/$/, '');
      if (!(await fs.writable(mountDir))) throw new Error(`cgroup v1: ${mountDir} is not writable (needs root)`);
      parents[h] = `${mountDir}/${parentName}`;
    }
    for (const dir of new Set(Object.values(parents))) await fs.mkdir(dir);
    const notes: string[] = [];
    const swapAccounted = await fs.exists(`${parents.memory}/memory.memsw.limit_in_bytes`);
    const swaps = await fs.read(`${fsRoot}/proc/swaps`);
    const hostHasSwap = swaps === null ? true : swaps.trim().split('\n').length > 1;
    const useMemsw = swapAccounted && hostHasSwap;
    if (!hostHasSwap) {
      // Swap 0 holds trivially. memsw is left unset on purpose: with memsw == limit, a kernel 6.18 charge
      // fails on the memsw counter first, and neither memory.failcnt nor memory.memsw.failcnt counts it
      // (measured), which would blind the memory watchdog's limit-hit signal.
      notes.push('no swap on this host: swap 0 holds without memory.memsw (left unset so memory.failcnt counts limit hits); memory.swappiness 0');
    } else if (!swapAccounted) {
      notes.push('swap is not accounted (memory.memsw.* absent; boot with swapaccount=1): memory.swappiness 0 instead, swap may exceed the limit');
    } else {
      notes.push('swap 0 via memory.memsw.limit_in_bytes; limit hits are read from memory.failcnt + memory.memsw.failcnt (some kernels count neither: then OOM is seen through oom_kill only)');
    }
    if (!(await fs.exists(`${parents.memory}/memory.oom_control`)) ||
        !parseKeyedInts(await fs.read(`${parents.memory}/memory.oom_control`)).has('oom_kill')) {
      notes.push('memory.oom_control has no oom_kill counter (kernel < 4.13): OOM kills are inferred from memory.failcnt and exit status');
    }
    if (mountsShareCpu(parents)) notes.push('cpu and cpuacct share one hierarchy');
    return new CgroupV1Backend(parents, notes, useMemsw, fs, opts.kill ?? nodeKill);
  }

  async sweep(isStale: (id: string) => boolean): Promise<number> {
    if (!this.fs.list) return 0;
    const ids = new Set<string>();
    for (const parent of new Set(Object.values(this.parents))) for (const name of await this.fs.list(parent)) ids.add(name);
    let removed = 0;
    for (const id of ids) {
      if (!isStale(id)) continue;
      const dirs = {} as Record<V1Hierarchy, string>;
      for (const h of NEEDED) dirs[h] = `${this.parents[h]}/${id}`;
      await new CgroupV1Group(id, dirs, this.fs, this.kill).destroy().then(
        () => removed++,
        () => {},
      );
    }
    return removed;
  }

  async create(id: string, limits: GroupLimits): Promise<LimitGroup> {
    validateGroupId(id);
    validateLimits(limits.memoryMb, limits.pidsMax);
    const dirs = {} as Record<V1Hierarchy, string>;
    for (const h of NEEDED) dirs[h] = `${this.parents[h]}/${id}`;
    const group = new CgroupV1Group(id, dirs, this.fs, this.kill);
    let preexisting = false;
    for (const dir of group.uniqueDirs) {
      if (await this.fs.exists(dir)) preexisting = true;
      await this.fs.mkdir(dir);
    }
    // A leftover group of the same id (a crash of ours): empty it and reset its counters.
    if (preexisting) await group.killAll();
    try {
      const bytes = String(mib(limits.memoryMb));
      const mem = dirs.memory;
      if (preexisting) {
        // memsw must stay ≥ limit: lift it first (it may be absent: ignore).
        await this.fs.write(`${mem}/memory.memsw.limit_in_bytes`, '-1').catch(() => {});
        await this.fs.write(`${mem}/memory.oom_control`, '0');
        await this.fs.write(`${mem}/memory.max_usage_in_bytes`, '0');
        await this.fs.write(`${mem}/memory.failcnt`, '0');
        if (this.useMemsw) await this.fs.write(`${mem}/memory.memsw.failcnt`, '0');
      }
      await this.fs.write(`${mem}/memory.limit_in_bytes`, bytes);
      if (this.useMemsw) await this.fs.write(`${mem}/memory.memsw.limit_in_bytes`, bytes);
      await this.fs.write(`${mem}/memory.swappiness`, '0');
      await this.fs.write(`${dirs.pids}/pids.max`, String(limits.pidsMax));
      await this.fs.write(`${dirs.cpu}/cpu.cfs_period_us`, String(CFS_PERIOD_US));
      await this.fs.write(`${dirs.cpu}/cpu.cfs_quota_us`, '-1');
    } catch (err) {
      await group.destroy().catch(() => {});
      throw err;
    }
    return group;
  }
}

function mountsShareCpu(p: Record<V1Hierarchy, string>): boolean {
  return p.cpu === p.cpuacct;
}

export class CgroupV1Group implements LimitGroup {
  readonly uniqueDirs: string[];
  private destroyed = false;
  private peakSeen = 0;

  constructor(
    readonly id: string,
    readonly dirs: Record<V1Hierarchy, string>,
    private readonly fs: CgroupFs,
    private readonly kill: KillFn,
  ) {
    this.uniqueDirs = [...new Set(NEEDED.map((h) => dirs[h]))];
  }

  wrap(argv: string[]): string[] {
    return enterGroupsArgv(this.uniqueDirs.map((d) => `${d}/cgroup.procs`), argv);
  }

  async resetPeak(): Promise<void> {
    await this.fs.write(`${this.dirs.memory}/memory.max_usage_in_bytes`, '0');
    this.peakSeen = 0;
  }

  async setMemoryMb(mb: number): Promise<void> {
    validateLimits(mb, 1);
    const bytes = String(mib(mb));
    // With memsw in use it must stay ≥ the limit: lower the limit first, raise memsw last (or the reverse).
    const current = parseIntOr(await this.fs.read(`${this.dirs.memory}/memory.limit_in_bytes`), 0);
    const memsw = `${this.dirs.memory}/memory.memsw.limit_in_bytes`;
    const usesMemsw = parseIntOr(await this.fs.read(memsw), -1) === current;
    if (usesMemsw && mib(mb) > current) await this.fs.write(memsw, bytes);
    await this.fs.write(`${this.dirs.memory}/memory.limit_in_bytes`, bytes);
    if (usesMemsw && mib(mb) <= current) await this.fs.write(memsw, bytes);
  }

  async setCpuPercent(percent: number | null): Promise<void> {
    validateCpuPercent(percent);
    const q = quotaUs(percent);
    await this.fs.write(`${this.dirs.cpu}/cpu.cfs_quota_us`, q === null ? '-1' : String(q));
  }

  async sample(): Promise<UsageSample> {
    const m = this.dirs.memory;
    const [usage, maxUsage, cpuacct, cpuStat, oomControl, failcnt, memswFailcnt, stat] = await Promise.all([
      this.fs.read(`${m}/memory.usage_in_bytes`),
      this.fs.read(`${m}/memory.max_usage_in_bytes`),
      this.fs.read(`${this.dirs.cpuacct}/cpuacct.usage`),
      this.fs.read(`${this.dirs.cpu}/cpu.stat`),
      this.fs.read(`${m}/memory.oom_control`),
      this.fs.read(`${m}/memory.failcnt`),
      this.fs.read(`${m}/memory.memsw.failcnt`),
      this.fs.read(`${m}/memory.stat`),
    ]);
    const memory = parseIntOr(usage, 0);
    this.peakSeen = Math.max(this.peakSeen, memory);
    const cpu = parseKeyedInts(cpuStat);
    const st = parseKeyedInts(stat);
    const anon = st.get('total_rss') ?? st.get('rss');
    return {
      at_ms: monoMs(),
      memory_bytes: memory,
      memory_peak_bytes: maxUsage === null ? this.peakSeen : parseIntOr(maxUsage, this.peakSeen),
      cpu_usage_ns: parseIntOr(cpuacct, 0),
      // v1 reports throttled_time in ns.
      cpu_throttled_ns: cpu.get('throttled_time') ?? 0,
      oom_kills: parseKeyedInts(oomControl).get('oom_kill') ?? 0,
      // With swap accounted, memory+swap is charged first, so hitting the limit counts in memsw.failcnt.
      limit_hits: parseIntOr(failcnt, 0) + parseIntOr(memswFailcnt, 0),
      ...(anon !== undefined ? { memory_anon_bytes: anon } : {}),
    };
  }

  /** Pids in any of our hierarchies (a runner mid-wrapper may be in some but not all yet). */
  async pids(): Promise<number[]> {
    const lists = await Promise.all(this.uniqueDirs.map((d) => this.fs.read(`${d}/cgroup.procs`)));
    return [...new Set(lists.flatMap(parsePids))];
  }

  async killAll(): Promise<void> {
    await killLoop(() => this.pids(), this.kill, 1000);
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    await this.killAll();
    for (const dir of this.uniqueDirs) {
      try {
        await rmdirRetry(this.fs, dir, 1000);
      } catch (err) {
        if (errnoOf(err) !== 'ENOENT') throw err;
      }
    }
    this.destroyed = true;
  }
}
