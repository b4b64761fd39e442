import { describe, expect, it } from 'vitest';
import { fieldErrors } from '../../server/api/field-errors';
import fc from 'fast-check';
import type { z } from 'zod';
import {
  CapsPatch,
  CreateSnippet,
  CreateVersion,
  Deploy,
  PageQuery,
  PutIntegration,
  PutSecret,
  PutStoreValue,
  ResourceName,
  SecretName,
  StoreKey,
} from '../../server/api/schemas';
import { paginate } from '../../server/services/pagination';
import { ApiError } from '../../server/errors';

// ---- reference predicates, written from API.md independently of the schemas' own regexes -----------

const isLowerAlnum = (c: string) => (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
const isUpper = (c: string) => c >= 'A' && c <= 'Z';
const isDigit = (c: string) => c >= '0' && c <= '9';

/** `[a-z0-9][a-z0-9-]{0,62}` */
function refResourceName(s: string): boolean {
  const chars = [...s];
  if (s.length < 1 || s.length > 63 || chars.length !== s.length) return false;
  return isLowerAlnum(chars[0]!) && chars.every((c) => isLowerAlnum(c) || c === '-');
}

/** `[A-Z_][A-Z0-9_]*`, at most 128 characters, `SVC_` reserved. */
function refSecretName(s: string): boolean {
  if (s.length < 1 || s.length > 128) return false;
  const chars = s.split('');
  if (!(isUpper(chars[0]!) || chars[0] === '_')) return false;
  if (!chars.every((c) => isUpper(c) || isDigit(c) || c === '_')) return false;
  return !s.startsWith('SVC_');
}

/** 1–512 printable ASCII characters, no space. */
function refStoreKey(s: string): boolean {
  if (s.length < 1 || s.length > 512) return false;
  for (let i = 0; i < s.length; i++) {
    const code = s.charCodeAt(i);
    if (code < 0x21 || code > 0x7e) return false;
  }
  return true;
}

const accepts = (schema: z.ZodType, value: unknown) => schema.safeParse(value).success;

/** Strings over `alphabet` with lengths up to `max`, plus strings of lengths right around `edge`. */
function stringsOver(alphabet: string[], max: number, edge: number) {
  const unit = fc.constantFrom(...alphabet);
  return fc.oneof(
    fc.string({ unit, maxLength: max }),
    fc.integer({ min: Math.max(0, edge - 3), max: edge + 3 }).chain((n) => fc.string({ unit, minLength: n, maxLength: n })),
  );
}

const chars = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => String.fromCharCode(from + i));

// ---- names ----------------------------------------------------------------------------------------

describe('ResourceName', () => {
  const nearAlphabet = [...chars(0x61, 0x7a), ...chars(0x30, 0x39), '-', 'A', 'Z', '_', '.', ' ', '\n', 'é'];

  it('accepts every string matching [a-z0-9][a-z0-9-]{0,62}', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,62}$/), (s) => {
        expect(accepts(ResourceName, s)).toBe(true);
      }),
    );
  });

  it('accepts exactly the strings the reference accepts (near misses and arbitrary strings)', () => {
    fc.assert(
      fc.property(fc.oneof(stringsOver(nearAlphabet, 70, 63), fc.string({ unit: 'binary' })), (s) => {
        expect(accepts(ResourceName, s)).toBe(refResourceName(s));
      }),
      { numRuns: 2000 },
    );
  });

  it('rejects the edges: empty, 64 characters, leading dash, trailing newline, uppercase', () => {
    expect(accepts(ResourceName, 'a'.repeat(63))).toBe(true);
    expect(accepts(ResourceName, '0')).toBe(true);
    expect(accepts(ResourceName, 'a-')).toBe(true);
    for (const bad of ['', 'a'.repeat(64), '-a', 'abc\n', 'Abc', 'a_b', 'a.b', ' a']) {
      expect(accepts(ResourceName, bad), JSON.stringify(bad)).toBe(false);
    }
  });

  it('rejects every non-string', () => {
    fc.assert(
      fc.property(fc.anything().filter((v) => typeof v !== 'string'), (v) => {
        expect(accepts(ResourceName, v)).toBe(false);
      }),
    );
  });
});

describe('SecretName', () => {
  const nearAlphabet = [...chars(0x41, 0x5a), ...chars(0x30, 0x39), '_', 'a', 'z', '-', ' ', '$', '\n'];

  it('accepts exactly env-var-like names of at most 128 characters not starting with SVC_', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,140}$/),
          stringsOver(nearAlphabet, 140, 128),
          fc.stringMatching(/^SVC_?[A-Z0-9_]{0,10}$/),
          fc.string({ unit: 'binary' }),
        ),
        (s) => {
          expect(accepts(SecretName, s)).toBe(refSecretName(s));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('edges', () => {
    expect(accepts(SecretName, '_')).toBe(true);
    expect(accepts(SecretName, 'SVC')).toBe(true);
    expect(accepts(SecretName, 'SVCX_KEY')).toBe(true);
    expect(accepts(SecretName, 'A'.repeat(128))).toBe(true);
    for (const bad of ['', 'SVC_', 'SVC_KEY', 'A'.repeat(129), '1ABC', 'api_key', 'A-B', 'KEY\n']) {
      expect(accepts(SecretName, bad), JSON.stringify(bad)).toBe(false);
    }
  });
});

describe('StoreKey', () => {
  const nearAlphabet = [...chars(0x1f, 0x80), '\t', '\n', 'é', '€'];

  it('accepts exactly 1–512 printable non-space ASCII characters', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          stringsOver(nearAlphabet, 40, 512),
          fc.string({ unit: fc.constantFrom(...chars(0x21, 0x7e)), minLength: 505, maxLength: 520 }),
          fc.string({ unit: 'binary' }),
        ),
        (s) => {
          expect(accepts(StoreKey, s)).toBe(refStoreKey(s));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('edges', () => {
    expect(accepts(StoreKey, '!')).toBe(true);
    expect(accepts(StoreKey, '~'.repeat(512))).toBe(true);
    expect(accepts(StoreKey, 'counter:visits/2026?x=1#y')).toBe(true);
    for (const bad of ['', ' ', 'a b', 'a'.repeat(513), 'key\n', 'ключ', 'a\u007f']) {
      expect(accepts(StoreKey, bad), JSON.stringify(bad)).toBe(false);
    }
  });
});

// ---- request decoders -----------------------------------------------------------------------------

const MAX_INT32 = 2_147_483_647;
const isLimit = (v: unknown, max = MAX_INT32) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 && v <= max;
const isBundlePath = (p: unknown) =>
  typeof p === 'string' &&
  p.length >= 1 &&
  p.length <= 255 &&
  !p.startsWith('/') &&
  !p.includes('\\') &&
  !p.includes('\0') &&
  p.split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..');
const keysWithin = (o: object, allowed: string[]) => Object.keys(o).every((k) => allowed.includes(k));

/** Values that are sometimes right for a field, sometimes subtly wrong. */
const anyJson = fc.jsonValue();
const limitish = fc.oneof(
  fc.integer({ min: -3, max: 3 }),
  fc.integer({ min: 1, max: 1_000_000 }),
  fc.constantFrom(MAX_INT32, MAX_INT32 + 1, 2 ** 53, 1.5, -0, Number.NaN, Number.POSITIVE_INFINITY, '10', null),
  anyJson,
);
const pathish = fc.oneof(
  fc.constantFrom('index.ts', 'main.py', 'lib/util.ts', '../x.ts', './a.ts', '/abs.ts', 'a//b', 'a\\b', 'a\0b', '', 'a/.', 'x'.repeat(256)),
  fc.string({ maxLength: 20 }),
);
const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

/** Objects shaped like the request, with each field right or wrong, and sometimes an extra field. */
function shaped(fields: Record<string, fc.Arbitrary<unknown>>) {
  return fc
    .tuple(
      // Usually every field present (each right or wrong), sometimes any subset.
      fc.oneof({ arbitrary: fc.record(fields), weight: 3 }, { arbitrary: fc.record(fields, { requiredKeys: [] }), weight: 1 }),
      // An unknown extra field now and then (the request schemas are strict).
      fc.oneof(
        { arbitrary: fc.constant(undefined), weight: 4 },
        { arbitrary: fc.dictionary(fc.string({ maxLength: 6 }), anyJson, { minKeys: 1, maxKeys: 2 }), weight: 1 },
      ),
    )
    .map(([o, extra]) => (extra ? { ...extra, ...o } : o));
}
/** Mostly one of the good values, sometimes anything. */
const mostly = <T>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<unknown> = anyJson) =>
  fc.oneof({ arbitrary: good, weight: 6 }, { arbitrary: bad, weight: 1 });

interface DecoderCase {
  name: string;
  schema: z.ZodType;
  near: fc.Arbitrary<unknown>;
  /** What a successful decode must satisfy. */
  check(out: any): void;
}

const cases: DecoderCase[] = [
  {
    name: 'CreateSnippet',
    schema: CreateSnippet,
    near: shaped({
      name: mostly(fc.oneof(fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,5}$/), fc.string({ maxLength: 8 }))),
      runtime: mostly(fc.constantFrom('bun', 'python', 'node', 'Bun', '')),
      description: mostly(fc.oneof(fc.string({ maxLength: 20 }), fc.constant('d'.repeat(1000)), fc.constant('d'.repeat(1001)))),
    }),
    check(out) {
      expect(keysWithin(out, ['name', 'runtime', 'description'])).toBe(true);
      expect(refResourceName(out.name)).toBe(true);
      expect(['bun', 'python']).toContain(out.runtime);
      if (out.description !== undefined) {
        expect(typeof out.description).toBe('string');
        expect(out.description.length).toBeLessThanOrEqual(1000);
      }
    },
  },
  {
    name: 'CreateVersion',
    schema: CreateVersion,
    near: shaped({
      code: fc.oneof(fc.string({ maxLength: 20 }), anyJson),
      files: fc.oneof(fc.dictionary(pathish, fc.oneof(fc.string({ maxLength: 10 }), anyJson), { maxKeys: 3 }), anyJson),
      entrypoint: pathish,
      timeout_ms: limitish,
      max_memory_mb: limitish,
      max_cpu_percent: limitish,
    }),
    check(out) {
      expect(keysWithin(out, ['code', 'files', 'entrypoint', 'timeout_ms', 'max_memory_mb', 'max_cpu_percent'])).toBe(true);
      for (const f of ['timeout_ms', 'max_memory_mb', 'max_cpu_percent']) {
        if (out[f] !== undefined) expect(isLimit(out[f]), `${f} = ${out[f]}`).toBe(true);
      }
      if (out.code !== undefined) expect(typeof out.code).toBe('string');
      if (out.entrypoint !== undefined) expect(isBundlePath(out.entrypoint)).toBe(true);
      if (out.files !== undefined) {
        for (const [p, content] of Object.entries(out.files)) {
          expect(isBundlePath(p), `file path ${JSON.stringify(p)}`).toBe(true);
          expect(typeof content).toBe('string');
        }
      }
    },
  },
  {
    name: 'PutSecret',
    schema: PutSecret,
    near: shaped({
      value: fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('', 'a\0b', 'x'.repeat(64 * 1024), 'é'.repeat(32 * 1024 + 1)), anyJson),
    }),
    check(out) {
      expect(keysWithin(out, ['value'])).toBe(true);
      expect(typeof out.value).toBe('string');
      expect(out.value.length).toBeGreaterThan(0);
      expect(Buffer.byteLength(out.value)).toBeLessThanOrEqual(64 * 1024);
      expect(out.value.includes('\0')).toBe(false);
    },
  },
  {
    name: 'PutStoreValue',
    schema: PutStoreValue,
    near: shaped({
      value: anyJson,
      ttl_seconds: fc.oneof(limitish, fc.constantFrom(315_360_000, 315_360_001)),
    }),
    check(out) {
      expect(keysWithin(out, ['value', 'ttl_seconds'])).toBe(true);
      expect(out.value).not.toBeUndefined();
      if (out.ttl_seconds !== undefined && out.ttl_seconds !== null) expect(isLimit(out.ttl_seconds, 315_360_000)).toBe(true);
    },
  },
  {
    name: 'PutIntegration',
    schema: PutIntegration,
    near: fc.oneof(
      // Coherent requests (auth type, secret and header agreeing), with base_url sometimes missing.
      fc.record(
        {
          provider: fc.constantFrom('http', 'openai'),
          base_url: fc.constantFrom('https://api.example.com', 'http://127.0.0.1:9/v1', 'file:///etc/passwd'),
          auth: fc.oneof(
            fc.record({ type: fc.constant('none') }),
            fc.record({ type: fc.constantFrom('bearer', 'basic'), secret: fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,8}$/) }),
            fc.record({
              type: fc.constant('header'),
              secret: fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,8}$/),
              header: fc.stringMatching(/^[A-Za-z0-9-]{1,10}$/),
            }),
          ),
        },
        { requiredKeys: ['provider', 'auth'] },
      ),
      shaped({
        provider: mostly(fc.constantFrom('http', 'openai', 'openai', 'anthropic', '')),
        base_url: mostly(fc.constantFrom('https://api.example.com', 'http://localhost:8080/v1', 'HTTPS://X.EXAMPLE', 'ftp://x', 'javascript:alert(1)', 'not a url', '')),
        auth: mostly(
          shaped({
            type: mostly(fc.constantFrom('bearer', 'header', 'basic', 'none', 'none', 'oauth')),
            secret: mostly(fc.constantFrom('API_KEY', 'TOKEN', 'SVC_KEY', 'lower', '')),
            header: mostly(fc.constantFrom('X-Api-Key', 'Authorization', 'Bad Header', '')),
          }),
        ),
      }),
    ),
    check(out) {
      expect(keysWithin(out, ['provider', 'base_url', 'auth'])).toBe(true);
      expect(['http', 'openai']).toContain(out.provider);
      if (out.base_url !== undefined) expect(['http:', 'https:']).toContain(new URL(out.base_url).protocol);
      if (out.provider === 'http') expect(out.base_url).toBeDefined();
      expect(keysWithin(out.auth, ['type', 'secret', 'header'])).toBe(true);
      expect(['bearer', 'header', 'basic', 'none']).toContain(out.auth.type);
      if (out.auth.type === 'none') expect(out.auth.secret).toBeUndefined();
      else expect(refSecretName(out.auth.secret)).toBe(true);
      if (out.auth.type === 'header') expect(out.auth.header).toMatch(/^[A-Za-z0-9-]{1,64}$/);
    },
  },
  {
    name: 'CapsPatch',
    schema: CapsPatch,
    near: shaped({
      timeout_ms: limitish,
      max_memory_mb: limitish,
      max_cpu_percent: limitish,
      max_concurrency: limitish,
    }),
    check(out) {
      expect(keysWithin(out, ['timeout_ms', 'max_memory_mb', 'max_cpu_percent', 'max_concurrency'])).toBe(true);
      for (const [f, v] of Object.entries(out)) if (v !== undefined) expect(isLimit(v), `${f} = ${v}`).toBe(true);
    },
  },
  {
    name: 'Deploy',
    schema: Deploy,
    near: shaped({ version: limitish }),
    check(out) {
      expect(keysWithin(out, ['version'])).toBe(true);
      expect(typeof out.version).toBe('number');
      expect(Number.isSafeInteger(out.version)).toBe(true);
      expect(out.version).toBeGreaterThanOrEqual(1);
    },
  },
  {
    name: 'PageQuery',
    schema: PageQuery,
    near: shaped({
      limit: fc.oneof(
        fc.integer({ min: -5, max: 1200 }).map(String),
        fc.constantFrom('0000', '0001', '1000', '1001', '9999', '10000', '1e3', ' 5', '5 ', '+5', '٥', ''),
        anyJson,
      ),
      cursor: fc.oneof(fc.string({ maxLength: 30 }), fc.constant('c'.repeat(1025)), anyJson),
    }),
    check(out) {
      if (out.limit !== undefined) {
        expect(Number.isInteger(out.limit)).toBe(true);
        expect(out.limit).toBeGreaterThanOrEqual(1);
        expect(out.limit).toBeLessThanOrEqual(1000);
      }
      if (out.cursor !== undefined) {
        expect(typeof out.cursor).toBe('string');
        expect(out.cursor.length).toBeLessThanOrEqual(1024);
      }
    },
  },
];

const richAnything = fc.anything({
  withBigInt: true,
  withBoxedValues: true,
  withDate: true,
  withMap: true,
  withSet: true,
  withNullPrototype: true,
  withObjectString: true,
  withSparseArray: true,
  withTypedArray: true,
  withUnicodeString: true,
});

describe.each(cases)('$name decoder', ({ schema, near, check }) => {
  it('never throws on arbitrary JSON, arbitrary values or near-valid objects; every success satisfies the contract', () => {
    let successes = 0;
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), richAnything, { arbitrary: near, weight: 4 }), (input) => {
        let result: ReturnType<typeof schema.safeParse>;
        expect(() => {
          result = schema.safeParse(input);
        }).not.toThrow();
        expect(typeof result!.success).toBe('boolean');
        if (result!.success) {
          successes++;
          check(result!.data);
        } else {
          expect(result!.error.issues.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 1500 },
    );
    // The generators must reach the accepting side, or the contract checks above proved nothing.
    expect(successes).toBeGreaterThanOrEqual(15);
  });
});

describe('CreateVersion.files', () => {
  const segment = fc.oneof(
    fc.stringMatching(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,8}$/).filter((s) => s !== '.' && s !== '..'),
    fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'prototype'),
  );
  const bundlePath = fc.array(segment, { minLength: 1, maxLength: 3 }).map((segs) => segs.join('/'));

  it('a bundle decodes with every file, none dropped or renamed, or is refused when a path has a __proto__ segment', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(bundlePath, fc.string({ maxLength: 10 })), { minLength: 1, maxLength: 6, selector: ([p]) => p }), (entries) => {
        // Built as JSON text and parsed, exactly as the body parser hands a request body over.
        const body = JSON.parse(`{"files":{${entries.map(([p, c]) => `${JSON.stringify(p)}:${JSON.stringify(c)}`).join(',')}}}`);
        const r = CreateVersion.safeParse(body);
        const poisoned = entries.some(([p]) => p.split('/').includes('__proto__'));
        if (poisoned) {
          // zod would build the record by assignment and silently lose such a key: refuse it instead.
          expect(r.success).toBe(false);
          if (!r.success) expect(fieldErrors(r.error, 'body').map((e) => e.message).join(' ')).toContain('__proto__');
          return;
        }
        expect(r.success).toBe(true);
        const files = r.success ? r.data.files! : {};
        expect(Object.keys(files).sort()).toEqual(entries.map(([p]) => p).sort());
        for (const [p, c] of entries) expect(Object.getOwnPropertyDescriptor(files, p)?.value, p).toBe(c);
      }),
      { numRuns: 500 },
    );
  });
});

describe('PageQuery.limit', () => {
  it('accepts exactly the decimal strings of 1..1000 (up to 4 digits, leading zeros allowed) and decodes them', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.stringMatching(/^\d{1,5}$/), fc.string({ maxLength: 6 }), fc.integer({ min: -10, max: 1100 }).map(String)),
        (s) => {
          const r = PageQuery.safeParse({ limit: s });
          const ok = /^[0-9]{1,4}$/.test(s) && Number(s) >= 1 && Number(s) <= 1000;
          expect(r.success).toBe(ok);
          if (r.success) expect(r.data.limit).toBe(Number(s));
        },
      ),
      { numRuns: 1000 },
    );
  });
});

// ---- pagination -----------------------------------------------------------------------------------

const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const sortedUniqueKeys = fc.uniqueArray(fc.string({ maxLength: 6 }), { maxLength: 60 }).map((keys) => [...keys].sort(byCodeUnit));

function walk<T>(list: () => readonly T[], keyOf: (t: T) => string, limit: number, compare?: (a: string, b: string) => number) {
  const pages: T[][] = [];
  let cursor: string | undefined;
  for (let guard = 0; guard < 1000; guard++) {
    const page = paginate(list(), keyOf, { limit, cursor }, (t) => t, compare);
    pages.push(page.data);
    expect(page.data.length).toBeLessThanOrEqual(limit);
    if (page.next_cursor === null) return pages;
    expect(page.data.length, 'a page with a next_cursor is never short').toBe(limit);
    cursor = page.next_cursor;
  }
  throw new Error('pagination did not terminate');
}

describe('paginate', () => {
  it('walking every page with any limit 1..20 yields every item exactly once, in order', () => {
    fc.assert(
      fc.property(sortedUniqueKeys, fc.integer({ min: 1, max: 20 }), (keys, limit) => {
        const items = keys.map((k, i) => ({ k, i }));
        const pages = walk(() => items, (x) => x.k, limit);
        expect(pages.flat()).toEqual(items);
        // No empty trailing page: the number of pages is exactly ceil(n / limit) (one empty page for n = 0).
        expect(pages).toHaveLength(Math.max(1, Math.ceil(items.length / limit)));
      }),
      { numRuns: 500 },
    );
  });

  it('the default limit is 100', () => {
    const keys = Array.from({ length: 250 }, (_, i) => String(i).padStart(3, '0'));
    const first = paginate(keys, (k) => k, {}, (k) => k);
    expect(first.data).toEqual(keys.slice(0, 100));
    expect(first.next_cursor).not.toBeNull();
  });

  it('works with a custom order (versions, newest first)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: 10_000 }), { maxLength: 50 }), fc.integer({ min: 1, max: 20 }), (nums, limit) => {
        const desc = [...nums].sort((a, b) => b - a);
        const pages = walk(() => desc, String, limit, (a, b) => Number(b) - Number(a));
        expect(pages.flat()).toEqual(desc);
      }),
      { numRuns: 300 },
    );
  });

  it('inserts and deletes between pages never repeat an item nor skip one that stayed', () => {
    const op = fc.record({ insert: fc.array(fc.string({ maxLength: 6 }), { maxLength: 4 }), remove: fc.array(fc.nat(), { maxLength: 3 }) });
    fc.assert(
      fc.property(sortedUniqueKeys, fc.integer({ min: 1, max: 8 }), fc.array(op, { maxLength: 30 }), (keys, limit, ops) => {
        let current = [...keys];
        const everRemoved = new Set<string>();
        let step = 0;
        const list = () => {
          // Before every page after the first, change the list.
          if (step > 0) {
            const o = ops[(step - 1) % Math.max(1, ops.length)];
            if (o) {
              for (const r of o.remove) {
                if (current.length === 0) break;
                const [gone] = current.splice(r % current.length, 1);
                everRemoved.add(gone!);
              }
              current = [...new Set([...current, ...o.insert])].sort(byCodeUnit);
            }
          }
          step++;
          return current;
        };
        const seen = walk(list, (k) => k, limit).flat();
        expect(new Set(seen).size, 'an item was returned twice').toBe(seen.length);
        for (let i = 1; i < seen.length; i++) expect(byCodeUnit(seen[i - 1]!, seen[i]!)).toBe(-1);
        // Every original key that was never removed was returned.
        for (const k of keys) if (!everRemoved.has(k)) expect(seen).toContain(k);
      }),
      { numRuns: 300 },
    );
  });

  it('an arbitrary cursor either pages or is refused as a 400 validation_failed, never another error', () => {
    const keys = ['a', 'b', 'c'];
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.base64String(), fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? '').toString('base64url'))), (cursor) => {
        try {
          const page = paginate(keys, (k) => k, { limit: 2, cursor }, (k) => k);
          expect(Array.isArray(page.data)).toBe(true);
        } catch (err) {
          expect(err).toBeInstanceOf(ApiError);
          expect((err as ApiError).status).toBe(400);
          expect((err as ApiError).code).toBe('validation_failed');
        }
      }),
      { numRuns: 1000 },
    );
  });
});
