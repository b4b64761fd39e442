import type { CgroupFs, ExecFn, KillFn } from './cgroupfs';
import { nodeCgroupFs, nodeKill } from './cgroupfs';
import {
  CPU_WEIGHT,
  PARENT_GROUP,
  killAllExcept,
  killLoop,
  mib,
  monoMs,
  nodeExec,
  parsePids,
  sampleV2,
  validateCpuPercent,
  validateGroupId,
  validateLimits,
  waitEmpty,
} from './common';
import type { CpuWeight, GroupLimits, LimitBackend, LimitGroup, SampleOptions, UsageSample } from './types';

/**
 * Unprivileged desktops (cgroup v2 + a systemd user manager): each sandbox is a transient scope unit made
 * by `systemd-run --user --scope`, which puts itself into the new scope and then execs the runner — so the
 * runner is inside before it runs any code. Limits are unit properties (MemoryMax, MemorySwapMax,
 * TasksMax, CPUWeight=1 for a warming spare; later CPUQuota and a claimed spare's CPUWeight=100 via `systemctl --user
 * set-property --runtime`); usage is read from the scope's cgroup directory (ControlGroup property) with the same v2
 * files as the cgroup-v2 backend.
 *
 * The cpu controller must be delegated to the user manager (systemd ≥ 252 does by default; RHEL 9 does
 * not): when it is not, CPUQuota is accepted and silently ignored, so the backend reports `degraded`.
 */

/** Why the backend has no sweep() (a note doctor shows; test/conformance/limit-backend.ts holds the backend to it). */
export const SCOPE_NO_SWEEP = 'no sweep: each scope is made with --collect, so systemd removes it when its last process is gone';

export interface SystemdScopeOptions {
  exec?: ExecFn;
  fs?: CgroupFs;
  kill?: KillFn;
  /** The cgroup2 mount point (fs path), to turn a ControlGroup into a directory. */
  cgroupMount: string;
  /** Why parity is degraded (e.g. cpu not delegated), decided by detect. */
  degraded?: string | null;
  notes?: string[];
  systemdRun?: string;
  systemctl?: string;
  unitPrefix?: string;
}

export class SystemdScopeBackend implements LimitBackend {
  readonly name = 'systemd-scope' as const;
  readonly degraded: string | null;
  readonly notes: string[];
  private readonly exec: ExecFn;
  private readonly fs: CgroupFs;
  private readonly kill: KillFn;

  constructor(private readonly opts: SystemdScopeOptions) {
    this.exec = opts.exec ?? nodeExec;
    this.fs = opts.fs ?? nodeCgroupFs;
    this.kill = opts.kill ?? nodeKill;
    this.degraded = opts.degraded ?? null;
    this.notes = [
      ...(opts.notes ?? []),
      'processes an invocation started are killed at its end by a SIGKILL loop over the scope ' +
        '(no freeze: a fork racing it dies in the next round)',
      SCOPE_NO_SWEEP,
    ];
  }

  async create(id: string, limits: GroupLimits): Promise<LimitGroup> {
    validateGroupId(id);
    validateLimits(limits.memoryMb, limits.pidsMax);
    const unit = `${this.opts.unitPrefix ?? PARENT_GROUP}-${id}`;
    return new SystemdScopeGroup(id, unit, limits, {
      exec: this.exec,
      fs: this.fs,
      kill: this.kill,
      cgroupMount: this.opts.cgroupMount.replace(/\/$/, ''),
      systemdRun: this.opts.systemdRun ?? 'systemd-run',
      systemctl: this.opts.systemctl ?? 'systemctl',
    });
  }
}

interface GroupDeps {
  exec: ExecFn;
  fs: CgroupFs;
  kill: KillFn;
  cgroupMount: string;
  systemdRun: string;
  systemctl: string;
}

export class SystemdScopeGroup implements LimitGroup {
  /** The unit's name with its suffix, e.g. svc-emu-abc.scope. */
  readonly scope: string;
  private dir: string | null = null;
  private peakSeen = 0;
  private destroyed = false;

  constructor(
    readonly id: string,
    readonly unit: string,
    private readonly limits: GroupLimits,
    private readonly d: GroupDeps,
  ) {
    this.scope = `${unit}.scope`;
  }

  wrap(argv: string[]): string[] {
    if (argv.length === 0) throw new Error('wrap: empty argv');
    return [
      this.d.systemdRun,
      '--user',
      '--scope',
      '--quiet',
      '--collect',
      `--unit=${this.unit}`,
      '-p',
      `MemoryMax=${mib(this.limits.memoryMb)}`,
      '-p',
      'MemorySwapMax=0',
      '-p',
      `TasksMax=${this.limits.pidsMax}`,
      '-p',
      'MemoryAccounting=yes',
      '-p',
      'TasksAccounting=yes',
      '-p',
      'CPUAccounting=yes',
      // A warming spare's low weight, from its first instruction (setCpuWeight restores the default at its claim).
      ...(this.limits.cpuWeight === 'low' ? ['-p', `CPUWeight=${CPU_WEIGHT.low}`] : []),
      '--',
      ...argv,
    ];
  }

  private async systemctl(args: string[]): Promise<{ ok: boolean; stdout: string; why: string }> {
    const r = await this.d.exec(this.d.systemctl, ['--user', ...args], { timeoutMs: 5000 });
    return { ok: r.code === 0, stdout: r.stdout, why: (r.stderr || r.error || `exit ${r.code}`).trim() };
  }

  async setMemoryMb(mb: number): Promise<void> {
    const value = `MemoryMax=${mib(mb)}`;
    const r = await this.systemctl(['set-property', '--runtime', this.scope, value]);
    if (!r.ok) throw new Error(`systemctl --user set-property ${this.scope} ${value}: ${r.why}`);
  }

  async setCpuPercent(percent: number | null): Promise<void> {
    validateCpuPercent(percent);
    const value = percent === null ? 'CPUQuota=' : `CPUQuota=${formatPercent(percent)}%`;
    const r = await this.systemctl(['set-property', '--runtime', this.scope, value]);
    if (!r.ok) throw new Error(`systemctl --user set-property ${this.scope} ${value}: ${r.why}`);
  }

  async setCpuWeight(weight: CpuWeight): Promise<void> {
    const value = `CPUWeight=${CPU_WEIGHT[weight]}`;
    const r = await this.systemctl(['set-property', '--runtime', this.scope, value]);
    if (!r.ok) throw new Error(`systemctl --user set-property ${this.scope} ${value}: ${r.why}`);
  }

  /** The scope's cgroup directory (null until systemd has made the scope, i.e. until the runner started). */
  async cgroupDir(): Promise<string | null> {
    if (this.dir) return this.dir;
    const r = await this.systemctl(['show', '-p', 'ControlGroup', '--value', this.scope]);
    const cg = parseControlGroup(r.stdout);
    if (!r.ok || !cg) return null;
    this.dir = `${this.d.cgroupMount}${cg}`;
    return this.dir;
  }

  async sample(opts?: SampleOptions): Promise<UsageSample> {
    const dir = await this.cgroupDir();
    if (!dir) {
      return {
        at_ms: monoMs(),
        memory_bytes: 0,
        memory_peak_bytes: this.peakSeen,
        cpu_usage_ns: 0,
        cpu_throttled_ns: 0,
        oom_kills: 0,
        limit_hits: 0,
      };
    }
    const s = await sampleV2(this.d.fs, dir, this.peakSeen, opts);
    this.peakSeen = Math.max(this.peakSeen, s.memory_bytes);
    return s;
  }

  async pids(): Promise<number[]> {
    const dir = await this.cgroupDir();
    return dir ? parsePids(await this.d.fs.read(`${dir}/cgroup.procs`)) : [];
  }

  async killAll(): Promise<void> {
    // Unit not loaded (never started, or already gone) is fine: nothing to kill.
    await this.systemctl(['kill', '--signal=SIGKILL', this.scope]);
    const left = await waitEmpty(() => this.pids(), 1000);
    if (left.length) await killLoop(() => this.pids(), this.d.kill, 500);
  }

  /**
   * Best effort (the scope's cgroup is systemd's, not ours to freeze): a SIGKILL loop over the scope's
   * cgroup.procs, sparing `keep`; a fork racing it dies in the next round. The backend's notes say so.
   */
  async killAllExcept(keep: ReadonlySet<number>): Promise<number> {
    const { killed, left } = await killAllExcept(() => this.pids(), keep, this.d.kill, null, 1000);
    if (left.length) throw new Error(`scope ${this.scope}: processes ${left.join(', ')} survived SIGKILL`);
    return killed;
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    await this.killAll();
    // --collect lets systemd drop the unit once empty, even after a failure; stop makes it immediate.
    await this.systemctl(['stop', this.scope]);
    this.destroyed = true;
  }
}

/** systemd accepts fractional percentages ("12.5%"). */
function formatPercent(p: number): string {
  return Number.isInteger(p) ? String(p) : p.toFixed(2).replace(/0+$/, '').replace(/\.$/, '');
}

/** `systemctl show -p ControlGroup --value` (or the `ControlGroup=` form) → a cgroup path, or null. */
export function parseControlGroup(stdout: string): string | null {
  const line = stdout.trim().split('\n')[0]?.trim() ?? '';
  const v = line.startsWith('ControlGroup=') ? line.slice('ControlGroup='.length) : line;
  return v.startsWith('/') ? v : null;
}
