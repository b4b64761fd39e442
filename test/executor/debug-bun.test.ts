/**
 * Issue 19, lane A: a debug run of a Bun snippet in the real executor (PooledExecutor over LocalSandboxHost: this
 * host's limit backend, bubblewrap, a root core dropping to the sandbox's uid), with a debugger of our own over the
 * relay (test/helpers/inspector-client.ts). Bun's inspector speaks the WebKit Inspector Protocol: breakpoints are
 * inactive until Debugger.setBreakpointsActive, and Inspector.initialized is what lets `--inspect-wait` run the
 * runner. A breakpoint set on index.ts line N (of TypeScript with lines the transpiler drops) stops on line N; the
 * debugger sits there past timeout_ms and the run still succeeds (the clock stands still while it is held), where
 * the same wait without a debugger times out.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import { join } from 'node:path';
import { rm } from 'node:fs/promises';
import { createExecutor } from '../../executor';
import { PooledExecutor } from '../../executor/executor';
import { LocalSandboxHost } from '../../executor/local-host';
import { gate } from '../../executor/debug/relay';
import { detectLimitBackend } from '../../executor/limits/detect';
import { readRuntimeInfo } from '../../executor/runtime-info';
import type { DebugEvent, ExecutionResult, Executor, ExecutorJob } from '../../executor/types';
import { PROJECT_ROOT, tempDir } from '../helpers/core';
import CDP from 'chrome-remote-interface';
import { accepts, debugEvents, debugRunEvents } from '../helpers/debug-events';
import { InlineSourceMap, InspectorSession } from '../helpers/inspector-client';
import { loudSkip } from './_helpers';

const installed = existsSync(join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json'));

// Lines 1–6 are TypeScript the transpiler drops: without a source mapping a breakpoint would land 6 lines off.
const CODE = `interface Input {
  n: number;
  note?: string;
}
type Out = { label: string; doubled: number };

export default async function handler(input: Input): Promise<Out> {
  const doubled: number = input.n * 2;
  const label = \`n=\${doubled}\`;
  return { label, doubled };
}
`;
/** 1-based line of `const label = …` (the breakpoint's line). */
const BREAK_LINE = 9;

/** Stops itself at a `debugger;` statement with a local in scope (no type-only lines: no mapping needed). */
const CODE_DEBUGGER = `export default async function handler(input: { n: number }) {
  const doubled = input.n * 2;
  debugger;
  return { doubled };
}
`;

/** Busy for `ms` (the handler's own wait, no debugger): a run that outlasts its timeout_ms. */
const BUSY = `export default async function handler(input: { ms: number }) {
  const end = Date.now() + input.ms;
  while (Date.now() < end) {}
  return { waited: input.ms };
}
`;

/** Holds `mb` MB (touched, so resident). */
const HOG = `export default async function handler(input: { mb: number }) {
  const held: Uint8Array[] = [];
  for (let i = 0; i < input.mb; i++) held.push(new Uint8Array(1024 * 1024).fill(1));
  return { held: held.length };
}
`;

let executor: Executor;
let workDir: string;
let seq = 0;

beforeAll(async () => {
  if (!installed) return;
  workDir = await tempDir('svc-emu-debug-bun-');
  ({ executor } = await createExecutor({ projectRoot: PROJECT_ROOT, workDir, spares: 'none' }));
}, 60_000);
afterAll(async () => {
  await executor?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

function job(code: string, input: Record<string, unknown>, o: { timeout_ms?: number; debug?: ExecutorJob['debug'] } = {}): ExecutorJob {
  const files = { 'index.ts': code };
  const sha = createHash('sha256').update(code).digest('hex');
  seq++;
  return {
    invocationId: `dbg-${process.pid}-${seq}`,
    tenantId: 't-debug',
    snippetId: `s-debug-${seq}`,
    version: 1,
    runtime: 'bun',
    bundle: { sha256: sha, entrypoint: 'index.ts', load: async () => files },
    limits: { timeout_ms: o.timeout_ms ?? 1000, max_memory_mb: 256, max_cpu_percent: 10 },
    input,
    env: {},
    ...(o.debug ? { debug: o.debug } : {}),
  };
}

/** Runs `j` and hands every debug event to `onDebug` as it comes. */
function run(
  j: ExecutorJob,
  onDebug: (e: DebugEvent) => void = () => {},
  signal?: AbortSignal,
  ex: Executor = executor,
): Promise<ExecutionResult> {
  return ex.run(j, debugRunEvents(onDebug), signal);
}

/** Host processes whose command line holds `needle`: pid, argv[0] and real uid (from /proc). */
function hostProcesses(needle: string): { pid: number; argv0: string; uid: number }[] {
  const out: { pid: number; argv0: string; uid: number }[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (!cmd.includes(needle)) continue;
      const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${d}/status`, 'utf8'))![1]);
      out.push({ pid: Number(d), argv0: cmd.split('\0')[0]!, uid });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * The CPU quota of the limit group holding a process of this invocation (groups are named after it), read from the
 * cgroup files: v1 cpu.cfs_quota_us (-1: none), v2 cpu.max ("max …": none). Null where no such group is found.
 */
function cpuQuotaOf(invocationId: string): string | null {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let text: string;
    try {
      text = readFileSync(`/proc/${d}/cgroup`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
      if (!path?.includes(invocationId)) continue;
      const files =
        controllers === ''
          ? [`/sys/fs/cgroup${path}/cpu.max`, `/sys/fs/cgroup/unified${path}/cpu.max`]
          : controllers!.split(',').includes('cpu')
            ? [`/sys/fs/cgroup/${controllers}${path}/cpu.cfs_quota_us`, `/sys/fs/cgroup/cpu${path}/cpu.cfs_quota_us`]
            : [];
      for (const f of files) if (existsSync(f)) return readFileSync(f, 'utf8').trim();
    }
  }
  return null;
}

/**
 * Attaches to a waiting debug run as a source-map-aware debugger and stops on TypeScript line BREAK_LINE of CODE
 * (run with input `n`): checks the mapping both ways and the local `doubled` (2n). Returns the session and frame.
 */
async function breakOnLine(waiting: DebugEvent, evs: ReturnType<typeof debugEvents>, n = 21): Promise<{ s: InspectorSession; top: any }> {
  const s = await InspectorSession.connect(waiting.url);
  await evs.next('attached');
  await s.enableDebugger();
  const url = `${waiting.remoteRoot}/index.ts`;
  // The inspector knows only the transpiled module (TypeScript's type-only lines gone) and hands its source map
  // over with scriptParsed. A debugger does what Bun's VS Code extension does: a placeholder breakpoint on the
  // file (it stops the run once the file is loaded, before the handler's line can run), then the real one at
  // the generated position of TypeScript line N, from the map.
  const placeholder = await s.call('Debugger.setBreakpointByUrl', { url, lineNumber: 0, columnNumber: 0 });
  await s.call('Inspector.initialized'); // lets --inspect-wait run the runner
  const first = await s.waitEvent('Debugger.paused', 15_000);
  expect(first.params.data?.breakpointId).toBe(placeholder.breakpointId);
  const parsed = s.events.find((e) => e.method === 'Debugger.scriptParsed' && e.params.url === url);
  expect(parsed, `scriptParsed of ${url}`).toBeTruthy();
  expect(parsed!.params.sourceMapURL).toMatch(/^data:application\/json;base64,/);
  const map = InlineSourceMap.fromUrl(parsed!.params.sourceMapURL);
  expect(map.map.sourcesContent?.[0]).toBe(CODE); // the map carries the TypeScript itself
  const at = map.generated(BREAK_LINE - 1)!;
  expect(at, `a mapping for line ${BREAK_LINE}`).toBeTruthy();
  expect(at.lineNumber).toBeLessThan(BREAK_LINE - 1); // the transpiled line differs: the mapping matters
  const bp = await s.call('Debugger.setBreakpoint', { location: { scriptId: parsed!.params.scriptId, ...at } });
  await s.call('Debugger.removeBreakpoint', { breakpointId: placeholder.breakpointId });
  const from = s.events.length;
  await s.call('Debugger.resume');

  const paused = await s.waitEvent('Debugger.paused', 15_000, () => true, from);
  expect(paused.params.data?.breakpointId).toBe(bp.breakpointId);
  const top = paused.params.callFrames[0];
  expect(top.location.scriptId).toBe(parsed!.params.scriptId);
  expect(map.original(top.location.lineNumber, top.location.columnNumber)?.line).toBe(BREAK_LINE - 1);
  expect(top.functionName).toBe('handler');
  const local = await s.call('Debugger.evaluateOnCallFrame', { callFrameId: top.callFrameId, expression: 'doubled' });
  expect(local.result).toMatchObject({ type: 'number', value: n * 2 });
  return { s, top };
}

describe('debug runs of a Bun snippet (real executor, real Bun inspector)', () => {
  it('stops on the TypeScript line, reads a local, holds the run past its timeout, and succeeds', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    if (executor.info.sandbox !== 'bwrap') loudSkip('bubblewrap-only checks', 'no parity sandbox here');
    const evs = debugEvents();
    const idleBefore = executor.stats().idle;
    const j = job(CODE, { n: 21 }, { timeout_ms: 1000, debug: { attachTimeoutMs: 30_000 } });
    const done = run(j, (e) => evs.push(e));
    const waiting = await evs.next('waiting');
    expect(waiting.protocol).toBe('inspector');
    expect(waiting.host).toBe('127.0.0.1');
    expect(waiting.url).toBe(`ws://127.0.0.1:${waiting.port}/`);
    if (executor.info.sandbox === 'bwrap') expect(waiting.remoteRoot).toBe('/opt/svc/app');

    const { s, top } = await breakOnLine(waiting, evs);

    // As root, the runner on the host is the sandbox's uid (dropped by setpriv), never 0; the CPU quota is not set.
    if (process.getuid?.() === 0 && executor.info.sandbox === 'bwrap') {
      const procs = hostProcesses('--inspect-wait=ws+unix:///run/svc-debug/debug.sock');
      const bun = procs.filter((p) => p.argv0.endsWith('/bun'));
      expect(bun.length, JSON.stringify(procs)).toBeGreaterThan(0);
      for (const p of bun) expect(p.uid, `pid ${p.pid}`).not.toBe(0);
      const uid = await s.call('Debugger.evaluateOnCallFrame', { callFrameId: top.callFrameId, expression: 'process.getuid()' });
      expect(uid.result.value).toBe(bun[0]!.uid);
    } else {
      void ctx.annotate('not root under bubblewrap: the uid check does not apply');
    }

    // The handler runs with no CPU quota on its group (max_cpu_percent is 10 here).
    const quota = cpuQuotaOf(j.invocationId);
    if (quota === null) void ctx.annotate(`no cpu controller group of ${j.invocationId} found (limit backend ${executor.info.backend})`);
    else expect(quota).toMatch(/^(-1|max \d+)$/);

    // Paused past the run's timeout_ms (1000 ms): waiting here is the scenario, not a decision.
    const heldFor = 2500;
    await new Promise((r) => setTimeout(r, heldFor));
    // The run ends as soon as the handler returns, and the relay cuts the debugger off with it: the answer to
    // resume may be cut off too.
    void s.call('Debugger.resume').catch(() => {});
    const result = await done;
    await s.close();
    expect(result.outcome, JSON.stringify(result.error)).toBe('success');
    expect(result.output).toEqual({ label: 'n=42', doubled: 42 });
    expect(result.debug).toMatchObject({ protocol: 'inspector', attached: true });
    expect(result.debug!.held_ms).toBeGreaterThanOrEqual(heldFor);
    expect(result.warm).toBe(false);
    // The relay is gone with the run.
    expect(await accepts(waiting.port)).toBe(false);
    expect(evs.seen.map((e) => e.state)).toEqual(['waiting', 'attached', 'detached']);
    expect(executor.stats().idle).toBe(idleBefore); // never pooled
  }, 60_000);

  it('a stock Chrome DevTools Protocol client (chrome-remote-interface) stops at a breakpoint and reads a local', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    const evs = debugEvents();
    const j = job(CODE_DEBUGGER, { n: 4 }, { debug: { attachTimeoutMs: 30_000 } });
    const done = run(j, (e) => evs.push(e));
    const waiting = await evs.next('waiting');
    // `local`: the protocol's description from the package, no HTTP discovery (the relay serves only the WebSocket).
    const client = (await CDP({ target: waiting.url, local: true })) as unknown as {
      send(method: string, params?: object): Promise<any>;
      on(event: string, listener: (params: any) => void): void;
      close(): Promise<void>;
    };
    try {
      const paused = new Promise<any>((resolve) => client.on('Debugger.paused', resolve));
      await client.send('Debugger.enable');
      await client.send('Debugger.setBreakpointsActive', { active: true });
      // WebKit's inspector (Bun's) pauses on `debugger;` only when asked, and runs a waiting program on `Inspector.initialized`.
      await client.send('Debugger.setPauseOnDebuggerStatements', { enabled: true });
      await client.send('Inspector.initialized');
      const { callFrames } = await paused;
      expect(callFrames[0].functionName).toBe('handler');
      const local = await client.send('Debugger.evaluateOnCallFrame', { callFrameId: callFrames[0].callFrameId, expression: 'doubled' });
      expect(local.result).toMatchObject({ type: 'number', value: 8 });
      // The run ends as soon as the handler returns and the relay cuts the debugger with it: the answer may not come.
      void client.send('Debugger.resume').catch(() => {});
      const result = await done;
      expect(result.outcome, JSON.stringify(result.error)).toBe('success');
      expect(result.output).toEqual({ doubled: 8 });
    } finally {
      await client.close().catch(() => {});
    }
  }, 60_000);

  it('a run nobody attaches to is cancelled at its attach timeout, and its port closes', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    const evs = debugEvents();
    const t0 = performance.now();
    const result = await run(job(CODE, { n: 1 }, { debug: { attachTimeoutMs: 400 } }), (e) => evs.push(e));
    const ms = performance.now() - t0;
    expect(result.outcome).toBe('cancelled');
    expect(result.error?.message).toBe('no debugger attached within 400 ms: the debug run was cancelled');
    expect(result.debug).toEqual({ protocol: 'inspector', attached: false, held_ms: 0 });
    expect(ms).toBeLessThan(10_000);
    expect(evs.seen.map((e) => e.state)).toEqual(['waiting']);
    expect(await accepts(evs.seen[0]!.port)).toBe(false);
  }, 30_000);

  it('a debugger that leaves before letting the program run: another may attach and run it; if none does, the run is cancelled saying so', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    // Another debugger comes back: the run goes on from where Bun waits.
    const evs = debugEvents();
    const done = run(job(CODE, { n: 5 }, { debug: { attachTimeoutMs: 60_000 } }), (e) => evs.push(e));
    const waiting = await evs.next('waiting');
    const first = await InspectorSession.connect(waiting.url);
    await evs.next('attached');
    await first.close(); // before Inspector.initialized: the program has not started
    await evs.next('detached');
    const second = await InspectorSession.connect(waiting.url);
    void second.call('Inspector.initialized').catch(() => {}); // the run may end before the answer comes
    const result = await done;
    await second.close();
    expect(result.outcome, JSON.stringify(result.error)).toBe('success');
    expect(result.output).toEqual({ label: 'n=10', doubled: 10 });
    expect(evs.seen.map((e) => e.state)).toEqual(['waiting', 'attached', 'detached', 'attached', 'detached']);

    // None comes back: the start's budget of time with no debugger connected runs out.
    const evs2 = debugEvents();
    const done2 = run(job(CODE, { n: 1 }, { debug: { attachTimeoutMs: 5_000 } }), (e) => evs2.push(e));
    const waiting2 = await evs2.next('waiting');
    const gone = await InspectorSession.connect(waiting2.url);
    await evs2.next('attached');
    await gone.close();
    const result2 = await done2;
    expect(result2.outcome).toBe('cancelled');
    expect(result2.error?.message).toBe(
      'no debugger held the run for 5 s before its program started (the debugger left before letting it run): the debug run was cancelled',
    );
    expect(result2.debug).toMatchObject({ protocol: 'inspector', attached: true });
    expect(await accepts(waiting2.port)).toBe(false);
  }, 60_000);

  it('a debug port already taken fails the run with a message that says how to pick another', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const result = await run(job(CODE, { n: 1 }, { debug: { port, attachTimeoutMs: 5_000 } }), () => {});
      expect(result.outcome).toBe('failed');
      expect(result.error?.message).toContain(`debug port ${port} on 127.0.0.1 is in use`);
      expect(result.error?.message).toContain('X-Emu-Debug: 1');
    } finally {
      await new Promise((r) => taken.close(r));
    }
  }, 30_000);

  it('a cancel while it waits for a debugger ends it at once', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    const evs = debugEvents();
    const ac = new AbortController();
    const done = run(job(CODE, { n: 1 }, { debug: { attachTimeoutMs: 60_000 } }), (e) => evs.push(e), ac.signal);
    const waiting = await evs.next('waiting');
    const t0 = performance.now();
    ac.abort();
    const result = await done;
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(result.outcome).toBe('cancelled');
    expect(result.error?.message).toMatch(/cancelled while it waited for a debugger/);
    expect(await accepts(waiting.port)).toBe(false);
  }, 30_000);

  it('runs without the CPU quota (max_cpu_percent does not apply to a debug run)', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    if (executor.info.backend === 'none') ctx.skip('no CPU quota on the none limit backend');
    const busyMs = 800;
    const evs = debugEvents();
    const j = job(BUSY, { ms: busyMs }, { timeout_ms: 10_000, debug: { attachTimeoutMs: 30_000 } });
    const done = run(j, (e) => evs.push(e));
    const s = await InspectorSession.connect((await evs.next('waiting')).url);
    await s.call('Inspector.enable');
    await s.call('Debugger.enable');
    await s.call('Inspector.initialized');
    const debugRun = await done;
    await s.close();
    const capped = await run(job(BUSY, { ms: busyMs }, { timeout_ms: 10_000 }));
    expect(debugRun.outcome, JSON.stringify(debugRun.error)).toBe('success');
    expect(capped.outcome, JSON.stringify(capped.error)).toBe('success');
    // At 10 % the handler is throttled; without a quota it never is.
    // (The share of a core each got is not compared: this 2-core machine is shared, its load is often ~10.)
    expect(debugRun.usage.cpu_throttled_ms).toBe(0);
    expect(capped.usage.cpu_throttled_ms).toBeGreaterThan(0);
    void ctx.annotate(
      `cpu_ms: debug ${debugRun.usage.cpu_ms}, capped ${capped.usage.cpu_ms} (${capped.usage.cpu_throttled_ms} ms throttled)`,
    );
  }, 60_000);

  it('the clock goes on with the time left when the debugger leaves', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    const evs = debugEvents();
    // 3 s of work, a 1 s timeout: held for the first ~1 s, then 1 s left for the ~2 s still to do.
    const done = run(job(BUSY, { ms: 3000 }, { timeout_ms: 1000, debug: { attachTimeoutMs: 30_000 } }), (e) => evs.push(e));
    const s = await InspectorSession.connect((await evs.next('waiting')).url);
    await s.call('Inspector.enable');
    await s.call('Debugger.enable');
    await s.call('Inspector.initialized');
    await new Promise((r) => setTimeout(r, 1000)); // connected (held) while the handler works: the scenario
    await s.close();
    await evs.next('detached');
    const result = await done;
    expect(result.outcome).toBe('timeout');
    expect(result.error?.message).toMatch(
      /^the run exceeded timeout_ms \(1000 ms, not counting \d+ ms held by the debugger\) and was killed$/,
    );
    expect(result.debug!.attached).toBe(true);
    expect(result.debug!.held_ms).toBeGreaterThanOrEqual(1000);
    // Killed ~1 s of un-held time after it started, the held part (all but the load) not counted.
    expect(result.usage.duration_ms).toBeGreaterThan(1500);
  }, 30_000);

  it("a web page's WebSocket (another Origin, or a rebound Host) is refused and never holds the run", async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    const evs = debugEvents();
    const done = run(job(CODE, { n: 2 }, { timeout_ms: 5000, debug: { attachTimeoutMs: 30_000 } }), (e) => evs.push(e));
    const { url } = await evs.next('waiting');
    await expect(InspectorSession.connect(url, { Origin: 'http://evil.example' })).rejects.toThrow(/HTTP\/1\.1 403/);
    await expect(InspectorSession.connect(url, { Host: `evil.example:${new URL(url).port}` })).rejects.toThrow(/HTTP\/1\.1 403/);
    expect(evs.seen.map((e) => e.state)).toEqual(['waiting']);
    // Bun's own debugger page is let through.
    const s = await InspectorSession.connect(url, { Origin: 'https://debug.bun.sh' });
    await evs.next('attached');
    await s.call('Inspector.enable');
    await s.call('Inspector.initialized');
    const result = await done;
    await s.close();
    expect(result.outcome, JSON.stringify(result.error)).toBe('success');
    expect(result.output).toEqual({ label: 'n=4', doubled: 4 });
  }, 30_000);

  it('memory is enforced as for any run: over max_memory_mb it is oom_killed', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    if (executor.info.backend === 'none') ctx.skip('no memory limit on the none limit backend');
    const evs = debugEvents();
    const j = job(HOG, { mb: 400 }, { timeout_ms: 20_000, debug: { attachTimeoutMs: 30_000 } });
    j.limits.max_memory_mb = 128;
    const done = run(j, (e) => evs.push(e));
    const s = await InspectorSession.connect((await evs.next('waiting')).url);
    await s.call('Inspector.enable');
    await s.call('Inspector.initialized');
    const result = await done;
    await s.close();
    expect(result.outcome, JSON.stringify(result.error)).toBe('oom_killed');
    expect(result.debug).toMatchObject({ protocol: 'inspector', attached: true });
  }, 60_000);

  it('a debugger that drops while the run is paused lets it go on, on the time it had left', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    const evs = debugEvents();
    const j = job(CODE, { n: 5 }, { timeout_ms: 5000, debug: { attachTimeoutMs: 30_000 } });
    const done = run(j, (e) => evs.push(e));
    const { s } = await breakOnLine(await evs.next('waiting'), evs, 5);
    await s.drop(); // paused at the breakpoint, the debugger goes away without a word
    const result = await done;
    expect(result.outcome, JSON.stringify(result.error)).toBe('success');
    expect(result.output).toEqual({ label: 'n=10', doubled: 10 });
    expect(evs.seen.map((e) => e.state)).toEqual(['waiting', 'attached', 'detached']);
  }, 30_000);

  it('closing the executor ends a run that waits for its debugger', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    const dir = await tempDir('svc-emu-debug-close-');
    const { executor: own } = await createExecutor({ projectRoot: PROJECT_ROOT, workDir: dir, spares: 'none' });
    try {
      const evs = debugEvents();
      const done = run(job(CODE, { n: 1 }, { debug: { attachTimeoutMs: 60_000 } }), (e) => evs.push(e), undefined, own);
      const waiting = await evs.next('waiting');
      await own.close();
      const result = await done;
      expect(result.outcome).toBe('cancelled');
      expect(await accepts(waiting.port)).toBe(false);
    } finally {
      await own.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it('the DAP gate lets only DAP framing through (an HTTP request a page sends is cut)', () => {
    expect(gate('dap', Buffer.from('Content-Length: 120\r\n\r\n{'))).toBe('ok');
    expect(gate('dap', Buffer.from('content-len'))).toBe('more');
    expect(gate('dap', Buffer.from('POST / HTTP/1.1\r\nContent-Length: 40\r\n'))).toMatchObject({ refused: expect.any(String) });
    expect(gate('inspector', Buffer.from('GET / HTTP/1.1\r\nHost: localhost:9229\r\n'))).toBe('more');
    expect(gate('inspector', Buffer.from('GET / HTTP/1.1\r\nHost: [::1]:9229\r\nUpgrade: websocket\r\n\r\n'))).toBe('ok');
    expect(gate('inspector', Buffer.from('POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'))).toMatchObject({ refused: expect.any(String) });
  });

  it('the same wait without a debugger times out', async (ctx) => {
    if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
    const result = await run(job(BUSY, { ms: 2500 }, { timeout_ms: 1000 }));
    expect(result.outcome).toBe('timeout');
    expect(result.debug).toBeUndefined();
  }, 30_000);
});

describe.skipIf(!installed)('a debug run without bubblewrap (sandbox none)', () => {
  // The unsandboxed path a normal user's core takes (a root core refuses it: test/executor/egress.test.ts): the
  // debugger's socket is in the host temp dir itself, and remoteRoot is the bundle's host path.
  let none: Executor;
  let noneDir: string;
  beforeAll(async () => {
    noneDir = await tempDir('svc-emu-debug-none-');
    const runtime = await readRuntimeInfo(PROJECT_ROOT);
    const host = new LocalSandboxHost({
      backend: (await detectLimitBackend()).backend,
      runtimes: {
        bun: { bin: runtime.bun.bin, nodeModules: runtime.bun.nodeModules },
        python: { bin: runtime.python.bin, venv: runtime.python.venv, basePrefix: runtime.python.basePrefix },
        runtimesDir: join(PROJECT_ROOT, 'executor', 'runtimes'),
      },
      workDir: noneDir,
      bwrap: null,
      bwrapMissingReason: 'off in this test',
      root: false,
      spares: 0,
    });
    await host.sweep();
    none = new PooledExecutor({ host });
  }, 30_000);
  afterAll(async () => {
    await none?.close();
    if (noneDir) await rm(noneDir, { recursive: true, force: true });
  });

  it('stops on the line and succeeds; the socket dir goes with the run', async () => {
    const evs = debugEvents();
    const j = job(CODE, { n: 21 }, { timeout_ms: 1000, debug: { attachTimeoutMs: 30_000 } });
    const done = run(j, (e) => evs.push(e), undefined, none);
    const waiting = await evs.next('waiting');
    expect(waiting.remoteRoot).toBe(join(noneDir, 'bundles', j.bundle.sha256));
    const mine = () => readdirSync(tmpdir()).filter((n) => n.startsWith(`svc-emu-debug-${process.pid}-`));
    expect(mine()).toHaveLength(1);
    const { s } = await breakOnLine(waiting, evs);
    void s.call('Debugger.resume').catch(() => {});
    const result = await done;
    await s.close();
    expect(result.outcome, JSON.stringify(result.error)).toBe('success');
    expect(result.output).toEqual({ label: 'n=42', doubled: 42 });
    expect(await accepts(waiting.port)).toBe(false);
    expect(mine()).toHaveLength(0);
  }, 60_000);
});
