/**
 * A runner that speaks the real fd-3 protocol (executor/protocol.ts) from a script, behind the real
 * PooledExecutor and RunnerChannel: a test sends exactly the frames it wants (host calls with any
 * arguments, chunks, an output) as JSON text — including what JSON.stringify could not build, such as
 * 10,000 levels of nesting — and reads back the core's replies. Not a test file itself.
 */
import { Duplex, PassThrough } from 'node:stream';
import { PooledExecutor } from '../../executor/executor';
import { ExitEvent, type ExitStatus } from '../../executor/exit-event';
import { RunnerChannel } from '../../executor/runner-client';
import type { UsageSample } from '../../executor/limits/types';
import type { Sandbox, SandboxHost } from '../../executor/sandbox-host';

export interface RunnerScript {
  /** Host calls made in order, each after the previous one's reply; `argsJson` is the JSON text of `args` (an object). */
  calls?: { op: string; argsJson: string }[];
  /** JSON texts of the values the handler yields (stream chunks). */
  chunks?: string[];
  /** JSON text of the handler's return value (default `null`). */
  outputJson?: string;
}

export interface CallReply {
  ok: boolean;
  value?: unknown;
  error?: { code: string; message: string; status?: number };
}

const READY = { t: 'ready', init_ms: 1, runtime: { name: 'bun', version: 'scripted' } } as const;

export function scriptedExecutor() {
  let script: RunnerScript = {};
  let replies: CallReply[] = [];

  function sandboxFor(id: string): Sandbox {
    const toHost = new PassThrough();
    const fromHost = new PassThrough();
    const channel = new RunnerChannel(Duplex.from({ readable: toHost, writable: fromHost }));
    const waiting = new Map<string, (r: CallReply) => void>();
    let seq = 0;
    const send = (text: string) => toHost.write(`${text}\n`);
    const run = async (invocation: string) => {
      const idJson = JSON.stringify(invocation);
      for (const call of script.calls ?? []) {
        const cid = `c${++seq}`;
        const reply = new Promise<CallReply>((resolve) => waiting.set(cid, resolve));
        send(`{"t":"call","id":${idJson},"cid":"${cid}","op":${JSON.stringify(call.op)},"args":${call.argsJson}}`);
        replies.push(await reply);
      }
      for (const chunk of script.chunks ?? []) send(`{"t":"chunk","id":${idJson},"data":${chunk}}`);
      send(`{"t":"result","id":${idJson},"output":${script.outputJson ?? 'null'}}`);
    };
    let buf = '';
    fromHost.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const frame = JSON.parse(buf.slice(0, nl)) as { t: string; id?: string; cid?: string } & CallReply;
        buf = buf.slice(nl + 1);
        if (frame.t === 'invoke') void run(frame.id!);
        else if (frame.t === 'reply') {
          const { ok, value, error } = frame;
          waiting.get(frame.cid!)?.({ ok, ...(ok ? { value } : { error }) });
          waiting.delete(frame.cid!);
        }
      }
    });
    send(JSON.stringify(READY));
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
    return {
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
      stdout: null,
      stderr: null,
    };
  }

  const host: SandboxHost = {
    info: { backend: 'none', sandbox: 'none', transport: 'scripted', degraded: [] },
    materialize: async () => {},
    hasBundle: async () => true,
    create: async (spec) => {
      const s = sandboxFor(spec.id);
      await s.channel.waitReady(1000);
      return s;
    },
    close: async () => {},
  };

  return {
    /** A new executor on the scripted host (a core closes it when it stops). */
    executor: () => new PooledExecutor({ host, sampleMs: 1000 }),
    /** The script of the next invocations; clears the replies. */
    setScript(s: RunnerScript) {
      script = s;
      replies = [];
    },
    /** The core's replies to the calls made since the last setScript. */
    get replies(): CallReply[] {
      return replies;
    },
  };
}
