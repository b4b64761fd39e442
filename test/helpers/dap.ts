/**
 * A minimal Debug Adapter Protocol client for the tests (test/executor/debug-python.test.ts): the base protocol's
 * `Content-Length` framing over a TCP socket, requests answered by `request_seq`, events kept in arrival order so
 * a test can wait for one that came before it asked. Enough to attach to debugpy (executor/runtimes/python/
 * _svc_debug.py), set a breakpoint, read a frame's locals, continue and disconnect — nothing else.
 */
import { connect, type Socket } from 'node:net';

export interface DapMessage {
  seq: number;
  type: 'request' | 'response' | 'event';
  command?: string;
  event?: string;
  success?: boolean;
  message?: string;
  request_seq?: number;
  body?: any;
}

export interface DapVariable {
  name: string;
  value: string;
  type?: string;
  variablesReference: number;
}

const HEADER_END = Buffer.from('\r\n\r\n');

export class DapClient {
  private seq = 0;
  private buffer = Buffer.alloc(0);
  private readonly pending = new Map<number, { resolve(m: DapMessage): void; reject(e: Error): void; command: string }>();
  private readonly waiters = new Set<{ match(m: DapMessage): boolean; resolve(m: DapMessage): void }>();
  private closedError: Error | null = null;
  /** Every event received, in order. */
  readonly events: DapMessage[] = [];

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new Error('the debug adapter closed the connection')));
  }

  /** Connects to a DAP server (a debug run's tcp://HOST:PORT). */
  static connect(host: string, port: number, timeoutMs = 10_000): Promise<DapClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no DAP connection to ${host}:${port} within ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new DapClient(socket));
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  /** Sends a request; resolves with the response's body, rejects when the adapter says it failed. */
  async request<T = any>(command: string, args?: unknown, timeoutMs = 30_000): Promise<T> {
    const message = await this.requestRaw(command, args, timeoutMs);
    if (!message.success) throw new Error(`DAP ${command} failed: ${message.message ?? JSON.stringify(message.body)}`);
    return message.body as T;
  }

  /** Sends a request and resolves with the whole response (success or not); `attach` is answered only after
   * `configurationDone` by some adapters, so it can be started, left pending, and awaited later. */
  requestRaw(command: string, args?: unknown, timeoutMs = 30_000): Promise<DapMessage> {
    if (this.closedError) return Promise.reject(this.closedError);
    this.seq += 1;
    const seq = this.seq;
    const body = Buffer.from(JSON.stringify({ seq, type: 'request', command, ...(args === undefined ? {} : { arguments: args }) }));
    return new Promise<DapMessage>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(seq);
        reject(new Error(`DAP ${command}: no response within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(seq, {
        command,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.socket.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body]));
    });
  }

  /** The first event named `name` (and matching `where`), received already or still to come. */
  waitEvent(name: string, where: (body: any) => boolean = () => true, timeoutMs = 30_000): Promise<DapMessage> {
    const match = (m: DapMessage) => m.event === name && where(m.body);
    const seen = this.events.find(match);
    if (seen) return Promise.resolve(seen);
    if (this.closedError) return Promise.reject(this.closedError);
    return new Promise((resolve, reject) => {
      const waiter = {
        match,
        resolve: (m: DapMessage) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve(m);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`no DAP event ${name} within ${timeoutMs} ms (got: ${this.events.map((e) => e.event).join(', ') || 'none'})`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  /** Reads a frame's local variables: scopes → the `Locals` scope → variables. */
  async locals(frameId: number): Promise<Record<string, DapVariable>> {
    const { scopes } = await this.request<{ scopes: Array<{ name: string; variablesReference: number }> }>('scopes', { frameId });
    const scope = scopes.find((s) => /^locals$/i.test(s.name)) ?? scopes[0];
    if (!scope) throw new Error('the frame has no scopes');
    const { variables } = await this.request<{ variables: DapVariable[] }>('variables', { variablesReference: scope.variablesReference });
    return Object.fromEntries(variables.map((v) => [v.name, v]));
  }

  /** Closes the connection (after a `disconnect` request, or to drop the debugger). */
  close(): void {
    this.socket.destroy();
  }

  /** Resolves once the adapter has closed the connection. */
  closed(timeoutMs = 10_000): Promise<void> {
    if (this.socket.destroyed) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the DAP connection is still open after ${timeoutMs} ms`)), timeoutMs);
      this.socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private onData(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const end = this.buffer.indexOf(HEADER_END);
      if (end < 0) return;
      const header = this.buffer.subarray(0, end).toString('ascii');
      const length = /Content-Length:\s*(\d+)/i.exec(header);
      if (!length) {
        this.fail(new Error(`a DAP header without Content-Length: ${JSON.stringify(header)}`));
        return;
      }
      const start = end + HEADER_END.length;
      const total = start + Number(length[1]);
      if (this.buffer.length < total) return;
      const message = JSON.parse(this.buffer.subarray(start, total).toString('utf8')) as DapMessage;
      this.buffer = this.buffer.subarray(total);
      this.dispatch(message);
    }
  }

  private dispatch(message: DapMessage): void {
    if (message.type === 'response' && message.request_seq !== undefined) {
      const pending = this.pending.get(message.request_seq);
      this.pending.delete(message.request_seq);
      pending?.resolve(message);
    } else if (message.type === 'event') {
      this.events.push(message);
      for (const waiter of [...this.waiters]) if (waiter.match(message)) waiter.resolve(message);
    }
  }

  private fail(err: Error): void {
    if (this.closedError) return;
    this.closedError = err;
    for (const [, pending] of this.pending) pending.reject(new Error(`DAP ${pending.command}: ${err.message}`));
    this.pending.clear();
  }
}

export interface AttachOptions {
  /** The bundle's directory on this machine (what the debugger shows). */
  localRoot: string;
  /** Where the bundle is in the sandbox (DebugEvent.remoteRoot). */
  remoteRoot: string;
  /** Breakpoints by file (relative to localRoot) → lines. */
  breakpoints: Record<string, number[]>;
}

/**
 * The attach sequence a debugger runs (VS Code's "Python Debugger: Remote Attach"): initialize, attach with the
 * path mapping, setBreakpoints per file, configurationDone. Returns the breakpoints as the adapter answered them.
 */
export async function attach(client: DapClient, o: AttachOptions): Promise<Record<string, Array<{ verified: boolean; line?: number }>>> {
  await client.request('initialize', {
    clientID: 'svc-emu-test',
    adapterID: 'debugpy',
    pathFormat: 'path',
    linesStartAt1: true,
    columnsStartAt1: true,
    supportsVariableType: true,
  });
  const attached = client.requestRaw('attach', {
    justMyCode: true,
    pathMappings: [{ localRoot: o.localRoot, remoteRoot: o.remoteRoot }],
  });
  await client.waitEvent('initialized');
  const verified: Record<string, Array<{ verified: boolean; line?: number }>> = {};
  for (const [file, lines] of Object.entries(o.breakpoints)) {
    const body = await client.request<{ breakpoints: Array<{ verified: boolean; line?: number }> }>('setBreakpoints', {
      source: { path: `${o.localRoot.replace(/\/$/, '')}/${file}` },
      breakpoints: lines.map((line) => ({ line })),
    });
    verified[file] = body.breakpoints;
  }
  await client.request('configurationDone');
  const response = await attached;
  if (!response.success) throw new Error(`DAP attach failed: ${response.message}`);
  return verified;
}
