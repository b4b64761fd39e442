// Issue 14, item 2: a run must leave nothing of itself behind on the warm sandbox it ran on. A fake host
// hands out one sandbox whose runner never exits (a warm sandbox, as in production) and answers each
// invoke over a real RunnerChannel; after N runs, every run's hooks object (which the run's closures hold)
// must be collectable. The old executor chained `sandbox.exited.then(...)` per run: all N stayed.
import { describe, expect, it } from 'vitest';
import { Duplex, PassThrough } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { PooledExecutor } from '../../executor/executor';
import { ExitEvent, type ExitStatus } from '../../executor/exit-event';
import { RunnerChannel } from '../../executor/runner-client';
import type { Sandbox, SandboxHost } from '../../executor/sandbox-host';
import type { UsageSample } from '../../executor/limits/types';
import type { ExecutorEvents, ExecutorJob } from '../../executor/types';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const READY = { t: 'ready', init_ms: 1, runtime: { name: 'bun', version: '1.4.4' } } as const;

/** A runner that answers every invoke with one 64 KiB log line and a result; it never exits unless told. */
function fakeSandbox(id: string) {
  const toHost = new PassThrough();
  const fromHost = new PassThrough();
  const channel = new RunnerChannel(Duplex.from({ readable: toHost, writable: fromHost }));
  let buf = '';
  fromHost.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const frame = JSON.parse(buf.slice(0, nl)) as { t: string; id: string };
      buf = buf.slice(nl + 1);
      if (frame.t !== 'invoke') continue;
      toHost.write(`${JSON.stringify({ t: 'log', id: frame.id, stream: 'stdout', data: 'x'.repeat(64 * 1024) })}\n`);
      toHost.write(`${JSON.stringify({ t: 'result', id: frame.id, output: { ok: true } })}\n`);
    }
  });
  toHost.write(`${JSON.stringify(READY)}\n`);
  let exit!: (e: ExitStatus) => void;
  const exited = new Promise<ExitStatus>((r) => (exit = r));
  const exitEvent = new ExitEvent(exited);
  const sample = async (): Promise<UsageSample> => ({
    at_ms: performance.now(),
    memory_bytes: 1e6,
    memory_peak_bytes: null,
    cpu_usage_ns: 0,
    cpu_throttled_ns: 0,
    oom_kills: 0,
    limit_hits: 0,
  });
  const sandbox: Sandbox = {
    id,
    channel,
    ready: READY,
    initMs: 1,
    setCpuPercent: async () => {},
    sample,
    killAll: async () => {},
    destroy: async () => {
      channel.close();
      exit({ code: 0, signal: null });
    },
    exited,
    onExit: (fn) => exitEvent.on(fn),
    stdout: new PassThrough(),
    stderr: new PassThrough(),
  };
  return { sandbox, channel, exitEvent, ready: channel.waitReady(1000) };
}

function fakeHost() {
  const made: ReturnType<typeof fakeSandbox>[] = [];
  const host: SandboxHost = {
    info: { backend: 'none', sandbox: 'none', transport: 'test', degraded: [] },
    materialize: async () => {},
    hasBundle: async () => true,
    create: async (spec) => {
      const s = fakeSandbox(spec.id);
      await s.ready;
      made.push(s);
      return s.sandbox;
    },
    close: async () => {},
  };
  return { host, made };
}

const job = (i: number): ExecutorJob => ({
  invocationId: `inv_${i}`,
  tenantId: 't',
  snippetId: 's',
  version: 1,
  runtime: 'bun',
  bundle: { sha256: 'a'.repeat(64), entrypoint: 'index.ts', load: async () => ({}) },
  limits: { timeout_ms: 5000, max_memory_mb: 128, max_cpu_percent: 100 },
  input: { i },
  env: {},
});

/** Forces full collections, with turns of the event loop between (WeakRefs are cleared after a job ends). */
async function collect() {
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setImmediate(r));
    gc();
  }
}

/**
 * N runs, one after the other; only weak references to each run's hooks come back. (In a function of its
 * own: a suspended async function's frame would keep its last loop iteration's hooks reachable.)
 */
async function runMany(executor: PooledExecutor, n: number): Promise<WeakRef<object>[]> {
  const refs: WeakRef<object>[] = [];
  for (let i = 0; i < n; i++) {
    const events: ExecutorEvents = { onLog: () => {}, onCall: async () => null };
    refs.push(new WeakRef(events));
    const result = await executor.run(job(i), events);
    expect(result.outcome, JSON.stringify(result.error)).toBe('success');
    expect(result.logs.length).toBe(64 * 1024);
    expect(result.warm).toBe(i > 0);
  }
  return refs;
}

describe('no per-invocation retention in the executor', () => {
  it('keeps nothing of a finished run alive on a warm sandbox whose runner has not exited', async () => {
    const { host, made } = fakeHost();
    const executor = new PooledExecutor({ host, sampleMs: 5 });
    const N = 30;
    try {
      const refs = await runMany(executor, N);
      expect(made.length, 'one warm sandbox served every run').toBe(1);
      expect(made[0]!.exitEvent.size, 'no exit listener left attached between runs').toBe(0);
      await collect();
      const alive = refs.filter((r) => r.deref() !== undefined).length;
      expect(alive, `runs whose context is still reachable, of ${N}`).toBe(0);
    } finally {
      await executor.close();
    }
  });

  it('still tells a run that its runner exited mid-run (the listener a run sets is the one that fires)', async () => {
    const { host, made } = fakeHost();
    const executor = new PooledExecutor({ host, sampleMs: 5 });
    try {
      expect((await executor.run(job(0), { onCall: async () => null })).outcome).toBe('success');
      const s = made[0]!;
      // The next invoke gets no answer; the runner exits instead.
      s.channel.invoke = () => new Promise(() => {});
      const run = executor.run(job(1), { onCall: async () => null });
      await new Promise((r) => setImmediate(r));
      expect(s.exitEvent.size, 'the running invocation listens for the exit').toBe(1);
      await s.sandbox.destroy();
      const result = await run;
      expect(result.outcome).toBe('handler_error');
      expect(result.error?.message).toMatch(/exited during the run \(exit code 0\)/);
    } finally {
      await executor.close();
    }
  });
});

describe('ExitEvent', () => {
  it('calls a listener once at the exit, not one that left, and one that comes after the exit in a microtask', async () => {
    let exit!: (e: ExitStatus) => void;
    const ev = new ExitEvent(new Promise<ExitStatus>((r) => (exit = r)));
    const seen: string[] = [];
    ev.on((e) => seen.push(`stays:${e.code}`));
    const off = ev.on(() => seen.push('left'));
    off();
    expect(ev.size).toBe(1);
    exit({ code: 3, signal: null });
    await Promise.resolve();
    await Promise.resolve();
    expect(seen).toEqual(['stays:3']);
    expect(ev.size).toBe(0);
    const late = new Promise<ExitStatus>((r) => ev.on(r));
    expect(await late).toEqual({ code: 3, signal: null });
    const offLate = ev.on(() => seen.push('late-left'));
    offLate();
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual(['stays:3']);
  });
});
