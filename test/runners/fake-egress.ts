/**
 * A stand-in for the core's egress proxy (not a test file): a unix socket server speaking the contract
 * of docs/egress-relay.md — one preamble line `SVC-EGRESS 1 <invocation id or ->\r\n`, then an
 * ordinary HTTP proxy connection — recording what arrives and answering a few fixed routes:
 *
 *   GET  http://…/big?n=N   N bytes of a known pattern (a download through the relay)
 *   POST http://…/echo      the request body back (an upload and its download)
 *   GET  http://…           200 "ok"
 *   CONNECT host:port       403 Forbidden (no tunnels here)
 *
 * `keepAlive` answers without `Connection: close` and keeps the connection for the next request.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface EgressRequest {
  /** The invocation id of the preamble ("-" when none ran). */
  id: string;
  /** The request line, e.g. `GET http://example.test/x HTTP/1.1`. */
  line: string;
  method: string;
  target: string;
  headers: Record<string, string>;
  /** Which connection (1, 2, …) carried it. */
  conn: number;
  bodyBytes: number;
}

export interface FakeEgress {
  path: string;
  /** Every preamble line received, in order (raw, without CRLF). */
  preambles: string[];
  requests: EgressRequest[];
  keepAlive: boolean;
  connections(): number;
  close(): Promise<void>;
}

export function pattern(n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + 7) & 0xff;
  return b;
}

/** `path`: where to listen (default: a new temp dir, removed on close). */
export async function startFakeEgress(opts: { keepAlive?: boolean; path?: string } = {}): Promise<FakeEgress> {
  const dir = opts.path ? null : mkdtempSync(join(tmpdir(), 'svc-egress-'));
  const path = opts.path ?? join(dir!, 'egress.sock');
  const preambles: string[] = [];
  const requests: EgressRequest[] = [];
  const sockets = new Set<Socket>();
  let conns = 0;
  const fake: FakeEgress = {
    path,
    preambles,
    requests,
    keepAlive: opts.keepAlive ?? false,
    connections: () => conns,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      if (dir) rmSync(dir, { recursive: true, force: true });
      else rmSync(path, { force: true });
    },
  };

  const server: Server = createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => {});
    const conn = ++conns;
    let buf = Buffer.alloc(0);
    let id: string | null = null;
    let busy = false;
    const pump = () => {
      if (busy) return;
      if (id === null) {
        const nl = buf.indexOf('\r\n');
        if (nl < 0) return;
        const line = buf.subarray(0, nl).toString('latin1');
        preambles.push(line);
        buf = buf.subarray(nl + 2);
        const m = /^SVC-EGRESS 1 (\S+)$/.exec(line);
        if (!m) {
          sock.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
          return;
        }
        id = m[1]!;
      }
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1').split('\r\n');
      const line = head[0]!;
      const headers: Record<string, string> = {};
      for (const h of head.slice(1)) {
        const i = h.indexOf(':');
        if (i > 0) headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (buf.length < end + 4 + length) return; // the body is still coming
      const body = buf.subarray(end + 4, end + 4 + length);
      buf = buf.subarray(end + 4 + length);
      const [method = '', target = ''] = line.split(' ');
      requests.push({ id, line, method, target, headers, conn, bodyBytes: length });
      if (method === 'CONNECT') {
        sock.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        return;
      }
      let payload: Buffer = Buffer.from('ok');
      const url = new URL(target, 'http://invalid.test');
      if (url.pathname === '/big') payload = pattern(Number(url.searchParams.get('n') ?? 0));
      else if (url.pathname === '/echo') payload = Buffer.from(body);
      const keep = fake.keepAlive;
      busy = true;
      sock.write(
        `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${payload.length}\r\n${keep ? 'Connection: keep-alive' : 'Connection: close'}\r\n\r\n`,
      );
      sock.write(payload, () => {
        busy = false;
        if (!keep) sock.end();
        else pump();
      });
    };
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      pump();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  return fake;
}
