/**
 * The Bun runner's egress relay, to the spec of docs/egress-relay.md: a TCP listener on 127.0.0.1 inside the
 * sandbox that forwards each connection to the core's egress proxy over the unix socket bound in at
 * SVC_EGRESS_SOCKET, after one preamble line naming the invocation running when the connection was accepted:
 *
 *   SVC-EGRESS 1 <invocation id or ->\r\n      then the bytes of an ordinary HTTP proxy connection
 *
 * HTTP_PROXY & co. point at the relay (Bun's fetch reads them from process.env on every request, with no
 * bypass for loopback targets while NO_PROXY is empty; checked on Bun 1.4.4). A connection belongs to one
 * invocation: the runner calls closeAll() when an invocation starts and when it ends, so a keep-alive
 * connection is never reused under another invocation's name.
 * Bun's own sockets, not node:net: listening costs ~0.1 ms here, node:net ~5 ms of every cold start.
 * Imported by runner.ts only; it imports nothing but Bun's globals.
 */

declare const Bun: {
  listen(o: { hostname: string; port: number; allowHalfOpen?: boolean; socket: RelayHandlers }): { port: number };
  connect(o: { unix: string; allowHalfOpen?: boolean; data?: RelayLink; socket: RelayHandlers }): Promise<RawSocket>;
};

/** What the relay needs from the runner: the running invocation's id, and where its notes go. */
/** Callbacks (properties, not methods: the relay calls them unbound). */
export interface RelayDeps {
  currentId: () => string | undefined;
  note: (message: string) => void;
}

export interface EgressRelay {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** The proxy variables to keep set: the relay's URL, and an empty NO_PROXY. */
  env: Record<string, string>;
  /** Closes every relayed connection, both sides. */
  closeAll(): void;
}

interface RawSocket {
  data: RelayLink;
  write(data: Uint8Array): number;
  /** Sends FIN and keeps reading (a half-close). Bun's end() closes the socket both ways, dropping what the peer still sends. */
  shutdown(): void;
  terminate(): void;
  pause(): void;
  resume(): void;
}

/** One side of a relayed connection: the client's TCP socket, or the upstream unix socket. */
interface RelaySide {
  sock: RawSocket | null;
  /** Bytes waiting to be written to this side (it is still connecting, or a write came back short). */
  queue: Uint8Array[];
  /** No more bytes will come from it (FIN or closed). */
  done: boolean;
  /** Closed: nothing can be written to it any more. */
  gone: boolean;
  /** We sent it our FIN. */
  ended: boolean;
}

interface RelayLink {
  client: RelaySide;
  upstream: RelaySide;
  closed: boolean;
}

interface RelayHandlers {
  open?(s: RawSocket): void;
  data?(s: RawSocket, d: Uint8Array): void;
  drain?(s: RawSocket): void;
  end?(s: RawSocket): void;
  close?(s: RawSocket, err?: unknown): void;
  error?(s: RawSocket, err: unknown): void;
}

/** The proxy variables the runner keeps set (they win over an invocation's env of the same name). */
const PROXY_NAMES = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'ALL_PROXY'] as const;
const NO_PROXY_NAMES = ['NO_PROXY', 'no_proxy'] as const;

/** An id fit for the preamble line: printable ASCII without spaces, else "-". */
function preambleId(id: string | undefined): string {
  return id && /^[\x21-\x7e]{1,200}$/.test(id) ? id : '-';
}

/** Starts the relay; null (with a note) when it cannot listen, and the runner serves without it. */
export function startEgressRelay(socketPath: string, deps: RelayDeps): EgressRelay | null {
  const { note } = deps;
  const links = new Set<RelayLink>();
  const side = (sock: RawSocket | null): RelaySide => ({ sock, queue: [], done: false, gone: false, ended: false });
  const other = (link: RelayLink, s: RelaySide) => (s === link.client ? link.upstream : link.client);

  const close = (link: RelayLink) => {
    if (link.closed) return;
    link.closed = true;
    links.delete(link);
    link.client.sock?.terminate();
    link.upstream.sock?.terminate();
  };
  const settle = (link: RelayLink) => {
    const { client: c, upstream: u } = link;
    const over = (s: RelaySide) => s.gone || (s.done && s.ended && s.queue.length === 0);
    if (over(c) && over(u)) {
      link.closed = true; // both directions are over: the sockets close themselves
      links.delete(link);
    }
  };

  /** Writes what waits for `dst`; once all of it is written, ends `dst` if its source is done, else resumes the source. */
  const flush = (link: RelayLink, dst: RelaySide) => {
    if (link.closed || dst.gone || !dst.sock) return;
    while (dst.queue.length) {
      const chunk = dst.queue[0]!;
      const n = dst.sock.write(chunk);
      if (n < 0) return close(link);
      if (n < chunk.byteLength) {
        dst.queue[0] = chunk.subarray(n);
        return; // the rest on drain
      }
      dst.queue.shift();
    }
    const src = other(link, dst);
    if (src.done) {
      if (!dst.ended) {
        dst.ended = true;
        dst.sock.shutdown();
      }
      settle(link);
    } else src.sock?.resume();
  };

  const onData = (link: RelayLink, src: RelaySide, chunk: Uint8Array) => {
    if (link.closed) return;
    const dst = other(link, src);
    if (dst.gone) return; // nobody reads it any more
    if (dst.sock && dst.queue.length === 0) {
      const n = dst.sock.write(chunk);
      if (n < 0) return close(link);
      if (n === chunk.byteLength) return;
      chunk = chunk.subarray(n);
    }
    dst.queue.push(Uint8Array.prototype.slice.call(chunk)); // a copy: the chunk's memory may be reused
    src.sock?.pause();
  };

  /** `src` sends no more: end the other side once what waits for it is written. */
  const onDone = (link: RelayLink, src: RelaySide) => {
    if (link.closed || src.done) return;
    src.done = true;
    flush(link, other(link, src));
    settle(link);
  };
  const onClose = (link: RelayLink, s: RelaySide) => {
    if (link.closed) return;
    s.gone = true;
    s.queue.length = 0;
    onDone(link, s);
    settle(link);
  };

  const upstreamHandlers: RelayHandlers = {
    data: (s, d) => onData(s.data, s.data.upstream, d),
    drain: (s) => flush(s.data, s.data.upstream),
    end: (s) => onDone(s.data, s.data.upstream),
    close: (s) => onClose(s.data, s.data.upstream),
    error: () => {}, // a close follows
  };

  let listener: { port: number };
  try {
    listener = Bun.listen({
      hostname: '127.0.0.1',
      port: 0,
      allowHalfOpen: true,
      socket: {
        open(client) {
          const link: RelayLink = { client: side(client), upstream: side(null), closed: false };
          client.data = link;
          links.add(link);
          link.upstream.queue.push(Buffer.from(`SVC-EGRESS 1 ${preambleId(deps.currentId())}\r\n`, 'latin1'));
          Bun.connect({ unix: socketPath, allowHalfOpen: true, data: link, socket: upstreamHandlers }).then(
            (upstream) => {
              if (link.closed) return upstream.terminate();
              link.upstream.sock = upstream;
              flush(link, link.upstream);
            },
            (err: unknown) => {
              if (link.closed) return;
              note(`egress: cannot reach the egress proxy at ${socketPath}: ${String((err as { code?: string })?.code ?? err)}`);
              const body = "the sandbox cannot reach the emulator's egress proxy\n";
              link.closed = true;
              links.delete(link);
              client.write(
                Buffer.from(
                  `HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
                  'latin1',
                ),
              );
              client.shutdown(); // not end(): closing with the request unread would reset the connection, and lose the 502
            },
          );
        },
        data: (s, d) => onData(s.data, s.data.client, d),
        drain: (s) => flush(s.data, s.data.client),
        end: (s) => onDone(s.data, s.data.client),
        close: (s) => onClose(s.data, s.data.client),
        error: () => {},
      },
    });
  } catch (err) {
    note(`egress: the relay could not start: ${String((err as { code?: string })?.code ?? err)}`);
    return null;
  }

  const url = `http://127.0.0.1:${listener.port}`;
  const env: Record<string, string> = {};
  for (const name of PROXY_NAMES) env[name] = url;
  for (const name of NO_PROXY_NAMES) env[name] = '';
  return {
    url,
    env,
    closeAll() {
      for (const link of [...links]) close(link);
    },
  };
}
