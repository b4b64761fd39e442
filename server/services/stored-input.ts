/**
 * The input an invocation keeps for replay (GUI "Run again" / "Edit and run", `svc-emu invoke --replay`):
 * the handler's input as it received it, with every tenant secret's value replaced by `"[secret NAME]"`,
 * and only up to `STORED_INPUT_MAX_BYTES` of JSON (above that nothing is kept and the record says so).
 * It lives in a blob named by the record (`stored_input_blob`), never in db.json.
 */

/** The largest input kept, as JSON text (UTF-8 bytes). */
export const STORED_INPUT_MAX_BYTES = 64 * 1024;

export type StoredInput = { text: string } | { truncated: true };

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Replaces each secret's value wherever it appears (whole or inside a string, in keys too; a number
 * equal to one) by `[secret NAME]`. Longer values first, in one pass, so a value inside another's
 * replacement text is never matched again.
 */
export function redactSecrets(value: unknown, secrets: Record<string, string>): unknown {
  const byValue = new Map<string, string>();
  for (const [name, v] of Object.entries(secrets)) if (v !== '' && !byValue.has(v)) byValue.set(v, name);
  if (byValue.size === 0) return value;
  const re = new RegExp(
    [...byValue.keys()]
      .sort((a, b) => b.length - a.length)
      .map(escape)
      .join('|'),
    'g',
  );
  const text = (s: string) => s.replace(re, (m) => `[secret ${byValue.get(m)!}]`);
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return text(v);
    if (typeof v === 'number') return byValue.has(String(v)) ? `[secret ${byValue.get(String(v))!}]` : v;
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[text(k)] = walk(x);
      return out;
    }
    return v;
  };
  return walk(value);
}

/** What to keep of an input: its redacted JSON, or that it was too large. */
export function storedInputOf(
  input: Record<string, unknown>,
  secrets: Record<string, string>,
  maxBytes = STORED_INPUT_MAX_BYTES,
): StoredInput {
  const text = JSON.stringify(redactSecrets(input, secrets));
  return Buffer.byteLength(text) > maxBytes ? { truncated: true } : { text };
}
