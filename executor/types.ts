import type { GraphFrame, HostOp, StepFrame } from './protocol';
import type { SpareStats } from './sandbox-host';

/**
 * The executor's public interface: what the core (server/) may use. The core never sees a process,
 * a cgroup or a frame; it hands over a job and gets back an outcome with its evidence.
 */
export type Runtime = 'bun' | 'python';

export interface RunLimits {
  timeout_ms: number;
  max_memory_mb: number;
  max_cpu_percent: number;
}

export interface BundleRef {
  /** Digest of the whole bundle: sandboxes and materialised bundle dirs are keyed by it. */
  sha256: string;
  entrypoint: string;
  /** Loads the files (path → content) when the bundle is not materialised yet. */
  load(): Promise<Record<string, string>>;
}

export interface ExecutorJob {
  invocationId: string;
  tenantId: string;
  snippetId: string;
  version: number;
  runtime: Runtime;
  bundle: BundleRef;
  limits: RunLimits;
  input: Record<string, unknown>;
  /** Secrets and SVC_* facts, set in the runner's environment before the handler runs. */
  env: Record<string, string>;
  /** A debug run (executor/debug/types.ts): a fresh sandbox of its own, never pooled, with the runtime's debugger on loopback. */
  debug?: DebugRequest;
}

/** What a debug run asks for. */
export interface DebugRequest {
  /** The loopback port the debugger is reached on (absent: any free one). */
  port?: number;
  /** How long the run waits for a debugger to attach before it ends `cancelled` (default DEBUG_ATTACH_TIMEOUT_MS). */
  attachTimeoutMs?: number;
}

/**
 * A debug run's session as it changes: `waiting` once the debugger listens (where to attach), `attached` when a
 * debugger connects (the timeout clock stops), `detached` when the last one leaves (the clock goes on).
 */
export interface DebugEvent {
  state: 'waiting' | 'attached' | 'detached';
  protocol: 'inspector' | 'dap';
  host: string;
  port: number;
  /** ws://HOST:PORT/PATH (inspector) or tcp://HOST:PORT (dap). */
  url: string;
  /** The bundle's absolute path inside the sandbox (for a debugger's path mapping). */
  remoteRoot: string;
  /** ms a debugger has held the run so far. */
  heldMs: number;
}

/**
 * A version's sandbox started before its first run (the workspace loader, once a save is deployed): the
 * job without an invocation, input or environment (those reach the runner with each run).
 */
export type PrewarmJob = Omit<ExecutorJob, 'invocationId' | 'input' | 'env'>;

/**
 * `ready`: a loaded sandbox waits in the idle pool under the version's key. `skipped`: nothing was started
 * (one is warm or starting already, the version was retired meanwhile, the executor is closing). Otherwise
 * the start failed the way a cold start would have: the module's load error, an OOM while loading, or the host.
 */
export type PrewarmResult =
  | { outcome: 'ready' | 'skipped' }
  | { outcome: 'handler_error' | 'oom_killed' | 'failed'; message: string; evidence?: Record<string, unknown> };

/** An agent framework's step, as the runner reported it from the framework's own hooks (executor/protocol.ts). */
export type AgentStepEvent = Omit<StepFrame, 't' | 'id'>;
/** A compiled LangGraph graph's shape, reported once per run and graph. */
export type AgentGraphEvent = Omit<GraphFrame, 't' | 'id'>;

export interface ExecutorEvents {
  onChunk?(data: unknown): void;
  /** Agent steps (start and end), at most MAX_STEPS_PER_RUN started ones per run (the rest: `steps_dropped`). */
  onStep?(step: AgentStepEvent): void;
  onGraph?(graph: AgentGraphEvent): void;
  onLog?(stream: 'stdout' | 'stderr', data: string): void;
  /** A debug run's session changed (ExecutorJob.debug): where to attach, and whether a debugger holds the run. */
  onDebug?(e: DebugEvent): void;
  /**
   * Host calls from the snippet's libraries (store, integrations), answered by the core. `log` adds a
   * line to the invocation's logs (an integration call says what it did there).
   */
  onCall(op: HostOp, args: Record<string, unknown>, log: (line: string) => void): Promise<unknown>;
}

export type Outcome = 'success' | 'handler_error' | 'timeout' | 'oom_killed' | 'cancelled' | 'failed';

export interface Usage {
  duration_ms: number;
  /** Runtime start and bundle load, when this invocation started a new sandbox; 0 on a warm one. */
  init_ms: number;
  cpu_ms: number;
  cpu_throttled_ms: number;
  peak_memory_mb: number;
}

export interface TimelinePoint {
  /** ms since the invocation started. */
  t_ms: number;
  memory_mb: number;
  /** CPU used since the previous point, in percent of one CPU. */
  cpu_percent: number;
  throttled: boolean;
}

export interface Parity {
  status: 'full' | 'degraded';
  reasons: string[];
}

export interface ExecutionResult {
  outcome: Outcome;
  output?: unknown;
  error?: { code: Outcome; message: string; stack?: string; evidence?: Record<string, unknown> };
  usage: Usage;
  timeline: TimelinePoint[];
  /** stdout/stderr of the run, capped at 1 MiB with a truncation mark. */
  logs: string;
  logs_truncated: boolean;
  parity: Parity;
  /** Whether a warm sandbox served it. */
  warm: boolean;
  /** Agent steps the run started past MAX_STEPS_PER_RUN, dropped (absent when none). */
  steps_dropped?: number;
  /** A debug run: whether a debugger attached and how long it held the run (not counted against timeout_ms). */
  debug?: { protocol: 'inspector' | 'dap'; attached: boolean; held_ms: number };
}

export interface RetireFilter {
  tenantId?: string;
  snippetId?: string;
  /** Retire sandboxes of versions NOT in this set (for the snippet given). */
  keepVersions?: number[];
  /** Only this version's sandboxes of this bundle: a prewarm whose version was never written (the workspace loader). */
  bundle?: { version: number; sha256: string };
}

export interface ExecutorInfo {
  backend: string;
  sandbox: 'bwrap' | 'none';
  transport: string;
  parity: Parity;
}

/**
 * What cancels a run: an AbortSignal, or anything with its `aborted` and abort listeners (server/services/invoke.ts
 * passes a lighter one: an AbortSignal cost ~7 µs of CPU to make, at every invoke).
 */
export interface RunSignal {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

export interface Executor {
  readonly info: ExecutorInfo;
  run(job: ExecutorJob, events: ExecutorEvents, signal?: RunSignal): Promise<ExecutionResult>;
  /**
   * Starts a sandbox for a version ahead of its first run, into the idle pool (it counts against the idle
   * budget and retires with its version). No run, so no tenant slot. Never throws. Optional: a host that
   * cannot prewarm starts the sandbox on the first run instead.
   */
  prewarm?(job: PrewarmJob): Promise<PrewarmResult>;
  /** Destroys idle sandboxes matching the filter (hot reload, undeploy, deleted snippet). */
  retire(filter: RetireFilter): Promise<number>;
  stats(): { idle: number; busy: number; created: number; reused: number; spares?: SpareStats };
  /**
   * Removes what dead cores left where sandboxes live (limit groups, temp bundle dirs, spare dirs); the
   * core calls it on its housekeeping timer. Returns how many groups and files went. Additive.
   */
  housekeep?(): Promise<{ groups: number; files: number }>;
  close(): Promise<void>;
}
