import type { Redactor } from './types';

/**
 * Credentials out of everything a cassette or a run's `egress_blob` keeps (docs/cassettes.md, "Redaction").
 * Pure: no I/O. Works on bytes, so a body that is not UTF-8 is redacted too, and a streamed body's chunk
 * boundaries can be moved with the replacements (server/egress/cassette/tape.ts).
 */

/** Header names whose value is always replaced by `[redacted]` (besides the ones the host added). */
export const CREDENTIAL_HEADERS: readonly string[] = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'api-key',
];
export const REDACTED_VALUE = '[redacted]';
/** Shorter values are not looked for: they would match ordinary text. */
export const MIN_SECRET_LENGTH = 4;
/** A base64 fragment shorter than this is not looked for (it would hit unrelated base64 data). */
const MIN_BASE64_FRAGMENT = 8;

export const secretMarker = (name: string): string => `[secret ${name}]`;

/** In a URL the markers are percent-encoded (`%5Bsecret%20NAME%5D`), so the URL stays a valid URI. */
export const urlMarkers = (url: string): string =>
  url.replace(/\[secret ([^\]\s]+)\]/g, (_m, name: string) => encodeURIComponent(secretMarker(name)));

/** One replacement in a byte string: `[start, end)` of the original becomes `marker`. */
export interface Span {
  start: number;
  end: number;
  marker: string;
}

/** The Redactor this module makes: also redacts bytes and says where (for chunk boundaries). */
export interface ByteRedactor extends Redactor {
  /** Replacements in `buf`, sorted by start, never overlapping. */
  spans(buf: Buffer): Span[];
  bytes(buf: Buffer): { bytes: Buffer; spans: Span[]; replaced: string[] };
}

interface Form {
  needle: Buffer;
  marker: string;
}

/**
 * Every form a secret value is looked for in: the value, its URL encodings (`%20` and `+` for spaces), its
 * JSON string escape, and its base64 (standard and URL-safe) at each of the three alignments it can have
 * inside a longer base64 string (`Basic dXNlcjpwYXNz` holds `user:pass` at an offset): the characters that
 * depend only on the value are looked for, so the secret is gone wherever it was encoded.
 */
function formsOf(name: string, value: string): Form[] {
  const marker = secretMarker(name);
  const texts = new Set<string>([value]);
  const uri = encodeURIComponent(value);
  texts.add(uri);
  texts.add(uri.replace(/%20/g, '+'));
  texts.add(new URLSearchParams({ v: value }).toString().slice(2)); // a form's encoding (`'` → %27, space → +)
  texts.add(JSON.stringify(value).slice(1, -1));
  const raw = Buffer.from(value, 'utf8');
  for (let k = 0; k < 3; k++) {
    const b64 = Buffer.concat([Buffer.alloc(k), raw]).toString('base64');
    const skip = k === 0 ? 0 : k + 1;
    const whole = Math.floor((k + raw.length) / 3) * 4;
    const fragment = b64.slice(skip, whole);
    if (fragment.length >= MIN_BASE64_FRAGMENT) {
      texts.add(fragment);
      texts.add(fragment.replace(/\+/g, '-').replace(/\//g, '_'));
    }
    // The value alone, padded: what `btoa(value)` gives.
    if (k === 0) texts.add(b64);
  }
  return [...texts].filter((t) => t.length >= MIN_SECRET_LENGTH).map((t) => ({ needle: Buffer.from(t, 'utf8'), marker }));
}

/**
 * A Redactor for one tenant's secrets (`{NAME: value}`). Values shorter than 4 characters are left alone.
 * Where two values overlap, the longer one wins.
 */
export function createRedactor(secrets: Record<string, string>): ByteRedactor {
  const forms: Form[] = [];
  for (const [name, value] of Object.entries(secrets)) {
    if (typeof value !== 'string' || value.length < MIN_SECRET_LENGTH) continue;
    forms.push(...formsOf(name, value));
  }
  // Longest first: a value that contains another is replaced as a whole.
  forms.sort((a, b) => b.needle.length - a.needle.length);

  const spans = (buf: Buffer): Span[] => {
    const taken: Span[] = [];
    if (forms.length === 0 || buf.length === 0) return taken;
    for (const form of forms) {
      for (let at = buf.indexOf(form.needle); at !== -1; at = buf.indexOf(form.needle, at + 1)) {
        const end = at + form.needle.length;
        // Overlapping an accepted (longer or earlier) span: that occurrence is already broken up.
        if (taken.some((s) => at < s.end && end > s.start)) continue;
        taken.push({ start: at, end, marker: form.marker });
        at = end - 1;
      }
    }
    return taken.sort((a, b) => a.start - b.start);
  };

  const bytes = (buf: Buffer): { bytes: Buffer; spans: Span[]; replaced: string[] } => {
    const found = spans(buf);
    if (found.length === 0) return { bytes: buf, spans: found, replaced: [] };
    const parts: Buffer[] = [];
    let at = 0;
    for (const s of found) {
      parts.push(buf.subarray(at, s.start), Buffer.from(s.marker, 'utf8'));
      at = s.end;
    }
    parts.push(buf.subarray(at));
    return { bytes: Buffer.concat(parts), spans: found, replaced: unique(found.map((s) => s.marker)) };
  };

  const text = (s: string): { text: string; replaced: string[] } => {
    if (forms.length === 0 || s.length === 0) return { text: s, replaced: [] };
    const out = bytes(Buffer.from(s, 'utf8'));
    return out.spans.length === 0 ? { text: s, replaced: [] } : { text: out.bytes.toString('utf8'), replaced: out.replaced };
  };

  return {
    spans,
    bytes,
    text,
    headers(h, hostAdded) {
      const always = new Set([...CREDENTIAL_HEADERS, ...hostAdded.map((n) => n.toLowerCase())]);
      const replaced: string[] = [];
      const headers = h.map(([name, value]): [string, string] => {
        if (always.has(name.toLowerCase())) {
          replaced.push(name.toLowerCase());
          return [name, REDACTED_VALUE];
        }
        const r = text(value);
        replaced.push(...r.replaced);
        return [name, r.text];
      });
      return { headers, replaced: unique(replaced) };
    },
  };
}

export const unique = <T>(xs: readonly T[]): T[] => [...new Set(xs)];

/**
 * Where the byte offsets of `spans`' original land after replacement: an offset inside a replaced range
 * moves to the end of its marker (a secret is never split across two chunks).
 */
export function mapOffset(offset: number, spans: readonly Span[]): number {
  let shift = 0;
  for (const s of spans) {
    if (offset <= s.start) break;
    const markerLen = Buffer.byteLength(s.marker, 'utf8');
    if (offset < s.end) return s.start + shift + markerLen;
    shift += markerLen - (s.end - s.start);
  }
  return offset + shift;
}
