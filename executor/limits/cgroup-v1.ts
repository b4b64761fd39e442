import type { CgroupFs, KillFn } from './cgroupfs';
import { errnoOf, nodeCgroupFs, nodeKill } from './cgroupfs';
import {
  CFS_PERIOD_US,
  CPU_SHARES,
  PARENT_GROUP,
  enterGroupsArgv,
  killAllExcept,
  killLoop,
  mib,
  pollUntil,
  monoMs,
  parseIntOr,
  keyedInt,
  parseKeyedInts,
  parsePids,
  quotaUs,
  rmdirRetry,
  validateCpuPercent,
  validateGroupId,
  validateLimits,
} from './common';
import type { CgroupMount } from './mountinfo';
import { v1MountFor } from './mountinfo';
import type { CpuWeight, GroupLimits, LimitBackend, LimitGroup, SampleOptions, UsageSample } from './types';

/**
 * cgroup v1 (root). One group `svc-emu/<id>` in each hierarchy we need: memory, cpu, cpuacct, pids
 * (cpu and cpuacct are one directory when mounted together as "cpu,cpuacct").
 *
 *   memory:  memory.limit_in_bytes; swap 0 via memory.memsw.limit_in_bytes = the same when the host has
 *            swap and the kernel accounts it, plus memory.swappiness 0 otherwise (noted; see open()). Kernel OOM kills counted in
 *            memory.oom_control `oom_kill` (kernels < 4.13 lack the line: then 0, and the executor relies on
 *            memory.failcnt and its own watchdog).
 *   cpu:     cpu.cfs_period_us 100000, cpu.cfs_quota_us from percent (-1 = none); throttling in cpu.stat;
 *            cpu.shares 2 for a `low` CPU weight (a warming spare), 1024 (the kernel's default) otherwise.
 *   cpuacct: cpuacct.usage (ns).
 *   pids:    pids.max.
 *
 *   freezer: freezer.state (optional: used when the hierarchy is mounted and writable).
 *
 * Killing: with the freezer, the group is frozen (FROZEN, read back until the kernel says so), every process
 * is sent SIGKILL, then the group is thawed and the kills land: a fork cannot race it. killAllExcept(keep)
 * does the same but spares the sandbox's own processes (the end of each invocation). Without a freezer
 * hierarchy it is a SIGKILL loop over cgroup.procs (a fork racing the loop joins the same group and dies in
 * the next round; pids.max bounds how many can appear), and a note says so.
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
  /** Use the freezer hierarchy when mounted (default true; false: the kill loop only). */
  freezer?: boolean;
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
    /** The freezer hierarchy's parent group dir, or null (no freezer: kill loop). */
    readonly freezerParent: string | null = null,
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
    let freezerParent: string | null = null;
    const fm = opts.freezer === false ? undefined : v1MountFor(opts.mounts, 'freezer');
    const freezerMount = fm ? fsRoot + fm.mountPoint.replace(/\/$/, '') : null;
    if (freezerMount && (await fs.writable(freezerMount))) {
      freezerParent = `${freezerMount}/${parentName}`;
      await fs.mkdir(freezerParent);
    } else {
      notes.push(
        'no writable freezer hierarchy: processes are killed with a SIGKILL loop over cgroup.procs ' +
          '(a fork racing it dies in the next round)',
      );
    }
    const swapAccounted = await fs.exists(`${parents.memory}/memory.memsw.limit_in_bytes`);
    const swaps = await fs.read(`${fsRoot}/proc/swaps`);
    const hostHasSwap = swaps === null ? true : swaps.trim().split('\n').length > 1;
    const useMemsw = swapAccounted && hostHasSwap;
    if (!hostHasSwap) {
      // Swap 0 holds trivially. memsw is left unset on purpose: with memsw == limit, a kernel 6.18 charge
      // fails on the memsw counter first, and neither memory.failcnt nor memory.memsw.failcnt counts it
      // (measured), which would blind the memory watchdog's limit-hit signal.
      notes.push(
        'no swap on this host: swap 0 holds without memory.memsw (left unset so memory.failcnt counts limit hits); memory.swappiness 0',
      );
    } else if (!swapAccounted) {
      notes.push(
        'swap is not accounted (memory.memsw.* absent; boot with swapaccount=1): memory.swappiness 0 instead, swap may exceed the limit',
      );
    } else {
      notes.push(
        'swap 0 via memory.memsw.limit_in_bytes; limit hits are read from memory.failcnt + memory.memsw.failcnt (some kernels count neither: then OOM is seen through oom_kill only)',
      );
    }
    if (
      !(await fs.exists(`${parents.memory}/memory.oom_control`)) ||
      !parseKeyedInts(await fs.read(`${parents.memory}/memory.oom_control`)).has('oom_kill')
    ) {
      notes.push('memory.oom_control has no oom_kill counter (kernel < 4.13): OOM kills are inferred from memory.failcnt and exit status');
    }
    if (mountsShareCpu(parents)) notes.push('cpu and cpuacct share one hierarchy');
    return new CgroupV1Backend(parents, notes, useMemsw, fs, opts.kill ?? nodeKill, freezerParent);
  }

  async sweep(isStale: (id: string) => boolean): Promise<number> {
    if (!this.fs.list) return 0;
    const ids = new Set<string>();
    const parents = new Set(Object.values(this.parents));
    if (this.freezerParent) parents.add(this.freezerParent);
    for (const parent of parents) for (const name of await this.fs.list(parent)) ids.add(name);
    let removed = 0;
    for (const id of ids) {
      if (!isStale(id)) continue;
      const dirs = {} as Record<V1Hierarchy, string>;
      for (const h of NEEDED) dirs[h] = `${this.parents[h]}/${id}`;
      await this.group(id, dirs)
        .destroy()
        .then(
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
    const group = this.group(id, dirs);
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
      // Every group says its weight (a leftover of a spare's id may still have a low one).
      await this.fs.write(`${dirs.cpu}/cpu.shares`, String(CPU_SHARES[limits.cpuWeight ?? 'default']));
    } catch (err) {
      await group.destroy().catch(() => {});
      throw err;
    }
    return group;
  }

  private group(id: string, dirs: Record<V1Hierarchy, string>): CgroupV1Group {
    return new CgroupV1Group(id, dirs, this.fs, this.kill, this.freezerParent ? `${this.freezerParent}/${id}` : null);
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
    /** This group's directory in the freezer hierarchy (null: no freezer, kill loop). */
    readonly freezerDir: string | null = null,
  ) {
    this.uniqueDirs = [...new Set([...NEEDED.map((h) => dirs[h]), ...(freezerDir ? [freezerDir] : [])])];
  }

  private freezer() {
    const dir = this.freezerDir;
    if (!dir) return null;
    const state = `${dir}/freezer.state`;
    return {
      freeze: async () => {
        try {
          await this.fs.write(state, 'FROZEN');
        } catch (err) {
          // A leftover group made before the freezer was used has no freezer dir: the kill loop does it. A group
          // removed meanwhile (ENODEV: its destroy won the race) has nothing left to freeze.
          if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENODEV') return false;
          throw err;
        }
        return pollUntil(async () => (await this.fs.read(state))?.trim() === 'FROZEN', 1000);
      },
      thaw: async () => {
        await this.fs.write(state, 'THAWED').catch((err) => {
          // Gone (ENOENT), or removed while frozen (ENODEV): nothing is left to thaw.
          if (errnoOf(err) !== 'ENOENT' && errnoOf(err) !== 'ENODEV') throw err;
        });
      },
    };
  }

  wrap(argv: string[]): string[] {
    return enterGroupsArgv(
      this.uniqueDirs.map((d) => `${d}/cgroup.procs`),
      argv,
    );
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

  async setCpuWeight(weight: CpuWeight): Promise<void> {
    await this.fs.write(`${this.dirs.cpu}/cpu.shares`, String(CPU_SHARES[weight]));
  }

  async sample(opts?: SampleOptions): Promise<UsageSample> {
    const m = this.dirs.memory;
    const [usage, maxUsage, cpuacct, cpuStat, oomControl, failcnt, memswFailcnt, stat, pidsEvents] = await Promise.all([
      this.fs.read(`${m}/memory.usage_in_bytes`),
      this.fs.read(`${m}/memory.max_usage_in_bytes`),
      this.fs.read(`${this.dirs.cpuacct}/cpuacct.usage`),
      this.fs.read(`${this.dirs.cpu}/cpu.stat`),
      this.fs.read(`${m}/memory.oom_control`),
      this.fs.read(`${m}/memory.failcnt`),
      this.fs.read(`${m}/memory.memsw.failcnt`),
      opts?.anon === false ? null : this.fs.read(`${m}/memory.stat`),
      this.fs.read(`${this.dirs.pids}/pids.events`),
    ]);
    const memory = parseIntOr(usage, 0);
    this.peakSeen = Math.max(this.peakSeen, memory);
    const cpu = parseKeyedInts(cpuStat);
    const anon = keyedInt(stat, 'total_rss') ?? keyedInt(stat, 'rss');
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
      ...(pidsEvents !== null ? { pids_limit_hits: parseKeyedInts(pidsEvents).get('max') ?? 0 } : {}),
    };
  }

  /** Pids in any of our hierarchies (a runner mid-wrapper may be in some but not all yet). */
  async pids(): Promise<number[]> {
    const lists = await Promise.all(this.uniqueDirs.map((d) => this.fs.read(`${d}/cgroup.procs`)));
    return [...new Set(lists.flatMap(parsePids))];
  }

  async killAll(): Promise<void> {
    if (!this.freezerDir) {
      await killLoop(() => this.pids(), this.kill, 1000);
      return;
    }
    await killAllExcept(() => this.pids(), new Set(), this.kill, this.freezer(), 1000);
  }

  async killAllExcept(keep: ReadonlySet<number>): Promise<number> {
    // The end of every warm run, and nearly always only the sandbox's own processes are left: one list says
    // so. A process the snippet started is in every hierarchy its runner is in (moving out of one takes a
    // write to cgroupfs, which the sandbox has no way to reach), so one hierarchy shows any there is.
    if (parsePids(await this.fs.read(`${this.dirs.pids}/cgroup.procs`)).every((pid) => keep.has(pid))) return 0;
    const { killed, left } = await killAllExcept(() => this.pids(), keep, this.kill, this.freezer(), 1000);
    if (left.length) throw new Error(`cgroup v1 group ${this.id}: processes ${left.join(', ')} survived SIGKILL`);
    return killed;
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
