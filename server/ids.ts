import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniform random base62 string (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
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
