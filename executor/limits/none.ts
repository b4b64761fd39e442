import { readFile, readdir } from 'node:fs/promises';
import type { KillFn } from './cgroupfs';
import { errnoOf, nodeKill } from './cgroupfs';
import { monoMs, sleep, validateCpuPercent, validateGroupId, validateLimits } from './common';
import type { GroupLimits, LimitBackend, LimitGroup, UsageSample } from './types';

/**
 * No limits (macOS without Lima, a Linux host without a usable cgroup backend): only the executor's timeout
 * is enforced. killAll reaches the process groups of the pids it was told about (`track`), so the runner
 * must be spawned `detached` (its own process group). Usage is best effort from /proc/<pid> of the tracked
 * pids (their descendants are not counted); zeros where there is no /proc.
 */

export const NO_BACKEND = 'no cgroup backend on this host: only the timeout is enforced';

/** USER_HZ and page size: the values every Linux/x86-64 and arm64 build uses. */
const CLK_TCK = 100;
const PAGE = 4096;

export class NoLimitBackend implements LimitBackend {
  readonly name = 'none' as const;
  readonly degraded: string;

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
  private readonly tracked = new Set<number>();
  private peakSeen = 0;

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
    if (Number.isInteger(pid) && pid > 0) this.tracked.add(pid);
  }

  async setMemoryMb(): Promise<void> {
    // accepted and not enforced: the backend's `degraded` says so
  }

  async setCpuPercent(percent: number | null): Promise<void> {
    validateCpuPercent(percent); // accepted and not enforced: the backend's `degraded` says so
  }

  async sample(): Promise<UsageSample> {
    let memory = 0;
    let cpuTicks = 0;
    for (const pid of this.tracked) {
      try {
        const [statm, stat] = await Promise.all([
          readFile(`${this.procRoot}/${pid}/statm`, 'utf8'),
          readFile(`${this.procRoot}/${pid}/stat`, 'utf8'),
        ]);
        memory += Number(statm.split(' ')[1] ?? 0) * PAGE;
        // Fields after the parenthesised comm: state is field 3; utime/stime are fields 14/15.
        const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        cpuTicks += Number(rest[11] ?? 0) + Number(rest[12] ?? 0);
      } catch {
        // gone, or no /proc (macOS)
      }
    }
    this.peakSeen = Math.max(this.peakSeen, memory);
    return {
      at_ms: monoMs(),
      memory_bytes: memory,
      memory_peak_bytes: this.peakSeen,
      cpu_usage_ns: (cpuTicks * 1e9) / CLK_TCK,
      cpu_throttled_ns: 0,
      oom_kills: 0,
      limit_hits: 0,
    };
  }

  /**
   * Is any member of process group `pgid` still running? On Linux, from /proc (zombies do not count: an
   * orphan's zombie may wait long for a reaper); elsewhere from kill(-pgid, 0).
   */
  private async groupAlive(pgid: number): Promise<boolean> {
    let entries: string[];
    try {
      entries = await readdir(this.procRoot);
    } catch {
      try {
        this.kill(-pgid, 0);
        return true;
      } catch (err) {
        return errnoOf(err) === 'EPERM';
      }
    }
    for (const e of entries) {
      if (!/^\d+$/.test(e)) continue;
      try {
        const stat = await readFile(`${this.procRoot}/${e}/stat`, 'utf8');
        const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (Number(rest[2]) === pgid && rest[0] !== 'Z' && rest[0] !== 'X') return true;
      } catch {
        // gone
      }
    }
    return false;
  }

  async killAll(): Promise<void> {
    const deadline = monoMs() + 1000;
    for (const pid of this.tracked) {
      for (;;) {
        for (const target of [-pid, pid]) {
          try {
            this.kill(target, 'SIGKILL');
          } catch (err) {
            if (errnoOf(err) !== 'ESRCH') throw err;
          }
        }
        if (!(await this.groupAlive(pid)) || monoMs() > deadline) break;
        await sleep(5);
      }
    }
  }

  async destroy(): Promise<void> {
    await this.killAll();
    this.tracked.clear();
  }
}
