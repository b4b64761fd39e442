/**
 * Nesting limits of JSON on the wire, shared by the request schemas (a store value, a host call's body)
 * and the server's body parser (server/http/body.ts, server/json-text.ts).
 */

/** Deeper JSON is refused at the edges: re-serialising it (JSON.stringify, every db.json write) would overflow the stack. */
export const JSON_MAX_DEPTH = 128;

/** Deepest a value handed over inside a body may nest: a body's 128 levels minus its envelope. */
export const VALUE_MAX_DEPTH = JSON_MAX_DEPTH - 1;

/**
 * Deepest nesting of arrays/objects in a parsed value (a scalar is 0, `[]` is 1); iterative, so a value
 * far too deep to re-serialise is measured without overflowing the stack. Stops counting past `stopAt`.
 */
export function jsonValueDepth(value: unknown, stopAt = Number.POSITIVE_INFINITY): number {
  let max = 0;
  const todo: [unknown, number][] = [[value, 0]];
  while (todo.length) {
    const [v, d] = todo.pop()!;
    if (v === null || typeof v !== 'object') continue;
    const depth = d + 1;
    if (depth > max) max = depth;
    if (max > stopAt) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') todo.push([child, depth]);
  }
  return max;
}
