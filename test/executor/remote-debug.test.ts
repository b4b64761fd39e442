/**
 * Issue 19, lane F: debug runs behind the agent (executor/remote.ts), as on macOS where sandboxes run in the Lima VM.
 * The agent runs through a plain shell here (the Lima transport minus `limactl shell`, as test/executor/remote.test.ts
 * does): its LocalSandboxHost makes the debug sandbox and its relay, and tells the core where it listens and when a
 * debugger holds the run; the core's RemoteDebugPort is what the executor's clock and session read. A real Bun
 * inspector is attached to the URL the core was told (test/helpers/inspector-client.ts): the session turns held, a
 * breakpoint is hit and a local read, the run sits there past its timeout_ms and still succeeds, and the port is
 * closed once the run is over; the same for a Python run with a DAP client (test/helpers/dap.ts). A debug run cancelled
 * while it waits for a debugger closes the relay behind the agent; one nobody attaches to ends at attachTimeoutMs. And
 * over the API: X-Emu-Debug on a core whose executor is behind the agent lists the session, attached, then gone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rm } from 'node:fs/promises';
import { createExecutor, limaTemplate } from '../../executor';
import type { DebugEvent, ExecutionResult, Executor, ExecutorJob } from '../../executor/types';
import { PROJECT_ROOT, request, tempDir } from '../helpers/core';
import { startEmulator, type RunningEmulator } from '../../server';
import { jsonLogger } from '../../server/logger';
import type { DebugSession } from '../../contract/schemas/debug';
import { accepts, debugEvents, debugRunEvents } from '../helpers/debug-events';
import { InspectorSession } from '../helpers/inspector-client';
import { attach, DapClient } from '../helpers/dap';
import { shellAgentArgv } from '../helpers/remote-agent';

const lock = join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json');
const installed = existsSync(lock);
if (!installed) console.warn('SKIPPING remote debug tests: runtimes not installed (run npm run build)');

const PY = 'def handler(input):\n    doubled = input["n"] * 2\n    return {"doubled": doubled}\n';
/** 1-based line of PY's `return`. */
const PY_BREAK_LINE = 3;

const CODE = `export default async function handler(input: { n: number }) {
  const doubled = input.n * 2;
  const label = "n=" + doubled;
  return { label, doubled };
}
`;

let executor: Executor;
let workDir: string;
let seq = 0;

beforeAll(async () => {
  if (!installed) return;
  const bun = JSON.parse(readFileSync(lock, 'utf8')).bun.bin as string;
  workDir = await tempDir('svc-emu-remote-debug-');
  ({ executor } = await createExecutor({
    projectRoot: PROJECT_ROOT,
    workDir: join(workDir, 'core'),
    agentArgv: shellAgentArgv(bun, join(workDir, 'agent'), ['--spares', 'none']),
  }));
}, 60_000);
afterAll(async () => {
  await executor?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

function job(
  code: string,
  input: Record<string, unknown>,
  o: { timeout_ms: number; debug: ExecutorJob['debug']; runtime?: 'bun' | 'python' },
): ExecutorJob {
  const runtime = o.runtime ?? 'bun';
  const entrypoint = runtime === 'bun' ? 'index.ts' : 'main.py';
  const files = { [entrypoint]: code };
  const sha = createHash('sha256').update(code).digest('hex');
  seq++;
  return {
    invocationId: `rdbg-${process.pid}-${seq}`,
    tenantId: 't-remote-debug',
    snippetId: `s-remote-debug-${seq}`,
    version: 1,
    runtime,
    bundle: { sha256: sha, entrypoint, load: async () => files },
    limits: { timeout_ms: o.timeout_ms, max_memory_mb: 256, max_cpu_percent: 10 },
    input,
    env: {},
    ...(o.debug ? { debug: o.debug } : {}),
  };
}

function run(j: ExecutorJob, onDebug: (e: DebugEvent) => void, signal?: AbortSignal): Promise<ExecutionResult> {
  return executor.run(j, debugRunEvents(onDebug), signal);
}

describe.skipIf(!installed)('debug runs behind the agent (a shell transport standing in for limactl shell)', () => {
  it('runs behind the agent (precondition)', () => {
    expect(executor.info.transport).toMatch(/^agent: /);
  });

  it('a Bun debug run: the inspector attaches to the URL the core was told, holds the run past its timeout, and the port is closed after', async () => {
    const evs = debugEvents();
    const j = job(CODE, { n: 21 }, { timeout_ms: 1000, debug: { attachTimeoutMs: 30_000 } });
    const done = run(j, (e) => evs.push(e));
    const waiting = await evs.next('waiting');
    expect(waiting).toMatchObject({ protocol: 'inspector', host: '127.0.0.1', url: `ws://127.0.0.1:${waiting.port}/` });
    expect(waiting.remoteRoot).toMatch(/^\//);

    const s = await InspectorSession.connect(waiting.url);
    const attached = await evs.next('attached'); // the agent's debug_held reached the core
    expect(attached.port).toBe(waiting.port);
    await s.enableDebugger();
    const url = `${waiting.remoteRoot}/index.ts`;
    // Stops once the file is loaded; then a breakpoint on the line of `const label` (no type-only lines here: the
    // transpiled module keeps the line numbers), as test/executor/debug-bun.test.ts does on the host.
    const placeholder = await s.call('Debugger.setBreakpointByUrl', { url, lineNumber: 0, columnNumber: 0 });
    await s.call('Inspector.initialized');
    await s.waitEvent('Debugger.paused', 15_000);
    expect(
      s.events.find((e) => e.method === 'Debugger.scriptParsed' && e.params.url === url),
      `scriptParsed of ${url}`,
    ).toBeTruthy();
    const bp = await s.call('Debugger.setBreakpointByUrl', { url, lineNumber: 2, columnNumber: 0 });
    await s.call('Debugger.removeBreakpoint', { breakpointId: placeholder.breakpointId });
    const from = s.events.length;
    await s.call('Debugger.resume');
    const paused = await s.waitEvent('Debugger.paused', 15_000, () => true, from);
    expect(paused.params.hitBreakpoints ?? [paused.params.data?.breakpointId]).toContain(bp.breakpointId);
    const top = paused.params.callFrames[0];
    const local = await s.call('Debugger.evaluateOnCallFrame', { callFrameId: top.callFrameId, expression: 'doubled' });
    expect(local.result).toMatchObject({ type: 'number', value: 42 });

    // Held past timeout_ms (1 s): the clock stands still behind the agent too. Waited on a condition: the run is
    // still going after 1.5 s of being held.
    const heldSince = performance.now();
    let finished = false;
    void done.then(() => (finished = true));
    while (performance.now() - heldSince < 1500) await new Promise((r) => setTimeout(r, 100));
    expect(finished, 'the run ended while the debugger held it').toBe(false);

    // The run ends as soon as the handler returns, and the relay cuts the debugger off with it: the resume's answer
    // may never come.
    void s.call('Debugger.resume').catch(() => {});
    const result = await done;
    expect(result.outcome, JSON.stringify(result.error)).toBe('success');
    expect(result.output).toEqual({ label: 'n=42', doubled: 42 });
    expect(result.debug).toMatchObject({ protocol: 'inspector', attached: true });
    expect(result.debug!.held_ms).toBeGreaterThanOrEqual(1500);
    await s.close();
    // The sandbox is destroyed before run() returns, and with it the relay behind the agent.
    expect(await accepts(waiting.port)).toBe(false);
  }, 60_000);

  it('a Python debug run: a DAP client attaches to the URL the core was told, stops at its breakpoint, reads a local, and the port is closed after', async () => {
    const evs = debugEvents();
    const done = run(job(PY, { n: 21 }, { runtime: 'python', timeout_ms: 1000, debug: { attachTimeoutMs: 30_000 } }), (e) => evs.push(e));
    const waiting = await evs.next('waiting');
    expect(waiting).toMatchObject({ protocol: 'dap', host: '127.0.0.1', url: `tcp://127.0.0.1:${waiting.port}` });
    const localRoot = mkdtempSync(join(tmpdir(), 'svc-emu-remote-debug-src-'));
    writeFileSync(join(localRoot, 'main.py'), PY);
    const dap = await DapClient.connect(waiting.host, waiting.port);
    try {
      const verified = await attach(dap, { localRoot, remoteRoot: waiting.remoteRoot, breakpoints: { 'main.py': [PY_BREAK_LINE] } });
      expect(verified['main.py']?.[0]?.verified, JSON.stringify(verified)).toBe(true);
      await evs.next('attached');
      const stopped = await dap.waitEvent('stopped', (b) => b.reason === 'breakpoint');
      const { stackFrames } = await dap.request('stackTrace', { threadId: stopped.body.threadId, levels: 20 });
      expect(stackFrames[0].line).toBe(PY_BREAK_LINE);
      expect(stackFrames[0].source.path).toBe(join(localRoot, 'main.py'));
      expect((await dap.locals(stackFrames[0].id)).doubled?.value).toBe('42');
      void dap.request('continue', { threadId: stopped.body.threadId }).catch(() => {});
      const result = await done;
      expect(result.outcome, JSON.stringify(result.error)).toBe('success');
      expect(result.output).toEqual({ doubled: 42 });
      expect(result.debug).toMatchObject({ protocol: 'dap', attached: true });
    } finally {
      dap.close();
      rmSync(localRoot, { recursive: true, force: true });
    }
    expect(await accepts(waiting.port)).toBe(false);
  }, 60_000);

  it('a debug run cancelled while it waits for a debugger ends cancelled, and the relay behind the agent is closed', async () => {
    const evs = debugEvents();
    const ac = new AbortController();
    const done = run(job(CODE, { n: 1 }, { timeout_ms: 1000, debug: { attachTimeoutMs: 30_000 } }), (e) => evs.push(e), ac.signal);
    const waiting = await evs.next('waiting');
    expect(await accepts(waiting.port)).toBe(true);
    ac.abort();
    const result = await done;
    expect(result.outcome).toBe('cancelled');
    expect(await accepts(waiting.port), JSON.stringify({ result, events: evs.seen })).toBe(false);
  }, 30_000);

  it('a debug run nobody attaches to ends cancelled once attachTimeoutMs passes (bounded by the agent, not a timeout of the core)', async () => {
    const evs = debugEvents();
    const t0 = performance.now();
    const result = await run(job(CODE, { n: 1 }, { timeout_ms: 1000, debug: { attachTimeoutMs: 1500 } }), (e) => evs.push(e));
    expect(result.outcome).toBe('cancelled');
    expect(result.error?.message).toMatch(/no debugger attached/);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(1500);
    const waiting = await evs.next('waiting');
    expect(await accepts(waiting.port)).toBe(false);
  }, 30_000);
});

describe.skipIf(!installed)('a debug run over the API with the core behind the agent', () => {
  let emu: RunningEmulator;
  let call: (m: string, p: string, b?: unknown, h?: Record<string, string>) => ReturnType<typeof request>;
  beforeAll(async () => {
    const bun = JSON.parse(readFileSync(lock, 'utf8')).bun.bin as string;
    emu = await startEmulator({
      dataDir: await tempDir(),
      port: 0,
      projectRoot: PROJECT_ROOT,
      logger: jsonLogger(() => {}),
      executorAgent: shellAgentArgv(bun, await tempDir('svc-emu-remote-debug-agent-'), ['--spares', 'none']),
    });
    call = (m, p, b, h) => request(emu.url, m, p, b, { defaultKey: emu.localApiKey!, headers: h });
  }, 60_000);
  afterAll(async () => {
    await emu?.stop();
  });

  const sessionOf = async (requestId: string, state: DebugSession['state']): Promise<DebugSession> => {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const r = await call('GET', '/_emu/debug/sessions', undefined, { authorization: `Bearer ${emu.adminToken}` });
      expect(r.status, r.text).toBe(200);
      const s = (r.json.data as DebugSession[]).find((x) => x.request_id === requestId && x.state === state);
      if (s) return s;
      if (Date.now() > deadline) throw new Error(`no ${state} session of ${requestId}: ${r.text}`);
      await new Promise((res) => setTimeout(res, 25));
    }
  };

  it('X-Emu-Debug: the session waits, turns attached when the inspector connects, the run answers, and the port is closed', async () => {
    const r0 = await call('GET', '/_emu/executor', undefined, { authorization: `Bearer ${emu.adminToken}` });
    expect(r0.json.transport).toMatch(/^agent: /);
    expect((await call('POST', '/v1/snippets', { name: 'remote-dbg', runtime: 'bun' })).status).toBe(201);
    expect((await call('POST', '/v1/snippets/remote-dbg/versions', { code: CODE, timeout_ms: 1000 })).status).toBe(201);
    const requestId = 'test-remote-debug-1';
    const run = call(
      'POST',
      '/v1/invoke/remote-dbg',
      { n: 21 },
      { 'x-emu-debug': '1', 'x-emu-admin': emu.adminToken, 'x-request-id': requestId },
    );
    const waiting = await sessionOf(requestId, 'waiting');
    expect(waiting).toMatchObject({ runtime: 'bun', protocol: 'inspector', host: '127.0.0.1' });
    const s = await InspectorSession.connect(waiting.url);
    await sessionOf(requestId, 'attached');
    await s.call('Inspector.enable');
    await s.call('Runtime.enable');
    // Lets --inspect-wait run the runner: the run may end, and cut the debugger off, before the answer comes.
    void s.call('Inspector.initialized').catch(() => {});
    const res = await run;
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ label: 'n=42', doubled: 42 });
    await s.close();
    const id = res.headers.get('x-invocation-id')!;
    const rec = await call('GET', `/_emu/invocations/${id}`, undefined, { authorization: `Bearer ${emu.adminToken}` });
    expect(rec.json.debug).toMatchObject({ protocol: 'inspector', attached: true });
    const left = await call('GET', '/_emu/debug/sessions', undefined, { authorization: `Bearer ${emu.adminToken}` });
    expect((left.json.data as DebugSession[]).filter((x) => x.invocation_id === id)).toEqual([]);
    expect(await accepts(waiting.port)).toBe(false);
  }, 60_000);
});

describe('the Lima template forwards the debug ports (generated, not run: no macOS here)', () => {
  it('forwards the guest loopback ports the relays listen on to the same ports on the Mac loopback', () => {
    const yaml = limaTemplate({
      projectRoot: '/Users/dev/snippet-emulator',
      manifest: { bun: { version: '1' }, python: { version: '3' } },
    });
    const rule =
      /\nportForwards:\n(?: +#.*\n)* {2}- guestIP: "127\.0\.0\.1"\n\s+guestPortRange: \[1024, 65535\]\n\s+hostIP: "127\.0\.0\.1"\n\s+hostPortRange: \[1024, 65535\]\n\s+proto: tcp\n/;
    expect(yaml).toMatch(rule);
  });
});
