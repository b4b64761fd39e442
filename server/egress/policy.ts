/**
 * Egress policy: may an outbound HTTP target (a webhook callback URL; later the snippet egress proxy) be
 * reached under an egress profile? Production refuses targets that are not public internet addresses
 * (private, loopback, link-local, cloud metadata …). The emulator mirrors that under the `production`
 * profile; under `local` (the default) it allows them and reports a parity warning instead.
 *
 * Two moments are checked: submit time ({@link checkTarget}, which resolves the name once and reports), and
 * connect time ({@link refuseAddress}, applied to every resolved address by the delivering lookup in
 * server/webhooks/deliver.ts), which is what actually stops a connection — a name may resolve differently by then (DNS rebinding).
 *
 * Pure: Node built-ins and zod only; no module-level state.
 */
import { isIP, isIPv4, isIPv6 } from 'node:net';
import { lookup as dnsLookup } from 'node:dns/promises';
import { z } from 'zod';

export type EgressProfile = 'local' | 'production';

export interface EgressRules {
  profile: EgressProfile;
  /** "host:port" exceptions, e.g. "127.0.0.1:9000", "[::1]:8080", "hooks.internal:443"; host compared case-insensitively. */
  allow: readonly string[];
}

export interface TargetVerdict {
  /** Refused under the profile (production) — with the reason a user can act on. */
  refused: string | null;
  /** Allowed here but production would refuse it (local profile) — the parity warning text. */
  warning: string | null;
  /** The resolved addresses checked. */
  addresses: string[];
}

/** Resolves a host name to all of its addresses, in resolver order. */
export type LookupAll = (host: string) => Promise<{ address: string; family: number }[]>;

export class TargetError extends Error {
  constructor(
    readonly code: 'invalid_url' | 'refused',
    message: string,
  ) {
    super(message);
    this.name = 'TargetError';
  }
}

// ---------------------------------------------------------------------------------------------------------
// Address classification

type Bytes = readonly number[];

/** [first address as 4 bytes, prefix length, label] — checked in order, so specific entries come first. */
const IPV4_RANGES: readonly (readonly [Bytes, number, string])[] = [
  [[0, 0, 0, 0], 32, 'unspecified'],
  [[0, 0, 0, 0], 8, 'this network'],
  [[10, 0, 0, 0], 8, 'private'],
  [[100, 100, 100, 200], 32, 'metadata'], // Alibaba Cloud
  [[100, 64, 0, 0], 10, 'carrier-grade NAT'],
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 169, 254], 32, 'metadata'], // AWS, GCP, Azure, OCI …
  [[169, 254, 170, 2], 32, 'metadata'], // AWS ECS task metadata
  [[169, 254, 0, 0], 16, 'link-local'],
  [[172, 16, 0, 0], 12, 'private'],
  [[192, 0, 0, 192], 32, 'metadata'], // Oracle Cloud (legacy)
  [[192, 0, 0, 0], 24, 'reserved'], // IETF protocol assignments
  [[192, 0, 2, 0], 24, 'documentation'],
  [[192, 88, 99, 0], 24, 'reserved'], // deprecated 6to4 relay anycast
  [[192, 168, 0, 0], 16, 'private'],
  [[198, 18, 0, 0], 15, 'benchmarking'],
  [[198, 51, 100, 0], 24, 'documentation'],
  [[203, 0, 113, 0], 24, 'documentation'],
  [[224, 0, 0, 0], 4, 'multicast'],
  [[255, 255, 255, 255], 32, 'broadcast'],
  [[240, 0, 0, 0], 4, 'reserved'],
];

const u32 = (b: Bytes, at = 0) => (((b[at] ?? 0) << 24) | ((b[at + 1] ?? 0) << 16) | ((b[at + 2] ?? 0) << 8) | (b[at + 3] ?? 0)) >>> 0;

function classify4(b: Bytes, at = 0): string | null {
  const ip = u32(b, at);
  for (const [base, len, label] of IPV4_RANGES) {
    const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
    if ((ip & mask) >>> 0 === (u32(base) & mask) >>> 0) return label;
  }
  return null;
}

/** Does `b` start with the `len`-bit prefix of `prefix` (given as 16-bit groups)? */
function inPrefix6(b: Bytes, prefix: readonly number[], len: number): boolean {
  for (let bit = 0; bit < len; bit += 8) {
    const group = prefix[bit >> 4] ?? 0;
    const byte = bit % 16 === 0 ? group >> 8 : group & 0xff;
    const take = Math.min(8, len - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    if (((b[bit >> 3] ?? 0) & mask) !== (byte & mask)) return false;
  }
  return true;
}

function embedded(b: Bytes, at: number, via: string): string | null {
  const inner = classify4(b, at);
  return inner === null ? null : `${inner} (${via})`;
}

function classify6(b: Bytes): string | null {
  const zeroUpTo = (n: number) => b.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(16)) return 'unspecified';
  if (zeroUpTo(15) && b[15] === 1) return 'loopback';
  if (zeroUpTo(10) && b[10] === 0xff && b[11] === 0xff) return embedded(b, 12, 'IPv4-mapped');
  if (zeroUpTo(12)) return embedded(b, 12, 'IPv4-compatible');
  if (inPrefix6(b, [0, 0, 0, 0, 0xffff, 0], 96)) return embedded(b, 12, 'IPv4-translated'); // ::ffff:0:0:0/96
  if (inPrefix6(b, [0x64, 0xff9b, 0, 0, 0, 0], 96)) return embedded(b, 12, 'NAT64');
  if (inPrefix6(b, [0x64, 0xff9b, 1], 48)) return 'private'; // local-use NAT64: translates into private space
  if (inPrefix6(b, [0x100, 0, 0, 0], 64)) return 'reserved'; // discard-only
  if (inPrefix6(b, [0x2001, 0xdb8], 32)) return 'documentation';
  if (inPrefix6(b, [0x2001, 0], 32)) return 'reserved'; // Teredo
  if (inPrefix6(b, [0x2001, 2, 0], 48)) return 'benchmarking';
  if (inPrefix6(b, [0x2002], 16)) return embedded(b, 2, '6to4');
  if (inPrefix6(b, [0x3fff], 20)) return 'documentation';
  if (inPrefix6(b, [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128)) return 'metadata'; // AWS IMDS over IPv6
  if (inPrefix6(b, [0xfc00], 7)) return 'unique local';
  if (inPrefix6(b, [0xfe80], 10)) return 'link-local';
  if (inPrefix6(b, [0xfec0], 10)) return 'reserved'; // deprecated site-local
  if (inPrefix6(b, [0xff00], 8)) return 'multicast';
  if (!inPrefix6(b, [0x2000], 3)) return 'reserved'; // outside global unicast: unassigned by IANA
  return null;
}

/** "[::1]" → "::1", "fe80::1%eth0" → "fe80::1". */
function bareAddress(ip: string): string {
  const unbracketed = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  const zone = unbracketed.indexOf('%');
  return zone >= 0 && unbracketed.includes(':') ? unbracketed.slice(0, zone) : unbracketed;
}

function parse4(text: string): number[] | null {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return null;
  return parts.map(Number);
}

/** IPv6 text (no brackets, no zone) → 16 bytes, or null. Handles `::`, dotted IPv4 tails and any case. */
function parseIPv6(text: string): number[] | null {
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const groupsOf = (s: string): number[] | null => {
    if (s === '') return [];
    const out: number[] = [];
    const parts = s.split(':');
    for (const [i, p] of parts.entries()) {
      if (i === parts.length - 1 && p.includes('.')) {
        const v4 = parse4(p);
        if (!v4) return null;
        out.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
      } else if (/^[0-9a-f]{1,4}$/i.test(p)) {
        out.push(parseInt(p, 16));
      } else {
        return null;
      }
    }
    return out;
  };
  const head = groupsOf(halves[0] ?? '');
  const tail = halves.length === 2 ? groupsOf(halves[1] ?? '') : [];
  if (!head || !tail) return null;
  // A dotted tail is only valid at the very end.
  if (halves.length === 2 && (halves[0] ?? '').includes('.')) return null;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const groups = [...head, ...Array<number>(missing).fill(0), ...tail];
  return groups.flatMap((g) => [g >> 8, g & 0xff]);
}

/**
 * Why an address is not a public internet address, or null when it is public. e.g. 'loopback', 'private',
 * 'link-local', 'metadata', 'unspecified', 'multicast', 'reserved', 'carrier-grade NAT', 'unique local',
 * 'benchmarking', 'documentation', 'broadcast', 'this network'; embedded IPv4 forms say how they embed it,
 * e.g. 'loopback (IPv4-mapped)', 'metadata (NAT64)'. 'invalid' for text that is not an IP address.
 * Brackets ("[::1]") and IPv6 zone ids ("fe80::1%eth0") are accepted.
 */
export function classifyAddress(ip: string): string | null {
  const bare = bareAddress(ip);
  switch (isIP(bare)) {
    case 4: {
      const b = parse4(bare);
      return b ? classify4(b) : 'invalid';
    }
    case 6: {
      const b = parseIPv6(bare);
      return b ? classify6(b) : 'invalid';
    }
    default:
      return 'invalid';
  }
}

// ---------------------------------------------------------------------------------------------------------
// The allow list

const HOSTNAME = /^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i;

interface HostPort {
  host: string;
  port: number;
}

/** "HOST:PORT" → parts, or a message saying what is wrong. */
function parseAllowEntry(entry: string): HostPort | string {
  const m = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/.exec(entry);
  if (!m) return 'must be HOST:PORT, e.g. 127.0.0.1:9000, [::1]:8080 or hooks.internal:443 (IPv6 addresses in brackets)';
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return `port ${m[3]} is not from 1 to 65535`;
  if (m[1] !== undefined) {
    return isIPv6(m[1]) ? { host: m[1], port } : `'[${m[1]}]' is not an IPv6 address`;
  }
  const host = m[2] ?? '';
  if (isIPv4(host) || HOSTNAME.test(host)) return { host, port };
  return `'${host}' is not an IPv4 address or host name`;
}

/** One `--egress-allow` entry: "HOST:PORT" with a port from 1 to 65535 and an IPv6 host in brackets. */
export const EgressAllowEntry: z.ZodType<string> = z.string().superRefine((entry, ctx) => {
  const parsed = parseAllowEntry(entry);
  if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: `egress allow entry '${entry}': ${parsed}` });
});

/** A host in the form used to compare it: lower case, no trailing dot, IPv6 as its full expanded form. */
function canonicalHost(host: string): string {
  const bare = bareAddress(host).toLowerCase().replace(/\.$/, '');
  if (isIPv6(bare)) {
    const b = parseIPv6(bare);
    if (b) return Array.from({ length: 8 }, (_, i) => (((b[2 * i] ?? 0) << 8) | (b[2 * i + 1] ?? 0)).toString(16)).join(':');
  }
  return bare;
}

/** "host:port" as the user would write it in `--egress-allow` (IPv6 in brackets). */
function hostPort(host: string, port: number): string {
  const bare = bareAddress(host);
  return isIPv6(bare) ? `[${bare}]:${port}` : `${host}:${port}`;
}

/** The allow entry that exempts host:port, if any. Malformed entries never match (validate them at the edge). */
function allowedBy(rules: EgressRules, host: string, port: number): string | null {
  const want = canonicalHost(host);
  for (const entry of rules.allow) {
    const parsed = parseAllowEntry(entry);
    if (typeof parsed !== 'string' && parsed.port === port && canonicalHost(parsed.host) === want) return entry;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------------
// Verdicts

interface Finding {
  /** The address (or, for localhost names, the name) that is not public. */
  subject: string;
  label: string;
}

const refusedText = (findings: readonly Finding[], suggest: string, what = 'callback targets') =>
  `production refuses ${what} that resolve to ${findings.map((f) => `${f.subject} (${f.label})`).join(', ')}; ` +
  `allow it with --egress-allow ${suggest}`;

const whyText = (findings: readonly Finding[]) =>
  `production would refuse this target: ${findings.map((f) => `${f.subject} is ${f.label}`).join(', ')}`;

function verdict(
  findings: readonly Finding[],
  exemptedBy: string | null,
  suggest: string,
  rules: EgressRules,
  addresses: string[],
): TargetVerdict {
  if (findings.length === 0) return { refused: null, warning: null, addresses };
  if (rules.profile === 'local') {
    return { refused: null, warning: `${whyText(findings)} (the emulator allows it under the local egress profile)`, addresses };
  }
  if (exemptedBy !== null)
    return { refused: null, warning: `${whyText(findings)}; allowed here by --egress-allow ${exemptedBy}`, addresses };
  return { refused: refusedText(findings, suggest), warning: null, addresses };
}

const isLocalhostName = (host: string) => {
  const h = host.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
};

const defaultLookupAll: LookupAll = (host) => dnsLookup(host, { all: true, verbatim: true });

/**
 * Check a URL at submit time. It must be http: or https: (else TargetError 'invalid_url'). The host name is
 * resolved with `lookup` (all addresses, verbatim); if ANY address is not public the target is not public.
 * IP-literal hosts (including bracketed IPv6) are not resolved. 'localhost' and '*.localhost' count as
 * loopback even when resolution fails.
 *
 * When resolution fails (ENOTFOUND, timeouts …) the verdict is allowed with no warning and no addresses under
 * both profiles: a name that does not resolve now may resolve later, and the connect-time check
 * (`refuseAddress` on every resolved address) refuses whatever it resolves to then.
 *
 * Under production an allow entry matching either the URL's host:port or every non-public address:port
 * exempts the target (refused null, warning saying so); under local the warning is given as usual.
 */
export async function checkTarget(url: string, rules: EgressRules, lookup: LookupAll = defaultLookupAll): Promise<TargetVerdict> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TargetError('invalid_url', `'${url}' is not a valid URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new TargetError('invalid_url', `callback URLs must be http: or https:, not ${parsed.protocol}`);
  }
  const host = parsed.hostname; // lower case; IPv6 in brackets; numeric IPv4 forms normalised by URL
  const port = parsed.port === '' ? (parsed.protocol === 'https:' ? 443 : 80) : Number(parsed.port);
  const bare = bareAddress(host);

  let addresses: string[];
  if (isIP(bare) !== 0) {
    addresses = [bare];
  } else {
    try {
      addresses = (await lookup(host)).map((a) => a.address);
    } catch {
      addresses = [];
    }
  }

  const findings: Finding[] = [];
  for (const address of addresses) {
    const label = classifyAddress(address);
    if (label !== null) findings.push({ subject: address, label });
  }
  if (findings.length === 0 && isLocalhostName(host)) findings.push({ subject: host, label: 'loopback' });

  const byAddresses = findings.map((f) => allowedBy(rules, f.subject, port));
  const exemptedBy =
    allowedBy(rules, host, port) ??
    (findings.length > 0 && byAddresses.every((e) => e !== null) ? [...new Set(byAddresses)].join(', ') : null);
  return verdict(findings, exemptedBy, hostPort(host, port), rules, addresses);
}

/**
 * For connect time when the URL host is an IP literal (http.request does not call `lookup` for literals):
 * the refusal reason, or null. Under 'local' it never refuses. An allow entry for host:port or ip:port exempts.
 * `what` names what is refused in the message ('callback targets' unless said).
 */
export function refuseAddress(ip: string, host: string, port: number, rules: EgressRules, what?: string): string | null {
  if (rules.profile === 'local') return null;
  const label = classifyAddress(ip);
  if (label === null) return null;
  if (allowedBy(rules, host, port) !== null || allowedBy(rules, ip, port) !== null) return null;
  return refusedText([{ subject: bareAddress(ip), label }], hostPort(host, port), what);
}
