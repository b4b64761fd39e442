// The sandbox hosts' conformance suite: the promises of executor/sandbox-host.ts (`SandboxHost`, `Sandbox`), declared
// once and run against each implementation: LocalSandboxHost (executor/local-host.ts, from
// test/executor/local-host.test.ts, on this host's limit backend and on none) and RemoteSandboxHost behind an agent
// (executor/remote.ts + executor/agent.ts, over a local child transport, from test/executor/remote.test.ts), with real
// runtimes, limits and bubblewrap. An optional promise an implementation does not keep is declared in `lacks` and its
// lack is tested instead; the host's limit backend decides what a run over its memory does (killed, or with none: runs
// on, parity degraded). Only a host without the runtimes skips.
import { afterAll, beforeAll, describe, expect, it, vi, type TestContext } from 'vitest';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import type { Sandbox, SandboxHost, SandboxSpec } from '../../executor/sandbox-host';
import type { DebugPort } from '../../executor/debug/types';
import type { Runtime } from '../../executor/types';
import { alive } from './processes';

export interface SandboxHostRun {
  host: SandboxHost;
  /** Stops what the run started (the agent, temp dirs) after host.close(). */
  dispose?(): Promise<void>;
}

export interface SandboxHostExpectations {
  /** What info.transport says. */
  transport: RegExp;
  /**
   * The optional promises this implementation does not keep, each with why: the suite then tests the lack (the
   * method is absent, and what it would have done is not done) instead of the promise. Only the host skips.
   */
  lacks?: {
    /** No `Sandbox.reap`: what an invocation started runs on until the sandbox goes. */
    reap?: string;
    /** No `SandboxHost.housekeep`. */
    housekeep?: string;
  };
}

const ENTRY: Record<Runtime, string> = { bun: 'index.ts', python: 'main.py' };

/** Handlers per runtime: `case` picks a behaviour (hello, env, spawn a background child, allocate). */
const CODE: Record<Runtime, string> = {
  bun: `export default async function handler(input: { case?: string; mark?: string; mb?: number }) {
  if (input.case === "env") return { secret: process.env.CONF_SECRET ?? null };
  if (input.case === "child") {
    const child = Bun.spawn(["sleep", input.mark ?? "86400"], { stdio: ["ignore", "ignore", "ignore"] });
    child.unref();
    return { pid: child.pid };
  }
  if (input.case === "alloc") {
    const b = Buffer.alloc((input.mb ?? 1) * 1024 * 1024, 1);
    return { bytes: b.length };
  }
  return { hello: "world", runtime: "bun" };
}
`,
  python: `import os
import subprocess


def handler(input):
    case = input.get("case")
    if case == "env":
        return {"secret": os.environ.get("CONF_SECRET")}
    if case == "child":
        child = subprocess.Popen(["sleep", input.get("mark", "86400")])
        return {"pid": child.pid}
    if case == "alloc":
        b = b"x" * (input.get("mb", 1) * 1024 * 1024)
        return {"bytes": len(b)}
    return {"hello": "world", "runtime": "python"}
`,
};

const BROKEN: Record<Runtime, string> = {
  bun: 'throw new Error("cannot load");\nexport default () => 1;\n',
  python: 'raise RuntimeError("cannot load")\n\ndef handler(input):\n    return 1\n',
};

function sha(files: Record<string, string>): string {
  return createHash('sha256')
    .update(JSON.stringify(Object.entries(files).sort()))
    .digest('hex');
}

async function invoke(sb: Sandbox, input: Record<string, unknown>, env: Record<string, string> = {}) {
  return sb.channel.invoke(`conf_${Math.random().toString(36).slice(2)}`, input, env, { onCall: async () => null });
}

export function sandboxHostConformance(
  name: string,
  start: () => Promise<SandboxHostRun>,
  expected: SandboxHostExpectations,
  hostReason: string | null,
): void {
  describe(`${name} sandbox host: conformance`, () => {
    let run: SandboxHostRun;
    let seq = 0;
    const sandboxes: Sandbox[] = [];
    const need = (ctx: TestContext): void => {
      if (hostReason) ctx.skip(hostReason);
    };

    beforeAll(async () => {
      if (hostReason) return; // every test below skips, naming why
      run = await start();
    }, 60_000);
    afterAll(async () => {
      for (const sb of sandboxes) await sb.destroy().catch(() => {});
      await run?.host.close();
      await run?.dispose?.();
    });

    const bundle = async (runtime: Runtime, code = CODE[runtime]): Promise<{ bundleSha: string; entrypoint: string }> => {
      const files = { [ENTRY[runtime]]: code };
      const bundleSha = sha(files);
      await run.host.materialize(bundleSha, ENTRY[runtime], files);
      return { bundleSha, entrypoint: ENTRY[runtime] };
    };
    const sandbox = async (runtime: Runtime, code?: string, memoryMb = 128): Promise<Sandbox> => {
      const spec: SandboxSpec = {
        id: `conf_${process.pid}_${++seq}`,
        runtime,
        ...(await bundle(runtime, code)),
        memoryMb,
        pidsMax: 64,
        tmpSizeMb: 16,
      };
      const sb = await run.host.create(spec);
      sandboxes.push(sb);
      return sb;
    };

    it('says what it is: limit backend, sandbox, transport, and why parity is degraded', (ctx) => {
      need(ctx);
      const { info } = run.host;
      expect(typeof info.backend).toBe('string');
      expect(['bwrap', 'none']).toContain(info.sandbox);
      expect(info.transport).toMatch(expected.transport);
      expect(Array.isArray(info.degraded)).toBe(true);
    });

    it('materialises a bundle once per digest: hasBundle is false before and true after, and again is fine', async (ctx) => {
      need(ctx);
      const files = { [ENTRY.python]: `def handler(input):\n    return ${++seq}\n` };
      const digest = sha(files);
      expect(await run.host.hasBundle(digest)).toBe(false);
      await run.host.materialize(digest, ENTRY.python, files);
      expect(await run.host.hasBundle(digest)).toBe(true);
      await run.host.materialize(digest, ENTRY.python, files);
      expect(await run.host.hasBundle(digest)).toBe(true);
    });

    for (const runtime of ['bun', 'python'] as const) {
      it(`${runtime}: a sandbox is ready with its runtime, answers invocations on its channel, and takes env per invocation`, async (ctx) => {
        need(ctx);
        const sb = await sandbox(runtime);
        expect(sb.ready).toMatchObject({ t: 'ready', runtime: { name: runtime } });
        expect(sb.initMs).toBeGreaterThan(0);
        expect(await invoke(sb, {})).toEqual({ kind: 'result', output: { hello: 'world', runtime } });
        expect(await invoke(sb, { case: 'env' }, { CONF_SECRET: 'one' })).toEqual({ kind: 'result', output: { secret: 'one' } });
        expect(await invoke(sb, { case: 'env' }, { CONF_SECRET: 'two' })).toEqual({ kind: 'result', output: { secret: 'two' } });
      });
    }

    it('a bundle that fails to load gives a sandbox whose ready is init_error with the message', async (ctx) => {
      need(ctx);
      for (const runtime of ['bun', 'python'] as const) {
        const sb = await sandbox(runtime, BROKEN[runtime]);
        expect(sb.ready).toMatchObject({ t: 'init_error', message: expect.stringContaining('cannot load') });
      }
    });

    it('sample reads the usage of the sandbox, memory included, and setCpuPercent takes a quota and lifts it', async (ctx) => {
      need(ctx);
      const sb = await sandbox('python');
      await sb.setCpuPercent(50);
      expect(await invoke(sb, { case: 'alloc', mb: 16 })).toEqual({ kind: 'result', output: { bytes: 16 * 1024 * 1024 } });
      await sb.setCpuPercent(null);
      const s = await sb.sample();
      // Every backend measures usage, none too (it caps nothing): a user of such a host still sees the run's peak memory.
      expect(s.memory_peak_bytes ?? s.memory_bytes).toBeGreaterThan(16 * 1024 * 1024);
      expect(s.cpu_usage_ns).toBeGreaterThan(0);
      expect(s.oom_kills).toBe(0);
    });

    it('a runner over its memory limit is killed, and sample counts the OOM kill (with the none limit backend: runs on, parity degraded)', async (ctx) => {
      need(ctx);
      const sb = await sandbox('python', undefined, 64);
      if (run.host.info.backend === 'none') {
        // This host's limits are none (executor/limits/none.ts): the run goes past its 64 MiB, and the host says parity is degraded.
        expect(run.host.info.degraded.join('\n')).toMatch(/only the timeout is enforced/);
        expect(await invoke(sb, { case: 'alloc', mb: 96 })).toEqual({ kind: 'result', output: { bytes: 96 * 1024 * 1024 } });
        expect((await sb.sample()).oom_kills).toBe(0);
      } else {
        const before = await sb.sample();
        const err = await invoke(sb, { case: 'alloc', mb: 300 }).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err, 'the invocation does not answer: its runner was killed').toMatchObject({ code: 'runner_exited' });
        const status = await sb.exited;
        expect(status.signal === 'SIGKILL' || status.code === 137, JSON.stringify(status)).toBe(true);
        expect((await sb.sample()).oom_kills - before.oom_kills).toBeGreaterThanOrEqual(1);
      }
    });

    if (expected.lacks?.reap) {
      it(`has no reap (${expected.lacks.reap}): what an invocation started runs on beside the warm runner`, async (ctx) => {
        need(ctx);
        const sb = await sandbox('python');
        expect(sb.reap).toBeUndefined();
        const mark = `86400.${Math.floor(Math.random() * 1e8)}`;
        expect((await invoke(sb, { case: 'child', mark })).kind).toBe('result');
        expect(await invoke(sb, {})).toEqual({ kind: 'result', output: { hello: 'world', runtime: 'python' } });
        await childRuns(mark);
      });
    }

    if (!expected.lacks?.reap)
      it('reap kills what an invocation left behind (a background child) and keeps the warm runner', async (ctx) => {
        need(ctx);
        const sb = await sandbox('python');
        expect(sb.reap, "a sandbox that cannot tell an invocation's processes from its own declares it (lacks.reap)").toBeTypeOf(
          'function',
        );
        const mark = `86400.${Math.floor(Math.random() * 1e8)}`;
        const out = await invoke(sb, { case: 'child', mark });
        expect(out.kind).toBe('result');
        await childRuns(mark); // precondition
        const killed = await sb.reap!();
        expect(killed).toBeGreaterThanOrEqual(1);
        await vi.waitFor(() => expect(processesWith(mark)).toEqual([]), { timeout: 5000, interval: 20 });
        expect(await invoke(sb, {})).toEqual({ kind: 'result', output: { hello: 'world', runtime: 'python' } });
      });

    it('killAll ends the runner: exited resolves, and onExit is told (at once for a late listener)', async (ctx) => {
      need(ctx);
      const sb = await sandbox('bun');
      const told = new Promise<unknown>((resolve) => sb.onExit(resolve));
      await sb.killAll();
      const status = await sb.exited;
      expect(status.signal === 'SIGKILL' || status.code !== 0).toBe(true);
      expect(await told).toEqual(status);
      const late = await new Promise<unknown>((resolve) => sb.onExit(resolve));
      expect(late).toEqual(status);
      await sb.channel.closed;
    });

    it('destroy ends the runner and what it started; a second destroy is a no-op', async (ctx) => {
      need(ctx);
      const sb = await sandbox('python');
      const mark = `86400.${Math.floor(Math.random() * 1e8)}`;
      const out = await invoke(sb, { case: 'child', mark });
      expect(out.kind).toBe('result');
      await childRuns(mark); // precondition: else the wait for none left below proves nothing
      await sb.destroy();
      await sb.exited;
      // The child's pid is the sandbox's own (a pid namespace under bubblewrap): find it by its mark instead.
      await vi.waitFor(() => expect(processesWith(mark)).toEqual([]), { timeout: 5000, interval: 20 });
      await sb.destroy();
    });

    if (expected.lacks?.housekeep) {
      it(`has no housekeep (${expected.lacks.housekeep})`, (ctx) => {
        need(ctx);
        expect(run.host.housekeep).toBeUndefined();
      });
    }

    if (!expected.lacks?.housekeep)
      it('housekeep answers how many groups and files it removed', async (ctx) => {
        need(ctx);
        expect(run.host.housekeep, 'a host without it declares it (lacks.housekeep)').toBeTypeOf('function');
        const swept = await run.host.housekeep!();
        expect(Number.isInteger(swept.groups) && swept.groups >= 0).toBe(true);
        expect(Number.isInteger(swept.files) && swept.files >= 0).toBe(true);
      });

    it('a debug sandbox: its relay listens on loopback before the runner is ready, a debugger’s connection holds it and leaving releases it, and close() while it waits for a debugger ends the create (debug_closed) and the port', async (ctx) => {
      need(ctx);
      let told!: (p: DebugPort) => void;
      const listening = new Promise<DebugPort>((r) => (told = r));
      const created = run.host.create({
        id: `conf_${process.pid}_${++seq}`,
        runtime: 'bun',
        ...(await bundle('bun')),
        memoryMb: 128,
        pidsMax: 64,
        tmpSizeMb: 16,
        cpuPercent: null,
        debug: { protocol: 'inspector', attachTimeoutMs: 30_000, onListening: (p) => told(p) },
      });
      created.then(
        (sb) => sandboxes.push(sb),
        () => {},
      ); // judged below (a sandbox made anyway is destroyed after)
      const port = await listening;
      expect(port).toMatchObject({ protocol: 'inspector', host: '127.0.0.1', url: `ws://127.0.0.1:${port.port}/`, held: false });
      expect(port.remoteRoot).toMatch(/^\//);
      const changes: boolean[] = [];
      const off = port.onHeldChange((held) => changes.push(held));
      // A debugger's first bytes (a WebSocket upgrade to the inspector, as a debugger on the machine sends it) hold
      // it; it sends nothing more (so the runner never starts) and leaves.
      const client = net.connect(port.port, '127.0.0.1');
      await new Promise<void>((resolve, reject) => client.once('connect', resolve).once('error', reject));
      client.on('error', () => {});
      client.write(
        `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${Buffer.from('conformance-key!').toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
      await vi.waitFor(() => expect(changes).toEqual([true]), { timeout: 5000, interval: 10 });
      expect(port.held).toBe(true);
      client.destroy();
      await vi.waitFor(() => expect(changes).toEqual([true, false]), { timeout: 5000, interval: 10 });
      expect(port.held).toBe(false);
      off();
      await port.close();
      await expect(created).rejects.toMatchObject({ code: 'debug_closed' });
      const refused = await new Promise<boolean>((resolve) => {
        const s = net.connect(port.port, '127.0.0.1');
        s.once('connect', () => (s.destroy(), resolve(false)));
        s.once('error', () => resolve(true));
      });
      expect(refused, 'the port is closed').toBe(true);
    });

    it('create refuses a bundle it does not have', async (ctx) => {
      need(ctx);
      await expect(
        run.host.create({
          id: `conf_${process.pid}_${++seq}`,
          runtime: 'python',
          bundleSha: 'f'.repeat(64),
          entrypoint: ENTRY.python,
          memoryMb: 64,
          pidsMax: 16,
          tmpSizeMb: 16,
        }),
      ).rejects.toThrow();
    });
  });
}

/**
 * Waits until exactly one process runs with `mark` in its command line. Not at once: Popen returns once the child's
 * exec is under way (its close-on-exec pipe closed, or a vfork parent released), which the kernel does before the new
 * program's arguments are in place, so for a moment /proc/<pid>/cmdline is empty (3 to 5 times in 40 on this 2-core
 * host, with cgroup v1 and with none alike).
 */
async function childRuns(mark: string): Promise<void> {
  await vi.waitFor(() => expect(processesWith(mark), `one process with ${mark} runs`).toHaveLength(1), { timeout: 5000, interval: 10 });
}

/** Pids whose command line contains `mark` (alive, not zombies). */
function processesWith(mark: string): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        return alive(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(mark);
      } catch {
        return false;
      }
    });
}
