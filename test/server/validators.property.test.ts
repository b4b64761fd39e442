import { describe, expect, it } from 'vitest';
import { fieldErrors } from '../../server/services/field-errors';
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
} from '../../contract';
import { paginate } from '../../server/services/pagination';
import { DomainError } from '../../server/domain/errors';
import { problemOfDomainError } from '../../server/http/problem';
import { fuzzSeed } from '../helpers/fuzz-seed';

/** Every property below draws from this seed (fixed; SVC_FUZZ_SEED=N explores others): what it covers is by construction. */
const seed = fuzzSeed('validators.property', 20261125, process.env, console.info);

// ---- reference predicates, written from docs/contract.md independently of the schemas' own regexes -----------

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
      { seed },
    );
  });

  it('accepts exactly the strings the reference accepts (near misses and arbitrary strings)', () => {
    fc.assert(
      fc.property(fc.oneof(stringsOver(nearAlphabet, 70, 63), fc.string({ unit: 'binary' })), (s) => {
        expect(accepts(ResourceName, s)).toBe(refResourceName(s));
      }),
      { numRuns: 2000, seed },
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
      fc.property(
        fc.anything().filter((v) => typeof v !== 'string'),
        (v) => {
          expect(accepts(ResourceName, v)).toBe(false);
        },
      ),
      { seed },
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
      { numRuns: 3000, seed },
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
      { numRuns: 2000, seed },
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
/** docs/contract.md: versions are 1, 2, 3, … with at most nine digits, as in a path or query. */
const VERSION_MAX = 999_999_999;
/** docs/contract.md: a bundle holds 1 to 200 files. */
const BUNDLE_FILES_MAX = 200;
const isLimit = (v: unknown, max = MAX_INT32) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 && v <= max;
/** 1–255 characters, relative, segments neither empty nor `.`, `..` or `__proto__`, no backslash or NUL. */
const isBundlePath = (p: unknown) =>
  typeof p === 'string' &&
  p.length >= 1 &&
  p.length <= 255 &&
  !p.startsWith('/') &&
  !p.includes('\\') &&
  !p.includes('\0') &&
  p.split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..' && seg !== '__proto__');
const keysWithin = (o: object, allowed: string[]) => Object.keys(o).every((k) => allowed.includes(k));
/** How deep arrays and objects nest in a value (a scalar is 0, `[]` is 1). */
const refDepth = (v: unknown): number => (v !== null && typeof v === 'object' ? 1 + Math.max(0, ...Object.values(v).map(refDepth)) : 0);
/** An array nested `depth` levels deep. */
const nested = (depth: number): unknown => {
  let v: unknown = 0;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
};

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
  fc.constantFrom('x'.repeat(255), '.env', '...', '__proto__', 'a/__proto__/b', 'lib/__proto__', '__proto__x', 'constructor'),
  fc.string({ maxLength: 20 }),
);
/** A bundle of n files: the edges of 1–200 are 0, 1, 200 and 201. */
const bundleOf = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`src/f${i}.ts`, `export const n = ${i};\n`]));

// ---- requests the contract allows, built from its rules: a decoder must accept every one ----------

const validLimit = fc.oneof(fc.integer({ min: 1, max: MAX_INT32 }), fc.constantFrom(1, MAX_INT32));
const validSegment = fc.stringMatching(/^[^/\\\0]{1,12}$/).filter((s) => s !== '.' && s !== '..' && s !== '__proto__');
const validPath = fc.oneof(
  { arbitrary: fc.array(validSegment, { minLength: 1, maxLength: 4 }).map((segs) => segs.join('/')), weight: 5 },
  fc.constantFrom('index.ts', 'x'.repeat(255), `${'d/'.repeat(126)}abc`, '.env', '...', 'constructor', '__proto__x'),
);
const validSecretName = fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,20}$/).filter((n) => !n.startsWith('SVC_'));

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
  /** Requests the contract allows, edges included: each must decode. */
  valid: fc.Arbitrary<unknown>;
  /** Requests near the valid ones, each field right or wrong. */
  near: fc.Arbitrary<unknown>;
  /** Requests at the contract's edges, one thing wrong in each (or just right): every test run meets them first, whatever the seed. */
  edges: unknown[];
  /** What a successful decode must satisfy. */
  check(out: any): void;
}

const cases: DecoderCase[] = [
  {
    name: 'CreateSnippet',
    schema: CreateSnippet,
    valid: fc.record(
      {
        name: fc.oneof(fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,62}$/), fc.constantFrom('0', 'a'.repeat(63))),
        runtime: fc.constantFrom('bun', 'python'),
        description: fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom('', 'd'.repeat(1000))),
      },
      { requiredKeys: ['name', 'runtime'] },
    ),
    near: shaped({
      name: mostly(fc.oneof(fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,5}$/), fc.string({ maxLength: 8 }))),
      runtime: mostly(fc.constantFrom('bun', 'python', 'node', 'Bun', '')),
      description: mostly(fc.oneof(fc.string({ maxLength: 20 }), fc.constant('d'.repeat(1000)), fc.constant('d'.repeat(1001)))),
    }),
    edges: [
      { name: 'a'.repeat(64), runtime: 'bun' },
      { name: '-a', runtime: 'bun' },
      { name: 'a', runtime: 'node' },
      { name: 'a' },
      { name: 'a', runtime: 'bun', description: 'd'.repeat(1001) },
      { name: 'a', runtime: 'bun', extra: 1 },
    ],
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
    valid: fc
      .tuple(
        fc.oneof(
          fc.record({ code: fc.string({ maxLength: 20 }) }),
          fc.record({
            files: fc.oneof(
              { arbitrary: fc.dictionary(validPath, fc.string({ maxLength: 10 }), { minKeys: 1, maxKeys: 4 }), weight: 4 },
              fc.constantFrom(bundleOf(1), bundleOf(BUNDLE_FILES_MAX)),
            ),
          }),
        ),
        fc.record(
          { entrypoint: validPath, timeout_ms: validLimit, max_memory_mb: validLimit, max_cpu_percent: validLimit },
          { requiredKeys: [] },
        ),
      )
      .map(([source, rest]) => ({ ...rest, ...source })),
    // `code` alone, `files` alone, both or neither (the contract allows only the first two), each right or wrong.
    near: fc
      .tuple(
        fc.constantFrom('code', 'files', 'both', 'neither'),
        shaped({
          code: fc.oneof(fc.string({ maxLength: 20 }), anyJson),
          files: fc.oneof(
            fc.dictionary(pathish, fc.oneof(fc.string({ maxLength: 10 }), anyJson), { maxKeys: 3 }),
            fc.constantFrom(bundleOf(0), bundleOf(1), bundleOf(BUNDLE_FILES_MAX), bundleOf(BUNDLE_FILES_MAX + 1)),
            anyJson,
          ),
          entrypoint: pathish,
          timeout_ms: limitish,
          max_memory_mb: limitish,
          max_cpu_percent: limitish,
        }),
      )
      .map(([source, o]: [string, Record<string, unknown>]) => {
        const { code, files, ...rest } = o;
        if (source === 'code' || source === 'both') rest.code = code;
        if (source === 'files' || source === 'both') rest.files = files;
        return rest;
      }),
    edges: [
      {},
      { entrypoint: 'index.ts', timeout_ms: 1000 },
      { code: '', files: bundleOf(1) },
      { files: bundleOf(0) },
      { files: bundleOf(BUNDLE_FILES_MAX) },
      { files: bundleOf(BUNDLE_FILES_MAX + 1) },
      { files: { 'a/__proto__/b.ts': '' } },
      { files: { 'a/../b.ts': '' } },
      { files: { ['x'.repeat(256)]: '' } },
      { files: { 'a.ts': 1 } },
      { code: '', entrypoint: '__proto__' },
      { code: '', entrypoint: 'x'.repeat(256) },
      { code: '', timeout_ms: 0 },
      { code: '', max_memory_mb: MAX_INT32 + 1 },
      { code: '', max_cpu_percent: 1.5 },
      { code: '', extra: 1 },
    ],
    check(out) {
      expect(keysWithin(out, ['code', 'files', 'entrypoint', 'timeout_ms', 'max_memory_mb', 'max_cpu_percent'])).toBe(true);
      // docs/contract.md: `code` or `files`, never both and never neither.
      expect(out.code === undefined, 'exactly one of code and files').not.toBe(out.files === undefined);
      for (const f of ['timeout_ms', 'max_memory_mb', 'max_cpu_percent']) {
        if (out[f] !== undefined) expect(isLimit(out[f]), `${f} = ${out[f]}`).toBe(true);
      }
      if (out.code !== undefined) expect(typeof out.code).toBe('string');
      if (out.entrypoint !== undefined) expect(isBundlePath(out.entrypoint)).toBe(true);
      if (out.files !== undefined) {
        const count = Object.keys(out.files).length;
        expect(count >= 1 && count <= BUNDLE_FILES_MAX, `a bundle of ${count} files`).toBe(true);
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
    valid: fc.record({
      value: fc.oneof(
        fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }).filter((v) => !v.includes('\0')),
        // 64 KiB as UTF-8: one, two and three bytes a character.
        fc.constantFrom('x'.repeat(64 * 1024), 'é'.repeat(32 * 1024), `${'€'.repeat(21_845)}x`),
      ),
    }),
    near: shaped({
      value: fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('', 'a\0b', 'x'.repeat(64 * 1024), 'é'.repeat(32 * 1024 + 1)), anyJson),
    }),
    edges: [
      {},
      { value: '' },
      { value: 'a\0b' },
      { value: 'x'.repeat(64 * 1024 + 1) },
      { value: `${'é'.repeat(32 * 1024)}x` },
      { value: 1 },
    ],
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
    valid: fc.record(
      {
        value: fc.jsonValue({ maxDepth: 4 }),
        ttl_seconds: fc.oneof(fc.integer({ min: 1, max: 315_360_000 }), fc.constantFrom(1, 315_360_000, null)),
      },
      { requiredKeys: ['value'] },
    ),
    near: shaped({
      value: anyJson,
      ttl_seconds: fc.oneof(limitish, fc.constantFrom(315_360_000, 315_360_001)),
    }),
    edges: [
      { ttl_seconds: 1 },
      { value: nested(127) },
      { value: nested(128) },
      { value: 1, ttl_seconds: 0 },
      { value: 1, ttl_seconds: 315_360_001 },
      { value: 1, ttl_seconds: 1.5 },
      { value: 1, ttl_seconds: '60' },
    ],
    check(out) {
      expect(keysWithin(out, ['value', 'ttl_seconds'])).toBe(true);
      expect(out.value).not.toBeUndefined();
      expect(refDepth(out.value), 'a value nests at most 127 levels').toBeLessThanOrEqual(127);
      if (out.ttl_seconds !== undefined && out.ttl_seconds !== null) expect(isLimit(out.ttl_seconds, 315_360_000)).toBe(true);
    },
  },
  {
    name: 'PutIntegration',
    schema: PutIntegration,
    valid: fc
      .record(
        {
          provider: fc.constantFrom('http', 'openai'),
          base_url: fc.constantFrom('https://api.example.com', 'http://127.0.0.1:9/v1', 'HTTPS://X.EXAMPLE/v1?q=1#f'),
          auth: fc.oneof(
            fc.record({ type: fc.constant('none') }),
            fc.record({ type: fc.constantFrom('bearer', 'basic'), secret: validSecretName }),
            fc.record({ type: fc.constant('header'), secret: validSecretName, header: fc.stringMatching(/^[A-Za-z0-9-]{1,64}$/) }),
          ),
        },
        { requiredKeys: ['provider', 'auth'] },
      )
      .filter((v) => v.provider !== 'http' || v.base_url !== undefined),
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
        base_url: mostly(
          fc.constantFrom(
            'https://api.example.com',
            'http://localhost:8080/v1',
            'HTTPS://X.EXAMPLE',
            'ftp://x',
            'javascript:alert(1)',
            'not a url',
            '',
          ),
        ),
        auth: mostly(
          shaped({
            type: mostly(fc.constantFrom('bearer', 'header', 'basic', 'none', 'none', 'oauth')),
            secret: mostly(fc.constantFrom('API_KEY', 'TOKEN', 'SVC_KEY', 'lower', '')),
            header: mostly(fc.constantFrom('X-Api-Key', 'Authorization', 'Bad Header', '')),
          }),
        ),
      }),
    ),
    edges: [
      { provider: 'http', auth: { type: 'none' } },
      { provider: 'openai', auth: { type: 'bearer' } },
      { provider: 'openai', auth: { type: 'none', secret: 'KEY' } },
      { provider: 'openai', auth: { type: 'header', secret: 'KEY' } },
      { provider: 'openai', auth: { type: 'basic', secret: 'SVC_KEY' } },
      { provider: 'openai', base_url: 'file:///etc/passwd', auth: { type: 'none' } },
      { provider: 'openai', auth: { type: 'header', secret: 'KEY', header: 'Bad Header' } },
    ],
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
    valid: fc.record(
      { timeout_ms: validLimit, max_memory_mb: validLimit, max_cpu_percent: validLimit, max_concurrency: validLimit },
      { requiredKeys: [] },
    ),
    near: shaped({
      timeout_ms: limitish,
      max_memory_mb: limitish,
      max_cpu_percent: limitish,
      max_concurrency: limitish,
    }),
    edges: [{}, { timeout_ms: 0 }, { max_concurrency: MAX_INT32 + 1 }, { max_cpu_percent: 1.5 }, { max_memory_mb: '64' }, { extra: 1 }],
    check(out) {
      expect(keysWithin(out, ['timeout_ms', 'max_memory_mb', 'max_cpu_percent', 'max_concurrency'])).toBe(true);
      for (const [f, v] of Object.entries(out)) if (v !== undefined) expect(isLimit(v), `${f} = ${v}`).toBe(true);
    },
  },
  {
    name: 'Deploy',
    schema: Deploy,
    valid: fc.record({ version: fc.oneof(fc.integer({ min: 1, max: VERSION_MAX }), fc.constantFrom(1, VERSION_MAX)) }),
    near: shaped({ version: fc.oneof(limitish, fc.constantFrom(VERSION_MAX, VERSION_MAX + 1)) }),
    edges: [{ version: 0 }, { version: VERSION_MAX }, { version: VERSION_MAX + 1 }, { version: '1' }, { version: 1.5 }],
    check(out) {
      expect(keysWithin(out, ['version'])).toBe(true);
      expect(typeof out.version).toBe('number');
      expect(Number.isSafeInteger(out.version)).toBe(true);
      expect(out.version).toBeGreaterThanOrEqual(1);
      expect(out.version).toBeLessThanOrEqual(VERSION_MAX);
    },
  },
  {
    name: 'PageQuery',
    schema: PageQuery,
    valid: fc.record(
      {
        limit: fc.oneof(fc.integer({ min: 1, max: 1000 }).map(String), fc.constantFrom('1', '1000')),
        cursor: fc.oneof(fc.string({ maxLength: 30 }), fc.constant('c'.repeat(1024))),
      },
      { requiredKeys: [] },
    ),
    near: shaped({
      limit: fc.oneof(
        fc.integer({ min: -5, max: 1200 }).map(String),
        fc.constantFrom('0000', '0001', '01', '0100', '1000', '1001', '9999', '10000', '1e3', ' 5', '5 ', '+5', '٥', ''),
        anyJson,
      ),
      cursor: fc.oneof(fc.string({ maxLength: 30 }), fc.constant('c'.repeat(1025)), anyJson),
    }),
    edges: [{ limit: '0' }, { limit: '01' }, { limit: '1000' }, { limit: '1001' }, { cursor: 'c'.repeat(1025) }, { limit: 10 }],
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

describe.each(cases)('$name decoder', ({ schema, valid, near, edges, check }) => {
  it('accepts every request the contract allows; never throws on arbitrary JSON, arbitrary values or near-valid objects; every success satisfies the contract', () => {
    const RUNS = 1500;
    let successes = 0;
    fc.assert(
      fc.property(valid, fc.oneof(fc.jsonValue(), richAnything, { arbitrary: near, weight: 4 }), (good, input) => {
        // Each run decodes one request the contract allows, so the checks run on accepted output every run, by
        // construction (not as often as a random draw happens to reach the accepting side).
        const accepted = schema.safeParse(good);
        if (!accepted.success) expect.fail(`refused a request the contract allows: ${accepted.error.message}`);
        successes++;
        check(accepted.data);
        let result: ReturnType<typeof schema.safeParse> | undefined;
        expect(() => {
          result = schema.safeParse(input);
        }).not.toThrow();
        expect(typeof result!.success).toBe('boolean');
        if (result!.success) {
          check(result!.data);
        } else {
          expect(result!.error.issues.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: RUNS, seed, examples: edges.map((edge) => [fc.sample(valid, { seed, numRuns: 1 })[0], edge]) },
    );
    // The contract checks above ran on accepted output in every run, or they proved nothing.
    expect(successes).toBeGreaterThanOrEqual(RUNS);
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
      fc.property(
        fc.uniqueArray(fc.tuple(bundlePath, fc.string({ maxLength: 10 })), { minLength: 1, maxLength: 6, selector: ([p]) => p }),
        (entries) => {
          // Built as JSON text and parsed, exactly as the body parser hands a request body over.
          const body = JSON.parse(`{"files":{${entries.map(([p, c]) => `${JSON.stringify(p)}:${JSON.stringify(c)}`).join(',')}}}`);
          const r = CreateVersion.safeParse(body);
          const poisoned = entries.some(([p]) => p.split('/').includes('__proto__'));
          if (poisoned) {
            // zod would build the record by assignment and silently lose such a key: refuse it instead.
            expect(r.success).toBe(false);
            if (!r.success)
              expect(
                fieldErrors(r.error, 'body')
                  .map((e) => e.message)
                  .join(' '),
              ).toContain('__proto__');
            return;
          }
          expect(r.success).toBe(true);
          const files = r.success ? r.data.files! : {};
          expect(Object.keys(files).sort()).toEqual(entries.map(([p]) => p).sort());
          for (const [p, c] of entries) expect(Object.getOwnPropertyDescriptor(files, p)?.value, p).toBe(c);
        },
      ),
      {
        numRuns: 500,
        seed,
        // Both sides every run, whatever the seed draws: a top-level and a nested __proto__, and keys named like Object's own.
        examples: [
          [[['__proto__', 'x']]],
          [
            [
              ['lib/__proto__/a.ts', ''],
              ['index.ts', 'y'],
            ],
          ],
          [
            [
              ['constructor', 'a'],
              ['toString/hasOwnProperty', 'b'],
              ['prototype', 'c'],
            ],
          ],
        ],
      },
    );
  });
});

describe('PageQuery.limit', () => {
  /** docs/contract.md: `limit` 1–1000, written as a number is written (no leading zero, sign, space or exponent). */
  const LIMITS = new Set(Array.from({ length: 1000 }, (_, i) => String(i + 1)));

  it('accepts exactly the decimal strings of 1..1000 without leading zeros, and decodes them', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.stringMatching(/^\d{1,5}$/),
          fc.string({ maxLength: 6 }),
          fc.integer({ min: -10, max: 1100 }).map(String),
          // The same numbers with leading zeros: refused.
          fc.tuple(fc.constantFrom('0', '00', '000'), fc.integer({ min: 0, max: 1100 })).map(([zeros, n]) => `${zeros}${n}`),
        ),
        (s) => {
          const r = PageQuery.safeParse({ limit: s });
          expect(r.success, JSON.stringify(s)).toBe(LIMITS.has(s));
          if (r.success) expect(r.data.limit).toBe(Number(s));
        },
      ),
      // The edges every run meets, whatever the seed draws.
      {
        numRuns: 1000,
        seed,
        examples: ['1', '1000', '0', '1001', '01', '001', '0001', '01000', '0000', '+1', '1e3', ' 1'].map((s) => [s]),
      },
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
        const pages = walk(
          () => items,
          (x) => x.k,
          limit,
        );
        expect(pages.flat()).toEqual(items);
        // No empty trailing page: the number of pages is exactly ceil(n / limit) (one empty page for n = 0).
        expect(pages).toHaveLength(Math.max(1, Math.ceil(items.length / limit)));
      }),
      { numRuns: 500, seed },
    );
  });

  it('the default limit is 100', () => {
    const keys = Array.from({ length: 250 }, (_, i) => String(i).padStart(3, '0'));
    const first = paginate(
      keys,
      (k) => k,
      {},
      (k) => k,
    );
    expect(first.data).toEqual(keys.slice(0, 100));
    expect(first.next_cursor).not.toBeNull();
  });

  it('works with a custom order (versions, newest first)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 10_000 }), { maxLength: 50 }),
        fc.integer({ min: 1, max: 20 }),
        (nums, limit) => {
          const desc = [...nums].sort((a, b) => b - a);
          const pages = walk(
            () => desc,
            String,
            limit,
            (a, b) => Number(b) - Number(a),
          );
          expect(pages.flat()).toEqual(desc);
        },
      ),
      { numRuns: 300, seed },
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
      { numRuns: 300, seed },
    );
  });

  it('an arbitrary cursor either pages or is refused as a 400 validation_failed, never another error', () => {
    const keys = ['a', 'b', 'c'];
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.base64String(),
          fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? '').toString('base64url')),
        ),
        (cursor) => {
          try {
            const page = paginate(
              keys,
              (k) => k,
              { limit: 2, cursor },
              (k) => k,
            );
            expect(Array.isArray(page.data)).toBe(true);
          } catch (err) {
            expect(err).toBeInstanceOf(DomainError);
            expect(problemOfDomainError(err as DomainError).status).toBe(400);
            expect((err as DomainError).code).toBe('validation_failed');
          }
        },
      ),
      { numRuns: 1000, seed },
    );
  });
});
