/**
 * The core's egress proxy (issue 7), driven the way a runner's relay drives it: a unix-socket connection
 * that starts with the preamble naming the invocation, then plain HTTP proxy traffic. Profiles, fault
 * rules and the egress log are checked on real loopback servers.
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import { connect, createServer, type AddressInfo, type Server as NetServer } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { EgressProxy } from '../../server/egress/proxy';
import { EgressService } from '../../server/services/egress';
import type { EgressRules } from '../../server/egress/policy';

let dir: string;
let upstream: Server;
let upstreamPort: number;
let echo: NetServer;
let echoPort: number;
let hits = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-emu-egress-'));
  upstream = createHttpServer((req, res) => {
    hits++;
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () =>
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ path: req.url, host: req.headers.host, proxyAuth: req.headers['proxy-authorization'] ?? null, body })),
    );
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamPort = (upstream.address() as AddressInfo).port;
  echo = createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as AddressInfo).port;
});
afterAll(async () => {
  upstream.close();
  echo.close();
  await rm(dir, { recursive: true, force: true });
});
beforeEach(() => {
  hits = 0;
});

async function withProxy(rules: EgressRules, fn: (p: { egress: EgressService; socket: string }) => Promise<void>) {
  const egress = new EgressService(
    rules,
    () => new Date(),
    (id) => (id === 'inv_1' ? 'acme' : null),
  );
  const socket = join(dir, `egress-${Math.random().toString(36).slice(2)}.sock`);
  const proxy = new EgressProxy(egress, socket);
  await proxy.listen();
  try {
    await fn({ egress, socket });
  } finally {
    await proxy.close();
  }
}

/** Writes the preamble and `request`, returns everything the proxy answered until it closed. */
function raw(
  socket: string,
  request: string,
  opts: { invocation?: string; closeAfterMs?: number } = {},
): Promise<{ text: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const c = connect(socket);
    let text = '';
    c.on('data', (d: Buffer) => (text += d.toString('latin1')));
    c.on('close', () => resolve({ text, ms: performance.now() - t0 }));
    c.on('error', reject);
    c.write(`SVC-EGRESS 1 ${opts.invocation ?? 'inv_1'}\r\n${request}`);
    if (opts.closeAfterMs) setTimeout(() => c.destroy(), opts.closeAfterMs);
  });
}

/** The body of a raw HTTP/1.1 answer (chunked or not). */
function bodyOf(text: string): string {
  const [head, ...rest] = text.split('\r\n\r\n');
  const body = rest.join('\r\n\r\n');
  if (!/transfer-encoding: chunked/i.test(head!)) return body;
  let out = '';
  for (let at = 0; at < body.length;) {
    const eol = body.indexOf('\r\n', at);
    const size = parseInt(body.slice(at, eol), 16);
    if (!size) break;
    out += body.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
  return out;
}

const get = (url: string, extra = '') => `GET ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\n${extra}\r\n`;
const local: EgressRules = { profile: 'local', allow: [] };
const production: EgressRules = { profile: 'production', allow: [] };

describe('plain HTTP through the proxy', () => {
  it('forwards, answers with Connection: close, and logs who, where, status and bytes (no proxy credentials upstream)', async () => {
    await withProxy(local, async ({ egress, socket }) => {
      const r = await raw(socket, get(`http://127.0.0.1:${upstreamPort}/x?y=1`, 'Proxy-Authorization: Basic c2VjcmV0\r\n'));
      expect(r.text).toMatch(/^HTTP\/1.1 200 OK/);
      expect(r.text.toLowerCase()).toContain('connection: close');
      const body = JSON.parse(bodyOf(r.text));
      expect(body).toEqual({ path: '/x?y=1', host: `127.0.0.1:${upstreamPort}`, proxyAuth: null, body: '' });
      const [entry] = egress.log.list();
      expect(entry).toMatchObject({
        source: 'snippet',
        tenant: 'acme',
        invocation_id: 'inv_1',
        method: 'GET',
        host: '127.0.0.1',
        port: upstreamPort,
        path: '/x',
        status: 200,
        refused: null,
        fault: null,
      });
      expect(entry!.bytes_in).toBeGreaterThan(10);
    });
  });

  it('a request body arriving before the upstream is connected is forwarded whole (even behind a latency fault)', async () => {
    await withProxy(local, async ({ egress, socket }) => {
      egress.faults.add({ host: '127.0.0.1', action: { type: 'latency', ms: 100 }, times: 1 });
      const body = JSON.stringify({ hello: 'x'.repeat(5000) });
      const r = await raw(
        socket,
        `POST http://127.0.0.1:${upstreamPort}/post HTTP/1.1\r\nHost: 127.0.0.1:${upstreamPort}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      expect(r.text).toMatch(/^HTTP\/1.1 200/);
      expect(JSON.parse(bodyOf(r.text)).body).toBe(body);
      expect(egress.log.list()[0]).toMatchObject({ method: 'POST', status: 200, bytes_out: body.length });
    });
  });

  it('a connection without the preamble is closed unanswered', async () => {
    await withProxy(local, async ({ socket }) => {
      const text = await new Promise<string>((resolve) => {
        const c = connect(socket);
        let t = '';
        c.on('data', (d: Buffer) => (t += d));
        c.on('close', () => resolve(t));
        c.write(get(`http://127.0.0.1:${upstreamPort}/`));
      });
      expect(text).toBe('');
      expect(hits).toBe(0);
    });
  });
});

describe('the production profile, at connect time', () => {
  it.each([
    ['the core’s own loopback port', () => `http://127.0.0.1:${upstreamPort}/`],
    ['a private address', () => 'http://10.0.0.1/'],
    ['the metadata address', () => 'http://169.254.169.254/latest/meta-data/'],
    ['IPv4-mapped loopback', () => `http://[::ffff:127.0.0.1]:${upstreamPort}/`],
    ['a name resolving to loopback', () => `http://localhost:${upstreamPort}/`],
  ])('refuses %s with a 403 naming the rule; nothing is sent', async (_what, url) => {
    await withProxy(production, async ({ egress, socket }) => {
      const r = await raw(socket, get(url()));
      expect(r.text).toMatch(/^HTTP\/1.1 403/);
      const problem = JSON.parse(bodyOf(r.text));
      expect(problem).toMatchObject({ status: 403, code: 'egress_refused' });
      expect(problem.detail).toMatch(/^production refuses outbound connections that resolve to .*; allow it with --egress-allow /);
      expect(hits).toBe(0);
      expect(egress.log.list()[0]).toMatchObject({ status: 403, refused: problem.detail });
    });
  });

  it('refuses a CONNECT tunnel the same way, and allows what --egress-allow names', async () => {
    await withProxy(production, async ({ socket }) => {
      const r = await raw(socket, `CONNECT 127.0.0.1:${echoPort} HTTP/1.1\r\nHost: 127.0.0.1:${echoPort}\r\n\r\n`);
      expect(r.text).toMatch(/^HTTP\/1.1 403 Forbidden/);
      expect(r.text).toContain('production refuses outbound connections');
    });
    await withProxy(
      { profile: 'production', allow: [`127.0.0.1:${echoPort}`, `127.0.0.1:${upstreamPort}`] },
      async ({ egress, socket }) => {
        expect((await raw(socket, get(`http://127.0.0.1:${upstreamPort}/ok`))).text).toMatch(/^HTTP\/1.1 200/);
        const tunnel = await raw(socket, `CONNECT 127.0.0.1:${echoPort} HTTP/1.1\r\nHost: x\r\n\r\nping`, { closeAfterMs: 300 });
        expect(tunnel.text).toBe('HTTP/1.1 200 Connection Established\r\n\r\nping');
        // The tunnel's log entry is written when the tunnel closes: wait for it, not for a fixed time.
        await vi.waitFor(() =>
          expect(egress.log.list()[0]).toMatchObject({
            method: 'CONNECT',
            host: '127.0.0.1',
            port: echoPort,
            path: null,
            status: 200,
            bytes_out: 4,
            bytes_in: 4,
          }),
        );
      },
    );
  });
});

describe('fault rules', () => {
  it('latency delays the call; status answers without calling; drop closes; timeout holds until the client gives up', async () => {
    await withProxy(local, async ({ egress, socket }) => {
      const url = `http://127.0.0.1:${upstreamPort}/f`;
      const slow = egress.faults.add({ host: '127.0.0.1', action: { type: 'latency', ms: 300 }, times: 1 });
      const late = await raw(socket, get(url));
      expect(late.text).toMatch(/^HTTP\/1.1 200/);
      expect(late.ms).toBeGreaterThanOrEqual(290);
      expect(egress.faults.list().find((f) => f.id === slow.id)).toBeUndefined(); // spent after `times`

      egress.faults.add({ host: '127.0.0.1', action: { type: 'status', status: 503 }, times: 1 });
      const failed = await raw(socket, get(url));
      expect(failed.text).toMatch(/^HTTP\/1.1 503/);
      expect(failed.text).toContain('x-svc-emu-fault: status');

      egress.faults.add({ host: '127.0.0.1', action: { type: 'drop' }, times: 1 });
      expect((await raw(socket, get(url))).text).toBe('');

      egress.faults.add({ host: '127.0.0.1', action: { type: 'timeout' }, times: 1 });
      const held = await raw(socket, get(url), { closeAfterMs: 400 });
      expect(held.text).toBe('');
      expect(held.ms).toBeGreaterThanOrEqual(390);

      expect(hits).toBe(1); // only the slow call reached the server
      // The held call's entry is written when its connection closes: wait for it, not for a fixed time.
      await vi.waitFor(() =>
        expect(egress.log.list().map((e) => [e.status, e.fault?.split(' (')[0] ?? null, e.error])).toEqual([
          [null, 'timeout', 'held without an answer by a fault rule'],
          [null, 'drop', 'connection dropped by a fault rule'],
          [503, 'status 503', null],
          [200, 'latency 300 ms', null],
        ]),
      );
    });
  });
});
