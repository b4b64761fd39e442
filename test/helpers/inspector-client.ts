/**
 * A debugger's side of a debug run, for tests (not a test file): an Inspector-protocol session over `ws`. Bun
 * speaks the WebKit Inspector Protocol, the JSON-RPC shape CDP shares: `{id, method, params}` → `{id, result|error}`,
 * events `{method, params}`. Tests that need a stock Chrome DevTools Protocol client use chrome-remote-interface.
 */
import WebSocket from 'ws';
import { generatedPositionFor, LEAST_UPPER_BOUND, originalPositionFor, TraceMap, type SourceMapInput } from '@jridgewell/trace-mapping';

export interface InspectorEvent {
  method: string;
  params: any;
}

/** An Inspector-protocol session: call(method, params) → result; events kept in order and waited for by name. */
export class InspectorSession {
  private seq = 0;
  private readonly pending = new Map<number, { resolve(v: any): void; reject(e: Error): void }>();
  readonly events: InspectorEvent[] = [];
  private readonly waiters = new Set<() => void>();
  readonly closed: Promise<void>;

  private constructor(readonly ws: WebSocket) {
    this.closed = new Promise((resolve) => ws.once('close', () => resolve()));
    ws.on('error', () => {});
    ws.on('message', (raw) => {
      const m = JSON.parse(String(raw)) as {
        id?: number;
        result?: unknown;
        error?: { message: string };
        method?: string;
        params?: unknown;
      };
      if (m.id !== undefined) {
        const p = this.pending.get(m.id);
        this.pending.delete(m.id);
        if (m.error) p?.reject(new Error(`${m.error.message}`));
        else p?.resolve(m.result);
      } else if (m.method) {
        this.events.push({ method: m.method, params: m.params });
        for (const w of [...this.waiters]) w();
      }
    });
    void this.closed.then(() => {
      for (const p of this.pending.values()) p.reject(new Error('the inspector connection closed'));
      this.pending.clear();
      for (const w of [...this.waiters]) w();
    });
  }

  /** `headers`: more request headers (Origin, or a Host of its own), as a browser would send them. */
  static connect(url: string, headers: Record<string, string> = {}, timeoutMs = 5000): Promise<InspectorSession> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers, handshakeTimeout: timeoutMs });
      ws.once('open', () => {
        ws.off('error', reject);
        resolve(new InspectorSession(ws));
      });
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => {
        ws.off('error', reject);
        reject(new Error(`not a WebSocket handshake: HTTP/${res.httpVersion} ${res.statusCode}`));
      });
    });
  }

  call<T = any>(method: string, params: Record<string, unknown> = {}, timeoutMs = 10_000): Promise<T> {
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** What a debugger sends first on attach: the domains on, and breakpoints active (WebKit's start inactive). */
  async enableDebugger(): Promise<void> {
    for (const method of ['Inspector.enable', 'Runtime.enable', 'Debugger.enable']) await this.call(method);
    await this.call('Debugger.setBreakpointsActive', { active: true });
  }

  /** The first event named `method` (after the `from`-th event) that matches, waited for up to timeoutMs. */
  waitEvent(method: string, timeoutMs = 10_000, match: (e: InspectorEvent) => boolean = () => true, from = 0): Promise<InspectorEvent> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const e = this.events.slice(from).find((x) => x.method === method && match(x));
        if (e) {
          done();
          resolve(e);
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${method} within ${timeoutMs} ms (events: ${this.events.map((x) => x.method).join(', ')})`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  /** A close handshake; resolves once the connection is gone. */
  close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(1000);
    return this.closed;
  }

  /** Cuts the connection without a close frame (a debugger that dies). */
  drop(): Promise<void> {
    this.ws.terminate();
    return this.closed;
  }
}

/**
 * A script's source map as Bun's inspector gives it (Debugger.scriptParsed `sourceMapURL`: an inline
 * `data:application/json;base64,…` map of the transpiled module back to the TypeScript, with sourcesContent): the
 * inspector itself knows only the transpiled lines, so a debugger maps both ways, as Bun's VS Code extension does.
 * Lines and columns are 0-based, as in the protocol; one source per map (a module's own file).
 */
export class InlineSourceMap {
  private readonly trace: TraceMap;

  constructor(readonly map: { version: number; sources: string[]; sourcesContent?: string[]; mappings: string }) {
    this.trace = new TraceMap(map as SourceMapInput);
  }

  static fromUrl(url: string): InlineSourceMap {
    const m = /^data:application\/json(?:;charset=[^;,]+)?;base64,(.*)$/.exec(url);
    if (!m) throw new Error(`not an inline source map: ${url.slice(0, 60)}`);
    return new InlineSourceMap(JSON.parse(Buffer.from(m[1]!, 'base64').toString('utf8')));
  }

  /** The first generated position of a source line, or null. */
  generated(srcLine: number): { lineNumber: number; columnNumber: number } | null {
    const source = this.map.sources[0]!;
    const g = generatedPositionFor(this.trace, { source, line: srcLine + 1, column: 0, bias: LEAST_UPPER_BOUND });
    return g.line === null ? null : { lineNumber: g.line - 1, columnNumber: g.column };
  }

  /** The source position of a generated one. */
  original(lineNumber: number, columnNumber: number): { line: number; column: number } | null {
    const o = originalPositionFor(this.trace, { line: lineNumber + 1, column: columnNumber });
    return o.line === null ? null : { line: o.line - 1, column: o.column };
  }
}
