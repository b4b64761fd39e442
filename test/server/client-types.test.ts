// The GUI's generated types (server/api/client-types.ts): what each JSON Schema form becomes.
import { describe, expect, it } from 'vitest';
import { clientTypes } from '../../server/api/client-types';

describe('clientTypes', () => {
  it('objects with required and optional fields, nullable types, enums, arrays, records, refs and unions', () => {
    const out = clientTypes({
      components: {
        schemas: {
          B: { type: 'string', enum: ['x', 'y'] },
          A: {
            type: 'object',
            description: 'An A.',
            properties: {
              id: { type: 'string', description: 'Its id.' },
              n: { type: ['integer', 'null'] },
              tags: { type: 'array', items: { $ref: '#/components/schemas/B' } },
              meta: { type: 'object', additionalProperties: { type: 'number' } },
              'odd-name': { type: 'boolean' },
              either: { oneOf: [{ type: 'object', properties: { kind: { type: 'string', enum: ['a'] } }, required: ['kind'] }, { type: 'null' }] },
              anything: {},
            },
            required: ['id', 'n'],
          },
        },
      },
    });
    expect(out).toContain('export type B = "x" | "y";');
    expect(out).toContain(
      [
        '/** An A. */',
        'export type A = {',
        '  /** Its id. */',
        '  id: string;',
        '  n: number | null;',
        '  tags?: Array<B>;',
        '  meta?: Record<string, number>;',
        '  "odd-name"?: boolean;',
        '  either?: {',
        '    kind: "a";',
        '  } | null;',
        '  anything?: unknown;',
        '};',
      ].join('\n'),
    );
    expect(out.indexOf('export type A')).toBeLessThan(out.indexOf('export type B')); // sorted, so the file is stable
  });
});
