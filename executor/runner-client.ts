import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import {
  FromRunner,
  MAX_FRAME_BYTES,
  type GraphFrame,
  type HostOp,
  type InitErrorFrame,
  type ReadyFrame,
  type StepFrame,
  type ToRunner,
} from './protocol';

/**
 * The host side of the runner protocol (executor/protocol.ts) over any Node `Duplex`: fd 3 of a spawned
 * runner, a remote agent's stream, or a test's PassThrough pair. Transport-agnostic and limit-agnostic:
 * it frames, validates and routes; the executor decides what a dead runner or a bad frame means.
 *
 * Events (never thrown: an `error` event is emitted only when someone listens):
 *   'error'      (err: RunnerProtocolError)  a line over MAX_FRAME_BYTES, not JSON, not a valid frame, or out of place
 *   'host_error' (err: unknown)              an onCall handler threw an error without a `code` (answered `host_error`)
 *   'close'      ()                          the stream ended
 *   'preloaded'  (frame: PreloadedFrame)     a framework spare has imported its framework (executor/local-host.ts)
 */

export type ProtocolErrorCode =
  'frame_too_large' | 'bad_frame' | 'unexpected_frame' | 'runner_exited' | 'ready_timeout' | 'not_ready' | 'busy';

export class RunnerProtocolError extends Error {
  constructor(
    readonly code: ProtocolErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'RunnerProtocolError';
  }
}

export type InvokeOutcome =
  { kind: 'result'; output: unknown; logsDropped?: number } | { kind: 'error'; message: string; stack?: string; logsDropped?: number };

export interface InvokeHandlers {
  onChunk?: (data: unknown) => void;
  onLog?: (stream: 'stdout' | 'stderr', data: string) => void;
  /** An agent framework's step started or ended (executor/protocol.ts StepFrame). */
  onStep?: (frame: StepFrame) => void;
  /** A compiled graph's shape (executor/protocol.ts GraphFrame). */
  onGraph?: (frame: GraphFrame) => void;
  /** Answers a host call; a thrown error with a string `code` becomes `{ok:false, error:{code, message}}`. */
  onCall: (op: HostOp, args: Record<string, unknown>) => Promise<unknown>;
}

interface Active {
  id: string;
  handlers: InvokeHandlers;
  resolve: (outcome: InvokeOutcome) => void;
  reject: (err: RunnerProtocolError) => void;
}

const NL = 0x0a;

export class RunnerChannel extends EventEmitter {
  /** Resolves when the stream has ended or closed (never rejects). */
  readonly closed: Promise<void>;
  private isClosed = false;
  private resolveClosed!: () => void;

  private parts: Buffer[] = [];
  private partBytes = 0;
  private discarding = false;

  private readyFrame: ReadyFrame | InitErrorFrame | null = null;
  private readyWaiters: Array<(frame: ReadyFrame | InitErrorFrame | RunnerProtocolError) => void> = [];
  private active: Active | null = null;
  private forwarder: ((frame: FromRunner) => void) | null = null;

  constructor(private readonly stream: Duplex) {
    super();
    this.closed = new Promise<void>((resolve) => {
      this.resolveClosed = resolve;
    });
    stream.on('data', (chunk: Buffer | string) => this.onData(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    stream.on('end', () => this.onClose());
    stream.on('close', () => this.onClose());
    stream.on('error', () => this.onClose());
  }

  /** The ready or init_error frame, once it has arrived. */
  get ready(): ReadyFrame | InitErrorFrame | null {
    return this.readyFrame;
  }

  get busy(): boolean {
    return this.active !== null;
  }

  send(frame: ToRunner): void {
    if (this.isClosed || this.stream.destroyed || this.stream.writableEnded) {
      throw new RunnerProtocolError('runner_exited', 'the runner channel is closed');
    }
    this.stream.write(`${JSON.stringify(frame)}\n`);
  }

  /** The runner's first frame: `ready` or `init_error`. Rejects on timeout or when the stream closes first. */
  waitReady(timeoutMs: number): Promise<ReadyFrame | InitErrorFrame> {
    if (this.readyFrame) return Promise.resolve(this.readyFrame);
    if (this.isClosed) return Promise.reject(new RunnerProtocolError('runner_exited', 'the runner exited before it was ready'));
    return new Promise((resolve, reject) => {
      const waiter = (frame: ReadyFrame | InitErrorFrame | RunnerProtocolError) => {
        clearTimeout(timer);
        if (frame instanceof RunnerProtocolError) reject(frame);
        else resolve(frame);
      };
      const timer = setTimeout(() => {
        this.readyWaiters = this.readyWaiters.filter((w) => w !== waiter);
        reject(new RunnerProtocolError('ready_timeout', `the runner was not ready within ${timeoutMs} ms`));
      }, timeoutMs);
      this.readyWaiters.push(waiter);
    });
  }

  /**
   * Runs one invocation. Resolves with the runner's `result` or `error` frame; rejects with a
   * RunnerProtocolError when the runner goes away (or breaks the protocol) before answering.
   * Throws at once when another invocation is running or the runner is not ready.
   */
  invoke(id: string, input: Record<string, unknown>, env: Record<string, string>, handlers: InvokeHandlers): Promise<InvokeOutcome> {
    if (this.active) throw new RunnerProtocolError('busy', `invocation ${this.active.id} is still running on this runner`);
    if (this.isClosed) throw new RunnerProtocolError('runner_exited', 'the runner channel is closed');
    if (!this.readyFrame || this.readyFrame.t !== 'ready') {
      throw new RunnerProtocolError('not_ready', this.readyFrame ? 'the runner failed to load its bundle' : 'the runner is not ready yet');
    }
    return new Promise<InvokeOutcome>((resolve, reject) => {
      this.active = {
        id,
        handlers,
        resolve: (outcome) => {
          this.active = null;
          resolve(outcome);
        },
        reject: (err) => {
          this.active = null;
          reject(err);
        },
      };
      try {
        this.send({ t: 'invoke', id, input, env });
      } catch (err) {
        this.active.reject(err as RunnerProtocolError);
      }
    });
  }

  /**
   * Hands every later frame (after ready) to `fn` instead of routing it to an invocation: a remote
   * agent relays frames to the host, whose own RunnerChannel does the routing.
   */
  forwardTo(fn: (frame: FromRunner) => void): void {
    this.forwarder = fn;
  }

  /** Ends our side of the stream: the runner exits when it sees fd 3 close. */
  close(): void {
    if (!this.stream.writableEnded && !this.stream.destroyed) this.stream.end();
  }

  // ---- incoming ------------------------------------------------------------------------------------

  private onData(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(NL); nl >= 0; nl = chunk.indexOf(NL, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.discarding) {
        this.discarding = false;
        continue;
      }
      if (this.partBytes + piece.length > MAX_FRAME_BYTES) {
        this.parts = [];
        this.partBytes = 0;
        this.tooLarge();
        continue;
      }
      let line: Buffer;
      if (this.parts.length === 0) line = piece;
      else {
        this.parts.push(piece);
        line = Buffer.concat(this.parts);
        this.parts = [];
        this.partBytes = 0;
      }
      if (line.length > 0) this.onLine(line);
    }
    if (start < chunk.length && !this.discarding) {
      const rest = chunk.subarray(start);
      if (this.partBytes + rest.length > MAX_FRAME_BYTES) {
        this.parts = [];
        this.partBytes = 0;
        this.discarding = true;
        this.tooLarge();
      } else {
        // Copy: the stream may reuse its buffer.
        this.parts.push(Buffer.from(rest));
        this.partBytes += rest.length;
      }
    }
  }

  private tooLarge(): void {
    const err = new RunnerProtocolError('frame_too_large', `the runner sent a line over ${MAX_FRAME_BYTES} bytes; it was dropped`);
    this.report(err);
    // The dropped line may have been the invocation's answer: fail it rather than wait for nothing.
    this.active?.reject(err);
  }

  private onLine(line: Buffer): void {
    let raw: unknown;
    try {
      raw = JSON.parse(line.toString('utf8'));
    } catch {
      this.report(new RunnerProtocolError('bad_frame', `the runner sent a line that is not JSON (${line.length} bytes)`));
      return;
    }
    const parsed = FromRunner.safeParse(raw);
    if (!parsed.success) {
      const t = raw && typeof raw === 'object' ? (raw as { t?: unknown }).t : undefined;
      this.report(
        new RunnerProtocolError(
          'bad_frame',
          `the runner sent an invalid frame (t=${JSON.stringify(t)}): ${parsed.error.issues[0]?.message ?? 'invalid'}`,
        ),
      );
      return;
    }
    const frame = parsed.data;
    if (frame.t === 'preloaded') {
      this.emit('preloaded', frame);
      return;
    }
    if (this.forwarder && frame.t !== 'ready' && frame.t !== 'init_error') {
      this.forwarder(frame);
      return;
    }
    switch (frame.t) {
      case 'ready':
      case 'init_error': {
        if (this.readyFrame) {
          this.report(new RunnerProtocolError('unexpected_frame', `a second ${frame.t} frame was ignored`));
          return;
        }
        this.readyFrame = frame;
        const waiters = this.readyWaiters;
        this.readyWaiters = [];
        for (const w of waiters) w(frame);
        return;
      }
      case 'call': {
        const active = this.active;
        if (!active || active.id !== frame.id) {
          this.report(
            new RunnerProtocolError('unexpected_frame', `a host call for invocation ${frame.id}, which is not running, was refused`),
          );
          this.reply(frame.cid, {
            ok: false,
            error: { code: 'invocation_ended', message: 'the invocation that made this call has ended' },
          });
          return;
        }
        void this.answer(active.handlers, frame.cid, frame.op, frame.args);
        return;
      }
      default: {
        const active = this.active;
        if (!active || active.id !== frame.id) {
          this.report(
            new RunnerProtocolError('unexpected_frame', `a ${frame.t} frame for invocation ${frame.id}, which is not running, was ignored`),
          );
          return;
        }
        if (frame.t === 'log') active.handlers.onLog?.(frame.stream, frame.data);
        else if (frame.t === 'chunk') active.handlers.onChunk?.(frame.data);
        else if (frame.t === 'step') active.handlers.onStep?.(frame);
        else if (frame.t === 'graph') active.handlers.onGraph?.(frame);
        else if (frame.t === 'result') {
          active.resolve({
            kind: 'result',
            output: frame.output === undefined ? null : frame.output,
            ...(frame.logs_dropped ? { logsDropped: frame.logs_dropped } : {}),
          });
        } else {
          active.resolve({
            kind: 'error',
            message: frame.message,
            ...(frame.stack === undefined ? {} : { stack: frame.stack }),
            ...(frame.logs_dropped ? { logsDropped: frame.logs_dropped } : {}),
          });
        }
      }
    }
  }

  private async answer(handlers: InvokeHandlers, cid: string, op: HostOp, args: Record<string, unknown>): Promise<void> {
    let value: unknown;
    try {
      value = await handlers.onCall(op, args);
    } catch (err) {
      const code = err && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
      if (typeof code === 'string' && code.length > 0) {
        const e = err as { message?: unknown; status?: unknown; body?: unknown };
        const message = err instanceof Error ? err.message : typeof e.message === 'string' ? e.message : code;
        // An integration's HTTP error travels with its status and body, for the snippet's exception.
        const detail = typeof e.status === 'number' ? { status: e.status, body: e.body ?? null } : {};
        this.reply(cid, { ok: false, error: { code, message, ...detail } });
      } else {
        if (this.listenerCount('host_error') > 0) this.emit('host_error', err);
        this.reply(cid, { ok: false, error: { code: 'host_error', message: 'the host could not complete the call' } });
      }
      return;
    }
    this.reply(cid, { ok: true, value: value === undefined ? null : value });
  }

  private reply(
    cid: string,
    body: { ok: true; value: unknown } | { ok: false; error: { code: string; message: string; status?: number; body?: unknown } },
  ): void {
    if (this.isClosed) return;
    try {
      this.send({ t: 'reply', cid, ...body });
    } catch (err) {
      // A value that does not serialise is the host's bug; tell the runner rather than leave it waiting.
      if (err instanceof RunnerProtocolError) return;
      if (this.listenerCount('host_error') > 0) this.emit('host_error', err);
      try {
        this.send({ t: 'reply', cid, ok: false, error: { code: 'host_error', message: 'the host could not complete the call' } });
      } catch {
        /* closed */
      }
    }
  }

  private report(err: RunnerProtocolError): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  private onClose(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    const err = new RunnerProtocolError('runner_exited', 'the runner closed its channel');
    const waiters = this.readyWaiters;
    this.readyWaiters = [];
    for (const w of waiters) w(new RunnerProtocolError('runner_exited', 'the runner exited before it was ready'));
    this.active?.reject(err);
    this.resolveClosed();
    this.emit('close');
  }
}
