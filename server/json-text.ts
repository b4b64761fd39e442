import { JSON_MAX_DEPTH } from '../contract/schemas/json';

/**
 * JSON text checks that hold for any input up to the body limit: every function here is a loop over the
 * text with an explicit stack, never a recursion on the input's nesting, so 6 MiB of `[` costs a linear
 * scan and cannot overflow the call stack (a recursive describer did: every JSON route answered 500).
 * Pure: no I/O, no module state.
 */

/** The most JSON the core takes in one piece: a request body, and what a run hands back (an output, a chunk). */
export const BODY_LIMIT_BYTES = 6 * 1024 * 1024;

/** Deeper JSON is refused at the edges (contract/schemas/json.ts). */
export { JSON_MAX_DEPTH };

/** Deepest nesting of arrays/objects in JSON text (strings skipped); a linear scan, no recursion. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) max = Math.max(max, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}

/** "unexpected '}' at line 3, column 14" for text that does not parse as JSON. */
export function describeJsonError(text: string, err: unknown): string {
  const offset = jsonErrorOffset(text);
  if (offset === null) return err instanceof Error ? err.message : String(err);
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  const column = offset - lineStart + 1;
  const what = offset >= text.length ? 'unexpected end of input' : `unexpected ${JSON.stringify(text[offset])}`;
  return `${what} at line ${line}, column ${column}`;
}

const NUMBER = /-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
const HEX = /^[0-9a-fA-F]$/;

/**
 * Offset of the first syntax error in `text`, or null if it is valid JSON (RFC 8259). Engines differ in
 * whether their JSON.parse messages say where (Node 20 often does not), so we find it ourselves: a state
 * machine whose only stack is an array of the closers still owed.
 */
export function jsonErrorOffset(text: string): number | null {
  const n = text.length;
  let i = 0;
  const ws = () => {
    for (let c = text.charCodeAt(i); c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d; c = text.charCodeAt(++i));
  };
  // Each reader advances `i` past what it read and returns true, or leaves `i` at the offending character.
  const string = (): boolean => {
    i++; // opening quote
    for (;;) {
      if (i >= n) return false;
      const c = text.charCodeAt(i);
      if (c === 0x22) return (i++, true);
      if (c < 0x20) return false;
      if (c !== 0x5c) {
        i++;
        continue;
      }
      const esc = text[++i];
      if (esc === 'u') {
        for (let k = 1; k <= 4; k++) if (!HEX.test(text[i + k] ?? '')) return ((i += k), false);
        i += 5;
      } else if (esc !== undefined && '"\\/bfnrt'.includes(esc)) i++;
      else return false;
    }
  };
  const literal = (word: string): boolean => {
    for (const ch of word) if (text[i++] !== ch) return (i--, false);
    return true;
  };
  const number = (): boolean => {
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (!m || m[0] === '' || m[0] === '-') return false;
    i += m[0].length;
    return true;
  };
  /** An object member's `"key":`, with the whitespace around it. */
  const key = (): boolean => {
    ws();
    if (text[i] !== '"' || !string()) return false;
    ws();
    if (text[i] !== ':') return false;
    i++;
    return true;
  };

  const closers: number[] = []; // 0x5d ']' or 0x7d '}', innermost last
  const at = () => Math.min(i, n);
  for (;;) {
    // A value is expected here.
    ws();
    const ch = text[i];
    if (ch === '{' || ch === '[') {
      i++;
      ws();
      const close = ch === '{' ? 0x7d : 0x5d;
      if (text.charCodeAt(i) === close) i++;
      else {
        closers.push(close);
        if (close === 0x7d && !key()) return at();
        continue;
      }
    } else if (ch === '"') {
      if (!string()) return at();
    } else if (ch === 't' || ch === 'f' || ch === 'n') {
      if (!literal(ch === 't' ? 'true' : ch === 'f' ? 'false' : 'null')) return at();
    } else if (ch === '-' || (ch !== undefined && ch >= '0' && ch <= '9')) {
      if (!number()) return at();
    } else return at();
    // A value ended: close what it ends, until a comma asks for the next value.
    for (;;) {
      ws();
      const close = closers.at(-1);
      if (close === undefined) return i < n ? i : null;
      const c = text.charCodeAt(i);
      if (c === 0x2c) {
        i++;
        if (close === 0x7d && !key()) return at();
        break;
      }
      if (c !== close) return at();
      i++;
      closers.pop();
    }
  }
}
