import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * Random bytes drawn 4 KiB at a time from the CSPRNG and used once each, as Node's own randomUUID does with its
 * entropy cache: one randomBytes call per ~100 ids instead of one per id (three ids a request; the per-call cost was
 * ~5% of the core's CPU on the warm invoke path, bench/results/profile-warm-path.md). The only state of this module.
 */
const ENTROPY_BYTES = 4096;
const entropy = { buf: Buffer.alloc(0), at: 0 };
function randomByte(): number {
  if (entropy.at >= entropy.buf.length) {
    entropy.buf = randomBytes(ENTROPY_BYTES);
    entropy.at = 0;
  }
  return entropy.buf[entropy.at++]!;
}

/** Uniform random base62 string (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += BASE62[byte % 62];
  }
  return out;
}

export const newId = (prefix: string) => `${prefix}_${randomBase62(20)}`;
export const newApiKey = () => `svc_${randomBase62(40)}`;
export const newAdminToken = () => `emu_${randomBase62(40)}`;
export const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
export const newRequestId = () => `req_${randomBase62(20)}`;

export const sha256Hex = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');

/** Constant-time comparison of two hex digests of equal length. */
export function digestEquals(aHex: string, bHex: string): boolean {
  const a = Buffer.from(aHex, 'hex');
  const b = Buffer.from(bHex, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Constant-time comparison of two secrets of any length (compares their digests). */
export const secretEquals = (a: string, b: string) => digestEquals(sha256Hex(a), sha256Hex(b));
