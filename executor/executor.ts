import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { LogBuffer } from './log-buffer';
import type { Sandbox, SandboxHost } from './sandbox-host';
import type { UsageSample } from './limits/types';
import { MemoryWatchdog } from './limits/watchdog';
import { MAX_STEPS_PER_RUN, type StepFrame } from './protocol';
import { HeldClock } from './debug/clock';
import { DebugRun } from './debug/run';
import type { DebugSpec } from './debug/types';
import type {
  ExecutionResult,
  Executor,
  ExecutorEvents,
  ExecutorInfo,
  ExecutorJob,
  Outcome,
  PrewarmJob,
  PrewarmResult,
  RetireFilter,
  RunSignal,
  TimelinePoint,
} from './types';

export interface ExecutorOptions {
  host: SandboxHost;
  /** Idle sandboxes older than this are destroyed. */
  idleTtlMs?: number;
  /** Host-wide budget of idle sandboxes (least recently used go first). */
  maxIdle?: number;
  /** Cgroup sampling period for the timeline and the memory watchdog. */
  sampleMs?: number;
  pidsMax?: number;
  tmpSizeMb?: number;
  now?: () => number;
  onError?: (msg: string, err: unknown) => void;
  /** More to end when the executor closes (e.g. the code checkers). */
  onClose?: () => void;
}

interface PoolEntry {
  sandbox: Sandbox;
  key: string;
  tenantId: string;
  snippetId: string;
  version: number;
  lastUsed: number;
}

type Verdict =
  | { kind: 'timeout' }
  | { kind: 'oom'; evidence: Record<string, unknown> }
  | { kind: 'cancelled' }
  | { kind: 'exited'; code: number | null; signal: string | null };

const MB = 1024 * 1024;

/**
 * The executor: a pool of warm sandboxes per (tenant, snippet, version, memory limit), one invocation
 * per sandbox at a time, and the run itself with its deadline, memory watchdog and cgroup sampling.
 */
export class PooledExecutor implements Executor {
  private readonly idle: PoolEntry[] = [];
  private readonly busy = new Map<Sandbox, Omit<PoolEntry, 'sandbox' | 'lastUsed'>>();
  /** Busy sandboxes retired while they ran: destroyed instead of pooled when their run ends. */
  private readonly retiring = new WeakSet<Sandbox>();
  /** The CPU quota each sandbox has now (set after init; re-set only when a run asks for another). */
  private readonly cpuQuota = new WeakMap<Sandbox, number>();
  /** Prewarms under way, by pool key: a run of that key waits for its sandbox; a retire marks them to go. */
  private readonly warming = new Map<
    string,
    { tenantId: string; snippetId: string; version: number; retired: boolean; done: Promise<void> }
  >();
  /** Debug runs under way: close() ends those still waiting for a debugger (their sandbox is not busy yet). */
  private readonly debugRuns = new Set<DebugRun>();
  private created = 0;
  private reused = 0;
  private closed = false;
  private readonly sweeper: NodeJS.Timeout;
  private readonly now: () => number;
  readonly info: ExecutorInfo;

  constructor(private readonly opts: ExecutorOptions) {
    this.now = opts.now ?? (() => performance.now());
    const h = opts.host.info;
    this.info = {
      backend: h.backend,
      sandbox: h.sandbox,
      transport: h.transport,
      parity: { status: h.degraded.length ? 'degraded' : 'full', reasons: [...h.degraded] },
    };
    this.sweeper = setInterval(() => void this.evictIdle(), Math.min(this.idleTtl, 5_000));
    this.sweeper.unref();
  }

  private get idleTtl() {
    return this.opts.idleTtlMs ?? 5 * 60_000;
  }

  stats() {
    const spares = this.opts.host.spareStats?.();
    return { idle: this.idle.length, busy: this.busy.size, created: this.created, reused: this.reused, ...(spares ? { spares } : {}) };
  }

  private keyOf(job: PrewarmJob) {
    return `${job.tenantId}:${job.snippetId}:${job.version}:${job.bundle.sha256}:${job.limits.max_memory_mb}`;
  }

  private async acquire(job: ExecutorJob, debug: DebugRun | null): Promise<{ sandbox: Sandbox; warm: boolean }> {
    // A debug run has a fresh sandbox of its own (its runtime started with its debugger), never a pooled one.
    if (debug) return { sandbox: await this.startSandbox(job, job.invocationId, debug.spec()), warm: false };
    const key = this.keyOf(job);
    const i = this.idle.findIndex((e) => e.key === key);
    if (i >= 0) {
      const [entry] = this.idle.splice(i, 1);
      this.reused++;
      return { sandbox: entry!.sandbox, warm: true };
    }
    const starting = this.warming.get(key);
    if (starting) {
      // Its prewarm is under way: take that sandbox (this run waited for its start, so it is not warm).
      await starting.done;
      const j = this.idle.findIndex((e) => e.key === key);
      if (j >= 0) return { sandbox: this.idle.splice(j, 1)[0]!.sandbox, warm: false };
    }
    return { sandbox: await this.startSandbox(job, job.invocationId), warm: false };
  }

  /** A new sandbox for a job's version (its bundle materialised first), in a limit group named after `id`. */
  private async startSandbox(job: PrewarmJob, id: string, debug?: DebugSpec): Promise<Sandbox> {
    const { host } = this.opts;
    if (!(await host.hasBundle(job.bundle.sha256))) {
      await host.materialize(job.bundle.sha256, job.bundle.entrypoint, await job.bundle.load());
    }
    const sandbox = await host.create({
      id,
      runtime: job.runtime,
      bundleSha: job.bundle.sha256,
      entrypoint: job.bundle.entrypoint,
      memoryMb: job.limits.max_memory_mb,
      pidsMax: this.opts.pidsMax ?? 256,
      tmpSizeMb: this.opts.tmpSizeMb ?? 64,
      // A debug sandbox runs without a CPU quota (its host sets none).
      cpuPercent: debug ? null : job.limits.max_cpu_percent,
      ...(debug ? { debug } : {}),
    });
    this.created++;
    return sandbox;
  }

  private release(job: PrewarmJob, sandbox: Sandbox) {
    if (this.closed || this.retiring.has(sandbox)) return void sandbox.destroy();
    this.idle.push({
      sandbox,
      key: this.keyOf(job),
      tenantId: job.tenantId,
      snippetId: job.snippetId,
      version: job.version,
      lastUsed: this.now(),
    });
    const max = this.opts.maxIdle ?? 16;
    while (this.idle.length > max) {
      this.idle.sort((a, b) => a.lastUsed - b.lastUsed);
      const evicted = this.idle.shift()!;
      void evicted.sandbox.destroy();
    }
  }

  private async evictIdle() {
    const cutoff = this.now() - this.idleTtl;
    for (let i = this.idle.length - 1; i >= 0; i--) {
      if (this.idle[i]!.lastUsed < cutoff) {
        const [e] = this.idle.splice(i, 1);
        await e!.sandbox.destroy().catch(() => {});
      }
    }
  }

  async retire(filter: RetireFilter): Promise<number> {
    const match = (e: PoolEntry) =>
      (filter.tenantId === undefined || e.tenantId === filter.tenantId) &&
      (filter.snippetId === undefined || e.snippetId === filter.snippetId) &&
      (filter.keepVersions === undefined || !filter.keepVersions.includes(e.version)) &&
      (filter.bundle === undefined || e.key.includes(`:${filter.bundle.version}:${filter.bundle.sha256}:`));
    const gone = this.idle.filter(match);
    for (const e of gone) this.idle.splice(this.idle.indexOf(e), 1);
    for (const [sandbox, e] of this.busy) if (match({ ...e, sandbox, lastUsed: 0 })) this.retiring.add(sandbox);
    for (const [key, w] of this.warming) if (match({ ...w, key, sandbox: null as never, lastUsed: 0 })) w.retired = true;
    await Promise.all(gone.map((e) => e.sandbox.destroy().catch(() => {})));
    return gone.length;
  }

  async prewarm(job: PrewarmJob): Promise<PrewarmResult> {
    const key = this.keyOf(job);
    const starting = this.warming.get(key);
    if (starting) starting.retired = false; // wanted again while it starts (the same bundle as this version)
    if (this.closed || starting || this.idle.some((e) => e.key === key)) return { outcome: 'skipped' };
    let done!: () => void;
    const entry = {
      tenantId: job.tenantId,
      snippetId: job.snippetId,
      version: job.version,
      retired: false,
      done: new Promise<void>((r) => (done = r)),
    };
    this.warming.set(key, entry);
    try {
      // Unique across executors of one process: it names a limit group.
      const sandbox = await this.startSandbox(job, `prewarm-${randomBytes(6).toString('hex')}`);
      if (sandbox.ready.t === 'init_error') {
        await sandbox.destroy().catch(() => {});
        return { outcome: 'handler_error', message: sandbox.ready.message };
      }
      if (entry.retired || this.closed) {
        await sandbox.destroy().catch(() => {});
        return { outcome: 'skipped' };
      }
      this.release(job, sandbox); // the idle pool: its budget, its TTL, retired with its version
      return { outcome: 'ready' };
    } catch (err) {
      // What a cold start of this version would have met (run() maps it the same way).
      const e = err as Error & { code?: string; evidence?: Record<string, unknown> };
      if (e.code === 'oom_killed') return { outcome: 'oom_killed', message: e.message, ...(e.evidence ? { evidence: e.evidence } : {}) };
      if (e.code === 'init_exit' || e.code === 'init_timeout') return { outcome: 'handler_error', message: e.message };
      return { outcome: 'failed', message: `the sandbox could not be started: ${e.message}` };
    } finally {
      this.warming.delete(key);
      done();
    }
  }

  async housekeep(): Promise<{ groups: number; files: number }> {
    return (await this.opts.host.housekeep?.()) ?? { groups: 0, files: 0 };
  }

  async run(job: ExecutorJob, events: ExecutorEvents, signal?: RunSignal): Promise<ExecutionResult> {
    if (!job.debug) return this.runOnce(job, events, signal, null);
    // A debug run (executor/debug/run.ts): its session lives exactly as long as the run.
    const debug = new DebugRun(job.runtime, job.debug, events, signal);
    this.debugRuns.add(debug);
    try {
      const result = await this.runOnce(job, events, signal, debug);
      return { ...result, debug: debug.summary() };
    } finally {
      this.debugRuns.delete(debug);
      debug.stop();
    }
  }

  private async runOnce(
    job: ExecutorJob,
    events: ExecutorEvents,
    signal: RunSignal | undefined,
    debug: DebugRun | null,
  ): Promise<ExecutionResult> {
    const logs = new LogBuffer();
    const started = this.now();
    const base = { logs: '', logs_truncated: false, parity: this.info.parity, timeline: [] as TimelinePoint[] };
    /** A run that ended before its handler started. */
    const early = (outcome: Outcome, message: string, evidence?: Record<string, unknown>): ExecutionResult => ({
      ...base,
      outcome,
      error: { code: outcome, message, ...(evidence ? { evidence } : {}) },
      usage: { duration_ms: Math.round(this.now() - started), init_ms: 0, cpu_ms: 0, cpu_throttled_ms: 0, peak_memory_mb: 0 },
      warm: false,
    });
    if (this.closed) return early('failed', 'the executor is shutting down');
    if (signal?.aborted) return early('cancelled', 'cancelled before it started');

    let sandbox: Sandbox;
    let warm: boolean;
    try {
      ({ sandbox, warm } = await this.acquire(job, debug));
    } catch (err) {
      const e = err as Error & { code?: string; evidence?: Record<string, unknown> };
      if (e.code === 'oom_killed') return early('oom_killed', e.message, e.evidence);
      // A debug run nobody attached to, or one cancelled while it waited for a debugger (executor/debug/wait.ts).
      if (e.code === 'attach_timeout') return early('cancelled', `${e.message}: the debug run was cancelled`);
      if (e.code === 'debug_closed') return early('cancelled', 'the invocation was cancelled while it waited for a debugger');
      // The tenant's module exited or never finished loading: its failure, not the service's.
      if (e.code === 'init_exit' || e.code === 'init_timeout') return early('handler_error', e.message);
      this.opts.onError?.('sandbox start failed', err);
      return early('failed', `the sandbox could not be started: ${e.message}`);
    }
    this.busy.set(sandbox, { key: this.keyOf(job), tenantId: job.tenantId, snippetId: job.snippetId, version: job.version });
    const initMs = warm ? 0 : Math.round(sandbox.initMs);
    try {
      if (sandbox.ready.t === 'init_error') {
        await sandbox.destroy();
        return {
          ...base,
          outcome: 'handler_error',
          error: { code: 'handler_error', message: sandbox.ready.message, stack: sandbox.ready.stack },
          usage: { duration_ms: 0, init_ms: initMs, cpu_ms: 0, cpu_throttled_ms: 0, peak_memory_mb: 0 },
          warm,
        };
      }
      return await this.execute(job, events, sandbox, warm, initMs, logs, signal, debug);
    } finally {
      this.busy.delete(sandbox);
    }
  }

  private async execute(
    job: ExecutorJob,
    events: ExecutorEvents,
    sandbox: Sandbox,
    warm: boolean,
    initMs: number,
    logs: LogBuffer,
    signal?: RunSignal,
    debug: DebugRun | null = null,
  ): Promise<ExecutionResult> {
    const { limits } = job;
    const limitBytes = limits.max_memory_mb * MB;
    if (warm) await sandbox.resetPeak?.().catch(() => {}); // this run's peak, not the sandbox's whole life's
    // The first and last samples: no watchdog check reads their anonymous memory (memory.stat: the costliest file).
    const first = await sandbox.sample(LEAN);
    // A spare's host set the quota before the snippet loaded (Sandbox.cpuPercent): not written again. A debug
    // sandbox has none for its whole life (it is never pooled).
    if (!sandbox.debug && (this.cpuQuota.has(sandbox) ? this.cpuQuota.get(sandbox) : sandbox.cpuPercent) !== limits.max_cpu_percent) {
      await sandbox.setCpuPercent(limits.max_cpu_percent);
      this.cpuQuota.set(sandbox, limits.max_cpu_percent);
    }
    const t0 = this.now();
    // The run's first point is `first`, taken a moment ago: the watchdog's first poll comes one period later.
    const timeline: TimelinePoint[] = [{ t_ms: 0, memory_mb: round1(first.memory_bytes / MB), cpu_percent: 0, throttled: false }];
    let peak = first.memory_bytes;
    let prev: UsageSample = first;

    let settle!: (v: Verdict) => void;
    const verdict = new Promise<Verdict>((r) => (settle = r));
    let decided: Verdict | null = null;
    let killing: Promise<void> = Promise.resolve();
    const decide = (v: Verdict) => {
      if (decided) return;
      decided = v;
      settle(v);
      // The verdict stands whatever the kill meets (a sandbox destroyed meanwhile): a failure is logged, never unhandled.
      if (v.kind !== 'exited')
        killing = sandbox.killAll().catch((err: unknown) => this.opts.onError?.('killing a decided run failed', err));
    };

    const onRaw = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      logs.append(text);
      events.onLog?.(stream, text);
    };
    const rawOut = onRaw('stdout');
    const rawErr = onRaw('stderr');
    const attach = (s: Readable | null, fn: (c: Buffer) => void) => s?.on('data', fn);
    attach(sandbox.stdout, rawOut);
    attach(sandbox.stderr, rawErr);

    // A debug run's clock stands still while a debugger holds it (executor/debug/clock.ts).
    const held = sandbox.debug;
    const clock = held ? new HeldClock(held, limits.timeout_ms, () => decide({ kind: 'timeout' }), this.now) : null;
    const deadline = held ? undefined : setTimeout(() => decide({ kind: 'timeout' }), limits.timeout_ms);
    const onAbort = () => decide({ kind: 'cancelled' });
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) onAbort(); // cancelled while the sandbox was starting: a listener added now never fires
    // Taken off again when the run ends: the sandbox outlives the run, and whatever listens on it keeps
    // this whole run (logs, timeline, reply, the caller's hooks) alive (docs/architecture.md, "Long-running core").
    const offExit = sandbox.onExit((e) => decide({ kind: 'exited', ...e }));

    // One poll feeds the timeline and the memory watchdog (the kernel's own OOM kill, or the group
    // pinned at its limit: under a tight CPU quota the kernel can take far longer to get there).
    const watchdog = new MemoryWatchdog({
      sample: () => sandbox.sample(),
      limitBytes,
      baseline: first,
      intervalMs: this.opts.sampleMs ?? 50,
      firstAfterMs: this.opts.sampleMs ?? 50,
      onSample: (s) => {
        peak = Math.max(peak, s.memory_bytes, s.memory_peak_bytes ?? 0);
        const dt = s.at_ms - prev.at_ms;
        timeline.push({
          t_ms: Math.round(s.at_ms - t0),
          memory_mb: round1(s.memory_bytes / MB),
          cpu_percent: dt > 0 ? round1(((s.cpu_usage_ns - prev.cpu_usage_ns) / 1e6 / dt) * 100) : 0,
          throttled: s.cpu_throttled_ns > prev.cpu_throttled_ns,
        });
        prev = s;
      },
      onOom: (e) =>
        decide({
          kind: 'oom',
          evidence: {
            memory_mb: round1(e.usage / MB),
            limit_mb: limits.max_memory_mb,
            limit_hits: e.limit_hits - first.limit_hits,
            kernel_oom_kills: e.oom_kills - first.oom_kills,
            detected_by: e.reason === 'kernel_oom_kill' ? 'kernel oom_kill counter' : 'memory pinned at the limit',
            after_ms: Math.round(e.after_ms),
          },
        }),
    });
    watchdog.start();

    const steps = new StepCap(events);
    let reply: Awaited<ReturnType<Sandbox['channel']['invoke']>> | null = null;
    try {
      reply = await Promise.race([
        sandbox.channel.invoke(job.invocationId, job.input, job.env, {
          onChunk: (d) => events.onChunk?.(d),
          onStep: events.onStep && ((f) => steps.pass(f)),
          onGraph: events.onGraph && (({ t: _t, id: _id, ...graph }) => events.onGraph!(graph)),
          onLog: (stream, data) => {
            logs.append(data);
            events.onLog?.(stream, data);
          },
          onCall: (op, args) =>
            events.onCall(op, args, (line) => {
              const text = line.endsWith('\n') ? line : `${line}\n`;
              logs.append(text);
              events.onLog?.('stderr', text);
            }),
        }),
        verdict.then(() => null),
      ]);
    } catch (err) {
      // The channel broke (the runner died mid-frame): the verdict, if any, explains it.
      await Promise.race([verdict, sleep(200)]);
      if (!decided) decide({ kind: 'exited', code: null, signal: `channel error: ${(err as Error).message}` });
    } finally {
      clearTimeout(deadline);
      clock?.stop();
      watchdog.stop();
      signal?.removeEventListener('abort', onAbort);
      offExit();
    }
    const duration = this.now() - t0;
    const end = await sandbox.sample(LEAN).catch(() => prev);
    peak = Math.max(peak, end.memory_bytes, end.memory_peak_bytes ?? 0);
    sandbox.stdout?.off('data', rawOut);
    sandbox.stderr?.off('data', rawErr);

    let outcome: Outcome;
    let error: ExecutionResult['error'];
    let output: unknown;
    const v = decided as Verdict | null;
    if (reply?.logsDropped) logs.addDropped(reply.logsDropped);
    if (reply && !v) {
      if (reply.kind === 'result') {
        outcome = 'success';
        output = reply.output;
      } else {
        outcome = 'handler_error';
        error = { code: 'handler_error', message: reply.message, stack: reply.stack };
      }
    } else if (v?.kind === 'timeout') {
      outcome = 'timeout';
      const heldNote = debug?.heldMs ? `, not counting ${debug.heldMs} ms held by the debugger` : '';
      error = { code: 'timeout', message: `the run exceeded timeout_ms (${limits.timeout_ms} ms${heldNote}) and was killed` };
    } else if (v?.kind === 'oom' || end.oom_kills > first.oom_kills) {
      outcome = 'oom_killed';
      const evidence =
        v?.kind === 'oom'
          ? v.evidence
          : { kernel_oom_kills: end.oom_kills - first.oom_kills, limit_mb: limits.max_memory_mb, detected_by: 'kernel oom_kill counter' };
      error = { code: 'oom_killed', message: `the run exceeded max_memory_mb (${limits.max_memory_mb} MB) and was killed`, evidence };
    } else if (v?.kind === 'cancelled') {
      outcome = 'cancelled';
      error = { code: 'cancelled', message: 'the invocation was cancelled' };
    } else {
      const e = v?.kind === 'exited' ? v : { code: null, signal: null };
      outcome = 'handler_error';
      error = {
        code: 'handler_error',
        message: `the snippet's process exited during the run (${e.signal ? `signal ${e.signal}` : `exit code ${e.code}`})`,
      };
    }
    if (outcome === 'oom_killed' && timeline.length) {
      // A 50 ms poll can miss the last climb before the kill: the kernel's peak counter is the evidence.
      const lastMb = timeline[timeline.length - 1]!.memory_mb;
      if (round1(peak / MB) > lastMb)
        timeline.push({ t_ms: Math.round(duration), memory_mb: round1(peak / MB), cpu_percent: 0, throttled: false });
    }
    // What the run started (a background child, a double-forked daemon) goes before the sandbox is pooled;
    // the warm runner stays. A sandbox whose leftovers survived is not reused, nor one whose run met the process
    // cap: the runner's own threads may have failed to start then (Bun aborted on its next run, exit 134).
    const metPidsCap = (end.pids_limit_hits ?? 0) > (first.pids_limit_hits ?? 0);
    // A debug sandbox is never pooled: destroyed (its relay closed, its socket dir removed) before the run returns.
    if (!sandbox.debug && (outcome === 'success' || (outcome === 'handler_error' && !v)) && !metPidsCap && (await reaped(sandbox)))
      this.release(job, sandbox);
    else {
      // After the verdict's kill, not beside it: two freeze-kill-thaw rounds on one group at once thaw each
      // other's freeze, and the later one waited out its whole bound (a timeout answered 1 s late).
      await killing;
      await sandbox.destroy().catch(() => {});
    }

    return {
      outcome,
      ...(outcome === 'success' ? { output } : {}),
      ...(error ? { error } : {}),
      usage: {
        duration_ms: Math.round(duration),
        init_ms: initMs,
        cpu_ms: Math.round((end.cpu_usage_ns - first.cpu_usage_ns) / 1e6),
        cpu_throttled_ms: Math.round((end.cpu_throttled_ns - first.cpu_throttled_ns) / 1e6),
        peak_memory_mb: round1(peak / MB),
      },
      timeline,
      logs: logs.text(),
      logs_truncated: logs.truncated,
      parity: this.info.parity,
      warm,
      ...(steps.dropped ? { steps_dropped: steps.dropped } : {}),
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.opts.onClose?.();
    clearInterval(this.sweeper);
    for (const d of this.debugRuns) d.cancel();
    const all = [...this.idle.map((e) => e.sandbox), ...this.busy.keys()];
    this.idle.length = 0;
    await Promise.all(all.map((s) => s.destroy().catch(() => {})));
    await this.opts.host.close();
  }
}

/** Sandbox.reap, where the host has it: true when only the sandbox's own processes are left. */
async function reaped(sandbox: Sandbox): Promise<boolean> {
  if (!sandbox.reap) return true;
  return sandbox.reap().then(
    () => true,
    () => false,
  );
}

/**
 * One run's agent steps on their way to the core: the first MAX_STEPS_PER_RUN started steps pass (with their
 * ends); a later start, and its end, is dropped and counted. Per run: it goes with the run.
 */
class StepCap {
  private readonly started = new Set<string>();
  dropped = 0;
  constructor(private readonly events: ExecutorEvents) {}
  pass({ t: _t, id: _id, ...step }: StepFrame): void {
    if (step.phase === 'start') {
      if (this.started.has(step.step_id)) return;
      if (this.started.size >= MAX_STEPS_PER_RUN) {
        this.dropped++;
        return;
      }
      this.started.add(step.step_id);
    } else if (!this.started.has(step.step_id)) {
      if (this.started.size < MAX_STEPS_PER_RUN)
        this.started.add(step.step_id); // an end with no start: kept as one step
      else return;
    }
    this.events.onStep?.(step);
  }
}

const round1 = (x: number) => Math.round(x * 10) / 10;
const LEAN = { anon: false } as const;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
