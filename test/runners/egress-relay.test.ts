// The egress relay's conformance suite: docs/egress-relay.md, clause by clause, run against both implementations
// (executor/runtimes/bun/egress-relay.ts and executor/runtimes/python/_svc_egress_relay.py, inside their real
// runners) with raw sockets at both ends: a TCP client on the relay's port, and a unix socket server standing in
// for the core's proxy that records every byte and answers what each test tells it to. What snippets' HTTP
// clients see through the relay is test/runners/egress.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runtimeBinary, skipNote, startRunner, type Runtime, type StartedRunner } from './helpers';

const FILES: Record<Runtime, Record<string, string>> = {
  bun: {
    'main.ts': [
      "import { store } from '@svc/store';",
      'export default async function handler(input: { op?: string }) {',
      "  if (input.op === 'hold') await store.get('hold');",
      '  return { proxy: process.env.HTTP_PROXY ?? null };',
      '}',
    ].join('\n'),
  },
  python: {
    'main.py': [
      'import os',
      'from svc import store',
      '',
      'def handler(input):',
      '    if input.get("op") == "hold":',
      '        store.get("hold")',
      '    return {"proxy": os.environ.get("HTTP_PROXY")}',
    ].join('\n'),
  },
};

/** A socket's bytes as they come, its FIN and its close, as promises a test waits on. */
class Peer {
  data = Buffer.alloc(0);
  readonly ended: Promise<void>;
  readonly closed: Promise<void>;
  /** FIN or close, whichever comes first (a reset closes without a FIN). */
  readonly over: Promise<void>;
  private waiters: Array<() => void> = [];

  constructor(readonly sock: Socket) {
    sock.on('data', (d: Buffer) => {
      this.data = Buffer.concat([this.data, d]);
      for (const w of this.waiters.splice(0)) w();
    });
    sock.on('error', () => {});
    this.ended = new Promise((r) => sock.once('end', () => r()));
    this.closed = new Promise((r) => sock.once('close', () => r()));
    this.over = Promise.race([this.ended, this.closed]);
  }

  /** Resolves once `n` bytes (or the text) have arrived; the whole buffer so far. */
  async until(what: number | string): Promise<Buffer> {
    const done = () => (typeof what === 'number' ? this.data.length >= what : this.data.includes(what));
    while (!done()) await new Promise<void>((r) => this.waiters.push(r));
    return this.data;
  }
}

/** The stand-in for the core's proxy: a unix socket server handing each connection to the test. */
class Upstream {
  readonly dir = mkdtempSync(join(tmpdir(), 'svc-relay-'));
  readonly path = join(this.dir, 'egress.sock');
  private server: Server | null = null;
  private pending: Peer[] = [];
  private all: Peer[] = [];
  private takers: Array<(p: Peer) => void> = [];

  async listen(): Promise<void> {
    this.server = createServer({ allowHalfOpen: true }, (sock) => {
      const peer = new Peer(sock);
      this.all.push(peer);
      const taker = this.takers.shift();
      if (taker) taker(peer);
      else this.pending.push(peer);
    });
    await new Promise<void>((r) => this.server!.listen(this.path, () => r()));
  }

  /** The next connection the relay opens. */
  next(): Promise<Peer> {
    const p = this.pending.shift();
    return p ? Promise.resolve(p) : new Promise((r) => this.takers.push(r));
  }

  async close(): Promise<void> {
    for (const p of this.all) p.sock.destroy();
    if (this.server) await new Promise<void>((r) => this.server!.close(() => r()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function preamble(id: string): string {
  return `SVC-EGRESS 1 ${id}\r\n`;
}

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * seed + 7) & 0xff;
  return b;
}

const BAD_GATEWAY =
  'HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 53\r\nConnection: close\r\n\r\n' +
  "the sandbox cannot reach the emulator's egress proxy\n";

for (const runtime of ['bun', 'python'] as const) {
  const have = !!runtimeBinary(runtime);
  if (!have) skipNote(runtime);

  describe.skipIf(!have)(`${runtime}: the egress relay (docs/egress-relay.md)`, () => {
    let up: Upstream;
    let runner: StartedRunner;
    let port = 0;
    let seq = 0;
    const id = () => `inv_relay_${runtime}_${process.pid}_${++seq}`;

    async function invoke(input: Record<string, unknown>, invId = id(), onCall?: () => Promise<unknown>): Promise<{ proxy: string }> {
      const outcome = await runner.channel.invoke(invId, input, {}, { onCall: onCall ?? (async () => null) });
      if (outcome.kind !== 'result') throw new Error(`${runtime}: ${outcome.message}\n${runner.stderr()}`);
      return outcome.output as { proxy: string };
    }

    /** A raw client on the relay, and the upstream connection the relay opened for it. */
    async function connect(): Promise<{ client: Peer; upstream: Peer; id: string; rest: () => string }> {
      const sock = createConnection({ host: '127.0.0.1', port, allowHalfOpen: true });
      const client = new Peer(sock);
      await new Promise<void>((r, j) => sock.once('connect', r).once('error', j));
      const upstream = await up.next();
      const line = (await upstream.until('\r\n')).toString('latin1');
      const id = /^SVC-EGRESS 1 (\S+)\r\n/.exec(line)?.[1];
      if (!id) throw new Error(`not a preamble: ${JSON.stringify(line)}`);
      /** What came after the preamble line. */
      const rest = () => upstream.data.subarray(preamble(id).length).toString('latin1');
      return { client, upstream, id, rest };
    }

    /**
     * A connection accepted while no invocation runs. The runner lets go of an invocation before its last
     * frame goes out (docs/egress-relay.md), so a connection made once an invoke has answered names no one.
     */
    async function connectIdle(): Promise<{ client: Peer; upstream: Peer; rest: () => string }> {
      const c = await connect();
      expect(c.id, 'a connection made after the last invocation answered').toBe('-');
      return c;
    }

    beforeAll(async () => {
      up = new Upstream();
      await up.listen();
      runner = await startRunner(runtime, FILES[runtime], undefined, { SVC_EGRESS_SOCKET: up.path });
      const { proxy } = await invoke({});
      expect(proxy).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      port = Number(new URL(proxy).port);
    }, 30_000);
    afterAll(async () => {
      await runner?.stop();
      await up?.close();
    });

    it('between invocations the preamble names no one, and the bytes pass unchanged both ways', async () => {
      const { client, upstream, rest } = await connectIdle();
      const request = 'GET http://example.test/x HTTP/1.1\r\nHost: example.test\r\n\r\n';
      client.sock.write(request);
      await upstream.until(request);
      expect(rest()).toBe(request);
      upstream.sock.write('HTTP/1.1 204 No Content\r\n\r\n');
      expect((await client.until('\r\n\r\n')).toString('latin1')).toBe('HTTP/1.1 204 No Content\r\n\r\n');
      client.sock.destroy();
      await upstream.ended; // the client's FIN, passed on
    });

    it('a connection accepted while an invocation runs carries its id, and is closed when the invocation ends', async () => {
      const invId = id();
      let release!: (v: unknown) => void;
      let held!: () => void;
      const running = new Promise<void>((r) => (held = r));
      const done = invoke({ op: 'hold' }, invId, () => {
        held();
        return new Promise((r) => (release = r));
      });
      await running;
      const { client, upstream, id: named } = await connect();
      expect(named).toBe(invId);
      client.sock.write('x');
      expect((await upstream.until(preamble(invId).length + 1)).toString('latin1')).toBe(preamble(invId) + 'x');
      release(null);
      await done;
      await Promise.all([client.over, upstream.over]);
    });

    it('a connection open between invocations is closed when the next one starts', async () => {
      const { client, upstream } = await connectIdle();
      client.sock.write('y');
      await upstream.until('y');
      await invoke({});
      await Promise.all([client.over, upstream.over]);
    });

    it('an id unfit for the preamble (over 200 characters) is sent as "-"', async () => {
      const long = `inv_${'a'.repeat(200)}`;
      let release!: (v: unknown) => void;
      let held!: () => void;
      const running = new Promise<void>((r) => (held = r));
      const done = invoke({ op: 'hold' }, long, () => {
        held();
        return new Promise((r) => (release = r));
      });
      await running;
      const { client, upstream } = await connect();
      client.sock.write('z');
      expect((await upstream.until(preamble('-').length + 1)).toString('latin1')).toBe(preamble('-') + 'z');
      release(null);
      await done;
      await client.over;
    });

    it("half-close: the client's FIN reaches the proxy, and the answer still comes back, then FIN", async () => {
      const { client, upstream, rest } = await connect();
      client.sock.end('request');
      await upstream.ended;
      expect(rest()).toBe('request');
      upstream.sock.end('answer');
      await client.ended;
      expect(client.data.toString('latin1')).toBe('answer');
      await Promise.all([client.closed, upstream.closed]);
    });

    it("half-close: the proxy's FIN reaches the client, which can still send", async () => {
      const { client, upstream, rest } = await connect();
      upstream.sock.end('early answer');
      await client.ended;
      expect(client.data.toString('latin1')).toBe('early answer');
      client.sock.end('late request');
      await upstream.ended;
      expect(rest()).toBe('late request');
      await Promise.all([client.closed, upstream.closed]);
    });

    it('CONNECT is only bytes to it: the tunnel carries every byte value unchanged', async () => {
      const { client, upstream } = await connect();
      const connectLine = 'CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n';
      client.sock.write(connectLine);
      await upstream.until(connectLine);
      upstream.sock.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      await client.until('\r\n\r\n');
      const up256 = pattern(256 * 64, 1);
      const down256 = pattern(256 * 64, 3);
      client.sock.write(up256);
      upstream.sock.write(down256);
      const head = upstream.data.indexOf('\r\n') + 2 + connectLine.length;
      expect((await upstream.until(head + up256.length)).subarray(head).equals(up256)).toBe(true);
      const answered = 'HTTP/1.1 200 Connection Established\r\n\r\n'.length;
      expect((await client.until(answered + down256.length)).subarray(answered).equals(down256)).toBe(true);
      client.sock.destroy();
      await upstream.ended; // the client's FIN, passed on
    });

    it('backpressure: while the client does not read, the relay stops reading the proxy; then all of it arrives intact', async () => {
      const { client, upstream } = await connect();
      client.sock.pause();
      const n = 24 * 1024 * 1024;
      const body = pattern(n, 31);
      upstream.sock.write(body);
      // Wait until the bytes stop moving (the kernel's buffers and the relay's one held read are full).
      let last = -1;
      while (upstream.sock.writableLength !== last) {
        last = upstream.sock.writableLength;
        await new Promise((r) => setTimeout(r, 100));
      }
      // Loopback TCP and unix socket buffers hold a few MiB; a relay reading ahead would have taken it all.
      expect(upstream.sock.writableLength).toBeGreaterThan(8 * 1024 * 1024);
      client.sock.resume();
      expect((await client.until(n)).equals(body)).toBe(true);
      client.sock.destroy();
      await upstream.ended; // the client's FIN, passed on
    }, 60_000);

    it("a proxy that closes the connection outright ends the client's", async () => {
      const { client, upstream } = await connect();
      upstream.sock.destroy();
      await client.over;
    });

    it('the proxy unreachable: exactly the 502 answer then FIN, a note on stderr, and the next connection tries again', async () => {
      const gone = new Upstream(); // a path with nobody listening yet
      const lone = await startRunner(runtime, FILES[runtime], undefined, { SVC_EGRESS_SOCKET: gone.path });
      try {
        const output = await lone.channel.invoke(id(), {}, {}, { onCall: async () => null });
        if (output.kind !== 'result') throw new Error(output.message);
        const relayPort = Number(new URL((output.output as { proxy: string }).proxy).port);
        const sock = createConnection({ host: '127.0.0.1', port: relayPort, allowHalfOpen: true });
        const client = new Peer(sock);
        sock.write('GET http://example.test/ HTTP/1.1\r\n\r\n');
        await client.ended;
        expect(client.data.toString('latin1')).toBe(BAD_GATEWAY);
        sock.end();
        await client.closed;
        expect(lone.stderr()).toContain(`egress: cannot reach the egress proxy at ${gone.path}`);

        await gone.listen();
        const again = new Peer(createConnection({ host: '127.0.0.1', port: relayPort }));
        again.sock.write('w');
        const upstream = await gone.next();
        expect((await upstream.until('w')).toString('latin1')).toMatch(/^SVC-EGRESS 1 \S+\r\nw$/);
        again.sock.destroy();
      } finally {
        await lone.stop();
        await gone.close();
      }
    });
  });
}
