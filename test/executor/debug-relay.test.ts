/**
 * The debug relay on its own (executor/debug/relay.ts): a debugger still connected when the relay closes (the run
 * ended under it) is told as a held → not-held change before close() settles, whatever order the sockets' close
 * events and the server's close come in. A fresh-clone run once missed it: the listeners were cleared first.
 */
import { afterEach, expect, it } from 'vitest';
import net from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRelay, type Relay } from '../../executor/debug/relay';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** The runtime's side: a unix socket that answers each DAP frame with one of its own (and counts connections). */
async function fakeRuntime(): Promise<{ path: string; connections: () => number }> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-test-'));
  const path = join(dir, 'debug.sock');
  let n = 0;
  const server = net.createServer((s) => {
    n++;
    s.on('data', () => s.write('Content-Length: 2\r\n\r\n{}'));
    s.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(path, r));
  cleanup.push(
    () => new Promise<void>((r) => server.close(() => r())),
    () => rmSync(dir, { recursive: true, force: true }),
  );
  return { path, connections: () => n };
}

it.each([1, 3])('close() with %i debugger(s) connected tells held → false before it settles, once', async (count) => {
  const runtime = await fakeRuntime();
  const relay: Relay = await startRelay({ protocol: 'dap', socketPath: runtime.path, remoteRoot: '/opt/svc/app', retryMs: 5 });
  cleanup.push(() => relay.close());
  const changes: boolean[] = [];
  relay.onHeldChange((held) => changes.push(held));

  const clients: net.Socket[] = [];
  for (let i = 0; i < count; i++) {
    const c = net.connect(relay.port, relay.host);
    c.on('error', () => {});
    cleanup.push(() => c.destroy());
    // The answer through the relay: this debugger is admitted and piped to the runtime.
    const answered = new Promise<void>((r) => c.once('data', () => r()));
    c.write('Content-Length: 2\r\n\r\n{}');
    await answered;
    clients.push(c);
  }
  expect(relay.held).toBe(true);
  expect(runtime.connections()).toBe(count);
  expect(changes).toEqual([true]);

  await relay.close();
  expect(changes).toEqual([true, false]);
  expect(relay.held).toBe(false);
  expect(relay.closed).toBe(true);
});
