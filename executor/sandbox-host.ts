import type { Readable } from 'node:stream';
import type { InitErrorFrame, ReadyFrame } from './protocol';
import type { RunnerChannel } from './runner-client';
import type { SampleOptions, UsageSample } from './limits/types';
import type { Runtime } from './types';
import type { DebugPort, DebugSpec } from './debug/types';
import type { ExitStatus } from './exit-event';
import type { ImportProfile } from './import-profile';

/**
 * Where sandboxes live: on this host (LocalSandboxHost) or inside a VM behind a remote agent
 * (RemoteSandboxHost over `limactl shell`). The executor's pool and limits logic sees only this.
 */
export interface SandboxSpec {
  id: string;
  runtime: Runtime;
  /** Bundle digest: the host materialises the files once per digest. */
  bundleSha: string;
  entrypoint: string;
  memoryMb: number;
  pidsMax: number;
  tmpSizeMb: number;
  /**
   * The version's CPU quota (max_cpu_percent; null: none). A host that hands out a spare runner sets it before
   * the snippet's first instruction and says so in Sandbox.cpuPercent; a freshly started sandbox loads without
   * one (the init phase, docs/parity.md). Absent: the executor sets it before the first run.
   */
  cpuPercent?: number | null;
  /**
   * A debug sandbox (executor/debug/types.ts): never a spare, no CPU quota, the runtime's debugger on a socket the
   * host relays to loopback; the runner waits for a debugger before it loads the bundle.
   */
  debug?: DebugSpec;
}

export interface Sandbox {
  readonly id: string;
  readonly channel: RunnerChannel;
  /** What the runner said after loading the bundle. */
  readonly ready: ReadyFrame | InitErrorFrame;
  /** Spawn → ready, measured by the host (runtime start + imports). */
  readonly initMs: number;
  /** The CPU quota the host already set (SandboxSpec.cpuPercent, before the bundle loaded); absent: none set yet. */
  readonly cpuPercent?: number | null;
  setCpuPercent(percent: number | null): Promise<void>;
  /** `opts` as LimitGroup.sample's (a host that cannot leave a part out reads it all). */
  sample(opts?: SampleOptions): Promise<UsageSample>;
  /** Starts a new peak-memory reading, where the backend can (see LimitGroup.resetPeak). */
  resetPeak?(): Promise<void>;
  killAll(): Promise<void>;
  /**
   * Kills every process in the sandbox's group that is not its own (those there when it became ready: the
   * wrappers, bubblewrap, the runner): what an invocation started (a background child, a double-forked
   * daemon) does not outlive it, and the warm runner stays. Resolves with how many were killed; rejects
   * when some survived (the sandbox must not be reused then). Absent where the host cannot tell them apart.
   */
  reap?(): Promise<number>;
  destroy(): Promise<void>;
  /**
   * Resolves once, when the runner exits. It lives as long as the sandbox: never chain a handler on it per
   * invocation (the handler and all it closes over stay until the runner exits); a run uses `onExit`.
   */
  readonly exited: Promise<ExitStatus>;
  /** Calls `listener` once when the runner exits (at once if it has); returns the unsubscribe (see ExitEvent). */
  onExit(listener: (e: ExitStatus) => void): () => void;
  /** Raw stdout/stderr of the runner (output that bypassed the runner's capture, e.g. native writes). */
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  /** A debug sandbox's relay (SandboxSpec.debug); closed when the sandbox is destroyed. */
  readonly debug?: DebugPort;
}

export interface SandboxHostInfo {
  backend: string;
  sandbox: 'bwrap' | 'none';
  transport: string;
  /** Why parity is degraded on this host (empty when it is not). */
  degraded: string[];
}

/** One runner started ahead (executor/local-host.ts): its import profile (executor/import-profile.ts) and memory. */
export interface SpareInfo {
  id: string;
  runtime: Runtime;
  profile: ImportProfile;
  /** starting: spawned, not yet known to be up; preloading: importing its framework; ready: claimable at once. */
  state: 'starting' | 'preloading' | 'ready';
  /** Sum of VmRSS over its processes (the group's: wrapper, bubblewrap, runtime), in MB; null where /proc cannot tell. */
  rss_mb: number | null;
  /** ms its framework import took (framework spares, once ready). */
  preload_ms?: number;
}

export interface SpareStats {
  /** Ready spares per runtime, of every profile. */
  ready: Record<Runtime, number>;
  /** Cold starts served by a spare, in all and per profile. */
  claimed: number;
  claimed_by_profile?: Partial<Record<ImportProfile, number>>;
  spares?: SpareInfo[];
}

export interface SandboxHost {
  readonly info: SandboxHostInfo;
  /** Makes the bundle's files available where sandboxes run (idempotent per digest). */
  materialize(sha: string, entrypoint: string, files: Record<string, string>): Promise<void>;
  hasBundle(sha: string): Promise<boolean>;
  create(spec: SandboxSpec): Promise<Sandbox>;
  /**
   * Periodic housekeeping (the core's timer): removes what dead cores left (limit groups, temp bundle dirs,
   * spare dirs). Returns how many groups and files went. Absent: nothing to sweep.
   */
  housekeep?(): Promise<{ groups: number; files: number }>;
  /** Runners started ahead, ready to be claimed, and how many cold starts they served. */
  spareStats?(): SpareStats;
  close(): Promise<void>;
}
