/**
 * Limit backends: how a sandbox's memory, CPU and process count are enforced on this host, and how
 * its usage is read back. Chosen once at start (`detectLimitBackend`), reported by doctor.
 */
export type LimitBackendName = 'cgroup-v2' | 'cgroup-v1' | 'systemd-scope' | 'none';

export interface GroupLimits {
  /** Memory limit from the sandbox's start (swap 0). */
  memoryMb: number;
  /** Process/thread cap (fork bombs stop here). */
  pidsMax: number;
  /**
   * The group's CPU weight against the other sandboxes' groups (absent: `default`). A spare warming ahead is `low`
   * (executor/local-host.ts): it gets the CPU that live runs, their kills and their answers leave over. Additive.
   */
  cpuWeight?: CpuWeight;
}

/**
 * A group's CPU weight: `low` is the smallest the backend can set (cgroup v1 cpu.shares 2, v2 cpu.weight 1, a systemd
 * scope's CPUWeight=1), `default` the kernel's own (1024, 100, 100). A weight is not a cap: alone on a CPU, a `low`
 * group runs at full speed.
 */
export type CpuWeight = 'low' | 'default';

export interface UsageSample {
  /** Monotonic ms when sampled. */
  at_ms: number;
  memory_bytes: number;
  /** Peak memory since the group was created, when the kernel tracks it (else the max of samples). */
  memory_peak_bytes: number | null;
  /** Total CPU time of the group, ns. */
  cpu_usage_ns: number;
  /** Time the group was throttled by its CPU quota, ns (0 when unknown). */
  cpu_throttled_ns: number;
  /** Number of kernel OOM kills in the group so far. */
  oom_kills: number;
  /** Times usage hit the memory limit (v1 failcnt, v2 memory.events max). */
  limit_hits: number;
  /**
   * Anonymous (unreclaimable without swap) memory, when the backend can tell (v1 memory.stat total_rss,
   * v2 memory.stat anon). `memory_bytes` includes page cache, which the kernel reclaims at the limit; the
   * MemoryWatchdog uses this to tell "really out of memory" from "cache being reclaimed". Additive.
   */
  memory_anon_bytes?: number;
  /**
   * Times a fork or clone met the group's process cap (v1 and v2 `pids.events` max), where the backend can
   * tell. A runner that met it may have lost threads of its own (Bun aborts later): such a sandbox is not
   * reused. Additive.
   */
  pids_limit_hits?: number;
}

/** What a sample may leave out (LimitGroup.sample). */
export interface SampleOptions {
  /** Read `memory_anon_bytes` (default true). */
  anon?: boolean;
}

export interface LimitGroup {
  readonly id: string;
  /** Argv that enters this group before exec'ing `argv` (the runner is in the group before it runs any code). */
  wrap(argv: string[]): string[];
  /** CPU quota in percent of one CPU; null lifts it (the init phase runs uncapped). */
  setCpuPercent(percent: number | null): Promise<void>;
  /**
   * Sets the group's CPU weight (GroupLimits.cpuWeight): a spare claimed by a version goes back to `default` before
   * its bundle loads. Absent where the backend cannot weigh groups (`none`: docs/parity.md, "Spare runners (cold starts)"). Additive.
   */
  setCpuWeight?(weight: CpuWeight): Promise<void>;
  /**
   * Changes the memory limit of a running group (a spare sandbox, started ahead with a generous limit,
   * takes the limit of the version it is given). Rejects when the group cannot go below its usage.
   */
  setMemoryMb(mb: number): Promise<void>;
  /**
   * Starts a new peak-memory reading (so a warm sandbox's peak is this run's, not its whole life's).
   * Absent where the kernel cannot reset it (v2 before 6.12): the peak of the samples is used then.
   */
  resetPeak?(): Promise<void>;
  /**
   * `anon: false` leaves `memory_anon_bytes` out (memory.stat is the costliest file to read: the kernel makes
   * ~40 lines anew): the executor's first and last sample of a run, which no watchdog check reads it from.
   */
  sample(opts?: SampleOptions): Promise<UsageSample>;
  /** SIGKILL every process in the group (and wait until none is left, bounded). */
  killAll(): Promise<void>;
  /**
   * The processes in the group now (thread-group ids; zombies are not listed). Additive: `none` lists the
   * members of the process groups it tracks.
   */
  pids?(): Promise<number[]>;
  /**
   * SIGKILLs every process in the group whose pid is not in `keep` (the sandbox's own wrapper, bubblewrap
   * and runner), so nothing an invocation started outlives it while the warm runner stays. cgroup v1 and
   * v2 freeze the group first (a fork cannot race the kill), then thaw; when only kept pids are there it
   * is one read of cgroup.procs. Returns how many processes were killed. Additive.
   */
  killAllExcept?(keep: ReadonlySet<number>): Promise<number>;
  /** Kill what is left and remove the group. Idempotent. */
  destroy(): Promise<void>;
  /**
   * Tell the group about a process the executor spawned with `wrap()` (its pid is also its process group
   * when spawned `detached`). Needed by the `none` backend, whose killAll can only reach process groups it
   * was told about; cgroup backends ignore it. Additive: call as `group.track?.(pid)`.
   */
  track?(pid: number): void;
}

export interface LimitBackend {
  readonly name: LimitBackendName;
  /** Null when the backend enforces all three limits; otherwise why parity is degraded. */
  readonly degraded: string | null;
  /** Facts worth showing in doctor that do not degrade parity (e.g. "swap is not accounted"). Additive. */
  readonly notes?: readonly string[];
  /**
   * Removes groups left by a core that died (SIGKILL, power loss): every group whose id `isStale` says
   * belongs to no live owner is emptied and removed. Returns how many went. Absent: nothing to sweep.
   */
  sweep?(isStale: (id: string) => boolean): Promise<number>;
  create(id: string, limits: GroupLimits): Promise<LimitGroup>;
}
