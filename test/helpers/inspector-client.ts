/**
 * A debugger's side of a debug run, for tests (not a test file): a minimal WebSocket client (RFC 6455: text
 * frames, fragmentation, ping/pong, close; no extensions) and, over it, an Inspector-protocol session (Bun speaks
 * the WebKit Inspector Protocol, the JSON-RPC shape CDP shares: `{id, method, params}` → `{id, result|error}`,
 * events `{method, params}`). No dependency: Node 20 has no WebSocket without a flag, and `ws` is not installed.
 */
import { randomBytes, createHash } from 'node:crypto';
import net from 'node:net';

export class MiniWebSocket {
  private buf = Buffer.alloc(0);
  private parts: Buffer[] = [];
  private readonly listeners = new Set<(text: string) => void>();
  readonly closed: Promise<void>;

  private constructor(private readonly sock: net.Socket) {
    this.closed = new Promise((resolve) => sock.once('close', () => resolve()));
    sock.on('data', (d) => this.onData(d));
    sock.on('error', () => {});
  }

  /** Connects to ws://HOST:PORT/PATH and completes the handshake. */
  static async connect(url: string, timeoutMs = 5000, headers: Record<string, string> = {}): Promise<MiniWebSocket> {
    const u = new URL(url);
    const sock = net.connect(Number(u.port), u.hostname);
    const key = randomBytes(16).toString('base64');
    const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    return new Promise((resolve, reject) => {
      let head = Buffer.alloc(0);
      const timer = setTimeout(() => fail(new Error(`no WebSocket handshake from ${url} within ${timeoutMs} ms`)), timeoutMs);
      const fail = (err: Error) => {
        clearTimeout(timer);
        sock.destroy();
        reject(err);
      };
      const onData = (d: Buffer) => {
        head = Buffer.concat([head, d]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        sock.off('data', onData);
        sock.off('error', fail);
        sock.off('close', onClose);
        clearTimeout(timer);
        const text = head.subarray(0, end).toString('latin1');
        if (!/^HTTP\/1\.1 101/.test(text) || !text.toLowerCase().includes(accept.toLowerCase())) {
          sock.destroy();
          return reject(new Error(`not a WebSocket handshake: ${text.split('\r\n')[0]}`));
        }
        const ws = new MiniWebSocket(sock);
        const rest = head.subarray(end + 4);
        resolve(ws);
        if (rest.length) ws.onData(rest);
      };
      const onClose = () => fail(new Error(`the connection to ${url} closed during the handshake`));
      sock.on('data', onData);
      sock.once('error', fail);
      sock.once('close', onClose);
      sock.once('connect', () =>
        sock.write(
          `GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${headers.Host ?? u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
            `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n` +
            Object.entries(headers)
              .filter(([k]) => k !== 'Host')
              .map(([k, v]) => `${k}: ${v}\r\n`)
              .join('') +
            '\r\n',
        ),
      );
    });
  }

  onMessage(fn: (text: string) => void): () => void {
    this.listeners.add(fn);
    return () => void this.listeners.delete(fn);
  }

  send(text: string): void {
    this.frame(0x1, Buffer.from(text, 'utf8'));
  }

  /** A close frame, then the TCP connection ends. */
  close(): Promise<void> {
    if (!this.sock.destroyed) {
      this.frame(0x8, Buffer.from([0x03, 0xe8]));
      this.sock.end();
    }
    return this.closed;
  }

  private frame(opcode: number, payload: Buffer): void {
    if (this.sock.destroyed) return;
    const len = payload.length;
    const head = len < 126 ? Buffer.alloc(2) : len < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
    head[0] = 0x80 | opcode;
    if (len < 126) head[1] = 0x80 | len;
    else if (len < 65536) {
      head[1] = 0x80 | 126;
      head.writeUInt16BE(len, 2);
    } else {
      head[1] = 0x80 | 127;
      head.writeBigUInt64BE(BigInt(len), 2);
    }
    const mask = randomBytes(4);
    const body = Buffer.from(payload);
    for (let i = 0; i < body.length; i++) body[i]! ^= mask[i % 4]!;
    this.sock.write(Buffer.concat([head, mask, body]));
  }

  private onData(d: Buffer): void {
    this.buf = Buffer.concat([this.buf, d]);
    for (;;) {
      if (this.buf.length < 2) return;
      const fin = (this.buf[0]! & 0x80) !== 0;
      const opcode = this.buf[0]! & 0x0f;
      const masked = (this.buf[1]! & 0x80) !== 0;
      let len = this.buf[1]! & 0x7f;
      let off = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        len = Number(this.buf.readBigUInt64BE(2));
        off = 10;
      }
      const maskKey = masked ? this.buf.subarray(off, off + 4) : null;
      if (masked) off += 4;
      if (this.buf.length < off + len) return;
      const payload = Buffer.from(this.buf.subarray(off, off + len));
      if (maskKey) for (let i = 0; i < payload.length; i++) payload[i]! ^= maskKey[i % 4]!;
      this.buf = this.buf.subarray(off + len);
      if (opcode === 0x8) {
        this.sock.end();
        return;
      }
      if (opcode === 0x9) {
        this.frame(0xa, payload);
        continue;
      }
      if (opcode === 0xa) continue;
      this.parts.push(payload);
      if (!fin) continue;
      const text = Buffer.concat(this.parts).toString('utf8');
      this.parts = [];
      for (const l of [...this.listeners]) l(text);
    }
  }
}

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

  private constructor(readonly ws: MiniWebSocket) {
    ws.onMessage((text) => {
      const m = JSON.parse(text) as { id?: number; result?: unknown; error?: { message: string }; method?: string; params?: unknown };
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
    void ws.closed.then(() => {
      for (const p of this.pending.values()) p.reject(new Error('the inspector connection closed'));
      this.pending.clear();
      for (const w of [...this.waiters]) w();
    });
  }

  /** `headers`: more request headers (Origin, or a Host of its own), as a browser would send them. */
  static async connect(url: string, headers: Record<string, string> = {}): Promise<InspectorSession> {
    return new InspectorSession(await MiniWebSocket.connect(url, 5000, headers));
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

  close(): Promise<void> {
    return this.ws.close();
  }
}

/**
 * A script's source map as Bun's inspector gives it (Debugger.scriptParsed `sourceMapURL`: an inline
 * `data:application/json;base64,…` map of the transpiled module back to the TypeScript, with sourcesContent): the
 * inspector itself knows only the transpiled lines, so a debugger maps both ways, as Bun's VS Code extension does.
 * Lines and columns are 0-based, as in the protocol; one source per map (a module's own file).
 */
export class InlineSourceMap {
  /** Per generated line: its segments [generated column, source line, source column], in column order. */
  private readonly lines: [number, number, number][][] = [];

  constructor(readonly map: { version: number; sources: string[]; sourcesContent?: string[]; mappings: string }) {
    let srcLine = 0;
    let srcCol = 0;
    for (const line of map.mappings.split(';')) {
      const segs: [number, number, number][] = [];
      let genCol = 0;
      for (const seg of line.split(',')) {
        if (!seg) continue;
        const v = decodeVlq(seg);
        genCol += v[0]!;
        if (v.length >= 4) {
          srcLine += v[2]!;
          srcCol += v[3]!;
          segs.push([genCol, srcLine, srcCol]);
        }
      }
      this.lines.push(segs);
    }
  }

  static fromUrl(url: string): InlineSourceMap {
    const m = /^data:application\/json(?:;charset=[^;,]+)?;base64,(.*)$/.exec(url);
    if (!m) throw new Error(`not an inline source map: ${url.slice(0, 60)}`);
    return new InlineSourceMap(JSON.parse(Buffer.from(m[1]!, 'base64').toString('utf8')));
  }

  /** The first generated position of a source line (its leftmost segment on the earliest generated line), or null. */
  generated(srcLine: number): { lineNumber: number; columnNumber: number } | null {
    for (let g = 0; g < this.lines.length; g++) {
      const hits = this.lines[g]!.filter((s) => s[1] === srcLine).sort((a, b) => a[0] - b[0]);
      if (hits.length) return { lineNumber: g, columnNumber: hits[0]![0] };
    }
    return null;
  }

  /** The source position of a generated one (the last segment at or before the column). */
  original(lineNumber: number, columnNumber: number): { line: number; column: number } | null {
    const segs = this.lines[lineNumber] ?? [];
    let best: [number, number, number] | null = null;
    for (const s of segs) if (s[0] <= columnNumber) best = s;
    best ??= segs[0] ?? null;
    return best ? { line: best[1], column: best[2] } : null;
  }
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

function decodeVlq(seg: string): number[] {
  const out: number[] = [];
  let value = 0;
  let shift = 0;
  for (const ch of seg) {
    const d = B64.indexOf(ch);
    if (d < 0) throw new Error(`bad VLQ digit ${ch}`);
    value += (d & 31) << shift;
    if (d & 32) shift += 5;
    else {
      out.push(value & 1 ? -(value >>> 1) : value >>> 1);
      value = 0;
      shift = 0;
    }
  }
  return out;
}
