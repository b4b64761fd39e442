import { readFileSync, readdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import type { KillFn } from './cgroupfs';
import { errnoOf, nodeKill } from './cgroupfs';
import { killAllExcept, monoMs, sleep, validateCpuPercent, validateGroupId, validateLimits } from './common';
import type { GroupLimits, LimitBackend, LimitGroup, UsageSample } from './types';

/**
 * No limits (macOS without Lima, a Linux host without a usable cgroup backend): only the executor's timeout
 * is enforced. The group is the pids it was told about (`track`), their process groups (so the runner must
 * be spawned `detached`) and, on Linux, every descendant of either, from /proc: killAll, pids and reap reach
 * them all. Usage is the sum over those processes from /proc (memory not capped is still measured, peak
 * included); zeros where there is no /proc.
 */

export const NO_BACKEND = 'no cgroup backend on this host: only the timeout is enforced';
/** Why none has no sweep() (a note doctor shows; test/conformance/limit-backend.ts holds the backend to it). */
export const NONE_NO_SWEEP = 'no sweep: nothing is kept on the host (no cgroup, no unit), so a core that dies leaves nothing to remove';

/** USER_HZ and page size: the values every Linux/x86-64 and arm64 build uses. */
const CLK_TCK = 100;
const PAGE = 4096;

export class NoLimitBackend implements LimitBackend {
  readonly name = 'none' as const;
  readonly degraded: string;
  readonly notes = [
    "processes an invocation started are killed at its end only while they stay in the runner's process tree or group " +
      '(a daemon that double-forks and calls setsid escapes until the sandbox goes; under bubblewrap its pid namespace ends with it)',
    NONE_NO_SWEEP,
  ];

  constructor(
    reason: string = NO_BACKEND,
    private readonly kill: KillFn = nodeKill,
  ) {
    this.degraded = reason;
  }

  async create(id: string, limits: GroupLimits): Promise<LimitGroup> {
    validateGroupId(id);
    validateLimits(limits.memoryMb, limits.pidsMax);
    return new NoLimitGroup(id, this.kill);
  }
}

export class NoLimitGroup implements LimitGroup {
  /** The pids the executor spawned (each its own process group), with their start times (a reused pid is not theirs). */
  private readonly tracked = new Map<number, string | null>();
  /** Members whose peak (VmHWM) resetPeak could not clear: their current RSS stands in for it. */
  private readonly hwmStale = new Set<number>();
  private peakSeen = 0;
  private cpuSeen = 0;

  constructor(
    readonly id: string,
    private readonly kill: KillFn,
    private readonly procRoot = '/proc',
  ) {}

  wrap(argv: string[]): string[] {
    if (argv.length === 0) throw new Error('wrap: empty argv');
    return [...argv];
  }

  track(pid: number): void {
    if (!Number.isInteger(pid) || pid <= 0) return;
    let start: string | null = null;
    try {
      start = parseStat(readFileSync(`${this.procRoot}/${pid}/stat`, 'utf8'))?.start ?? null;
    } catch {
      // already gone, or no /proc (macOS)
    }
    this.tracked.set(pid, start);
  }

  async setMemoryMb(): Promise<void> {
    // accepted and not enforced: the backend's `degraded` says so
  }

  async setCpuPercent(percent: number | null): Promise<void> {
    validateCpuPercent(percent); // accepted and not enforced: the backend's `degraded` says so
  }

  /**
   * Usage summed over the members (see members()): resident memory, CPU time (with the times of children they
   * reaped), and a peak from each member's own high-water mark (VmHWM), so memory used between two samples is
   * still seen. Shared pages count once per process: an upper bound, as `ps` would add it up.
   */
  async sample(): Promise<UsageSample> {
    const members = this.members() ?? [];
    let memory = 0;
    let peak = 0;
    let cpuTicks = 0;
    for (const m of members) {
      const rss = m.rssPages * PAGE;
      memory += rss;
      cpuTicks += m.cpuTicks;
      const hwm = this.hwmStale.has(m.pid) ? null : this.highWaterMark(m.pid);
      peak += Math.max(rss, hwm ?? 0);
    }
    this.peakSeen = Math.max(this.peakSeen, peak, memory);
    // A member reaped by a process outside the group takes its CPU time with it: the total never goes back.
    this.cpuSeen = Math.max(this.cpuSeen, (cpuTicks * 1e9) / CLK_TCK);
    return {
      at_ms: monoMs(),
      memory_bytes: memory,
      memory_peak_bytes: this.peakSeen,
      cpu_usage_ns: this.cpuSeen,
      cpu_throttled_ns: 0,
      oom_kills: 0,
      limit_hits: 0,
    };
  }

  /**
   * Starts a new peak reading: each member's VmHWM is cleared (`5` into /proc/<pid>/clear_refs, Linux 4.0+).
   * A member whose mark cannot be cleared counts with its current RSS from here on instead.
   */
  async resetPeak(): Promise<void> {
    this.peakSeen = 0;
    this.hwmStale.clear();
    for (const m of this.members() ?? []) {
      try {
        await writeFile(`${this.procRoot}/${m.pid}/clear_refs`, '5');
      } catch {
        this.hwmStale.add(m.pid);
      }
    }
  }

  private highWaterMark(pid: number): number | null {
    try {
      const kb = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`${this.procRoot}/${pid}/status`, 'utf8'))?.[1];
      return kb === undefined ? null : Number(kb) * 1024;
    } catch {
      return null;
    }
  }

  /**
   * The running processes that belong to the group, from one read of /proc: the tracked pids, the members of
   * their process groups, and every descendant of either. Descendants matter because bubblewrap's
   * `--new-session` puts the runner (bwrap → setpriv → runtime) and all it starts in a session of their own,
   * out of the tracked process group; a process that leaves both (double fork and setsid outside a pid
   * namespace) is not seen. Zombies are left out. Null where there is no /proc (macOS).
   */
  private members(): ProcStat[] | null {
    // Synchronous on purpose: /proc is generated in memory, and one scan of ~100 processes takes under 1 ms this
    // way against ~30 ms through the thread pool, every sample (50 ms apart) of a running invocation.
    let entries: string[];
    try {
      entries = readdirSync(this.procRoot);
    } catch {
      return null;
    }
    const all: ProcStat[] = [];
    for (const e of entries) {
      if (!/^\d+$/.test(e)) continue;
      try {
        const st = parseStat(readFileSync(`${this.procRoot}/${e}/stat`, 'utf8'));
        if (st) all.push({ ...st, pid: Number(e) });
      } catch {
        // gone
      }
    }
    const roots = new Set<number>();
    for (const [pid, start] of this.tracked) {
      const now = all.find((p) => p.pid === pid);
      if (now && (start === null || now.start === start)) roots.add(pid);
    }
    const children = new Map<number, ProcStat[]>();
    for (const p of all) {
      const siblings = children.get(p.ppid);
      if (siblings) siblings.push(p);
      else children.set(p.ppid, [p]);
    }
    const inGroup = new Set<number>();
    const queue = all.filter((p) => roots.has(p.pid) || this.tracked.has(p.pgid));
    while (queue.length) {
      const p = queue.pop()!;
      if (inGroup.has(p.pid)) continue;
      inGroup.add(p.pid);
      queue.push(...(children.get(p.pid) ?? []));
    }
    return all.filter((p) => inGroup.has(p.pid) && p.state !== 'Z' && p.state !== 'X');
  }

  /** Members of the group (see members()); the tracked pids themselves where there is no /proc (macOS). */
  async pids(): Promise<number[]> {
    const members = this.members();
    if (members) return members.map((m) => m.pid);
    return [...this.tracked.keys()].filter((pid) => {
      try {
        this.kill(pid, 0);
        return true;
      } catch (err) {
        return errnoOf(err) === 'EPERM';
      }
    });
  }

  /** Best effort: SIGKILL loop over the tracked process groups' members, sparing `keep` (see the backend's notes). */
  async killAllExcept(keep: ReadonlySet<number>): Promise<number> {
    const { killed, left } = await killAllExcept(() => this.pids(), keep, this.kill, null, 1000);
    if (left.length) throw new Error(`processes ${left.join(', ')} survived SIGKILL`);
    return killed;
  }

  /** SIGKILL loop over the tracked process groups and the members (see members()) until none runs, bounded. */
  async killAll(): Promise<void> {
    const deadline = monoMs() + 1000;
    for (let round = 0; ; round++) {
      const members = this.members();
      // Without /proc: the tracked pids, and whether their process groups still have a member.
      const running = members ? members.map((m) => m.pid) : [...this.tracked.keys()].filter((pid) => this.groupAlive(pid));
      if (round > 0 && (running.length === 0 || monoMs() > deadline)) return;
      for (const target of [...[...this.tracked.keys()].map((pid) => -pid), ...running]) {
        try {
          this.kill(target, 'SIGKILL');
        } catch (err) {
          if (errnoOf(err) !== 'ESRCH') throw err;
        }
      }
      await sleep(5);
    }
  }

  private groupAlive(pgid: number): boolean {
    try {
      this.kill(-pgid, 0);
      return true;
    } catch (err) {
      return errnoOf(err) === 'EPERM';
    }
  }

  async destroy(): Promise<void> {
    await this.killAll();
    this.tracked.clear();
    this.hwmStale.clear();
  }
}

interface ProcStat {
  pid: number;
  ppid: number;
  pgid: number;
  /** R, S, D, Z (zombie), X (dead), … */
  state: string;
  /** Start time since boot, in clock ticks: with the pid, it names one process (pids are reused). */
  start: string;
  rssPages: number;
  /** utime + stime + cutime + cstime, in clock ticks. */
  cpuTicks: number;
}

/** /proc/<pid>/stat, after the parenthesised comm (which may hold spaces and parentheses): proc(5)'s fields 3 on. */
function parseStat(text: string): Omit<ProcStat, 'pid'> | null {
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  if (f.length < 3) return null;
  const n = (i: number) => Number(f[i] ?? 0);
  return { state: f[0]!, ppid: n(1), pgid: n(2), cpuTicks: n(11) + n(12) + n(13) + n(14), start: f[19] ?? '', rssPages: n(21) };
}
