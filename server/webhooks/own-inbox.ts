import { isIPv6 } from 'node:net';

/**
 * Is a `callback_url` this core's own callback inbox (`{its origin}/_emu/inbox/{name}`, server/api/inbox.ts)?
 * That target is the emulator itself, not a private network host: it stays reachable under the
 * `production` egress profile (with a parity warning), while every other loopback or private URL is
 * refused there. Only the exact inbox qualifies: plain http, an origin naming an address this core
 * listens on (or the URL it printed), its port, the inbox path, no credentials; and at connect time only
 * those addresses on that port.
 */
export interface SelfEndpoint {
  port: number;
  /** The addresses a connection to this core goes to (a wildcard bind means its loopback ones). */
  addresses: string[];
  /** The origins that name this core: one per address, and the URL it printed. */
  origins: string[];
}

/** The inbox route's path: one name as server/api/schemas.ts's ResourceName allows. */
const INBOX_PATH = /^\/_emu\/inbox\/[a-z0-9][a-z0-9-]{0,62}$/;

const canonical = (ip: string) => (isIPv6(ip) ? new URL(`http://[${ip}]/`).hostname.slice(1, -1) : ip);

/** From the listening socket's address (`server.address()`) and the URL the core printed. */
export function selfEndpoint(listening: { address: string; port: number }, url: string): SelfEndpoint {
  const bound = canonical(listening.address);
  // Node's `::` socket is dual-stack; `0.0.0.0` only IPv4.
  const addresses = bound === '0.0.0.0' ? ['127.0.0.1'] : bound === '::' ? ['127.0.0.1', '::1'] : [bound];
  const origins = new Set(addresses.map((a) => new URL(`http://${isIPv6(a) ? `[${a}]` : a}:${listening.port}/`).origin));
  origins.add(new URL(url).origin);
  return { port: listening.port, addresses, origins: [...origins] };
}

/** True when `url` is exactly this core's callback inbox. */
export function isOwnInbox(url: string, self: SelfEndpoint | null): boolean {
  if (!self) return false;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  return (
    parsed.protocol === 'http:' &&
    parsed.username === '' &&
    parsed.password === '' &&
    self.origins.includes(parsed.origin) &&
    INBOX_PATH.test(parsed.pathname)
  );
}

/** At connect time: is this the core's own listening address and port? */
export function isSelfAddress(address: string, port: number, self: SelfEndpoint | null): boolean {
  return !!self && port === self.port && self.addresses.includes(canonical(address.replace(/^\[(.*)\]$/, '$1')));
}
