import net from 'node:net';
import type { DebugPort, DebugSpec } from './types';

/**
 * A debug sandbox's relay (executor/debug/types.ts): a TCP listener on loopback whose every connection is piped,
 * byte for byte, to the debugger's unix socket inside the sandbox (bound out to the host at `socketPath`). The
 * runtime may not have made its socket yet when a debugger connects (it is made a few ms after the runner
 * starts): the relay retries the connect until the socket answers, the client leaves, or the relay closes; what
 * the client sends meanwhile waits in its paused socket.
 *
 * `held`: at least one debugger connected now. Each change is told to onHeldChange's listeners; `attached`
 * says whether one ever connected; close() stops listening, cuts every connection and tells `onClose`.
 */
export interface RelayOptions {
  protocol: DebugSpec['protocol'];
  /** The runtime's socket, as the host sees it. */
  socketPath: string;
  /** Loopback port (absent or 0: any free one). */
  port?: number;
  /** The bundle's path inside the sandbox (DebugPort.remoteRoot). */
  remoteRoot: string;
  /** Retry period while the socket is not there yet (default 20 ms). */
  retryMs?: number;
}

export interface Relay extends DebugPort {
  /** Whether a debugger ever connected. */
  readonly attached: boolean;
  readonly closed: boolean;
  /** Calls `listener` once when the relay closes (at once if it has); returns the unsubscribe. */
  onClose(listener: () => void): () => void;
}

export const RELAY_HOST = '127.0.0.1';

/** Browser pages allowed to attach to a Bun inspector: Bun's own debugger (debug.bun.sh) only. */
export const INSPECTOR_ORIGINS: readonly string[] = ['https://debug.bun.sh'];
const LOOPBACK_NAMES = new Set(['127.0.0.1', 'localhost', '[::1]']);
/** How much of a connection's first bytes the gate reads before it must decide, and how long it waits for them. */
const MAX_HEAD_BYTES = 16 * 1024;
const GATE_TIMEOUT_MS = 30_000;

/**
 * Whether a connection's first bytes are a debugger's: `ok`, `more` (read on), or why not. Any web page the user
 * opens can reach a loopback port, so the relay lets through only what a debugger sends:
 * - inspector: an HTTP/1.1 GET (the WebSocket upgrade) whose Host is a loopback name (no DNS rebinding) and that
 *   carries no Origin (VS Code's Bun extension, a CLI) or one of INSPECTOR_ORIGINS. A page of another origin
 *   could otherwise open a WebSocket to the inspector and run code in the snippet's process (its secrets).
 * - dap: a `Content-Length:` header first, as every DAP message starts; an HTTP request a page sends there (its
 *   own Content-Length line and a body that parses as DAP) is cut before debugpy reads a byte of it.
 * A refused connection never holds the run.
 */
export function gate(protocol: DebugSpec['protocol'], head: Buffer): 'ok' | 'more' | { refused: string } {
  if (protocol === 'dap') {
    const want = 'content-length:';
    const got = head.subarray(0, want.length).toString('latin1').toLowerCase();
    if (!want.startsWith(got)) return { refused: 'not a DAP message (it starts with a Content-Length header)' };
    return got.length === want.length ? 'ok' : 'more';
  }
  const end = head.indexOf('\r\n\r\n');
  if (end < 0) return 'more';
  const [line, ...fields] = head.subarray(0, end).toString('latin1').split('\r\n');
  if (!/^GET \S+ HTTP\/1\.1$/.test(line ?? '')) return { refused: 'not a WebSocket upgrade request' };
  const headers = new Map<string, string>();
  for (const f of fields) {
    const i = f.indexOf(':');
    if (i > 0) headers.set(f.slice(0, i).trim().toLowerCase(), f.slice(i + 1).trim());
  }
  const host = headers.get('host');
  if (!host) return { refused: 'no Host header' };
  const name = host.replace(/:\d+$/, '').toLowerCase();
  if (!LOOPBACK_NAMES.has(name)) return { refused: `Host ${host} is not a loopback name: attach to ${RELAY_HOST}` };
  const origin = headers.get('origin');
  if (origin !== undefined && !INSPECTOR_ORIGINS.includes(origin)) {
    return {
      refused: `a page of ${origin} may not attach to the inspector (allowed: a debugger without an Origin, or ${INSPECTOR_ORIGINS.join(', ')})`,
    };
  }
  return 'ok';
}

/** Listens on 127.0.0.1:(port ?? any); resolves once it listens (rejects when the port is taken). */
export async function startRelay(o: RelayOptions): Promise<Relay> {
  const clients = new Set<net.Socket>();
  /** Each open connection's end (below): close() runs them, so a debugger cut off is told before close() settles. */
  const enders = new Set<() => void>();
  const upstreams = new Set<net.Socket>();
  const heldListeners = new Set<(held: boolean) => void>();
  const closeListeners = new Set<() => void>();
  const retryMs = o.retryMs ?? 20;
  let attached = false;
  let closed = false;
  let closing: Promise<void> | null = null;

  const setHeld = (before: boolean) => {
    const now = clients.size > 0;
    if (now !== before) for (const l of [...heldListeners]) l(now);
  };

  /** Connections still at the gate (not yet known to be a debugger): not counted as holding the run. */
  const pending = new Set<net.Socket>();

  const server = net.createServer({ pauseOnConnect: true }, (client) => {
    if (closed) return void client.destroy();
    client.setNoDelay(true);
    pending.add(client);
    let head = Buffer.alloc(0);
    let upstream: net.Socket | null = null;
    let timer: NodeJS.Timeout | undefined;
    let gone = false;
    let admitted = false;
    // A connection that says nothing is not a debugger: it is cut (it would sit at the gate for ever).
    const headTimer = setTimeout(() => end(), GATE_TIMEOUT_MS);
    const end = () => {
      if (gone) return;
      gone = true;
      enders.delete(end);
      clearTimeout(timer);
      clearTimeout(headTimer);
      client.destroy();
      pending.delete(client);
      if (upstream) {
        upstream.destroy();
        upstreams.delete(upstream);
      }
      if (!admitted) return;
      const held = clients.size > 0;
      clients.delete(client);
      setHeld(held);
    };
    enders.add(end);
    client.on('error', end);
    client.on('close', end);
    const connect = () => {
      if (gone || closed) return;
      const u = net.connect(o.socketPath);
      const retry = (err: NodeJS.ErrnoException) => {
        u.destroy();
        // Not there yet (the runtime is starting) or not listening yet: try again; anything else ends the client.
        if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') timer = setTimeout(connect, retryMs);
        else end();
      };
      u.once('error', retry);
      u.once('connect', () => {
        u.off('error', retry);
        if (gone || closed) return void u.destroy();
        upstream = u;
        upstreams.add(u);
        u.setNoDelay(true);
        u.on('error', end);
        u.on('close', end);
        u.write(head);
        client.pipe(u);
        u.pipe(client);
        client.resume();
      });
    };
    const onHead = (d: Buffer) => {
      head = Buffer.concat([head, d]);
      const verdict = gate(o.protocol, head);
      if (verdict === 'more' && head.length <= MAX_HEAD_BYTES) return;
      client.off('data', onHead);
      client.pause();
      clearTimeout(headTimer);
      if (verdict !== 'ok') {
        const why = verdict === 'more' ? 'the request head is too long' : verdict.refused;
        if (o.protocol !== 'inspector') return end();
        const body = `${why}\n`;
        return void client.end(
          `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
          () => end(),
        );
      }
      // A debugger: it holds the run from now on.
      pending.delete(client);
      const before = clients.size > 0;
      clients.add(client);
      admitted = true;
      attached = true;
      setHeld(before);
      connect();
    };
    client.on('data', onHead);
    client.resume();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? Object.assign(
              new Error(
                `debug port ${o.port} on ${RELAY_HOST} is in use (another debug run, or a program listening there): free it, or ask for another port (--debug-port N, X-Emu-Debug: port=N) or any free one (X-Emu-Debug: 1)`,
              ),
              { code: 'debug_port_in_use' },
            )
          : err,
      ),
    );
    server.listen(o.port ?? 0, RELAY_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  const url = o.protocol === 'inspector' ? `ws://${RELAY_HOST}:${port}/` : `tcp://${RELAY_HOST}:${port}`;

  const relay: Relay = {
    protocol: o.protocol,
    host: RELAY_HOST,
    port,
    url,
    remoteRoot: o.remoteRoot,
    get held() {
      return clients.size > 0;
    },
    get attached() {
      return attached;
    },
    get closed() {
      return closed;
    },
    onHeldChange(listener) {
      heldListeners.add(listener);
      return () => void heldListeners.delete(listener);
    },
    onClose(listener) {
      if (closed) {
        listener();
        return () => {};
      }
      closeListeners.add(listener);
      return () => void closeListeners.delete(listener);
    },
    close() {
      if (closing) return closing;
      closed = true;
      closing = new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Each connection ends here, not on its socket's 'close' event: the server's close callback can come before
        // those (a handle's close is a later turn of the loop), and the listeners are cleared then — a debugger cut
        // off by the close would never be told as `detached`.
        for (const e of [...enders]) e();
        for (const u of upstreams) u.destroy();
        for (const c of clients) c.destroy();
        for (const c of pending) c.destroy();
      }).then(() => heldListeners.clear());
      // Told at once: a waiter for the debugger must not wait for the sockets to drain.
      const ls = [...closeListeners];
      closeListeners.clear();
      for (const l of ls) l();
      return closing;
    },
  };
  return relay;
}
