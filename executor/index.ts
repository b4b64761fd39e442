import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DENIED_SYSCALLS } from './sandbox/seccomp';
import { PooledExecutor } from './executor';
import { LocalSandboxHost, SPARE_PLANS, type LocalHostOptions, type LocalRuntimePaths, type SpareMode, type SparePlan } from './local-host';
import { detectLimitBackend } from './limits/detect';
import type { LimitBackendName } from './limits/types';
import { bwrapAvailable } from './sandbox/bwrap';
import { probeIdentity, sandboxProfile, type SandboxIdentity } from './sandbox/profile';
import { readRuntimeInfo, type RuntimeInfo } from './runtime-info';
import { createCodeChecker, type CodeProblem } from './validate';
import { spawnAgent } from './remote';
import { detectLimactl } from './lima/manager';
import type { SandboxHost } from './sandbox-host';
import type { Executor, ExecutorJob, ExecutionResult, ExecutorInfo } from './types';

// The public interface: what server/ (and main/, through server/) may use of the executor.
export type {
  AgentGraphEvent,
  AgentStepEvent,
  DebugEvent,
  DebugRequest,
  Executor,
  ExecutorJob,
  ExecutionResult,
  ExecutorInfo,
  Outcome,
  PrewarmJob,
  PrewarmResult,
  RunLimits,
  RunSignal,
} from './types';
export { MAX_STEPS_PER_RUN } from './protocol';
export { DEBUG_ATTACH_TIMEOUT_MS } from './debug/types';
export type { CodeProblem } from './validate';
export type { HostOp } from './protocol';
export { limaAgentArgv, limaTemplate, VM_NAME } from './lima/template';
export {
  LimaManager,
  LimaRefused,
  VmStatus,
  VmOperation,
  VmInfo,
  detectLimactl,
  type LimaManagerOptions,
  type LimaRefusalCode,
} from './lima/manager';
export { spawnRunner, type ProcessRunner, type RunResult } from './lima/process';
export { pidAlive, sweepLeftovers, type LeftoverPolicy } from './leftovers';
export { SPARE_PLANS, type SpareMode, type SparePlan } from './local-host';

type Log = { log(level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>): void };

export interface LocalHostBuild {
  host: LocalSandboxHost;
  runtime: RuntimeInfo;
  limitReason: string;
  runtimes: LocalRuntimePaths;
}

/**
 * The sandbox host of this machine: detected limit backend, bubblewrap if it works, installed
 * runtimes. Used by the executor on Linux, and by the agent inside a Lima VM.
 */
export async function createLocalHost(opts: {
  projectRoot: string;
  workDir: string;
  transport?: string;
  /** Spare runners kept (LocalHostOptions.spares; a mode of SPARE_PLANS); default one plain spare per runtime. */
  spares?: number | SparePlan | SpareMode;
  /** The core's egress proxy socket (absolute host path); see CreateExecutorOptions.egressSocket. */
  egressSocket?: string | null;
  /** The TLS roots runners trust; see CreateExecutorOptions.caBundle. */
  caBundle?: string | null;
  onSpare?: LocalHostOptions['onSpare'];
  /**
   * Spares start once this settles (the core passes its listening): started at once, their forks and their runtimes'
   * start-up (a framework import is ~0.4–1 s of CPU) competed with the core's own start on a 2-core machine and
   * pushed start to /readyz from ~315 to ~395 ms here. Unset: at once.
   */
  sparesAfter?: Promise<unknown>;
  /**
   * Pins the limit backend, as SVC_EMU_LIMITS does for a whole process (and before it): one that cannot be used
   * gives `none` with the reason (executor/limits/detect.ts). test/executor/local-host.test.ts runs `none` here.
   */
  limitBackend?: LimitBackendName;
  /** LocalHostOptions.spareLowWeightMs (tests pin how long a spare keeps its low CPU weight). */
  spareLowWeightMs?: number;
}): Promise<LocalHostBuild> {
  const runtime = await readRuntimeInfo(opts.projectRoot);
  const runtimesDir = join(opts.projectRoot, 'executor', 'runtimes');
  const detected = await detectLimitBackend(opts.limitBackend ? { force: opts.limitBackend } : {});
  const probe = await bwrapAvailable(runtime.bwrap?.bin ?? 'bwrap');
  const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p)) ?? null;
  const runtimes: LocalRuntimePaths = {
    bun: { bin: runtime.bun.bin, nodeModules: runtime.bun.nodeModules },
    python: { bin: runtime.python.bin, venv: runtime.python.venv, basePrefix: runtime.python.basePrefix },
    runtimesDir,
  };
  const prlimit = ['/usr/bin/prlimit', '/bin/prlimit'].find((p) => existsSync(p)) ?? null;
  const profile = probe.ok
    ? await sandboxProfile({ bwrap: { bin: probe.bwrap, features: probe.features }, setpriv, prlimit, workDir: opts.workDir })
    : null;
  const host = new LocalSandboxHost({
    backend: detected.backend,
    runtimes,
    workDir: opts.workDir,
    bwrap: profile,
    bwrapMissingReason: probe.reason,
    setpriv,
    transport: opts.transport,
    spares: typeof opts.spares === 'string' ? SPARE_PLANS[opts.spares] : (opts.spares ?? 1),
    egressSocket: opts.egressSocket ?? null,
    caBundle: opts.caBundle ?? null,
    ...(opts.onSpare ? { onSpare: opts.onSpare } : {}),
    ...(opts.spareLowWeightMs !== undefined ? { spareLowWeightMs: opts.spareLowWeightMs } : {}),
  });
  await host.sweep();
  if (opts.sparesAfter) void opts.sparesAfter.finally(() => host.refillSpares()).catch(() => {});
  else host.refillSpares();
  return { host, runtime, limitReason: detected.reason, runtimes };
}

/** What this host can enforce, for `svc-emu doctor`: limit backend, parity sandbox, runtimes vs the manifest, Lima. */
export async function probeHost(opts: { projectRoot: string | null }) {
  const limits = await detectLimitBackend();
  const sandbox = await bwrapAvailable();
  let runtime: Record<string, unknown>;
  try {
    if (!opts.projectRoot) throw new Error('the project checkout is unknown');
    const info = await readRuntimeInfo(opts.projectRoot);
    runtime = {
      bun: info.bun.version,
      python: info.python.version,
      packages: { ...info.installed.bun.packages, ...info.installed.python.packages },
      mismatches: info.mismatches,
      stale: info.stale,
      // Emulator-only, not production's (no mismatch when missing): what Python debug runs use.
      debugger: {
        debugpy: {
          expected: info.manifest.debugger?.debugpy ?? null,
          installed: info.installed.debugpy?.version ?? null,
          emulator_only: true,
        },
      },
    };
  } catch (err) {
    runtime = { error: (err as Error).message };
  }
  const limactl = detectLimactl();
  const degraded: string[] = [];
  if (limits.backend.degraded) degraded.push(limits.backend.degraded);
  if (!sandbox.ok) degraded.push(`no parity sandbox: ${sandbox.reason}`);
  // Who a snippet is, read from this host's /proc: started exactly as the executor starts sandboxes.
  let identity: SandboxIdentity | { error: string } | null = null;
  if (sandbox.ok) {
    const workDir = await mkdtemp(join(tmpdir(), 'svc-emu-doctor-'));
    try {
      const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p)) ?? null;
      identity = await probeIdentity(await sandboxProfile({ bwrap: { bin: sandbox.bwrap, features: sandbox.features }, setpriv, workDir }));
      if (!identity.ok) degraded.push(`the sandbox does not hold: ${identity.problems.join('; ')}`);
    } catch (err) {
      identity = { error: (err as Error).message };
      degraded.push(`the sandbox's identity could not be checked: ${identity.error}`);
    } finally {
      await rm(workDir, { recursive: true, force: true });
    }
  } else if (process.platform === 'linux' && typeof process.getuid === 'function' && process.getuid() === 0) {
    degraded.push('the core runs as root without bubblewrap: no snippet runs (install bubblewrap, or run as a normal user)');
  }
  if ('error' in runtime) degraded.push(`runtimes: ${String(runtime.error)}`);
  else if ((runtime.mismatches as unknown[]).length) degraded.push('installed runtime versions differ from the production manifest');
  if (process.platform === 'darwin' && !limactl)
    degraded.push(
      'macOS without Lima: snippets cannot run under Linux limits (install Lima with `brew install lima`, then create and start the VM on the Parity status page or with `svc-emu lima create` and `svc-emu lima start`)',
    );
  return {
    limits: { backend: limits.backend.name, reason: limits.reason, checked: limits.checked, notes: limits.backend.notes ?? [] },
    sandbox: {
      bubblewrap: sandbox.ok,
      bin: sandbox.bwrap,
      version: sandbox.version,
      reason: sandbox.reason,
      identity,
      seccomp_denies: DENIED_SYSCALLS,
    },
    runtime,
    lima: process.platform === 'darwin' ? { limactl } : { note: 'not needed on Linux' },
    degraded,
  };
}

export interface CreateExecutorOptions {
  /** Project root (holds `.runtimes/` and `executor/runtimes/`); null when unknown. */
  projectRoot: string | null;
  /** Scratch space for materialised bundles. */
  workDir: string;
  logger?: Log;
  /**
   * Run sandboxes behind an agent instead of on this host: the argv that starts it (for Lima:
   * `limaAgentArgv(…)`; in tests a plain shell command). Null: local sandboxes.
   */
  agentArgv?: string[] | null;
  /**
   * The unix socket (absolute path on this host) the core's egress proxy listens on. Each connection to it
   * starts with one line, `SVC-EGRESS 1 <invocation id or ->\r\n`, then is an ordinary HTTP proxy
   * connection. Runners get `SVC_EGRESS_SOCKET` (under bubblewrap the socket is bound in at
   * `/run/svc-egress.sock`; the sandbox keeps its loopback-only network), relay from 127.0.0.1 to it and set
   * HTTP_PROXY, HTTPS_PROXY, http_proxy, https_proxy, ALL_PROXY to the relay and NO_PROXY/no_proxy to "".
   * Listen on it before createExecutor: a sandbox started while the socket is missing is not bound to it
   * (its relay answers 502), though spares made then are dropped, not handed out, once it exists.
   * Not used behind an agent (agentArgv: the socket is on this host, the sandboxes elsewhere). Unset: no proxy.
   */
  egressSocket?: string | null;
  /**
   * A PEM file (absolute host path) of the TLS roots runners trust: the host's roots and the core's egress CA,
   * so a recording or replaying run's HTTPS, whose TLS the core terminates, verifies (LocalHostOptions.caBundle).
   * Not used behind an agent (the file is on this host). Unset: the runtimes' own roots.
   */
  caBundle?: string | null;
  /**
   * Spare runners started ahead (executor/local-host.ts, SPARE_PLANS): `all` adds one per runtime that has imported
   * its framework (a Mastra or LangGraph cold start in milliseconds, ~0.1 GB each and ~0.4–1 s of CPU per start),
   * `plain` (the default here) only plain ones, `none` none. serve and the desktop app default to `all`.
   */
  spares?: SpareMode;
  /** Spares start once this settles (createLocalHost's sparesAfter): the core passes its listening. */
  sparesAfter?: Promise<unknown>;
}

export interface BuiltExecutor {
  executor: Executor;
  validateCode:
    ((input: { runtime: 'bun' | 'python'; entrypoint: string; files: Record<string, string> }) => Promise<CodeProblem[]>) | null;
  runtime: () => Promise<unknown>;
}

/**
 * The executor of this emulator. Where the runtimes are missing, every run fails with a clear reason
 * (and parity says so) instead of pretending.
 */
export async function createExecutor(opts: CreateExecutorOptions): Promise<BuiltExecutor> {
  const root = opts.projectRoot;
  if (!root || !existsSync(join(root, 'executor', 'runtimes'))) {
    return unavailable('the project root is unknown: the runners and runtimes cannot be found', opts.logger);
  }
  let host: SandboxHost;
  let runtime: RuntimeInfo;
  let limitReason: string;
  let runtimes: LocalRuntimePaths;
  let checkerHost: LocalSandboxHost;
  try {
    let local: LocalSandboxHost;
    ({
      host: local,
      runtime,
      limitReason,
      runtimes,
    } = await createLocalHost({
      projectRoot: root,
      workDir: opts.workDir,
      egressSocket: opts.egressSocket ?? null,
      caBundle: opts.caBundle ?? null,
      // Behind an agent this host only finds the runtimes (for the code checker): it starts no spares.
      spares: opts.agentArgv ? 'none' : (opts.spares ?? 'plain'),
      ...(opts.sparesAfter ? { sparesAfter: opts.sparesAfter } : {}),
      // A spare that dies unclaimed says why (its exit and stderr): nothing else would show it.
      onSpare: (e) => {
        if (e.type === 'died') opts.logger?.log('warn', 'a spare runner died unclaimed', { ...e });
        // A framework spare whose imports or warm-up failed still serves (slower): say so once.
        if (e.type === 'preloaded' && (e.failed.length || e.warmupFailed))
          opts.logger?.log('warn', 'a framework spare is not fully warm', { ...e });
      },
    }));
    host = checkerHost = local;
    if (opts.agentArgv) {
      // The local host stays for the code checkers' sandbox only (it starts no spares); it closes with the executor.
      host = (await spawnAgent(opts.agentArgv, `agent: ${opts.agentArgv[0]}`)).host;
      limitReason = `${limitReason} (sandboxes run behind the agent)`;
    }
  } catch (err) {
    return unavailable((err as Error).message, opts.logger);
  }
  const checker = createCodeChecker({
    bunBin: runtimes.bun?.bin ?? null,
    pythonBin: runtimes.python?.bin ?? null,
    runtimesDir: runtimes.runtimesDir,
    sandbox: (runtime, env) => checkerHost.checkerSandbox(runtime, env),
  });
  const executor = new PooledExecutor({
    host,
    onError: (msg, err) => opts.logger?.log('error', msg, { error: err instanceof Error ? err.message : String(err) }),
    onClose: () => {
      checker.close(); // the code checkers end with the executor, and the local host kept for them behind an agent
      if (checkerHost !== host) void checkerHost.close().catch(() => {});
    },
  });
  opts.logger?.log('info', 'executor ready', {
    backend: host.info.backend,
    sandbox: host.info.sandbox,
    transport: host.info.transport,
    degraded: host.info.degraded,
  });
  return {
    executor,
    validateCode: checker,
    runtime: async () => ({ ...runtime, limit_backend: limitReason, sandbox: host.info }),
  };
}

function unavailable(reason: string, logger?: Log): BuiltExecutor {
  logger?.log('warn', 'executor unavailable', { reason });
  return { executor: new UnavailableExecutor(reason), validateCode: null, runtime: async () => ({ error: reason }) };
}

/** Stands in when no runtime can run here: every invocation is `failed` with the reason. */
export class UnavailableExecutor implements Executor {
  readonly info: ExecutorInfo;
  constructor(private readonly reason: string) {
    this.info = { backend: 'none', sandbox: 'none', transport: 'none', parity: { status: 'degraded', reasons: [reason] } };
  }
  async run(_job: ExecutorJob): Promise<ExecutionResult> {
    return {
      outcome: 'failed',
      error: { code: 'failed', message: `snippets cannot run here: ${this.reason}` },
      usage: { duration_ms: 0, init_ms: 0, cpu_ms: 0, cpu_throttled_ms: 0, peak_memory_mb: 0 },
      timeline: [],
      logs: '',
      logs_truncated: false,
      parity: this.info.parity,
      warm: false,
    };
  }
  async retire() {
    return 0;
  }
  stats() {
    return { idle: 0, busy: 0, created: 0, reused: 0 };
  }
  async close() {}
}
