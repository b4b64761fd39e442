/**
 * Debugging a Python snippet (issue 19, "Debugger attach"): a real DAP client (test/helpers/dap.ts) attaches to
 * debugpy in the real Python runner (executor/runtimes/python/_svc_debug.py), sets a breakpoint in the handler,
 * reads a local variable when it hits, and continues.
 *
 * - "the runner" drives the runner alone, the way the host does (executor/debug/types.ts): SVC_DEBUG=dap and
 *   SVC_DEBUG_SOCKET, with this test playing the host's relay (a TCP listener on 127.0.0.1 piped to the socket).
 * - "the executor" runs it for real (PooledExecutor over LocalSandboxHost: this host's limit backend, bubblewrap,
 *   seccomp, a root core dropping to the sandbox's uid) with the debugger on the relay's tcp:// URL: the run sits
 *   at the breakpoint past its timeout_ms and succeeds, where the same snippet without a debugger times out.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect as connectUnix, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createExecutor } from '../../executor';
import { RunnerChannel } from '../../executor/runner-client';
import type { DebugEvent, Executor, ExecutorJob } from '../../executor/types';
import { PROJECT_ROOT } from '../helpers/core';
import { attach, DapClient } from '../helpers/dap';
import { findPython, makeBundle, PY_RUNNER, PY_SVC_DIR, run, startRunner } from '../runners/helpers';

const DEBUGPY_DIR = join(findPython() ?? '/nonexistent/bin/python', '..', '..', 'svc-debug', 'debugpy');

/** A handler with locals worth reading; BREAK_LINE is its `return` (a line with no generator expression: the
 * debugger would stop in its frame too). */
const SNIPPETS = {
  sync: `import os


def handler(input):
    items = input["items"]
    total = sum(items) * 2
    label = "n=%d" % len(items)
    env = sorted(k for k in os.environ if k.startswith("SVC_DEBUG"))
    return {"total": total, "label": label, "env": env}
`,
  async: `import asyncio
import os


async def handler(input):
    items = input["items"]
    await asyncio.sleep(0)
    total = sum(items) * 2
    label = "n=%d" % len(items)
    env = sorted(k for k in os.environ if k.startswith("SVC_DEBUG"))
    return {"total": total, "label": label, "env": env}
`,
} as const;
const BREAK_LINE = { sync: 9, async: 11 } as const;

/** What the host's relay does (executor/local-host.ts): a loopback TCP port piped to the runner's unix socket. */
function relay(socketPath: string): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connectUnix(socketPath);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port, sockets })),
  );
}

async function until(what: string, cond: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the runner', () => {
  const cleanups: Array<() => void | Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  /** The runner started as the host starts a debug runner, with this test as the host's relay. */
  async function startDebugRunner(code: string) {
    const python = findPython();
    expect(python, 'no Python 3.11 (.runtimes/python or python3)').toBeTruthy();
    expect(existsSync(DEBUGPY_DIR), `debugpy is not installed in ${DEBUGPY_DIR}: run node scripts/setup.mjs`).toBe(true);
    const bundle = makeBundle({ 'main.py': code });
    const dir = mkdtempSync(join(tmpdir(), 'svc-debug-'));
    const socketPath = join(dir, 'debug.sock');
    const child = spawn(python!, ['-I', '-u', PY_RUNNER, '--bundle', bundle, '--entry', 'main.py'], {
      cwd: bundle,
      env: { PATH: '/usr/bin:/bin', HOME: '/tmp', PYTHONPATH: PY_SVC_DIR, SVC_DEBUG: 'dap', SVC_DEBUG_SOCKET: socketPath },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const channel = new RunnerChannel(child.stdio[3] as Duplex);
    cleanups.push(() => {
      channel.close();
      child.kill('SIGKILL');
      rmSync(bundle, { recursive: true, force: true });
      rmSync(dir, { recursive: true, force: true });
    });
    await until('the debug socket', () => existsSync(socketPath));
    const { server, port, sockets } = await relay(socketPath);
    cleanups.push(() => {
      for (const s of sockets) s.destroy();
      server.close();
    });
    let readyEarly = false;
    const ready = channel.waitReady(60_000).then((r) => ((readyEarly = true), r));
    await until('debugpy to listen', () => stderr.includes('waiting for a debugger'));
    let seq = 0;
    return {
      bundle,
      port,
      ready,
      readyEarly: () => readyEarly,
      stderr: () => stderr,
      invoke: (input: Record<string, unknown>) =>
        channel.invoke(`inv_dbg_${++seq}`, input, {}, { onChunk() {}, onLog() {}, onCall: async () => null }),
      async attach(line: number): Promise<DapClient> {
        const dap = await DapClient.connect('127.0.0.1', port);
        cleanups.push(() => dap.close());
        const verified = await attach(dap, { localRoot: bundle, remoteRoot: bundle, breakpoints: { 'main.py': [line] } });
        expect(verified['main.py']?.[0]?.verified, JSON.stringify(verified)).toBe(true);
        return dap;
      },
    };
  }

  for (const kind of ['sync', 'async'] as const) {
    it(`stops at a breakpoint in ${kind === 'sync' ? 'a' : 'an'} ${kind} handler, reads its locals and goes on`, async () => {
      const r = await startDebugRunner(SNIPPETS[kind]);
      // Nothing runs before a debugger attaches: no `ready` yet.
      expect(r.readyEarly()).toBe(false);
      const dap = await r.attach(BREAK_LINE[kind]);
      expect((await r.ready).t, r.stderr()).toBe('ready');

      const outcome = r.invoke({ items: [1, 2, 3] });
      const stopped = await dap
        .waitEvent('stopped', (b) => b.reason === 'breakpoint', 10_000)
        .catch((e) => {
          throw new Error(`${e.message}\nstderr: ${r.stderr()}\nevents: ${JSON.stringify(dap.events)}`);
        });
      const { stackFrames } = await dap.request('stackTrace', { threadId: stopped.body.threadId, levels: 20 });
      expect(stackFrames[0].line).toBe(BREAK_LINE[kind]);
      // justMyCode: the runner's own frames (executor/runtimes/python) are library code, not shown.
      expect(stackFrames.map((f: { source?: { path?: string } }) => f.source?.path)).toEqual([join(r.bundle, 'main.py')]);
      const locals = await dap.locals(stackFrames[0].id);
      expect(locals.total?.value).toBe('12');
      expect(locals.label?.value).toBe("'n=3'");
      await dap.request('continue', { threadId: stopped.body.threadId });
      await expect(outcome).resolves.toMatchObject({ kind: 'result', output: { total: 12, label: 'n=3', env: [] } });
      await dap.request('disconnect', { terminateDebuggee: false });
      expect(r.stderr()).not.toMatch(/Traceback|Debugger warning/);
    });
  }

  it('a breakpoint on a module-level line binds: the bundle loads only once the debugger is configured', async () => {
    const r = await startDebugRunner(`LIMIT = 3
SCALE = LIMIT * 7


def handler(input):
    return {"scale": SCALE}
`);
    const dap = await r.attach(2);
    const stopped = await dap.waitEvent('stopped', (b) => b.reason === 'breakpoint');
    const { stackFrames } = await dap.request('stackTrace', { threadId: stopped.body.threadId, levels: 1 });
    expect(stackFrames[0]).toMatchObject({ name: '<module>', line: 2 }); // stopped in the bundle's load
    expect((await dap.locals(stackFrames[0].id)).LIMIT?.value).toBe('3');
    await dap.request('continue', { threadId: stopped.body.threadId });
    expect((await r.ready).t).toBe('ready');
    await expect(r.invoke({})).resolves.toMatchObject({ kind: 'result', output: { scale: 21 } });
  });

  it('a debugger that leaves without `disconnect` releases the run it stopped; one that attaches again stops it again', async () => {
    const r = await startDebugRunner(SNIPPETS.sync);
    let dap = await r.attach(BREAK_LINE.sync);
    await r.ready;
    const first = r.invoke({ items: [1] });
    await dap.waitEvent('stopped', (b) => b.reason === 'breakpoint');
    dap.close(); // killed, or its connection dropped: no `disconnect` request
    await expect(first).resolves.toMatchObject({ kind: 'result', output: { total: 2 } });
    // No debugger: the breakpoints went with it.
    await expect(r.invoke({ items: [2] })).resolves.toMatchObject({ kind: 'result', output: { total: 4 } });
    dap = await r.attach(BREAK_LINE.sync);
    const third = r.invoke({ items: [3] });
    const stopped = await dap.waitEvent('stopped', (b) => b.reason === 'breakpoint');
    const { stackFrames } = await dap.request('stackTrace', { threadId: stopped.body.threadId, levels: 1 });
    expect((await dap.locals(stackFrames[0].id)).total?.value).toBe('6');
    await dap.request('continue', { threadId: stopped.body.threadId });
    await expect(third).resolves.toMatchObject({ kind: 'result', output: { total: 6 } });
  });

  it('a normal run neither loads debugpy nor can import it (production has none)', async (ctx) => {
    if (!findPython()) return ctx.skip('no Python 3.11 (.runtimes/python or python3)');
    const r = await startRunner('python', {
      'main.py': `import sys


def handler(input):
    try:
        import debugpy  # noqa: F401
        importable = True
    except ImportError:
        importable = False
    return {"importable": importable, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("debugpy", "pydevd", "_svc_debug"))}
`,
    });
    cleanups.push(() => r.stop());
    expect(r.ready.t).toBe('ready');
    expect((await run(r)).outcome).toEqual({ kind: 'result', output: { importable: false, loaded: [] } });
  });
});

/** The handler sleeps `sleep_s` before the breakpoint's line: without a debugger, that is what outlasts timeout_ms. */
const SLEEPY = {
  sync: `import time


def handler(input):
    time.sleep(input["sleep_s"])
    doubled = input["n"] * 2
    return {"doubled": doubled}
`,
  async: `import asyncio


async def handler(input):
    await asyncio.sleep(input["sleep_s"])
    doubled = input["n"] * 2
    return {"doubled": doubled}
`,
} as const;
const SLEEPY_BREAK_LINE = 7;

describe('the executor', () => {
  const installed = existsSync(join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json'));
  let executor: Executor;
  let workDir: string;
  let seq = 0;
  beforeAll(async () => {
    if (!installed) return;
    workDir = mkdtempSync(join(tmpdir(), 'svc-emu-debug-py-'));
    ({ executor } = await createExecutor({ projectRoot: PROJECT_ROOT, workDir, spares: 'none' }));
  }, 60_000);
  afterAll(async () => {
    await executor?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  function job(code: string, input: Record<string, unknown>, debug?: ExecutorJob['debug']): ExecutorJob {
    seq += 1;
    const files = { 'main.py': code };
    return {
      invocationId: `dbg-py-${process.pid}-${seq}`,
      tenantId: 't-debug',
      snippetId: `s-debug-py-${seq}`,
      version: 1,
      runtime: 'python',
      bundle: { sha256: createHash('sha256').update(code).digest('hex'), entrypoint: 'main.py', load: async () => files },
      limits: { timeout_ms: 1000, max_memory_mb: 256, max_cpu_percent: 10 },
      input,
      env: {},
      ...(debug ? { debug } : {}),
    };
  }

  for (const kind of ['sync', 'async'] as const) {
    it(`${kind === 'sync' ? 'a' : 'an'} ${kind} handler stops at its breakpoint, its local reads right, and held past timeout_ms it still succeeds`, async (ctx) => {
      if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
      void ctx.annotate(`sandbox: ${executor.info.sandbox}, limit backend: ${executor.info.backend}`);
      const events: DebugEvent[] = [];
      const done = executor.run(job(SLEEPY[kind], { n: 21, sleep_s: 0 }, { attachTimeoutMs: 30_000 }), {
        onDebug: (e) => events.push(e),
        onCall: async () => {
          throw new Error('no host calls here');
        },
      });
      await until('the debug session to wait', () => events.some((e) => e.state === 'waiting'));
      const waiting = events.find((e) => e.state === 'waiting')!;
      expect(waiting.protocol).toBe('dap');
      expect(waiting.url).toBe(`tcp://127.0.0.1:${waiting.port}`);
      if (executor.info.sandbox === 'bwrap') expect(waiting.remoteRoot).toBe('/opt/svc/app');

      // The debugger's side of the path mapping: the snippet's folder as the author has it.
      const localRoot = mkdtempSync(join(tmpdir(), 'svc-emu-debug-src-'));
      writeFileSync(join(localRoot, 'main.py'), SLEEPY[kind]);
      const dap = await DapClient.connect(waiting.host, waiting.port);
      try {
        const t0 = performance.now();
        const verified = await attach(dap, {
          localRoot,
          remoteRoot: waiting.remoteRoot,
          breakpoints: { 'main.py': [SLEEPY_BREAK_LINE] },
        });
        expect(verified['main.py']?.[0]?.verified, JSON.stringify(verified)).toBe(true);
        const stopped = await dap.waitEvent('stopped', (b) => b.reason === 'breakpoint');
        void ctx.annotate(`connect → stopped at the breakpoint: ${Math.round(performance.now() - t0)} ms`);
        const { stackFrames } = await dap.request('stackTrace', { threadId: stopped.body.threadId, levels: 20 });
        expect(stackFrames[0].line).toBe(SLEEPY_BREAK_LINE);
        expect(stackFrames[0].name).toBe('handler');
        expect(stackFrames[0].source.path).toBe(join(localRoot, 'main.py')); // mapped back from /opt/svc/app
        const locals = await dap.locals(stackFrames[0].id);
        expect(locals.input?.value).toBe("{'n': 21, 'sleep_s': 0}");
        // The breakpoint is on `return`: `doubled` is set.
        expect(locals.doubled?.value).toBe('42');
        expect(events.map((e) => e.state)).toContain('attached');

        // Paused past the run's timeout_ms (1000 ms): waiting here is the scenario, not a decision.
        const heldFor = 2500;
        await new Promise((r) => setTimeout(r, heldFor));
        // The run ends as soon as the handler returns and the relay cuts the debugger off with it.
        void dap.request('continue', { threadId: stopped.body.threadId }).catch(() => {});
        const result = await done;
        expect(result.outcome, JSON.stringify(result.error)).toBe('success');
        expect(result.output).toEqual({ doubled: 42 });
        expect(result.debug).toMatchObject({ protocol: 'dap', attached: true });
        expect(result.debug!.held_ms).toBeGreaterThanOrEqual(heldFor);
      } finally {
        dap.close();
        rmSync(localRoot, { recursive: true, force: true });
      }
    }, 60_000);

    if (kind === 'sync')
      it('a debugger that drops while the run is stopped lets it finish, on the time it had left', async (ctx) => {
        if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
        const events: DebugEvent[] = [];
        const done = executor.run(job(SLEEPY.sync, { n: 5, sleep_s: 0 }, { attachTimeoutMs: 30_000 }), {
          onDebug: (e) => events.push(e),
          onCall: async () => {
            throw new Error('no host calls here');
          },
        });
        await until('the debug session to wait', () => events.some((e) => e.state === 'waiting'));
        const waiting = events.find((e) => e.state === 'waiting')!;
        const dap = await DapClient.connect(waiting.host, waiting.port);
        await attach(dap, { localRoot: '/src/snippet', remoteRoot: waiting.remoteRoot, breakpoints: { 'main.py': [SLEEPY_BREAK_LINE] } });
        await dap.waitEvent('stopped', (b) => b.reason === 'breakpoint');
        dap.close(); // no `disconnect`: the debugger was killed
        const result = await done;
        expect(result.outcome, JSON.stringify(result.error)).toBe('success');
        expect(result.output).toEqual({ doubled: 10 });
        expect(events.map((e) => e.state)).toEqual(['waiting', 'attached', 'detached']);
      }, 60_000);

    it(`the same ${kind} snippet without a debugger, waiting as long, times out`, async (ctx) => {
      if (!installed) ctx.skip('no runtimes here (.runtimes/runtime-lock.json is missing): run node scripts/setup.mjs');
      const result = await executor.run(job(SLEEPY[kind], { n: 21, sleep_s: 2.5 }), {
        onCall: async () => {
          throw new Error('no host calls here');
        },
      });
      expect(result.outcome).toBe('timeout');
      expect(result.debug).toBeUndefined();
    }, 30_000);
  }
});
