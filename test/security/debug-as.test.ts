/**
 * Debug runs with the core as root and as an unprivileged uid (test/security/core-as.ts): a real core in its own
 * process, a Bun and a Python debug run started over HTTP with X-Emu-Debug, a real debugger attached (Bun's
 * inspector over `ws`, debugpy over DAP). Judged from this host: the runtime waiting for the debugger is never
 * host uid 0 (as root the core drops it to the sandbox's uid; as a normal user it is that user), the relay
 * listens on loopback only, and after the run neither the port nor the socket dir is left.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { descendsFrom, sandboxedCoreAs, type CoreAs } from './core-as';
import { InspectorSession } from '../helpers/inspector-client';
import { accepts } from '../helpers/debug-events';
import { attach, DapClient } from '../helpers/dap';
import type { DebugSession } from '../../contract/schemas/debug';

const NON_ROOT_UID = 4243;

const BUN = `export default async function handler(input: { n: number }) {
  const doubled = input.n * 2;
  return { doubled };
}
`;
const PY = `def handler(input):
    doubled = input["n"] * 2
    return {"doubled": doubled}
`;

async function call(core: CoreAs, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${core.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${core.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null, text };
}

/** The session of the debug run this request started, once its debugger listens. */
async function sessionOf(core: CoreAs, requestId: string): Promise<DebugSession> {
  const end = Date.now() + 30_000;
  for (;;) {
    const r = await fetch(`${core.url}/_emu/debug/sessions`, { headers: { authorization: `Bearer ${core.admin}` } });
    const found = ((await r.json()) as { data: DebugSession[] }).data.find((s) => s.request_id === requestId && s.state === 'waiting');
    if (found) return found;
    if (Date.now() > end) throw new Error(`no waiting debug session for request ${requestId} within 30 s`);
    await new Promise((r2) => setTimeout(r2, 50));
  }
}

/** The runtime's processes under `core` (argv[0] is the runtime itself, not a wrapper starting it), with their host uid. */
function runtimeProcesses(core: number, runtime: 'bun' | 'python'): { pid: number; uid: number; argv: string }[] {
  const out: { pid: number; uid: number; argv: string }[] = [];
  // The runners (the sandboxes' processes), not the code checkers (runtimes/*/check.*, which parse but never run a snippet).
  const isRuntime =
    runtime === 'bun'
      ? (argv: string[]) => argv[0]!.endsWith('/bun') && argv.some((a) => a.endsWith('/runner.ts'))
      : (argv: string[]) => /\/python3?(\.\d+)?$/.test(argv[0]!) && argv.some((a) => a.endsWith('/svc_runner.py'));
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (!isRuntime(argv) || !descendsFrom(Number(d), core)) continue;
      const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${d}/status`, 'utf8'));
      if (uid) out.push({ pid: Number(d), uid: Number(uid[1]), argv: argv.join(' ').slice(0, 200) });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

const debugDirs = () => readdirSync(tmpdir()).filter((n) => n.startsWith('svc-emu-debug-'));

const cores: CoreAs[] = [];
afterAll(async () => {
  await Promise.all(cores.map((c) => c.stop()));
});

describe.each([
  { mode: 'root', uid: null as number | null },
  { mode: 'an unprivileged uid', uid: NON_ROOT_UID },
])('debug runs with the core as $mode', ({ uid }) => {
  it('a Bun and a Python debug run: the debugger attaches, the runtime is never host uid 0, nothing is left after', async (ctx) => {
    const core = await sandboxedCoreAs(ctx, uid, cores);
    const dirsBefore = new Set(debugDirs());

    for (const [runtime, code, file] of [
      ['bun', BUN, 'index.ts'],
      ['python', PY, 'main.py'],
    ] as const) {
      const name = `dbg-as-${runtime}`;
      expect((await call(core, 'POST', '/v1/snippets', { name, runtime })).status).toBe(201);
      expect((await call(core, 'POST', `/v1/snippets/${name}/versions`, { files: { [file]: code }, timeout_ms: 1000 })).status).toBe(201);
      const requestId = `dbg-as-${runtime}-${process.pid}-${Date.now()}`;
      const answer = call(
        core,
        'POST',
        `/v1/invoke/${name}`,
        { n: 21 },
        { 'x-emu-debug': '1', 'x-emu-admin': core.admin, 'x-request-id': requestId },
      );
      answer.catch(() => {}); // awaited below; a failure before that must not turn into an unhandled rejection
      const session = await sessionOf(core, requestId);
      expect(session.host).toBe('127.0.0.1');

      // Who waits for the debugger, seen from this host: never uid 0; as a normal user's core, that user.
      const procs = runtimeProcesses(core.pid, runtime);
      expect(procs.length, `${runtime} processes under the core`).toBeGreaterThan(0);
      for (const p of procs) expect(p.uid, JSON.stringify(p)).not.toBe(0);
      if (uid !== null) for (const p of procs) expect(p.uid, JSON.stringify(p)).toBe(uid);

      if (runtime === 'bun') {
        const s = await InspectorSession.connect(session.url);
        void s.call('Inspector.initialized').catch(() => {});
        const r = await answer;
        await s.close();
        expect(r.status, r.text).toBe(200);
        expect(r.json).toEqual({ doubled: 42 });
      } else {
        const dap = await DapClient.connect(session.host, session.port);
        // Line 3 (`return …`): stopped there, the local reads right.
        await attach(dap, { localRoot: '/snippets/dbg-as-python', remoteRoot: session.remote_root, breakpoints: { 'main.py': [3] } });
        const stopped = await dap.waitEvent('stopped', (b) => b.reason === 'breakpoint');
        const { stackFrames } = await dap.request('stackTrace', { threadId: stopped.body.threadId, levels: 20 });
        expect((await dap.locals(stackFrames[0].id)).doubled?.value).toBe('42');
        // The run ends as soon as the handler returns, and the relay cuts the debugger with it: the answer may not come.
        void dap.request('continue', { threadId: stopped.body.threadId }).catch(() => {});
        const r = await answer;
        dap.close();
        expect(r.status, r.text).toBe(200);
        expect(r.json).toEqual({ doubled: 42 });
      }
      expect(await accepts(session.port)).toBe(false);
      const inv = await call(
        core,
        'GET',
        `/_emu/invocations/${(await call(core, 'GET', `/v1/invocations?snippet=${name}`)).json.data[0].id}`,
        undefined,
        {
          authorization: `Bearer ${core.admin}`,
        },
      );
      expect(inv.json.debug).toMatchObject({ attached: true });
    }
    // The socket dirs went with the runs.
    expect(debugDirs().filter((d) => !dirsBefore.has(d))).toEqual([]);
  }, 120_000);
});
