/**
 * JSON never 500s (issue 14): every body up to the size limit, on every route that takes a body, answers
 * 2xx or 4xx, and every 4xx is problem+json. The routes are enumerated from the route declarations
 * (server/api/routes.ts, the same list the router and the OpenAPI document are built from), so a new route
 * is fuzzed without editing this file. Bodies: 100,000 levels of nesting (arrays, objects, mixed; closed,
 * unclosed, or with junk after), random bytes, invalid UTF-8, huge numbers, random JSON and near-valid
 * objects made of the fields the routes read.
 *
 * Depth policy (docs/security.md): a body nesting arrays/objects deeper than 128 levels is a 422
 * `validation_failed` at `body` when it is JSON, a 400 `malformed_json` when it is not.
 */
import { request as httpRequest } from 'node:http';
import fc from 'fast-check';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { allRoutes } from '../../server/api/routes';
import { BODY_LIMIT_BYTES } from '../../server/http/body';
import type { RouteDef } from '../../server/http/route';
import { BUN_CODE } from './_util';

let core: TestCore;

/** Every route that reads a request body: a declared JSON body, or a raw one (the inbox). */
const bodyRoutes = allRoutes.filter((r) => r.body !== undefined || r.method === 'post' || r.method === 'put' || r.method === 'patch');

/** A value for each path parameter that its schema accepts, preferring the resources made in beforeAll. */
const PARAM_CANDIDATES = ['fz', '1', 'dev', 'FZ_SECRET', 'fz-key'];
function pathFor(route: RouteDef): string {
  const shape = (route.params as z.ZodObject<Record<string, z.ZodType>> | undefined)?.shape ?? {};
  return route.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
    const schema = shape[name];
    const value = PARAM_CANDIDATES.find((c) => !schema || schema.safeParse(c).success);
    if (value === undefined) throw new Error(`no candidate value for {${name}} of ${route.path}`);
    return encodeURIComponent(value);
  });
}

interface Answer {
  status: number;
  type: string;
  text: string;
}

function send(route: RouteDef, body: Buffer, contentType = 'application/json'): Promise<Answer> {
  const u = new URL(core.url);
  const auth = route.auth === 'tenant' ? core.key : route.auth === 'admin' ? core.admin : null;
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: Number(u.port),
        method: route.method.toUpperCase(),
        path: pathFor(route),
        agent: false,
        headers: {
          'content-type': contentType,
          'content-length': String(body.length),
          ...(auth ? { authorization: `Bearer ${auth}` } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            type: String(res.headers['content-type'] ?? ''),
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    // A 413 may be answered before the whole body is sent: the socket closing under us is not a failure.
    req.on('error', reject);
    req.end(body);
  });
}

/** The outcome rule: below 500, and every 4xx a problem with a stable snake_case code and its own status. */
function expectAnswered(route: RouteDef, body: Buffer, res: Answer): void {
  const what = `${route.method.toUpperCase()} ${route.path} with ${body.length} bytes (${JSON.stringify(body.subarray(0, 60).toString('latin1'))}…)`;
  expect(res.status, `${what} → ${res.status} ${res.text.slice(0, 300)}`).toBeLessThan(500);
  expect(res.status, what).toBeGreaterThanOrEqual(200);
  if (res.status >= 400) {
    expect(res.type, `${what}: content type`).toMatch(/^application\/problem\+json/);
    const problem = JSON.parse(res.text) as { status?: unknown; code?: unknown };
    expect(problem.status, what).toBe(res.status);
    expect(String(problem.code), what).toMatch(/^[a-z][a-z0-9_]*$/);
  }
}

// ---- bodies

const DEEP = 100_000;
const nested = (kind: 'array' | 'object' | 'mixed', depth: number, ending: 'closed' | 'open' | 'junk'): string => {
  const open = kind === 'array' ? '[' : kind === 'object' ? '{"a":' : '[{"a":';
  const close = kind === 'array' ? ']' : kind === 'object' ? '}' : '}]';
  const levels = kind === 'mixed' ? Math.ceil(depth / 2) : depth;
  const inner = kind === 'array' ? '' : '1';
  const text = open.repeat(levels) + (ending === 'open' ? '' : inner + close.repeat(levels));
  return ending === 'junk' ? text + ']' : text;
};

/** Fixed cases every route gets. */
const CORPUS: { name: string; body: Buffer }[] = [
  { name: '20 KB of [', body: Buffer.from('['.repeat(20 * 1024)) },
  ...(['array', 'object', 'mixed'] as const).flatMap((kind) =>
    (['closed', 'open', 'junk'] as const).map((ending) => ({
      name: `${DEEP} levels, ${kind}, ${ending}`,
      body: Buffer.from(nested(kind, DEEP, ending)),
    })),
  ),
  { name: '129 levels inside an object', body: Buffer.from(`{"value": ${nested('array', 129, 'closed')}, "code": "x"}`) },
  {
    name: 'huge numbers',
    body: Buffer.from(`{"value": 1e999999, "timeout_ms": ${'9'.repeat(5000)}, "version": -${'9'.repeat(400)}, "ttl_seconds": 1e308}`),
  },
  { name: 'a tiny number', body: Buffer.from('{"value": 1e-400, "max_memory_mb": 4.9e-324, "version": -0}') },
  {
    name: 'invalid UTF-8',
    body: Buffer.concat([
      Buffer.from('{"value": "'),
      Buffer.from([0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0x80, 0xf4, 0x90]),
      Buffer.from('"}'),
    ]),
  },
  { name: 'lone surrogates', body: Buffer.from('{"value": "\\ud800\\udc00\\udfff\\ud800", "name": "\\ud83d", "code": "\\udc00"}') },
  { name: 'NUL and controls', body: Buffer.from('{"name": "a\\u0000b", "value": "\\u0007", "code": "\\u0000"}') },
  { name: 'a BOM', body: Buffer.from('\ufeff{"value": 1}') },
  { name: 'not an object', body: Buffer.from('[1,2,3]') },
  { name: 'null', body: Buffer.from('null') },
  { name: 'a bare string', body: Buffer.from('"x"') },
  {
    name: 'prototype keys',
    body: Buffer.from('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"x": 1}}, "value": {"__proto__": 1}}'),
  },
  { name: '1 MiB string', body: Buffer.from(JSON.stringify({ value: 'x'.repeat(1024 * 1024), code: 'y'.repeat(1024 * 1024) })) },
];

/** Fields the routes read, so random objects reach past the schema now and then. */
const FIELDS = [
  'name',
  'runtime',
  'description',
  'code',
  'files',
  'entrypoint',
  'timeout_ms',
  'max_memory_mb',
  'max_cpu_percent',
  'version',
  'value',
  'ttl_seconds',
  'provider',
  'base_url',
  'auth',
  'type',
  'secret',
  'header',
  'status',
  'times',
  'retry_after_seconds',
  'host',
  'action',
  'latency_ms',
  'data',
  'cols',
  'rows',
  'target',
  'max_concurrency',
  'callback_url',
  'match',
  'integration',
];
const nearValid = fc.dictionary(
  fc.constantFrom(...FIELDS),
  fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.integer(), fc.constantFrom('bun', 'python', 'dev', 'http', 'bearer', 'none', BUN_CODE)),
  { maxKeys: 6 },
);

const bodies: fc.Arbitrary<Buffer> = fc.oneof(
  fc.json({ maxDepth: 5 }).map((t) => Buffer.from(t)),
  nearValid.map((o) => Buffer.from(JSON.stringify(o))),
  fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)),
  fc.string({ unit: 'binary', maxLength: 300 }).map((s) => Buffer.from(s)),
  fc
    .tuple(
      fc.constantFrom<'array' | 'object' | 'mixed'>('array', 'object', 'mixed'),
      fc.integer({ min: 100, max: DEEP }),
      fc.constantFrom<'closed' | 'open' | 'junk'>('closed', 'open', 'junk'),
    )
    .map(([kind, depth, ending]) => Buffer.from(nested(kind, depth, ending))),
  fc.tuple(fc.json({ maxDepth: 3 }), fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 4 })).map(([t, at, bytes]) => {
    const b = Buffer.from(t);
    const i = b.length === 0 ? 0 : at % b.length;
    return Buffer.concat([b.subarray(0, i), Buffer.from(bytes), b.subarray(i)]);
  }),
  fc
    .tuple(
      fc.constantFrom('value', 'timeout_ms', 'version', 'ttl_seconds', 'max_memory_mb'),
      fc.integer({ min: 300, max: 400_000 }),
      fc.boolean(),
    )
    .map(([k, digits, neg]) => Buffer.from(`{"${k}": ${neg ? '-' : ''}${'9'.repeat(digits)}}`)),
);

// ---- the core

beforeAll(async () => {
  // Terminals off: a random valid body must not start shells (the body is still read and checked first).
  core = await startTestCore({ config: { terminal: false } });
  const setup: [string, string, unknown, string?][] = [
    ['POST', '/v1/snippets', { name: 'fz', runtime: 'bun' }],
    ['POST', '/v1/snippets/fz/versions', { code: BUN_CODE }],
    ['PUT', '/v1/snippets/fz/environments/dev', { version: 1 }],
    ['PUT', '/v1/secrets/FZ_SECRET', { value: 's' }],
    ['PUT', '/v1/store/fz', { value: 1 }],
    ['PUT', '/v1/integrations/fz', { provider: 'http', base_url: 'http://127.0.0.1:9', auth: { type: 'none' } }],
    ['POST', '/v1/environments', { name: 'fz' }],
    ['POST', '/_emu/tenants', { name: 'fz' }, 'admin'],
  ];
  for (const [method, path, body, who] of setup) {
    const r = await core.call(method, path, body, who ? { key: core.admin } : {});
    expect(r.status, `${method} ${path}: ${r.text}`).toBeLessThan(300);
  }
});
afterAll(async () => {
  await core?.stop();
});

describe('JSON never 500s, on every route that takes a body', () => {
  it('enumerates the body routes from the route declarations (/v1 and /_emu)', () => {
    const paths = bodyRoutes.map((r) => `${r.method} ${r.path}`);
    expect(paths).toEqual(
      expect.arrayContaining([
        'post /v1/snippets',
        'post /v1/invoke/{snippet}',
        'put /v1/store/{key}',
        'post /_emu/inbox/{name}',
        'post /_emu/tenants',
      ]),
    );
    expect(bodyRoutes.filter((r) => r.path.startsWith('/_emu/')).length).toBeGreaterThan(5);
    expect(bodyRoutes.filter((r) => r.path.startsWith('/v1/')).length).toBeGreaterThan(5);
  });

  it.each(CORPUS.map((c) => [c.name, c.body] as const))('%s: every route answers < 500, 4xx as problem+json', async (_name, body) => {
    for (const route of bodyRoutes) expectAnswered(route, body, await send(route, body));
  });

  it('the depth policy: 422 validation_failed when it is JSON, 400 malformed_json when it is not', async () => {
    const store = bodyRoutes.find((r) => r.path === '/v1/store/{key}')!;
    for (const kind of ['array', 'object', 'mixed'] as const) {
      const closed = await send(store, Buffer.from(nested(kind, DEEP, 'closed')));
      expect(closed.status, closed.text).toBe(422);
      expect(JSON.parse(closed.text)).toMatchObject({
        code: 'validation_failed',
        errors: [{ location: 'body', message: 'nests arrays/objects deeper than 128 levels' }],
      });
      for (const ending of ['open', 'junk'] as const) {
        const broken = await send(store, Buffer.from(nested(kind, DEEP, ending)));
        expect(broken.status, broken.text).toBe(400);
        expect(JSON.parse(broken.text).code).toBe('malformed_json');
      }
    }
    const atLimit = await send(store, Buffer.from(`{"value": ${nested('array', 127, 'closed')}}`));
    expect(atLimit.status, atLimit.text).toBe(200);
  });

  it('bodies of the whole size limit are answered (400/422), one byte more is a 413', async () => {
    const routes = bodyRoutes.filter((r) => ['/v1/snippets', '/v1/invoke/{snippet}', '/_emu/inbox/{name}'].includes(r.path));
    for (const route of routes) {
      for (const body of [
        Buffer.alloc(BODY_LIMIT_BYTES, '['),
        Buffer.from(nested('object', BODY_LIMIT_BYTES, 'open').slice(0, BODY_LIMIT_BYTES)),
      ]) {
        expectAnswered(route, body, await send(route, body));
      }
      const over = await send(route, Buffer.alloc(BODY_LIMIT_BYTES + 1, '[')).catch(() => null);
      if (over) expect(over.status).toBe(413); // or the connection closed while we were still sending
    }
  }, 60_000);

  it('random bodies (random JSON, near-valid objects, random bytes, deep nesting, huge numbers) on random routes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...bodyRoutes),
        bodies,
        fc.constantFrom('application/json', 'application/json', 'application/json', 'application/merge-patch+json', 'text/plain'),
        async (route, body, type) => {
          expectAnswered(route, body, await send(route, body, type));
        },
      ),
      { numRuns: 400 },
    );
  }, 60_000);

  it('the core is still well afterwards and logged no internal error', async () => {
    expect((await core.call('GET', '/v1/snippets/fz')).status).toBe(200);
    expect((await core.call('GET', '/readyz', undefined, { key: null })).status).toBe(200);
    expect(core.logs.filter((l) => l.includes('"internal error"'))).toEqual([]);
  });
});
