import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { EgressCa } from './ca';

/** How long a client has to finish its TLS handshake with the core before the tunnel is closed. */
const HANDSHAKE_MS = 10_000;
/** Tunnels remembered as not terminable (host:port): a client that pins certificates fails once, then passes through. */
const FAILED_MAX = 1024;

export type Termination = { socket: TLSSocket } | { failed: string };

/**
 * TLS termination for record and replay of HTTPS (docs/cassettes.md "HTTPS"): a CONNECT tunnel of a
 * recording or replaying run is answered by the core itself with a certificate for the tunnel's host, signed
 * by the data dir's egress CA (ca.ts), which the sandboxes trust. The decrypted socket then carries ordinary
 * origin-form HTTP/1.1 requests that the proxy records or replays like plain HTTP.
 *
 * When it cannot be done (no CA, or this host:port failed a handshake before: a client that pins
 * certificates or does not trust the CA), `refusal` says why: a recording run's tunnel then goes out blind
 * (counted as passthrough), a replaying run's is refused.
 */
export class TlsTerminator {
  private readonly failed = new Map<string, string>();

  constructor(
    /** The data dir's CA, or null with why there is none. */
    private readonly ca: EgressCa | null,
    private readonly caError: string | null = null,
  ) {}

  /** Why a tunnel to host:port cannot be terminated, or null when it can. */
  refusal(host: string, port: number): string | null {
    if (!this.ca) return `the egress CA is not available (${this.caError ?? 'not made'})`;
    return this.failed.get(key(host, port)) ?? null;
  }

  /**
   * Answers the CONNECT with `200 Connection Established`, then the TLS handshake as the server of `host`
   * (SNI picks the certificate; the CONNECT's host when the client sends none). Resolves once the handshake
   * is done, or with why it failed (then the tunnel is closed, and, when the client refused the TLS, host:port is
   * remembered as not terminable).
   */
  async terminate(client: Socket, head: Buffer, host: string, port: number): Promise<Termination> {
    const ca = this.ca;
    if (!ca) return { failed: this.refusal(host, port)! };
    let context;
    try {
      context = ca.context(host);
    } catch (err) {
      return { failed: `no certificate for ${host}: ${(err as Error).message}` };
    }
    if (client.destroyed) return { failed: 'the client went away' };
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    // Bytes the client sent after its CONNECT (a ClientHello sent without waiting): TLSSocket reads what is buffered first.
    if (head.length) client.unshift(head);
    const socket = new TLSSocket(client, {
      isServer: true,
      secureContext: context,
      SNICallback: (name, cb) => {
        try {
          cb(null, ca.context(name));
        } catch (err) {
          cb(err as Error);
        }
      },
      // The proxy's HTTP server speaks HTTP/1.1: a client offering h2 is told to use it.
      ALPNProtocols: ['http/1.1'],
    });
    return new Promise<Termination>((resolve) => {
      /**
       * `remember`: only the client's own TLS refusal (an alert, or what is not TLS at all) marks host:port as not
       * terminable; a close or a reset mid-handshake (a run cancelled, the runner's relay closing its connections
       * at the run's end) or a timeout fails this connection only.
       */
      const done = (t: Termination, remember = false) => {
        clearTimeout(timer);
        socket.off('secure', ok);
        socket.off('error', bad);
        socket.off('close', closed);
        if ('failed' in t) {
          if (remember) this.remember(host, port, t.failed);
          socket.destroy();
          client.destroy();
        }
        resolve(t);
      };
      const ok = () => done({ socket });
      const bad = (err: Error) => done({ failed: handshakeError(err) }, /^ERR_SSL_/.test((err as NodeJS.ErrnoException).code ?? ''));
      const closed = () => done({ failed: 'the client closed the connection during the TLS handshake' });
      const timer = setTimeout(() => done({ failed: `no TLS handshake within ${HANDSHAKE_MS} ms` }), HANDSHAKE_MS);
      socket.once('secure', ok);
      socket.once('error', bad);
      socket.once('close', closed);
    });
  }

  private remember(host: string, port: number, why: string): void {
    const k = key(host, port);
    this.failed.delete(k);
    this.failed.set(k, `an earlier TLS handshake with the client failed: ${why}`);
    if (this.failed.size > FAILED_MAX) this.failed.delete(this.failed.keys().next().value!);
  }
}

const key = (host: string, port: number) => `${host.toLowerCase()}:${port}`;

/** An OpenSSL alert as a sentence: what the client said about the certificate it was shown. */
function handshakeError(err: Error): string {
  const m = /alert (\w[\w ]*)/i.exec(err.message) ?? /SSL alert number (\d+)/.exec(err.message);
  if (m)
    return `the client refused the emulator's certificate (TLS alert: ${m[1]}; a client that pins certificates or does not trust the egress CA)`;
  return `TLS handshake failed: ${(err as NodeJS.ErrnoException).code ?? err.message}`;
}
