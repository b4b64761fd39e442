/**
 * A minimal WebSocket client (RFC 6455, text frames) over node:http, for tests that attach to a debug run's
 * inspector (Node 20 has no WebSocket without a flag, and the project has no WebSocket dependency). JSON in,
 * JSON out: enough for the WebKit Inspector Protocol Bun speaks.
 */
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';

export interface WsClient {
  send(message: unknown): void;
  /** The next message (parsed JSON) matching `pred`, or a rejection after `timeoutMs`. */
  next(pred: (m: any) => boolean, timeoutMs?: number): Promise<any>;
  /** Sends `method` with a fresh id and resolves with its reply. */
  call(method: string, params?: Record<string, unknown>, timeoutMs?: number): Promise<any>;
  close(): Promise<void>;
  readonly closed: Promise<void>;
}

export function connectWs(url: string): Promise<WsClient> {
  const u = new URL(url);
  const key = randomBytes(16).toString('base64');
  return new Promise((resolve, reject) => {
    const req = request({
      host: u.hostname,
      port: Number(u.port),
      path: u.pathname + u.search,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Key': key, 'Sec-WebSocket-Version': '13' },
    });
    req.once('error', reject);
    req.once('response', (res) => reject(new Error(`no upgrade: HTTP ${res.statusCode}`)));
    req.once('upgrade', (_res, socket: Socket, head: Buffer) => resolve(client(socket, head)));
    req.end();
  });
}

function frame(opcode: number, payload: Buffer): Buffer {
  const mask = randomBytes(4);
  const len = payload.length;
  const head = len < 126 ? Buffer.from([0x80 | opcode, 0x80 | len]) : len < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  if (len >= 126 && len < 65536) {
    head[0] = 0x80 | opcode;
    head[1] = 0x80 | 126;
    head.writeUInt16BE(len, 2);
  } else if (len >= 65536) {
    head[0] = 0x80 | opcode;
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(len), 2);
  }
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i]! ^= mask[i % 4]!;
  return Buffer.concat([head, mask, body]);
}

function client(socket: Socket, head: Buffer): WsClient {
  let buf = head;
  let fragments: Buffer[] = [];
  const messages: any[] = [];
  const waiters: { pred: (m: any) => boolean; resolve: (m: any) => void }[] = [];
  let nextId = 1;
  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  socket.once('close', () => resolveClosed());
  socket.on('error', () => {});
  const deliver = (m: any) => {
    const i = waiters.findIndex((w) => w.pred(m));
    if (i >= 0) waiters.splice(i, 1)[0]!.resolve(m);
    else messages.push(m);
  };
  const parse = () => {
    for (;;) {
      if (buf.length < 2) return;
      const fin = (buf[0]! & 0x80) !== 0;
      const opcode = buf[0]! & 0x0f;
      let len = buf[1]! & 0x7f;
      let off = 2;
      if (len === 126) {
        if (buf.length < 4) return;
        len = buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (buf.length < 10) return;
        len = Number(buf.readBigUInt64BE(2));
        off = 10;
      }
      if (buf.length < off + len) return;
      const payload = buf.subarray(off, off + len);
      buf = buf.subarray(off + len);
      if (opcode === 0x9) socket.write(frame(0xa, payload));
      else if (opcode === 0x8) socket.end();
      else if (opcode === 0x1 || opcode === 0x0) {
        fragments.push(payload);
        if (fin) {
          const text = Buffer.concat(fragments).toString('utf8');
          fragments = [];
          try {
            deliver(JSON.parse(text));
          } catch {
            deliver(text);
          }
        }
      }
    }
  };
  socket.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    parse();
  });
  parse();
  const ws: WsClient = {
    closed,
    send: (m) => socket.write(frame(0x1, Buffer.from(JSON.stringify(m)))),
    next(pred, timeoutMs = 10_000) {
      const i = messages.findIndex(pred);
      if (i >= 0) return Promise.resolve(messages.splice(i, 1)[0]);
      return new Promise((resolve, reject) => {
        const w = {
          pred,
          resolve: (m: any) => {
            clearTimeout(timer);
            resolve(m);
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(w), 1);
          reject(new Error(`no matching WebSocket message within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.push(w);
      });
    },
    call(method, params = {}, timeoutMs) {
      const id = nextId++;
      ws.send({ id, method, params });
      return ws.next((m) => m && m.id === id, timeoutMs);
    },
    async close() {
      if (!socket.destroyed) {
        socket.write(frame(0x8, Buffer.alloc(0)));
        socket.end();
        setTimeout(() => socket.destroy(), 1000).unref();
      }
      await closed;
    },
  };
  return ws;
}
