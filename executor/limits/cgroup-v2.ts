import type { CgroupFs, KillFn } from './cgroupfs';
import { errnoOf, nodeCgroupFs, nodeKill } from './cgroupfs';
import {
  CFS_PERIOD_US,
  CPU_WEIGHT,
  PARENT_GROUP,
  enterGroupsArgv,
  killAllExcept,
  mib,
  parseKeyedInts,
  parsePids,
  pollUntil,
  quotaUs,
  rmdirRetry,
  sampleV2,
  sleep,
  validateCpuPercent,
  validateGroupId,
  validateLimits,
  waitEmpty,
} from './common';
import type { CpuWeight, GroupLimits, LimitBackend, LimitGroup, SampleOptions, UsageSample } from './types';

/**
 * cgroup v2, as root or in a delegated subtree.
 *
 * Where groups go. We pick an *anchor* cgroup whose `cgroup.subtree_control` we may write, create
 * `<anchor>/svc-emu` under it, enable memory, pids (and cpu) for its children, and make one leaf
 * `<anchor>/svc-emu/<id>` per sandbox:
 *   - root: the anchor is the mount's root (`/sys/fs/cgroup`), so groups are `/sys/fs/cgroup/svc-emu/<id>`.
 *   - unprivileged: the anchor is our own cgroup, when it is delegated to us (writable `cgroup.procs` and
 *     `cgroup.subtree_control`, the controllers listed in its `cgroup.controllers`) — e.g. started with
 *     `systemd-run --user -p Delegate=yes …`, or a container with its own cgroup namespace. We never write
 *     to our cgroup's parent: under systemd only a Delegate=yes unit's own subtree is ours to manage, and
 *     siblings we created in a slice would be outside any unit.
 *
 * The "no internal processes" rule: a non-root cgroup with processes cannot enable controllers for its
 * children (EBUSY). The true root is exempt, but our own cgroup (and a container's namespace root) is not.
 * So when enabling fails with EBUSY we first move every process of the anchor — ourselves included — into a
 * leaf `<anchor>/svc-emu-core` (as runc and podman do with their "init" leaf), then enable again. Moving a
 * process needs write access to `cgroup.procs` of the common ancestor of source and target: the anchor,
 * which is ours. The runner wrapper then moves each runner from `svc-emu-core` to `svc-emu/<id>`: same
 * ancestor, same permission.
 *
 * Per group: memory.max, memory.swap.max 0, memory.oom.group 1 (a kernel OOM kill takes the whole sandbox,
 * as "killed hard" says), pids.max, cpu.max ("max 100000" or "QUOTA 100000"), cpu.weight (1 for a `low` CPU weight, a
 * warming spare; 100, the kernel's default, otherwise). Without the cpu controller
 * (systemd < 252 does not delegate it; RHEL 9) the backend is `degraded`: the CPU cap is not enforced.
 * killAll writes cgroup.kill (kernel ≥ 5.14) or falls back to freeze (cgroup.freeze, kernel ≥ 5.2), SIGKILL,
 * thaw. killAllExcept(keep) — the end of each invocation — freezes the group, SIGKILLs every process not in
 * `keep` (the sandbox's own), thaws; a SIGKILL loop where cgroup.freeze is absent.
 */

export interface CgroupV2Plan {
  /** The cgroup under which `svc-emu` is created (a directory in the cgroup2 mount). */
  anchor: string;
  mode: 'root' | 'delegated';
  /** cpu controller available (else degraded). */
  cpu: boolean;
}

export interface CgroupV2Options {
  plan: CgroupV2Plan;
  fs?: CgroupFs;
  kill?: KillFn;
  parent?: string;
  /** Name of the leaf our own processes move to when the anchor must give up its processes. */
  coreLeaf?: string;
}

export const CPU_NOT_DELEGATED =
  'cgroup v2: the cpu controller is not available to us (systemd < 252 and RHEL 9 do not delegate it to users): the CPU cap is not enforced';

async function controllersOf(fs: CgroupFs, dir: string): Promise<Set<string>> {
  const text = await fs.read(`${dir}/cgroup.controllers`);
  return new Set((text ?? '').split(/\s+/).filter(Boolean));
}

/**
 * Decides where groups would go, reading only. `anchorDir` is the mount root (root) or our own cgroup's
 * directory (unprivileged). Returns the plan, or why v2 is not usable.
 */
export async function planCgroupV2(
  fs: CgroupFs,
  anchorDir: string,
  mode: 'root' | 'delegated',
): Promise<{ plan: CgroupV2Plan } | { reason: string }> {
  const available = await controllersOf(fs, anchorDir);
  const missing = ['memory', 'pids'].filter((c) => !available.has(c));
  if (missing.length) {
    return {
      reason: `cgroup v2 at ${anchorDir}: controller(s) ${missing.join(', ')} not available (cgroup.controllers: "${[...available].join(' ')}")`,
    };
  }
  for (const f of ['cgroup.subtree_control', 'cgroup.procs']) {
    if (!(await fs.writable(`${anchorDir}/${f}`))) return { reason: `cgroup v2: ${anchorDir}/${f} is not writable by us` };
  }
  if (!(await fs.writable(anchorDir))) return { reason: `cgroup v2: cannot create groups in ${anchorDir}` };
  return { plan: { anchor: anchorDir, mode, cpu: available.has('cpu') } };
}

export class CgroupV2Backend implements LimitBackend {
  readonly name = 'cgroup-v2' as const;

  private constructor(
    readonly base: string,
    readonly degraded: string | null,
    readonly notes: string[],
    private readonly cpu: boolean,
    private readonly fs: CgroupFs,
    private readonly kill: KillFn,
  ) {}

  /** Prepares the anchor and `svc-emu` (enabling controllers, moving our processes to a leaf if needed). */
  static async open(opts: CgroupV2Options): Promise<CgroupV2Backend> {
    const fs = opts.fs ?? nodeCgroupFs;
    const { anchor, cpu } = opts.plan;
    const wanted = cpu ? ['memory', 'pids', 'cpu'] : ['memory', 'pids'];
    const notes: string[] = [];
    const moved = await enableControllers(fs, anchor, wanted, `${anchor}/${opts.coreLeaf ?? 'svc-emu-core'}`);
    if (moved < 0) throw new Error(`cgroup v2: ${anchor} has processes; cannot enable controllers`);
    if (moved > 0)
      notes.push(`moved ${moved} process(es) of ${anchor} into ${opts.coreLeaf ?? 'svc-emu-core'} (no internal processes rule)`);
    const base = `${anchor}/${opts.parent ?? PARENT_GROUP}`;
    await fs.mkdir(base);
    const moved2 = await enableControllers(fs, base, wanted, null);
    if (moved2 < 0) throw new Error(`cgroup v2: ${base} has processes of its own; cannot enable controllers`);
    if (!(await fs.exists(`${base}/memory.swap.max`)) && (await fs.exists(`${base}/memory.max`))) {
      notes.push('memory.swap.max absent (swap not accounted): swap is not limited');
    }
    return new CgroupV2Backend(base, cpu ? null : CPU_NOT_DELEGATED, notes, cpu, fs, opts.kill ?? nodeKill);
  }

  async sweep(isStale: (id: string) => boolean): Promise<number> {
    if (!this.fs.list) return 0;
    let removed = 0;
    for (const id of await this.fs.list(this.base)) {
      if (!isStale(id)) continue;
      await new CgroupV2Group(id, `${this.base}/${id}`, this.cpu, this.fs, this.kill).destroy().then(
        () => removed++,
        () => {},
      );
    }
    return removed;
  }

  async create(id: string, limits: GroupLimits): Promise<LimitGroup> {
    validateGroupId(id);
    validateLimits(limits.memoryMb, limits.pidsMax);
    const dir = `${this.base}/${id}`;
    const preexisting = await this.fs.exists(dir);
    await this.fs.mkdir(dir);
    const group = new CgroupV2Group(id, dir, this.cpu, this.fs, this.kill);
    if (preexisting) await group.killAll();
    try {
      await this.fs.write(`${dir}/memory.max`, String(mib(limits.memoryMb)));
      try {
        await this.fs.write(`${dir}/memory.swap.max`, '0');
      } catch (err) {
        if (errnoOf(err) !== 'ENOENT' && errnoOf(err) !== 'EACCES') throw err;
      }
      try {
        await this.fs.write(`${dir}/memory.oom.group`, '1');
      } catch (err) {
        if (errnoOf(err) !== 'ENOENT' && errnoOf(err) !== 'EACCES') throw err;
      }
      await this.fs.write(`${dir}/pids.max`, String(limits.pidsMax));
      if (this.cpu) {
        await this.fs.write(`${dir}/cpu.max`, `max ${CFS_PERIOD_US}`);
        await this.fs.write(`${dir}/cpu.weight`, String(CPU_WEIGHT[limits.cpuWeight ?? 'default']));
      }
    } catch (err) {
      await group.destroy().catch(() => {});
      throw err;
    }
    return group;
  }
}

/**
 * Enables `wanted` in `dir/cgroup.subtree_control`. On EBUSY (processes in `dir`) and with a `leaf`, moves
 * dir's processes into the leaf and retries. Returns how many processes were moved, or -1 when it got
 * EBUSY and had no leaf to move them to.
 */
export async function enableControllers(fs: CgroupFs, dir: string, wanted: string[], leaf: string | null): Promise<number> {
  const enabled = new Set(((await fs.read(`${dir}/cgroup.subtree_control`)) ?? '').split(/\s+/).filter(Boolean));
  const missing = wanted.filter((c) => !enabled.has(c));
  if (missing.length === 0) return 0;
  const line = missing.map((c) => `+${c}`).join(' ');
  try {
    await fs.write(`${dir}/cgroup.subtree_control`, line);
    return 0;
  } catch (err) {
    if (errnoOf(err) !== 'EBUSY') throw err;
    if (!leaf) return -1;
  }
  await fs.mkdir(leaf);
  let moved = 0;
  for (let round = 0; round < 20; round++) {
    const pids = parsePids(await fs.read(`${dir}/cgroup.procs`));
    if (pids.length === 0) break;
    for (const pid of pids) {
      try {
        await fs.write(`${leaf}/cgroup.procs`, String(pid));
        moved++;
      } catch (err) {
        // ESRCH: gone; EINVAL: exiting or a kernel thread we cannot move.
        if (errnoOf(err) !== 'ESRCH' && errnoOf(err) !== 'EINVAL') throw err;
      }
    }
    await sleep(5);
  }
  await fs.write(`${dir}/cgroup.subtree_control`, line);
  return moved;
}

export class CgroupV2Group implements LimitGroup {
  private destroyed = false;
  private peakSeen = 0;

  constructor(
    readonly id: string,
    readonly dir: string,
    private readonly cpu: boolean,
    private readonly fs: CgroupFs,
    private readonly kill: KillFn,
  ) {}

  wrap(argv: string[]): string[] {
    return enterGroupsArgv([`${this.dir}/cgroup.procs`], argv);
  }

  async setMemoryMb(mb: number): Promise<void> {
    validateLimits(mb, 1);
    await this.fs.write(`${this.dir}/memory.max`, String(mib(mb)));
  }

  async setCpuPercent(percent: number | null): Promise<void> {
    validateCpuPercent(percent);
    if (!this.cpu) return; // degraded: reported by the backend
    const q = quotaUs(percent);
    await this.fs.write(`${this.dir}/cpu.max`, `${q === null ? 'max' : q} ${CFS_PERIOD_US}`);
  }

  async setCpuWeight(weight: CpuWeight): Promise<void> {
    if (!this.cpu) return; // no cpu controller: no weight either (degraded, reported by the backend)
    await this.fs.write(`${this.dir}/cpu.weight`, String(CPU_WEIGHT[weight]));
  }

  async sample(opts?: SampleOptions): Promise<UsageSample> {
    const s = await sampleV2(this.fs, this.dir, this.peakSeen, opts);
    this.peakSeen = Math.max(this.peakSeen, s.memory_bytes);
    return s;
  }

  pids(): Promise<number[]> {
    return this.fs.read(`${this.dir}/cgroup.procs`).then(parsePids);
  }

  /** cgroup.freeze, confirmed by `frozen 1` in cgroup.events; null before kernel 5.2 (no such file). */
  private async freezer() {
    const file = `${this.dir}/cgroup.freeze`;
    if (!(await this.fs.exists(file))) return null;
    return {
      freeze: async () => {
        await this.fs.write(file, '1');
        return pollUntil(async () => parseKeyedInts(await this.fs.read(`${this.dir}/cgroup.events`)).get('frozen') === 1, 1000);
      },
      thaw: async () => {
        await this.fs.write(file, '0').catch((err) => {
          if (errnoOf(err) !== 'ENOENT') throw err;
        });
      },
    };
  }

  async killAllExcept(keep: ReadonlySet<number>): Promise<number> {
    const { killed, left } = await killAllExcept(() => this.pids(), keep, this.kill, await this.freezer(), 1000);
    if (left.length) throw new Error(`cgroup v2 group ${this.id}: processes ${left.join(', ')} survived SIGKILL`);
    return killed;
  }

  async killAll(): Promise<void> {
    if (await this.fs.exists(`${this.dir}/cgroup.kill`)) {
      try {
        await this.fs.write(`${this.dir}/cgroup.kill`, '1');
        const left = await waitEmpty(() => this.pids(), 1000);
        if (left.length === 0) return;
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') return;
        // fall through to freeze-and-kill
      }
    }
    await killAllExcept(() => this.pids(), new Set(), this.kill, await this.freezer(), 1000);
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    await this.killAll();
    await rmdirRetry(this.fs, this.dir, 1000);
    this.destroyed = true;
  }
}
