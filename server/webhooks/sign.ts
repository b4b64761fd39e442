import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The Standard Webhooks signature scheme (https://www.standardwebhooks.com/, the same as Svix's):
 * `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, where the key is the
 * base64-decoded part of a `whsec_…` secret. Several space-separated signatures allow key rotation.
 */

const SECRET_PREFIX = 'whsec_';

/** The HMAC key of a secret: the base64 after `whsec_` (a secret without the prefix is taken whole, like Svix does). */
function keyOf(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  const key = Buffer.from(encoded, 'base64');
  if (key.length === 0) throw new Error('a webhook secret must hold base64 key bytes after "whsec_"');
  return key;
}

export function signatureOf(secret: string, msgId: string, timestamp: number, body: string): string {
  if (!Number.isSafeInteger(timestamp)) throw new RangeError('the timestamp must be whole unix seconds');
  const mac = createHmac('sha256', keyOf(secret)).update(`${msgId}.${timestamp}.${body}`, 'utf8').digest('base64');
  return `v1,${mac}`;
}

export type SignatureHeaders = Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string>;

/** The three headers of a delivery; one signature per secret, current secret first, then the previous one. */
export function signHeaders(secrets: readonly string[], msgId: string, timestamp: number, body: string): SignatureHeaders {
  if (secrets.length === 0) throw new Error('signing a webhook needs at least one secret');
  return {
    'webhook-id': msgId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((s) => signatureOf(s, msgId, timestamp, body)).join(' '),
  };
}

export interface VerifyResult {
  verified: boolean;
  reason: string | null;
  /** Index in `secrets` of the secret whose signature matched. */
  matched: number | null;
  timestamp_ok: boolean;
}

type Headers = Record<string, string | string[] | undefined>;

/** A header by name, case-insensitively, falling back to its `svix-` alias. Repeated headers are joined with spaces. */
function header(headers: Headers, name: 'id' | 'timestamp' | 'signature'): string | null {
  const wanted = [`webhook-${name}`, `svix-${name}`];
  for (const w of wanted) {
    for (const [key, value] of Object.entries(headers)) {
      if (key.toLowerCase() !== w || value === undefined) continue;
      const text = (Array.isArray(value) ? value.join(' ') : value).trim();
      if (text !== '') return text;
    }
  }
  return null;
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

const NO_MATCH = 'no signature matches the tenant’s secret (the body or headers were changed, or it was signed with another secret)';

export function verify(
  secrets: readonly string[],
  headers: Headers,
  body: string,
  nowSeconds: number,
  toleranceSeconds = 300,
): VerifyResult {
  const fail = (reason: string): VerifyResult => ({ verified: false, reason, matched: null, timestamp_ok: false });
  const id = header(headers, 'id');
  const timestampText = header(headers, 'timestamp');
  const signatureText = header(headers, 'signature');
  if (id === null) return fail('missing webhook-id header');
  if (timestampText === null) return fail('missing webhook-timestamp header');
  if (signatureText === null) return fail('missing webhook-signature header');
  if (!/^\d{1,15}$/.test(timestampText))
    return fail(`webhook-timestamp header is not unix seconds: ${JSON.stringify(timestampText.slice(0, 40))}`);
  const timestamp = Number(timestampText);

  // Only v1 (symmetric) signatures are ours; other versions (v1a = ed25519) are skipped, as the spec says.
  const candidates = signatureText.split(/\s+/).filter((s) => s.startsWith('v1,'));
  let matched: number | null = null;
  for (let i = 0; i < secrets.length && matched === null; i++) {
    const expected = signatureOf(secrets[i]!, id, timestamp, body);
    if (candidates.some((c) => sameText(c, expected))) matched = i;
  }

  const skew = Math.round(nowSeconds - timestamp);
  const timestampOk = Math.abs(skew) <= toleranceSeconds;
  const reasons: string[] = [];
  if (matched === null) reasons.push(candidates.length === 0 ? 'webhook-signature header holds no v1 signature' : NO_MATCH);
  if (!timestampOk) reasons.push(`timestamp is ${Math.abs(skew)} s away from now (tolerance ${toleranceSeconds} s)`);
  return {
    verified: reasons.length === 0,
    reason: reasons.length === 0 ? null : reasons.join('; '),
    matched,
    timestamp_ok: timestampOk,
  };
}
