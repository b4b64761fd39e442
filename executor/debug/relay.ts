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

/** Listens on 127.0.0.1:(port ?? any); resolves once it listens (rejects when the port is taken). */
export async function startRelay(o: RelayOptions): Promise<Relay> {
  const clients = new Set<net.Socket>();
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

  const server = net.createServer({ pauseOnConnect: true }, (client) => {
    if (closed) return void client.destroy();
    const before = clients.size > 0;
    clients.add(client);
    attached = true;
    client.setNoDelay(true);
    let upstream: net.Socket | null = null;
    let timer: NodeJS.Timeout | undefined;
    let gone = false;
    const end = () => {
      if (gone) return;
      gone = true;
      clearTimeout(timer);
      client.destroy();
      if (upstream) {
        upstream.destroy();
        upstreams.delete(upstream);
      }
      const held = clients.size > 0;
      clients.delete(client);
      setHeld(held);
    };
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
        client.pipe(u);
        u.pipe(client);
        client.resume();
      });
    };
    connect();
    setHeld(before);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
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
        for (const u of upstreams) u.destroy();
        for (const c of clients) c.destroy();
      }).then(() => {
        // Every client's close has run by now (the server's close waits for its connections).
        heldListeners.clear();
      });
      // Told at once: a waiter for the debugger must not wait for the sockets to drain.
      const ls = [...closeListeners];
      closeListeners.clear();
      for (const l of ls) l();
      return closing;
    },
  };
  return relay;
}
