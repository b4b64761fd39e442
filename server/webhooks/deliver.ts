import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { parseRetryAfter } from './schedule';

/** The outcome of one HTTP POST of a webhook. */
export interface DeliveryAttempt {
  status_code: number | null;
  error: string | null;
  retry_after_ms: number | null;
  duration_ms: number;
  /** true when the receiver answered 2xx */
  ok: boolean;
  /** true when retrying is pointless: HTTP 410 Gone, or the target was refused by the egress guard */
  final: boolean;
}

/** Decides whether an address may be connected to: a refusal reason, or null to allow it. */
export type EgressGuard = (address: string, host: string, port: number) => string | null;

export interface DeliverOptions {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Overall deadline: connect, response headers and body. Default 15000. */
  timeoutMs?: number;
  /** Called for every resolved address (and for IP-literal hosts) before connecting: return a refusal reason to block it, or null. */
  guard?: EgressGuard;
  now?: () => Date;
}

export const DEFAULT_TIMEOUT_MS = 15_000;
/** The most of a response body we read (and discard); a receiver sending more is cut off. */
export const MAX_RESPONSE_BODY_BYTES = 64 * 1024;
export const USER_AGENT = 'svc-emu-webhooks/1';
export const EGRESS_REFUSED = 'EGRESS_REFUSED';

type ErrnoError = Error & { code?: string };

function refusal(reason: string): ErrnoError {
  return Object.assign(new Error(reason), { code: EGRESS_REFUSED });
}

/** Applies the guard, treating a guard that throws as a refusal (never connect on an unchecked address). */
function check(guard: EgressGuard, address: string, host: string, port: number): string | null {
  try {
    return guard(address, host, port);
  } catch {
    return 'refused: the egress guard could not check this address';
  }
}

/** Resolves every address of a host name (the seam a test or another resolver can replace). */
export type ResolveAll = (
  host: string,
  family: number | 'IPv4' | 'IPv6' | undefined,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

const systemResolveAll: ResolveAll = (host, family, callback) => dnsLookup(host, { all: true, family: family ?? 0 }, callback);

/**
 * A `lookup` for http.request that resolves all addresses of the host and refuses the connection (an
 * error with code EGRESS_REFUSED) if the guard refuses any of them. Because the socket connects to exactly
 * the addresses checked here, a DNS answer cannot change between the check and the connect.
 */
export function guardedLookup(guard: EgressGuard, port: number, resolveAll: ResolveAll = systemResolveAll): LookupFunction {
  return (hostname, options, callback) => {
    const all = options.all === true;
    const fail = (err: NodeJS.ErrnoException) => (all ? callback(err, []) : callback(err, ''));
    resolveAll(hostname, options.family, (err, addresses) => {
      if (err) return fail(err);
      if (addresses.length === 0) return fail(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }));
      for (const a of addresses) {
        const reason = check(guard, a.address, hostname, port);
        if (reason !== null) return fail(refusal(reason));
      }
      const first = addresses[0]!;
      return all ? callback(null, addresses) : callback(null, first.address, first.family);
    });
  };
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(3))} s`;

const CONNECT_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection closed or reset before an answer',
  EPIPE: 'connection closed while sending',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'DNS lookup failed temporarily',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};

/** A connection error as text a tenant may see: what happened and the error code, not Node's message. */
function describeError(err: ErrnoError): string {
  const code = err.code ?? 'unknown';
  const known = CONNECT_ERRORS[code];
  if (known !== undefined) return `${known} (${code})`;
  if (/CERT|TLS|SSL/.test(code)) return `TLS handshake failed: ${err.message} (${code})`;
  return `connection failed (${code})`;
}

/** One POST of a webhook body to its endpoint. Never throws: every failure is an outcome. */
export async function deliver(opts: DeliverOptions): Promise<DeliveryAttempt> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const now = opts.now ?? (() => new Date());
  const started = performance.now();
  const outcome = (fields: Partial<DeliveryAttempt>): DeliveryAttempt => ({
    status_code: null,
    error: null,
    retry_after_ms: null,
    ok: false,
    final: false,
    ...fields,
    duration_ms: Math.round(performance.now() - started),
  });

  let url: URL;
  try {
    url = new URL(opts.url);
  } catch {
    return outcome({ error: 'the endpoint URL is not a valid URL', final: true });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return outcome({ error: `only http: and https: endpoints are supported, not ${url.protocol}`, final: true });
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);

  // The lookup is not consulted for an IP literal: check it here.
  if (opts.guard && isIP(host) !== 0) {
    const reason = check(opts.guard, host, host, port);
    if (reason !== null) return outcome({ error: reason, final: true });
  }

  const options: RequestOptions = {
    method: 'POST',
    hostname: host,
    port,
    path: `${url.pathname}${url.search}`,
    headers: {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      ...opts.headers,
      'content-length': String(Buffer.byteLength(opts.body, 'utf8')),
    },
    agent: false,
    ...(url.username !== '' ? { auth: `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` } : {}),
    ...(opts.guard ? { lookup: guardedLookup(opts.guard, port) } : {}),
  };

  return new Promise<DeliveryAttempt>((resolve) => {
    let settled = false;
    let response: IncomingMessage | null = null;
    const settle = (fields: Partial<DeliveryAttempt>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome(fields));
    };
    const answered = (res: IncomingMessage): Partial<DeliveryAttempt> => {
      const status = res.statusCode ?? null;
      const ok = status !== null && status >= 200 && status < 300;
      const redirect = status !== null && status >= 300 && status < 400;
      return {
        status_code: status,
        ok,
        final: status === 410,
        error: redirect ? 'redirects are not followed (3xx answered)' : null,
        retry_after_ms: parseRetryAfter(headerText(res.headers['retry-after']), now()),
      };
    };

    const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(options);
    const timer = setTimeout(() => {
      const fields: Partial<DeliveryAttempt> = response
        ? {
            ...answered(response),
            ok: false,
            final: false,
            error: `no complete answer within ${seconds(timeoutMs)} (the body was still arriving)`,
          }
        : { error: `no answer within ${seconds(timeoutMs)}` };
      settle(fields);
      req.destroy();
    }, timeoutMs);

    req.on('error', (err: ErrnoError) => {
      if (response) return; // an answer was received; a broken body does not undo it
      if (err.code === EGRESS_REFUSED) settle({ error: err.message, final: true });
      else settle({ error: describeError(err) });
    });
    req.on('response', (res) => {
      response = res;
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received >= MAX_RESPONSE_BODY_BYTES) {
          settle(answered(res));
          res.destroy();
        }
      });
      res.on('error', () => settle(answered(res)));
      res.on('close', () => settle(answered(res)));
    });
    req.end(opts.body);
  });
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
