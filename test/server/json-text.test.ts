/**
 * server/json-text.ts: the JSON checks on request bodies are loops, never recursions on the input's nesting
 * (issue 14: 20 KB of `[` overflowed the stack of the recursive describer). The iterative checker agrees
 * with JSON.parse on what is JSON, and survives any nesting up to the body limit.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { describeJsonError, jsonDepth, jsonErrorOffset } from '../../server/json-text';
import { BODY_LIMIT_BYTES } from '../../server/http/body';

const parses = (text: string) => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

/** JSON text, and JSON text with one character deleted, inserted or replaced (mostly invalid, sometimes not). */
const jsonish = fc.oneof(
  fc.json({ maxDepth: 6 }),
  fc
    .tuple(
      fc.json({ maxDepth: 6 }),
      fc.nat(),
      fc.constantFrom('', '[', ']', '{', '}', ',', ':', '"', '\\', '-', '0', 'e', '.', ' ', 't', 'n', '\u0001'),
    )
    .map(([text, at, ch]) => {
      const i = text.length === 0 ? 0 : at % text.length;
      return text.slice(0, i) + ch + text.slice(i + (at % 2));
    }),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: fc.constantFrom('[', ']', '{', '}', ',', ':', '"', '1', ' ', 'a', '\\', 'u', '0'), maxLength: 30 }),
);

describe('jsonErrorOffset', () => {
  it('is null exactly when JSON.parse accepts the text', () => {
    fc.assert(
      fc.property(jsonish, (text) => {
        expect(jsonErrorOffset(text) === null, JSON.stringify(text)).toBe(parses(text));
      }),
      { numRuns: 5000 },
    );
  });

  it('points inside the text (or at its end) when it is not JSON', () => {
    fc.assert(
      fc.property(jsonish, (text) => {
        const at = jsonErrorOffset(text);
        if (at !== null) {
          expect(at).toBeGreaterThanOrEqual(0);
          expect(at).toBeLessThanOrEqual(text.length);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it.each([
    ['arrays', (n: number) => '['.repeat(n), (n: number) => ']'.repeat(n)],
    ['objects', (n: number) => '{"a":'.repeat(n), (n: number) => '1' + '}'.repeat(n)],
    ['mixed', (n: number) => '[{"a":'.repeat(n / 2), (n: number) => '1' + '}]'.repeat(n / 2)],
  ])('survives 100,000 levels of %s, closed or not, and whole body limits of them', (_kind, open, close) => {
    const deep = open(100_000);
    expect(jsonErrorOffset(deep + close(100_000) + '1')).toBe(deep.length + close(100_000).length);
    expect(jsonErrorOffset(deep + close(100_000))).toBeNull();
    expect(jsonErrorOffset(deep)).toBe(deep.length);
    expect(describeJsonError(deep, new Error('x'))).toBe(`unexpected end of input at line 1, column ${deep.length + 1}`);
    expect(jsonDepth(deep + close(100_000))).toBe(100_000);
    const limit = open(BODY_LIMIT_BYTES).slice(0, BODY_LIMIT_BYTES);
    expect(jsonErrorOffset(limit)).not.toBeNull();
    expect(describeJsonError(limit, null)).toMatch(/at line 1, column \d+$/);
  });

  it('describes where a document broke, across lines', () => {
    expect(describeJsonError('{\n  "a": [1,\n  2,,\n]}', null)).toBe('unexpected "," at line 3, column 5');
    expect(describeJsonError('\n\n["\\uZZ"]', null)).toBe('unexpected "Z" at line 3, column 5');
  });
});
