import { Duplex, type Readable, type Writable } from 'node:stream';
import { createInterface } from 'node:readline';
import { spawn, type ChildProcess } from 'node:child_process';
import { z } from 'zod';
import { FromRunner, ToRunner, type InitErrorFrame, type ReadyFrame } from './protocol';
import { RunnerChannel } from './runner-client';
import { ExitEvent } from './exit-event';
import type { UsageSample } from './limits/types';
import type { Sandbox, SandboxHost, SandboxHostInfo, SandboxSpec } from './sandbox-host';
import type { DebugPort, DebugSpec } from './debug/types';

/**
 * Sandboxes behind a stream: the executor on the host talks to an agent (executor/agent.ts) running
 * where the sandboxes live — inside the Lima VM on macOS (`limactl shell <vm> -- …`), or any shell
 * command. One NDJSON stream carries requests, replies, runner frames and runner output for all
 * sandboxes; the agent runs the same LocalSandboxHost the Linux host runs.
 *
 * Debug runs (executor/debug/types.ts) cross it too: the spec's DebugSpec goes without its callback, the agent's
 * host makes the debug sandbox and its relay (a TCP listener on the agent machine's 127.0.0.1, which Lima forwards
 * to the Mac's: executor/lima/template.ts), and the agent tells where it listens (`debug_listening`), every change
 * of `held` (`debug_held`) and its end (`debug_closed`); here a RemoteDebugPort built from those is what the
 * spec's onListening gets and what the Sandbox carries, and its close() asks the agent to close the relay.
 */

export const HostMsg = z.discriminatedUnion('op', [
  z.object({ op: z.literal('hello'), rid: z.number() }),
  z.object({ op: z.literal('has'), rid: z.number(), sha: z.string() }),
  z.object({
    op: z.literal('materialize'),
    rid: z.number(),
    sha: z.string(),
    entrypoint: z.string(),
    files: z.record(z.string(), z.string()),
  }),
  z.object({ op: z.literal('create'), rid: z.number(), spec: z.record(z.string(), z.unknown()) }),
  z.object({ op: z.literal('cpu'), rid: z.number(), sid: z.string(), percent: z.number().nullable() }),
  z.object({ op: z.literal('sample'), rid: z.number(), sid: z.string() }),
  z.object({ op: z.literal('kill'), rid: z.number(), sid: z.string() }),
  /** Sandbox.reap: the end of an invocation (answers how many processes were killed). */
  z.object({ op: z.literal('reap'), rid: z.number(), sid: z.string() }),
  /** SandboxHost.housekeep: what dead cores left where the agent's sandboxes live. */
  z.object({ op: z.literal('housekeep'), rid: z.number() }),
  z.object({ op: z.literal('destroy'), rid: z.number(), sid: z.string() }),
  z.object({ op: z.literal('frame'), sid: z.string(), frame: ToRunner }),
  /** DebugPort.close of a debug sandbox's relay (also while its create still waits for a debugger). */
  z.object({ op: z.literal('debug_close'), rid: z.number(), sid: z.string() }),
]);
export type HostMsg = z.infer<typeof HostMsg>;

export const AgentMsg = z.discriminatedUnion('op', [
  z.object({ op: z.literal('ok'), rid: z.number(), value: z.unknown().optional() }),
  z.object({
    op: z.literal('fail'),
    rid: z.number(),
    message: z.string(),
    code: z.string().optional(),
    evidence: z.record(z.string(), z.unknown()).optional(),
  }),
  z.object({ op: z.literal('frame'), sid: z.string(), frame: FromRunner }),
  z.object({ op: z.literal('output'), sid: z.string(), stream: z.enum(['stdout', 'stderr']), data: z.string() }),
  z.object({ op: z.literal('exit'), sid: z.string(), code: z.number().nullable(), signal: z.string().nullable() }),
  /** A debug sandbox's relay listens (sent before its create answers: the runner waits for a debugger first). */
  z.object({
    op: z.literal('debug_listening'),
    sid: z.string(),
    protocol: z.enum(['inspector', 'dap']),
    host: z.string(),
    port: z.number(),
    url: z.string(),
    remoteRoot: z.string(),
    held: z.boolean(),
  }),
  z.object({ op: z.literal('debug_held'), sid: z.string(), held: z.boolean() }),
  /** The relay is closed (its sandbox destroyed or never made, or debug_close): nothing more about it comes. */
  z.object({ op: z.literal('debug_closed'), sid: z.string() }),
]);
export type AgentMsg = z.infer<typeof AgentMsg>;

const send = (out: Writable, msg: unknown) => out.write(JSON.stringify(msg) + '\n');

/** SandboxSpec.debug as it travels (its onListening stays behind: the agent's own tells the host). */
const WireDebugSpec = z.object({
  protocol: z.enum(['inspector', 'dap']),
  port: z.number().int().optional(),
  attachTimeoutMs: z.number(),
});

// ---- agent side ---------------------------------------------------------------------------------------

/** Serves a SandboxHost over a stream (the agent's stdin/stdout). Resolves when the input ends. */
export async function serveAgent(host: SandboxHost, input: Readable, output: Writable): Promise<void> {
  const sandboxes = new Map<string, Sandbox>();
  // Debug sandboxes' relays by sandbox id, from the moment they listen (before the sandbox exists) to their close.
  const debugPorts = new Map<string, { port: DebugPort; off: () => void }>();
  const debugGone = (sid: string) => {
    const d = debugPorts.get(sid);
    if (!d) return;
    debugPorts.delete(sid);
    d.off();
    send(output, { op: 'debug_closed', sid });
  };
  const withDebug = (raw: Record<string, unknown>): SandboxSpec => {
    const spec = raw as unknown as SandboxSpec;
    if (raw.debug === undefined) return spec;
    const sid = spec.id;
    const wire = WireDebugSpec.parse(raw.debug);
    const debug: DebugSpec = {
      ...wire,
      onListening: (port) => {
        const off = port.onHeldChange((held) => send(output, { op: 'debug_held', sid, held }));
        debugPorts.set(sid, { port, off });
        const { protocol, host: at, port: n, url, remoteRoot, held } = port;
        send(output, { op: 'debug_listening', sid, protocol, host: at, port: n, url, remoteRoot, held });
      },
    };
    return { ...spec, debug };
  };
  const rl = createInterface({ input, crlfDelay: Infinity });
  const reply = (rid: number, work: () => Promise<unknown>) => {
    // Through a promise even when `work` throws at once (an unknown sandbox): one bad request must
    // answer `fail`, never take the agent and every sandbox behind it down.
    Promise.resolve()
      .then(work)
      .then(
        (value) => send(output, { op: 'ok', rid, value }),
        (err: unknown) => {
          const e = err as { code?: unknown; evidence?: unknown };
          send(output, {
            op: 'fail',
            rid,
            message: err instanceof Error ? err.message : String(err),
            ...(typeof e?.code === 'string' ? { code: e.code } : {}),
            ...(e?.evidence && typeof e.evidence === 'object' ? { evidence: e.evidence } : {}),
          });
        },
      );
  };
  const get = (sid: string) => {
    const s = sandboxes.get(sid);
    if (!s) throw new Error(`no sandbox ${sid}`);
    return s;
  };
  for await (const line of rl) {
    if (!line.trim()) continue;
    let msg: HostMsg;
    try {
      msg = HostMsg.parse(JSON.parse(line));
    } catch {
      continue; // a malformed request cannot be answered (no rid): the host times out on it
    }
    switch (msg.op) {
      case 'hello':
        reply(msg.rid, async () => host.info);
        break;
      case 'has':
        reply(msg.rid, () => host.hasBundle(msg.sha));
        break;
      case 'materialize':
        reply(msg.rid, () => host.materialize(msg.sha, msg.entrypoint, msg.files));
        break;
      case 'create':
        reply(msg.rid, async () => {
          const spec = withDebug(msg.spec);
          let sandbox: Sandbox;
          try {
            sandbox = await host.create(spec);
          } catch (err) {
            debugGone(spec.id); // the host closed its relay (no debugger came, or a debug_close)
            throw err;
          }
          sandboxes.set(sandbox.id, sandbox);
          sandbox.channel.forwardTo((frame) => send(output, { op: 'frame', sid: sandbox.id, frame }));
          for (const stream of ['stdout', 'stderr'] as const) {
            sandbox[stream]?.on('data', (c: Buffer) => send(output, { op: 'output', sid: sandbox.id, stream, data: c.toString('utf8') }));
          }
          // The sandbox stays known after its runner exits, until the host destroys it: the host still
          // samples its group then (an OOM kill is read from the group's counters after the fact).
          void sandbox.exited.then((e) => send(output, { op: 'exit', sid: sandbox.id, ...e }));
          return { id: sandbox.id, ready: sandbox.ready, initMs: sandbox.initMs };
        });
        break;
      case 'cpu':
        reply(msg.rid, () => get(msg.sid).setCpuPercent(msg.percent));
        break;
      case 'sample':
        reply(msg.rid, () => get(msg.sid).sample());
        break;
      case 'kill':
        reply(msg.rid, () => get(msg.sid).killAll());
        break;
      case 'housekeep':
        reply(msg.rid, async () => (await host.housekeep?.()) ?? { groups: 0, files: 0 });
        break;
      case 'reap':
        reply(msg.rid, async () => {
          const s = get(msg.sid);
          return s.reap ? s.reap() : 0;
        });
        break;
      case 'destroy':
        reply(msg.rid, async () => {
          const s = sandboxes.get(msg.sid);
          sandboxes.delete(msg.sid);
          await s?.destroy();
          debugGone(msg.sid); // its relay closed with it (its held changes went first)
        });
        break;
      case 'debug_close':
        reply(msg.rid, async () => {
          await debugPorts.get(msg.sid)?.port.close();
          debugGone(msg.sid);
        });
        break;
      case 'frame':
        try {
          get(msg.sid).channel.send(msg.frame);
        } catch {
          /* the sandbox is gone; its exit message tells the host */
        }
        break;
    }
  }
  await Promise.all([...sandboxes.values()].map((s) => s.destroy().catch(() => {})));
  await Promise.all([...debugPorts.values()].map((d) => d.port.close().catch(() => {})));
  await host.close();
}

// ---- host side -----------------------------------------------------------------------------------------

/**
 * A debug sandbox's relay behind the agent, as seen from the core: where it listens, whether a debugger holds the run
 * (told by the agent's debug_held), and a close() the agent carries out. The address is the agent machine's loopback;
 * inside Lima the same port answers on the Mac's (executor/lima/template.ts, portForwards).
 */
class RemoteDebugPort implements DebugPort {
  private isHeld: boolean;
  private isClosed = false;
  private closing: Promise<void> | null = null;
  private readonly listeners = new Set<(held: boolean) => void>();

  constructor(
    readonly protocol: DebugPort['protocol'],
    readonly host: string,
    readonly port: number,
    readonly url: string,
    readonly remoteRoot: string,
    held: boolean,
    private readonly closeRemote: () => Promise<unknown>,
  ) {
    this.isHeld = held;
  }

  get held(): boolean {
    return this.isHeld;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  onHeldChange(listener: (held: boolean) => void): () => void {
    if (this.isClosed) return () => {};
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** The agent's debug_held. */
  setHeld(held: boolean): void {
    if (this.isClosed || held === this.isHeld) return;
    this.isHeld = held;
    for (const l of [...this.listeners]) l(held);
  }

  /** The agent's debug_closed, or the agent gone: released first if it was held, then nothing more. */
  markClosed(): void {
    if (this.isClosed) return;
    this.setHeld(false);
    this.isClosed = true;
    this.listeners.clear();
  }

  close(): Promise<void> {
    if (this.isClosed) return Promise.resolve();
    this.closing ??= this.closeRemote().then(
      () => this.markClosed(),
      () => this.markClosed(), // the agent is gone: so is its relay
    );
    return this.closing;
  }
}

interface RemoteSandboxState {
  toHost: Duplex;
  stdout: Duplex;
  stderr: Duplex;
  exit: (e: { code: number | null; signal: string | null }) => void;
}

/** A SandboxHost whose sandboxes live behind an agent at the other end of `input`/`output`. */
export class RemoteSandboxHost implements SandboxHost {
  private rid = 0;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly sandboxes = new Map<string, RemoteSandboxState>();
  /** Debug sandboxes' relays, from debug_listening to debug_closed (or the sandbox's destroy). */
  private readonly debugPorts = new Map<string, RemoteDebugPort>();
  /** The DebugSpec of each debug create in flight: its onListening is called on debug_listening. */
  private readonly debugSpecs = new Map<string, DebugSpec>();
  private closedError: Error | null = null;
  /** What to add to the agent's clock to read this process's (see onAgentClock). */
  private clock = { lo: -Infinity, hi: Infinity };
  info: SandboxHostInfo;

  private constructor(
    private readonly input: Readable,
    private readonly output: Writable,
    private readonly onClose: () => Promise<void>,
    transport: string,
  ) {
    this.info = { backend: 'unknown', sandbox: 'none', transport, degraded: [] };
    const rl = createInterface({ input, crlfDelay: Infinity });
    rl.on('line', (line) => this.onLine(line));
    rl.on('close', () => this.fail(new Error(`the ${transport} agent went away`)));
    // A request written as the agent exits fails with EPIPE on this stream: without a listener that is an
    // uncaught exception in the core (seen in test/api/routes.test.ts's VM test, shuffled seed 7).
    output.on('error', (err) => this.fail(new Error(`the ${transport} agent went away (${err.message})`)));
  }

  /** Connects to an agent and learns what its host can enforce. */
  static async connect(
    input: Readable,
    output: Writable,
    opts: { transport: string; onClose?: () => Promise<void> },
  ): Promise<RemoteSandboxHost> {
    const host = new RemoteSandboxHost(input, output, opts.onClose ?? (async () => {}), opts.transport);
    const remote = (await host.request({ op: 'hello' })) as SandboxHostInfo;
    host.info = { ...remote, transport: opts.transport };
    return host;
  }

  /** timeoutMs null: no bound of its own (a debug sandbox's create waits as long as the agent's host lets it). */
  private request(msg: Record<string, unknown>, timeoutMs: number | null = 120_000): Promise<unknown> {
    if (this.closedError) return Promise.reject(this.closedError);
    const rid = ++this.rid;
    return new Promise((resolve, reject) => {
      const timer =
        timeoutMs === null
          ? undefined
          : setTimeout(() => {
              this.pending.delete(rid);
              reject(new Error(`the agent did not answer ${String(msg.op)} within ${timeoutMs} ms`));
            }, timeoutMs);
      this.pending.set(rid, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      send(this.output, { ...msg, rid });
    });
  }

  private onLine(line: string) {
    let msg: AgentMsg;
    try {
      msg = AgentMsg.parse(JSON.parse(line));
    } catch {
      return;
    }
    if (msg.op === 'ok' || msg.op === 'fail') {
      const p = this.pending.get(msg.rid);
      this.pending.delete(msg.rid);
      if (msg.op === 'ok') p?.resolve(msg.value);
      else p?.reject(Object.assign(new Error(msg.message), msg.code ? { code: msg.code, evidence: msg.evidence } : {}));
      return;
    }
    if (msg.op === 'debug_listening' || msg.op === 'debug_held' || msg.op === 'debug_closed') return this.onDebug(msg);
    const s = this.sandboxes.get(msg.sid);
    if (!s) return;
    if (msg.op === 'frame') s.toHost.push(JSON.stringify(msg.frame) + '\n');
    else if (msg.op === 'output') s[msg.stream].push(Buffer.from(msg.data, 'utf8'));
    else {
      this.sandboxes.delete(msg.sid);
      s.toHost.push(null);
      s.exit({ code: msg.code, signal: msg.signal });
    }
  }

  private onDebug(msg: Extract<AgentMsg, { op: 'debug_listening' | 'debug_held' | 'debug_closed' }>) {
    const { sid } = msg;
    if (msg.op === 'debug_listening') {
      const port = new RemoteDebugPort(msg.protocol, msg.host, msg.port, msg.url, msg.remoteRoot, msg.held, () =>
        this.request({ op: 'debug_close', sid }, 30_000),
      );
      this.debugPorts.set(sid, port);
      this.debugSpecs.get(sid)?.onListening(port);
    } else if (msg.op === 'debug_held') {
      this.debugPorts.get(sid)?.setHeld(msg.held);
    } else {
      this.debugPorts.get(sid)?.markClosed();
      this.debugPorts.delete(sid);
    }
  }

  private fail(err: Error) {
    this.closedError = err;
    for (const port of this.debugPorts.values()) port.markClosed();
    this.debugPorts.clear();
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    for (const s of this.sandboxes.values()) {
      s.toHost.push(null);
      s.exit({ code: null, signal: 'agent-lost' });
    }
    this.sandboxes.clear();
  }

  /**
   * A sample's `at_ms` is the agent's monotonic clock (performance.now() of another process, in the Lima VM another
   * machine): the executor reads it against its own (the run's timeline, the memory watchdog's `after_ms`), so it is
   * moved onto this process's clock. Each exchange bounds the offset: the sample was taken after the request left
   * and before the answer came. The bounds of every exchange so far are intersected (both clocks are monotonic);
   * if they stop overlapping (a clock ran at another rate), the latest exchange alone counts.
   */
  private onAgentClock(agentMs: number, sentMs: number, receivedMs: number): number {
    let lo = Math.max(this.clock.lo, sentMs - agentMs);
    let hi = Math.min(this.clock.hi, receivedMs - agentMs);
    if (lo > hi) [lo, hi] = [sentMs - agentMs, receivedMs - agentMs];
    this.clock = { lo, hi };
    return agentMs + (lo + hi) / 2;
  }

  private async sample(sid: string): Promise<UsageSample> {
    const sent = performance.now();
    const s = (await this.request({ op: 'sample', sid })) as UsageSample;
    return { ...s, at_ms: this.onAgentClock(s.at_ms, sent, performance.now()) };
  }

  async housekeep(): Promise<{ groups: number; files: number }> {
    return (await this.request({ op: 'housekeep' }, 30_000)) as { groups: number; files: number };
  }

  async hasBundle(sha: string): Promise<boolean> {
    return (await this.request({ op: 'has', sha })) as boolean;
  }

  async materialize(sha: string, entrypoint: string, files: Record<string, string>): Promise<void> {
    await this.request({ op: 'materialize', sha, entrypoint, files });
  }

  async create(spec: SandboxSpec): Promise<Sandbox> {
    const sid = spec.id;
    const output = this.output;
    // The runner's fd 3, as seen from here: writes become `frame` requests, `frame` messages are read.
    const toHost = new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        for (const line of chunk.toString('utf8').split('\n')) {
          if (line.trim()) send(output, { op: 'frame', sid, frame: JSON.parse(line) as unknown });
        }
        cb();
      },
    });
    let exit!: RemoteSandboxState['exit'];
    const exited = new Promise<{ code: number | null; signal: string | null }>((r) => (exit = r));
    const state: RemoteSandboxState = {
      toHost,
      stdout: new Duplex({ read() {}, write: (_c, _e, cb) => cb() }),
      stderr: new Duplex({ read() {}, write: (_c, _e, cb) => cb() }),
      exit,
    };
    this.sandboxes.set(sid, state);
    const { debug, ...rest } = spec;
    const wire = debug ? { ...rest, debug: WireDebugSpec.parse(debug) } : rest;
    if (debug) this.debugSpecs.set(sid, debug);
    let created: { id: string; ready: ReadyFrame | InitErrorFrame; initMs: number };
    try {
      // A debug runner waits for its debugger, then loads with the clock standing still while one holds it: the
      // agent's host bounds that (attachTimeoutMs, its init budget), not a timeout of ours.
      created = (await this.request({ op: 'create', spec: wire }, debug ? null : 120_000)) as typeof created;
    } catch (err) {
      this.sandboxes.delete(sid);
      this.debugPorts.get(sid)?.markClosed();
      this.debugPorts.delete(sid);
      throw err;
    } finally {
      this.debugSpecs.delete(sid);
    }
    const debugPort = this.debugPorts.get(sid);
    // The agent's channel consumed the runner's ready frame: replay it to ours.
    toHost.push(JSON.stringify(created.ready) + '\n');
    const channel = new RunnerChannel(toHost);
    await channel.waitReady(5_000);
    const exitEvent = new ExitEvent(exited);
    return {
      id: sid,
      channel,
      ready: created.ready,
      initMs: created.initMs,
      setCpuPercent: async (percent) => void (await this.request({ op: 'cpu', sid, percent })),
      sample: () => this.sample(sid),
      killAll: async () => void (await this.request({ op: 'kill', sid }).catch(() => {})),
      reap: async () => (await this.request({ op: 'reap', sid }, 10_000)) as number,
      destroy: async () => {
        await this.request({ op: 'destroy', sid }).catch(() => {});
        channel.close();
        // The agent said debug_closed before its answer; gone either way once destroyed.
        debugPort?.markClosed();
        this.debugPorts.delete(sid);
      },
      exited,
      onExit: (fn) => exitEvent.on(fn),
      stdout: state.stdout,
      stderr: state.stderr,
      ...(debugPort ? { debug: debugPort } : {}),
    };
  }

  async close(): Promise<void> {
    this.output.end();
    await this.onClose();
  }
}

/**
 * Runs an agent as a child process (e.g. `limactl shell svc-emu -- bun /path/agent.ts`) and connects.
 * The agent dies with its stdin: closing the host ends every sandbox behind it.
 */
export async function spawnAgent(
  argv: string[],
  transport: string,
  env?: NodeJS.ProcessEnv,
): Promise<{ host: RemoteSandboxHost; child: ChildProcess }> {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'], env: env ?? process.env });
  // The agent's stderr goes on to ours; its last words also explain a failed start (`limactl shell` on a
  // VM that is not running says so there).
  let stderrTail = '';
  child.stderr.on('data', (chunk: Buffer) => {
    process.stderr.write(chunk);
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-1000);
  });
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  try {
    const host = await RemoteSandboxHost.connect(child.stdout, child.stdin, {
      transport,
      onClose: () =>
        new Promise((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
          child.once('exit', () => (clearTimeout(t), resolve()));
        }),
    });
    return { host, child };
  } catch (err) {
    await Promise.race([closed, new Promise((r) => setTimeout(r, 1_000))]);
    const said = stderrTail.trim().split('\n').slice(-3).join(' / ');
    throw new Error(`${err instanceof Error ? err.message : String(err)}${said ? `: ${said}` : ''}`, { cause: err });
  }
}
