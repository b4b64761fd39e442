// The runners' egress relay (issue 7 item 1, docs/egress-relay.md), for real: with SVC_EGRESS_SOCKET
// set, each runner listens on 127.0.0.1, points HTTP_PROXY & co. at itself and relays every connection to
// the unix socket after the preamble naming the running invocation. Here the socket is a fake core-side
// proxy (fake-egress.ts) and the runners run without a sandbox; test/executor/egress.test.ts runs them
// through the executor, under bubblewrap too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:net';
import { fakeStore, findBun, findPython, skipNote, startRunner, type Runtime, type StartedRunner } from './helpers';
import { startFakeEgress, type FakeEgress } from './fake-egress';
import { EGRESS_PROBE, PROXY_ENV } from '../helpers/egress-probe';

const have: Record<Runtime, boolean> = { bun: !!findBun(), python: !!findPython() };
if (!have.bun) skipNote('bun');
if (!have.python) skipNote('python');

const FILES: Record<Runtime, Record<string, string>> = { bun: { 'main.ts': EGRESS_PROBE.bun }, python: { 'main.py': EGRESS_PROBE.python } };

let seq = 0;
async function call(
  r: StartedRunner,
  input: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<{ id: string; output: any }> {
  const id = `inv_egress_${process.pid}_${++seq}`;
  const outcome = await r.channel.invoke(id, input, { SVC_INVOCATION_ID: id, ...env }, { onCall: fakeStore().onCall });
  if (outcome.kind !== 'result')
    throw new Error(`${r.runtime} ${JSON.stringify(input)}: ${outcome.message}\n${outcome.stack ?? ''}\n${r.stderr()}`);
  return { id, output: outcome.output };
}

for (const runtime of ['bun', 'python'] as const) {
  describe.skipIf(!have[runtime])(`${runtime} runner: the egress relay`, () => {
    let egress: FakeEgress;
    let runner: StartedRunner;
    let plain: StartedRunner;
    /** A TCP server on the host's loopback: it must never be reached directly while the proxy is set. */
    let local: Server;
    let localHits = 0;
    let localPort = 0;

    beforeAll(async () => {
      egress = await startFakeEgress();
      local = createServer((s) => {
        localHits++;
        s.end('HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\ndirect');
      });
      await new Promise<void>((r) => local.listen(0, '127.0.0.1', () => r()));
      localPort = (local.address() as { port: number }).port;
      [runner, plain] = await Promise.all([
        startRunner(runtime, FILES[runtime], undefined, { SVC_EGRESS_SOCKET: egress.path }),
        startRunner(runtime, FILES[runtime]),
      ]);
    }, 30_000);
    afterAll(async () => {
      await Promise.all([runner?.stop(), plain?.stop()]);
      await egress?.close();
      await new Promise((r) => local?.close(r));
    });

    it('sets the proxy variables to its relay on 127.0.0.1 and empties NO_PROXY; without a socket nothing is set', async () => {
      const { output } = await call(runner, { op: 'env' });
      const url = output.HTTP_PROXY as string;
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      for (const name of PROXY_ENV) expect(output[name], name).toBe(url);
      expect(output.NO_PROXY).toBe('');
      expect(output.no_proxy).toBe('');
      expect(output.SVC_EGRESS_SOCKET).toBe(egress.path);

      expect((await call(plain, { op: 'env' })).output).toEqual({});
    });

    const clients = runtime === 'bun' ? ['fetch'] : ['urllib', 'requests', 'httpx'];
    // it.for, not it.each: only it.for hands the test its context (ctx.skip).
    it.for(clients)('%s reaches the proxy, and the preamble names the invocation', async (op, ctx) => {
      const { id, output } = await call(runner, { op, url: 'http://example.test/x' });
      if (output.skipped) ctx.skip(output.skipped);
      expect(output).toEqual({ status: 200, body: 'ok' });
      const req = egress.requests.find((r) => r.id === id);
      expect(req, JSON.stringify(egress.requests)).toBeTruthy();
      expect(req!.line).toBe('GET http://example.test/x HTTP/1.1');
      expect(egress.preambles).toContain(`SVC-EGRESS 1 ${id}`);
    });

    it.for(clients)('%s: a loopback target goes through the proxy too (no bypass)', async (op, ctx) => {
      const { id, output } = await call(runner, { op, url: `http://127.0.0.1:${localPort}/loop` });
      if (output.skipped) ctx.skip(output.skipped);
      expect(output).toEqual({ status: 200, body: 'ok' });
      expect(egress.requests.filter((r) => r.id === id).map((r) => r.target)).toEqual([`http://127.0.0.1:${localPort}/loop`]);
      expect(localHits).toBe(0);
    });

    it('an https URL is tunnelled with CONNECT through the proxy (refused by this fake)', async () => {
      const { id, output } = await call(runner, { op: runtime === 'bun' ? 'fetch' : 'urllib', url: 'https://example.test/secure' });
      expect(output.error, JSON.stringify(output)).toBeTruthy();
      expect(egress.requests.filter((r) => r.id === id).map((r) => r.line)).toEqual([
        expect.stringMatching(/^CONNECT example\.test:443 HTTP\/1\.[01]$/),
      ]);
    });

    it("an invocation's env cannot move the proxy, and the runner's variables survive the env reset", async () => {
      const before = (await call(runner, { op: 'env' })).output;
      const evil = { HTTP_PROXY: 'http://10.0.0.1:1', http_proxy: 'http://10.0.0.1:1', NO_PROXY: '*', no_proxy: '*' };
      const during = (await call(runner, { op: 'env' }, evil)).output;
      expect(during).toEqual(before);
      const { id, output } = await call(runner, { op: runtime === 'bun' ? 'fetch' : 'urllib', url: 'http://example.test/after' }, evil);
      expect(output).toEqual({ status: 200, body: 'ok' });
      expect(egress.requests.find((r) => r.id === id)?.target).toBe('http://example.test/after');
      expect((await call(runner, { op: 'env' })).output).toEqual(before);
    });

    it('megabytes both ways arrive intact (backpressure in the relay)', async () => {
      const n = 6 * 1024 * 1024 + 13;
      expect((await call(runner, { op: 'big', n })).output).toEqual({ status: 200, bytes: n, intact: true });
      expect((await call(runner, { op: 'echo', n })).output).toEqual({ status: 200, bytes: n, intact: true });
    }, 20_000);

    it('a keep-alive connection is not reused under the next invocation: each request names its own', async (ctx) => {
      egress.keepAlive = true;
      try {
        const op = runtime === 'bun' ? 'fetch' : 'httpx_client';
        const ids: string[] = [];
        for (let i = 0; i < 3; i++) {
          const { id, output } = await call(runner, { op, url: `http://example.test/ka${i}` });
          if (output.skipped) ctx.skip(output.skipped);
          expect(output).toEqual({ status: 200, body: 'ok' });
          ids.push(id);
        }
        const seen = egress.requests.filter((r) => r.target.startsWith('http://example.test/ka'));
        expect(seen.map((r) => [r.id, r.target])).toEqual(ids.map((id, i) => [id, `http://example.test/ka${i}`]));
      } finally {
        egress.keepAlive = false;
      }
    });
  });
}

describe.skipIf(!have.bun && !have.python)('the relay when the egress proxy is not there', () => {
  it.each((['bun', 'python'] as const).filter((r) => have[r]))(
    '%s: a request gets 502 from the relay, and the runner keeps serving',
    async (runtime) => {
      const r = await startRunner(runtime, FILES[runtime], undefined, { SVC_EGRESS_SOCKET: '/nonexistent/egress.sock' });
      try {
        const { output } = await call(r, { op: runtime === 'bun' ? 'fetch' : 'urllib', url: 'http://example.test/x' });
        if (runtime === 'bun') expect(output).toMatchObject({ status: 502 });
        else expect(output.error).toMatch(/502/);
        expect((await call(r, { op: 'env' })).output.HTTP_PROXY).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      } finally {
        await r.stop();
      }
    },
  );
});
