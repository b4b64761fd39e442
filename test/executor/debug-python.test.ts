/**
 * Debugging a Python snippet (issue 19, "Debugger attach"): a real DAP client (test/helpers/dap.ts) attaches to
 * debugpy in the real Python runner (executor/runtimes/python/_svc_debug.py), sets a breakpoint in the handler,
 * reads a local variable when it hits, and continues.
 *
 * - "the runner" drives the runner alone, the way the host does (executor/debug/types.ts): SVC_DEBUG=dap and
 *   SVC_DEBUG_SOCKET, with this test playing the host's relay (a TCP listener on 127.0.0.1 piped to the socket).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect as connectUnix, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { RunnerChannel } from '../../executor/runner-client';
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

  for (const kind of ['sync', 'async'] as const) {
    it(`stops at a breakpoint in a ${kind} handler, reads its locals and goes on`, async (ctx) => {
      const python = findPython();
      if (!python) return ctx.skip('no Python 3.11 (.runtimes/python or python3)');
      expect(existsSync(DEBUGPY_DIR), `debugpy is not installed in ${DEBUGPY_DIR}: run node scripts/setup.mjs`).toBe(true);
      const bundle = makeBundle({ 'main.py': SNIPPETS[kind] });
      const dir = mkdtempSync(join(tmpdir(), 'svc-debug-'));
      const socketPath = join(dir, 'debug.sock');
      const child = spawn(python, ['-I', '-u', PY_RUNNER, '--bundle', bundle, '--entry', 'main.py'], {
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
      // Nothing runs before a debugger attaches: no `ready` yet.
      let readyEarly = false;
      const ready = channel.waitReady(60_000).then((r) => ((readyEarly = true), r));
      await until('debugpy to listen', () => stderr.includes('waiting for a debugger'));
      expect(readyEarly).toBe(false);

      const dap = await DapClient.connect('127.0.0.1', port);
      cleanups.push(() => dap.close());
      const verified = await attach(dap, { localRoot: bundle, remoteRoot: bundle, breakpoints: { 'main.py': [BREAK_LINE[kind]] } });
      expect(verified['main.py']?.[0]?.verified, JSON.stringify(verified)).toBe(true);
      expect((await ready).t, stderr).toBe('ready');

      const outcome = channel.invoke('inv_dbg', { items: [1, 2, 3] }, {}, { onChunk() {}, onLog() {}, onCall: async () => null });
      const stopped = await dap
        .waitEvent('stopped', (b) => b.reason === 'breakpoint', 10_000)
        .catch((e) => {
          throw new Error(`${e.message}\nstderr: ${stderr}\nevents: ${JSON.stringify(dap.events)}`);
        });
      const { stackFrames } = await dap.request('stackTrace', { threadId: stopped.body.threadId, levels: 20 });
      expect(stackFrames[0].line).toBe(BREAK_LINE[kind]);
      // justMyCode: the runner's own frames (executor/runtimes/python) are library code, not shown.
      expect(stackFrames.map((f: { source?: { path?: string } }) => f.source?.path)).toEqual([join(bundle, 'main.py')]);
      const locals = await dap.locals(stackFrames[0].id);
      expect(locals.total?.value).toBe('12');
      expect(locals.label?.value).toBe("'n=3'");
      await dap.request('continue', { threadId: stopped.body.threadId });
      await expect(outcome).resolves.toMatchObject({ kind: 'result', output: { total: 12, label: 'n=3', env: [] } });
      await dap.request('disconnect', { terminateDebuggee: false });
      expect(stderr).not.toMatch(/Traceback|Debugger warning/);
    });
  }

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
