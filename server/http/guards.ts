import type { Middleware } from 'koa';
import { isIP } from 'node:net';
import { ApiError } from '../errors';

/**
 * Defences of a server on the user's own machine:
 * - DNS rebinding: a page on evil.example whose name resolves to 127.0.0.1 sends `Host: evil.example`.
 *   Only loopback names, the bound host, IP literals (when bound to all interfaces: a rebinding attack
 *   needs a name) and names the user allowed are accepted → otherwise 421.
 * - Cross-origin pages: no CORS headers are ever sent, and a request carrying a foreign `Origin` (or
 *   `Sec-Fetch-Site: cross-site`) is refused → 403, so even "simple" requests cannot cause side effects.
 */
export interface HostPolicy {
  boundHost: string;
  allowedHosts: string[];
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
const WILDCARD = new Set(['0.0.0.0', '::', '[::]']);

export function hostnameOf(hostHeader: string): string | null {
  try {
    return new URL(`http://${hostHeader}`).hostname.toLowerCase();
  } catch {
    return null;
  }
}

export function isAllowedHostname(hostname: string, policy: HostPolicy): boolean {
  const bare = hostname.replace(/^\[|\]$/g, '');
  if (LOOPBACK_NAMES.has(hostname) || LOOPBACK_NAMES.has(bare) || hostname.endsWith('.localhost')) return true;
  if (hostname === policy.boundHost.toLowerCase() || bare === policy.boundHost.toLowerCase()) return true;
  if (policy.allowedHosts.some((h) => h.toLowerCase() === hostname)) return true;
  return WILDCARD.has(policy.boundHost) && isIP(bare) !== 0;
}

export function hostAndOriginGuard(policy: HostPolicy): Middleware {
  return async (ctx, next) => {
    const host = ctx.get('host');
    const hostname = host ? hostnameOf(host) : null;
    if (!hostname || !isAllowedHostname(hostname, policy)) {
      throw new ApiError(
        421,
        'misdirected_request',
        'Misdirected request',
        `Host '${host}' is not served here; use http://127.0.0.1 or http://localhost (or start with --allow-host)`,
      );
    }
    const origin = ctx.get('origin');
    if (origin) {
      let same: boolean;
      try {
        const o = new URL(origin);
        same = (o.protocol === 'http:' || o.protocol === 'https:') && o.host.toLowerCase() === host.toLowerCase();
      } catch {
        same = false;
      }
      if (!same) {
        throw new ApiError(403, 'forbidden_origin', 'Forbidden origin', `requests from origin '${origin}' are not accepted`);
      }
    } else if (ctx.get('sec-fetch-site') === 'cross-site') {
      throw new ApiError(403, 'forbidden_origin', 'Forbidden origin', 'cross-site requests are not accepted');
    }
    await next();
  };
}
