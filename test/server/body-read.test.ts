import { afterEach, describe, expect, it } from 'vitest';
import Koa from 'koa';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { readRawBody } from '../../server/http/body';

// readRawBody (server/http/body.ts) reads with the request stream's events: every way a body can end settles the
// read — whole, over the limit, cut mid-body, and already gone before the read began — so no request waits forever.

let server: Server | null = null;
afterEach(() => {
  server?.close();
  server = null;
});

/** A server whose handler reads the body (after `before`, when given) and reports how the read ended. */
async function serve(before?: (req: Koa.Context['req']) => Promise<void>) {
  const outcomes: Array<(o: string) => void> = [];
  const app = new Koa();
  app.silent = true;
  app.use(async (ctx) => {
    const report = outcomes.shift()!;
    if (before) await before(ctx.req);
    try {
      const body = await readRawBody(ctx, 1000);
      report(`ok ${body.toString()}`);
      ctx.body = 'ok';
    } catch (err) {
      report(`err ${(err as { code?: string }).code ?? (err as Error).message}`);
      throw err;
    }
  });
  server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server!.once('listening', r));
  const port = (server.address() as AddressInfo).port;
  /** Sends a request's head and `body`, then (with `cut`) closes the connection; resolves with the read's outcome. */
  const send = (body: string, length: number, cut: boolean) =>
    new Promise<string>((resolve) => {
      outcomes.push(resolve);
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(`POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${length}\r\n\r\n${body}`);
        if (cut) socket.destroy();
      });
      socket.on('error', () => {});
      socket.on('data', () => socket.destroy());
    });
  return { send };
}

describe('reading a request body', () => {
  it('whole: the bytes', async () => {
    const { send } = await serve();
    expect(await send('hello', 5, false)).toBe('ok hello');
  });

  it('over the limit: 413 payload_too_large', async () => {
    const { send } = await serve();
    expect(await send('x'.repeat(2000), 2000, false)).toBe('err payload_too_large');
  });

  it('cut mid-body by the client: an error, not a wait', async () => {
    const { send } = await serve();
    expect(await send('abc', 100, true)).toMatch(/^err /);
  });

  it('gone before the read began: an error at once', async () => {
    // The handler reads only once the request has closed (the client left while earlier middleware ran).
    const { send } = await serve((req) => (req.destroyed ? Promise.resolve() : new Promise((r) => req.once('close', () => r()))));
    expect(await send('abc', 100, true)).toBe('err ERR_STREAM_PREMATURE_CLOSE');
  });
});
