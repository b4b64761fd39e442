/**
 * Bad input gets a clear 4xx with a stable code, never a 500 and never a partial write (issue 2).
 * Table-driven: each case states the status and `code` (and, for validation, where the problem is);
 * after each, a snapshot of everything the tenant can see (and db.json's bytes) must be unchanged.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { request as httpRequest } from 'node:http';
import { BUN_CODE, expectProblem } from './_util';

let core: TestCore;

const JSON_CT = { 'content-type': 'application/json' };
const MiB = 1024 * 1024;

/** Everything observable through the API, plus db.json's bytes. */
async function snapshot(): Promise<{ api: unknown; db: string }> {
  const get = async (path: string, key: string | null = core.key) => {
    const r = await core.call('GET', path, undefined, { key });
    expect(r.status, `${path}: ${r.text}`).toBe(200);
    return r.json;
  };
  const snippets = (await get('/v1/snippets?limit=1000')).data;
  const perSnippet: Record<string, unknown> = {};
  for (const s of snippets) {
    perSnippet[s.name] = {
      versions: (await get(`/v1/snippets/${s.id}/versions?limit=1000`)).data,
      environments: (await get(`/v1/snippets/${s.id}/environments`)).data,
    };
  }
  const storeList = (await get('/v1/store?limit=1000')).data;
  const storeValues: Record<string, unknown> = {};
  for (const e of storeList) storeValues[e.key] = (await get(`/v1/store/${encodeURIComponent(e.key)}`)).value;
  const api = {
    snippets,
    perSnippet,
    environments: (await get('/v1/environments?limit=1000')).data,
    secrets: (await get('/v1/secrets?limit=1000')).data,
    revealed: core.emu.services.secrets.reveal(core.emu.services.tenants.get('local')),
    store: storeList,
    storeValues,
    integrations: (await get('/v1/integrations?limit=1000')).data,
    limits: await get('/v1/tenant/runtime-limits'),
    webhook: await get('/v1/tenant/webhook-secret'),
    tenants: (await get('/_emu/tenants', core.admin)).data,
  };
  const db = await readFile(join(core.dataDir, 'db.json'), 'utf8');
  return { api, db };
}

beforeAll(async () => {
  core = await startTestCore();
  const setup: [string, string, unknown][] = [
    ['POST', '/v1/snippets', { name: 'bi', runtime: 'bun' }],
    ['POST', '/v1/snippets/bi/versions', { code: BUN_CODE }],
    ['PUT', '/v1/snippets/bi/environments/dev', { version: 1 }],
    ['POST', '/v1/snippets', { name: 'bi-py', runtime: 'python' }],
    ['PUT', '/v1/secrets/EXISTING', { value: 'existing-value' }],
    ['PUT', '/v1/store/existing', { value: { n: 1 } }],
    ['PUT', '/v1/integrations/existing-int', { provider: 'openai', auth: { type: 'bearer', secret: 'EXISTING' } }],
    ['POST', '/v1/environments', { name: 'custom' }],
  ];
  for (const [m, p, b] of setup) {
    const r = await core.call(m, p, b);
    expect(r.status, `${m} ${p}: ${r.text}`).toBeLessThan(300);
  }
});
afterAll(async () => {
  await core?.stop();
});

interface Case {
  name: string;
  method: string;
  path: string;
  body?: unknown;
  raw?: string | Buffer;
  headers?: Record<string, string>;
  admin?: boolean;
  status: number;
  code: string;
  /** For validation problems: a location that must be among `errors`. */
  location?: string;
}

const json = (
  name: string,
  method: string,
  path: string,
  body: unknown,
  status: number,
  code: string,
  location?: string,
  admin = false,
): Case => ({
  name,
  method,
  path,
  body,
  status,
  code,
  location,
  admin,
});
const v422 = (name: string, method: string, path: string, body: unknown, location?: string, admin = false) =>
  json(name, method, path, body, 422, 'validation_failed', location, admin);
const rawCase = (
  name: string,
  method: string,
  path: string,
  raw: string | Buffer,
  headers: Record<string, string>,
  status: number,
  code: string,
  admin = false,
): Case => ({
  name,
  method,
  path,
  raw,
  headers,
  status,
  code,
  admin,
});

const VERSIONS = '/v1/snippets/bi/versions';
const LIMIT_FIELDS = ['timeout_ms', 'max_memory_mb', 'max_cpu_percent'] as const;
const CAPS = { timeout_ms: 900000, max_memory_mb: 2048, max_cpu_percent: 100 } as const;

const cases: Case[] = [
  // ---- malformed JSON → 400 malformed_json
  rawCase('malformed: truncated object', 'POST', '/v1/snippets', '{"name": "x",', JSON_CT, 400, 'malformed_json'),
  rawCase('malformed: unquoted keys', 'POST', VERSIONS, "{code: 'x'}", JSON_CT, 400, 'malformed_json'),
  rawCase('malformed: trailing brace', 'PUT', '/v1/snippets/bi/environments/prod', '{"version": 1}}', JSON_CT, 400, 'malformed_json'),
  rawCase('malformed: unterminated secret', 'PUT', '/v1/secrets/NEW_SECRET', '{"value": "abc"', JSON_CT, 400, 'malformed_json'),
  rawCase('malformed: NaN', 'PUT', '/v1/store/new-key', '{"value": NaN}', JSON_CT, 400, 'malformed_json'),
  rawCase('malformed: single quotes', 'PUT', '/v1/integrations/new-int', "{'provider': 'openai'}", JSON_CT, 400, 'malformed_json'),
  rawCase('malformed: garbage after', 'POST', '/v1/environments', '{"name":"newenv"}garbage', JSON_CT, 400, 'malformed_json'),
  rawCase('malformed: invalid UTF-8 bytes', 'POST', '/v1/snippets', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), JSON_CT, 400, 'malformed_json'),
  rawCase('malformed: /_emu limits', 'PATCH', '/_emu/tenants/local/limits', '{', JSON_CT, 400, 'malformed_json', true),
  rawCase('malformed: /_emu tenant create', 'POST', '/_emu/tenants', '{"name":', JSON_CT, 400, 'malformed_json', true),

  // ---- not JSON → 415
  rawCase(
    '415: text/plain',
    'POST',
    '/v1/snippets',
    '{"name":"t415","runtime":"bun"}',
    { 'content-type': 'text/plain' },
    415,
    'unsupported_media_type',
  ),
  rawCase(
    '415: form',
    'POST',
    '/v1/snippets',
    'name=t415&runtime=bun',
    { 'content-type': 'application/x-www-form-urlencoded' },
    415,
    'unsupported_media_type',
  ),
  rawCase(
    '415: multipart',
    'POST',
    '/v1/snippets',
    '--b\r\nContent-Disposition: form-data; name="name"\r\n\r\nt415\r\n--b--',
    { 'content-type': 'multipart/form-data; boundary=b' },
    415,
    'unsupported_media_type',
  ),
  rawCase(
    '415: store text/plain',
    'PUT',
    '/v1/store/new-key',
    '{"value":1}',
    { 'content-type': 'text/plain' },
    415,
    'unsupported_media_type',
  ),
  rawCase('415: no content type', 'PUT', '/v1/secrets/NEW_SECRET', Buffer.from('{"value":"v"}'), {}, 415, 'unsupported_media_type'),
  rawCase(
    '415: application/jsonp',
    'POST',
    '/v1/environments',
    '{"name":"newenv"}',
    { 'content-type': 'application/jsonp' },
    415,
    'unsupported_media_type',
  ),

  // ---- body over 6 MiB → 413
  rawCase(
    '413: 7 MiB store body',
    'PUT',
    '/v1/store/new-key',
    JSON.stringify({ value: 'x'.repeat(7 * MiB) }),
    JSON_CT,
    413,
    'payload_too_large',
  ),
  rawCase(
    '413: 6.5 MiB version body',
    'POST',
    VERSIONS,
    JSON.stringify({ code: 'y'.repeat(6.5 * MiB) }),
    JSON_CT,
    413,
    'payload_too_large',
  ),

  // ---- a body that is not an object, or is missing
  rawCase('body: JSON array', 'POST', '/v1/snippets', '[]', JSON_CT, 422, 'validation_failed'),
  rawCase('body: JSON string', 'POST', '/v1/snippets', '"bi2"', JSON_CT, 422, 'validation_failed'),
  rawCase('body: JSON null', 'POST', '/v1/snippets', 'null', JSON_CT, 422, 'validation_failed'),
  rawCase('body: JSON number', 'PUT', '/v1/store/new-key', '42', JSON_CT, 422, 'validation_failed'),
  json('body: missing on create snippet', 'POST', '/v1/snippets', undefined, 422, 'validation_failed', 'body'),
  json('body: missing on create version', 'POST', VERSIONS, undefined, 422, 'validation_failed', 'body'),
  json('body: missing on deploy', 'PUT', '/v1/snippets/bi/environments/prod', undefined, 422, 'validation_failed', 'body'),
  json('body: missing on store put', 'PUT', '/v1/store/new-key', undefined, 422, 'validation_failed', 'body'),

  // ---- wrong types
  v422('type: name number', 'POST', '/v1/snippets', { name: 123, runtime: 'bun' }, 'body.name'),
  v422('type: name null', 'POST', '/v1/snippets', { name: null, runtime: 'bun' }, 'body.name'),
  v422('type: runtime number', 'POST', '/v1/snippets', { name: 'tt', runtime: 1 }, 'body.runtime'),
  v422('type: description number', 'POST', '/v1/snippets', { name: 'tt', runtime: 'bun', description: 5 }, 'body.description'),
  v422(
    'type: description too long',
    'POST',
    '/v1/snippets',
    { name: 'tt', runtime: 'bun', description: 'd'.repeat(1001) },
    'body.description',
  ),
  v422('type: code number', 'POST', VERSIONS, { code: 123 }, 'body.code'),
  v422('type: files array', 'POST', VERSIONS, { files: ['index.ts'] }, 'body.files'),
  v422('type: file content number', 'POST', VERSIONS, { files: { 'index.ts': 5 } }, 'body.files.index.ts'),
  v422('type: entrypoint number', 'POST', VERSIONS, { code: BUN_CODE, entrypoint: 1 }, 'body.entrypoint'),
  v422('type: deploy version string', 'PUT', '/v1/snippets/bi/environments/prod', { version: '1' }, 'body.version'),
  v422('type: deploy version 0', 'PUT', '/v1/snippets/bi/environments/prod', { version: 0 }, 'body.version'),
  v422('type: deploy version -1', 'PUT', '/v1/snippets/bi/environments/prod', { version: -1 }, 'body.version'),
  v422('type: deploy version 1.5', 'PUT', '/v1/snippets/bi/environments/prod', { version: 1.5 }, 'body.version'),
  v422('type: deploy version missing', 'PUT', '/v1/snippets/bi/environments/prod', {}, 'body.version'),
  v422('type: secret value number', 'PUT', '/v1/secrets/NEW_SECRET', { value: 123 }, 'body.value'),
  v422('type: secret value empty', 'PUT', '/v1/secrets/NEW_SECRET', { value: '' }, 'body.value'),
  v422('type: secret value with NUL', 'PUT', '/v1/secrets/NEW_SECRET', { value: 'a\u0000b' }, 'body.value'),
  v422('type: secret value over 64 KiB', 'PUT', '/v1/secrets/NEW_SECRET', { value: 's'.repeat(64 * 1024 + 1) }, 'body.value'),
  v422('type: secret value missing', 'PUT', '/v1/secrets/NEW_SECRET', {}, 'body.value'),
  v422('type: replacing a secret with a number', 'PUT', '/v1/secrets/EXISTING', { value: 7 }, 'body.value'),
  v422('type: store value missing', 'PUT', '/v1/store/new-key', {}, 'body.value'),
  v422('type: store ttl string', 'PUT', '/v1/store/new-key', { value: 1, ttl_seconds: '10' }, 'body.ttl_seconds'),
  v422('type: store ttl 0', 'PUT', '/v1/store/new-key', { value: 1, ttl_seconds: 0 }, 'body.ttl_seconds'),
  v422('type: store ttl -1', 'PUT', '/v1/store/new-key', { value: 1, ttl_seconds: -1 }, 'body.ttl_seconds'),
  v422('type: store ttl 1.5', 'PUT', '/v1/store/new-key', { value: 1, ttl_seconds: 1.5 }, 'body.ttl_seconds'),
  v422('type: replacing a store value with a bad ttl', 'PUT', '/v1/store/existing', { value: 2, ttl_seconds: 'x' }, 'body.ttl_seconds'),
  v422('type: env name number', 'POST', '/v1/environments', { name: 5 }, 'body.name'),
  v422('type: caps string', 'PATCH', '/_emu/tenants/local/limits', { max_memory_mb: '512' }, 'body.max_memory_mb', true),

  // ---- unknown runtime
  v422('runtime: node', 'POST', '/v1/snippets', { name: 'rt', runtime: 'node' }, 'body.runtime'),
  v422('runtime: Python (case)', 'POST', '/v1/snippets', { name: 'rt', runtime: 'Python' }, 'body.runtime'),
  v422('runtime: empty', 'POST', '/v1/snippets', { name: 'rt', runtime: '' }, 'body.runtime'),
  v422('runtime: missing', 'POST', '/v1/snippets', { name: 'rt' }, 'body.runtime'),

  // ---- bad names
  ...['Upper', '-lead', 'a'.repeat(64), 'under_score', '', 'has space', 'dot.name', 'ünï', 'emoji😀'].flatMap((name) => [
    v422(`name '${name.slice(0, 12)}': snippet`, 'POST', '/v1/snippets', { name, runtime: 'bun' }, 'body.name'),
    v422(`name '${name.slice(0, 12)}': environment`, 'POST', '/v1/environments', { name }, 'body.name'),
    v422(`name '${name.slice(0, 12)}': tenant`, 'POST', '/_emu/tenants', { name }, 'body.name', true),
  ]),
  ...['Upper', '-lead', 'a'.repeat(64), 'under_score'].map((name) =>
    v422(
      `name '${name.slice(0, 12)}': integration path`,
      'PUT',
      `/v1/integrations/${name}`,
      { provider: 'openai', auth: { type: 'none' } },
      'path.name',
    ),
  ),
  ...['lower', '1ABC', 'A-B', 'SVC_RESERVED', 'SVC_'].map((name) =>
    v422(`secret name '${name}'`, 'PUT', `/v1/secrets/${name}`, { value: 'v' }, 'path.name'),
  ),
  v422('store key over 512 chars', 'PUT', `/v1/store/${'k'.repeat(513)}`, { value: 1 }, 'path.key'),
  v422('store key with a space', 'PUT', '/v1/store/a%20b', { value: 1 }, 'path.key'),
  v422('store key with a non-ASCII char', 'PUT', '/v1/store/%C3%A9', { value: 1 }, 'path.key'),

  // ---- version limits: 0, -1, 1.5, "10", null, true, huge → 422; above the cap → limit_exceeds_tenant_cap
  ...LIMIT_FIELDS.flatMap((field) => [
    ...([0, -1, 1.5, '10', null, true, 1e20] as unknown[]).map((bad) =>
      v422(`limit ${field}=${JSON.stringify(bad)}`, 'POST', VERSIONS, { code: BUN_CODE, [field]: bad }, `body.${field}`),
    ),
    json(
      `limit ${field} above cap`,
      'POST',
      VERSIONS,
      { code: BUN_CODE, [field]: CAPS[field] + 1 },
      422,
      'limit_exceeds_tenant_cap',
      `body.${field}`,
    ),
  ]),
  ...(['timeout_ms', 'max_memory_mb', 'max_cpu_percent', 'max_concurrency'] as const).flatMap((field) =>
    ([0, -1, 1.5, '10'] as unknown[]).map((bad) =>
      v422(`caps ${field}=${JSON.stringify(bad)}`, 'PATCH', '/_emu/tenants/local/limits', { [field]: bad }, `body.${field}`, true),
    ),
  ),

  // ---- code
  v422('code: empty', 'POST', VERSIONS, { code: '' }, 'body.code'),
  v422('code: whitespace only', 'POST', VERSIONS, { code: '  \n\t ' }, 'body.code'),
  v422('code: empty entry file', 'POST', VERSIONS, { files: { 'index.ts': '', 'lib.ts': 'export {}' } }),
  json('code: over 1 MiB', 'POST', VERSIONS, { code: 'x'.repeat(MiB + 1) }, 413, 'payload_too_large'),
  json(
    'code: files over 1 MiB in all',
    'POST',
    VERSIONS,
    { files: { 'index.ts': BUN_CODE, 'big.ts': 'x'.repeat(MiB) } },
    413,
    'payload_too_large',
  ),
  v422('code: both code and files', 'POST', VERSIONS, { code: BUN_CODE, files: { 'index.ts': BUN_CODE } }, 'body'),
  v422('code: neither code nor files', 'POST', VERSIONS, { timeout_ms: 1000 }),
  v422('code: files empty', 'POST', VERSIONS, { files: {} }, 'body.files'),
  v422(
    'code: too many files',
    'POST',
    VERSIONS,
    { files: Object.fromEntries([['index.ts', BUN_CODE], ...Array.from({ length: 200 }, (_, i) => [`f${i}.ts`, 'export {}'])]) },
    'body.files',
  ),
  v422('entrypoint: missing (no default among files)', 'POST', VERSIONS, { files: { 'lib.ts': BUN_CODE } }, 'body.entrypoint'),
  v422('entrypoint: not among files', 'POST', VERSIONS, { files: { 'index.ts': BUN_CODE }, entrypoint: 'main.ts' }, 'body.entrypoint'),
  v422('entrypoint: traversal', 'POST', VERSIONS, { code: BUN_CODE, entrypoint: '../index.ts' }, 'body.entrypoint'),
  v422('entrypoint: absolute', 'POST', VERSIONS, { code: BUN_CODE, entrypoint: '/index.ts' }, 'body.entrypoint'),
  ...[
    '../x.ts',
    'a/../../x.ts',
    'a/../index.ts',
    '/etc/x.ts',
    'a\\b.ts',
    './index.ts',
    'a//b.ts',
    'a/.',
    'x\u0000.ts',
    'p'.repeat(256),
  ].map((p) =>
    v422(`files path ${JSON.stringify(p.slice(0, 16))}`, 'POST', VERSIONS, { files: { 'index.ts': BUN_CODE, [p]: 'export {}' } }),
  ),

  // ---- deploying what does not exist → 404
  json('deploy: missing version', 'PUT', '/v1/snippets/bi/environments/prod', { version: 99 }, 404, 'not_found'),
  json('deploy: missing version to custom env', 'PUT', '/v1/snippets/bi/environments/custom', { version: 2 }, 404, 'not_found'),
  json('deploy: missing env', 'PUT', '/v1/snippets/bi/environments/nope', { version: 1 }, 404, 'not_found'),
  json('deploy: missing snippet', 'PUT', '/v1/snippets/nope/environments/prod', { version: 1 }, 404, 'not_found'),
  json('deploy: snippet without versions', 'PUT', '/v1/snippets/bi-py/environments/prod', { version: 1 }, 404, 'not_found'),
  json('undeploy: nothing deployed', 'DELETE', '/v1/snippets/bi/environments/prod', undefined, 404, 'not_found'),
  json('version of a missing snippet', 'POST', '/v1/snippets/nope/versions', { code: BUN_CODE }, 404, 'not_found'),

  // ---- unknown fields (strict) → 422
  v422('strict: snippet', 'POST', '/v1/snippets', { name: 'strict', runtime: 'bun', extra: 1 }),
  v422('strict: version', 'POST', VERSIONS, { code: BUN_CODE, memory_mb: 5 }),
  v422('strict: deploy', 'PUT', '/v1/snippets/bi/environments/prod', { version: 1, force: true }),
  v422('strict: secret', 'PUT', '/v1/secrets/NEW_SECRET', { value: 'v', note: 'x' }),
  v422('strict: store', 'PUT', '/v1/store/new-key', { value: 1, ttl: 5 }),
  v422('strict: environment', 'POST', '/v1/environments', { name: 'strict-env', builtin: true }),
  v422('strict: integration', 'PUT', '/v1/integrations/new-int', { provider: 'openai', auth: { type: 'none' }, extra: 1 }),
  v422('strict: integration auth', 'PUT', '/v1/integrations/new-int', { provider: 'openai', auth: { type: 'none', token: 'x' } }),
  v422('strict: caps', 'PATCH', '/_emu/tenants/local/limits', { max_memory: 5 }, undefined, true),
  v422('strict: tenant', 'POST', '/_emu/tenants', { name: 'strict-t', caps: {} }, undefined, true),

  // ---- query and path parameters
  ...['limit=0', 'limit=1001', 'limit=-1', 'limit=abc', 'limit=1.5', 'limit=1&limit=2', 'cursor=garbage', `cursor=${'c'.repeat(1025)}`].map(
    (q) => json(`query ${q.slice(0, 20)}`, 'GET', `/v1/snippets?${q}`, undefined, 400, 'validation_failed'),
  ),
  json('query: prefix over 512', 'GET', `/v1/store?prefix=${'p'.repeat(513)}`, undefined, 400, 'validation_failed'),
  json(
    'query: a cursor of another list shape',
    'GET',
    `/v1/snippets/bi/versions?cursor=${Buffer.from('{"x":1}').toString('base64url')}`,
    undefined,
    400,
    'validation_failed',
  ),
  v422('path: version 0', 'GET', '/v1/snippets/bi/versions/0', undefined, 'path.version'),
  v422('path: version abc', 'GET', '/v1/snippets/bi/versions/abc', undefined, 'path.version'),
  v422('path: version -1', 'GET', '/v1/snippets/bi/versions/-1', undefined, 'path.version'),
  v422('path: version 1e3', 'GET', '/v1/snippets/bi/versions/1e3', undefined, 'path.version'),
];

describe('bad input: a clear 4xx with a stable code, never a 500, never a partial write', () => {
  // Taken before each test, not once: the tests that do write (the snapshot check, the prototype-named files)
  // may run first in a shuffled order, and "nothing written" is about the request under test.
  let before: Awaited<ReturnType<typeof snapshot>>;
  beforeEach(async () => {
    before = await snapshot();
  });

  it('the table covers every kind of bad input named in the issue', () => {
    const codes = new Set(cases.map((c) => c.code));
    for (const c of [
      'malformed_json',
      'unsupported_media_type',
      'payload_too_large',
      'validation_failed',
      'limit_exceeds_tenant_cap',
      'not_found',
    ]) {
      expect(codes).toContain(c);
    }
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const res = await core.call(c.method, c.path, c.body, {
      key: c.admin ? core.admin : core.key,
      ...(c.raw !== undefined ? { raw: c.raw } : {}),
      ...(c.headers ? { headers: c.headers } : {}),
    });
    expect(res.status).not.toBe(500);
    expectProblem(res, c.status, c.code);
    if (c.status === 422 || c.status === 400) expect(Array.isArray(res.json.errors) || c.code === 'malformed_json').toBe(true);
    if (c.location) {
      expect(
        res.json.errors.map((e: { location: string }) => e.location),
        res.text.slice(0, 400),
      ).toContain(c.location);
    }
    if (res.json.errors) {
      for (const e of res.json.errors) {
        expect(typeof e.location).toBe('string');
        expect(typeof e.message).toBe('string');
        expect(e.message.length).toBeGreaterThan(0);
      }
    }
    const after = await snapshot();
    expect(after.api).toEqual(before.api);
    expect(after.db === before.db, 'db.json changed').toBe(true);
  });

  it('odd URLs are a 4xx problem, never a 500', async () => {
    const paths = [
      '/%zz',
      '/%',
      '/%E0%A4%A',
      '/assets/%zz',
      '/v1/%zz',
      '/v1/snippets/%zz',
      '/v1/snippets/%E0%A4%A/versions',
      '/v1/store/%',
      '/_emu/tenants/%zz',
      '/v1/secrets/%zz',
      '/..%2F..%2Fetc%2Fpasswd',
      '/v1/snippets/bi/versions/%00',
    ];
    const bad: string[] = [];
    for (const path of paths) {
      for (const key of [core.key, core.admin]) {
        const res = await core.call('GET', path, undefined, { key });
        if (res.status >= 500 || res.status < 400) bad.push(`${path} → ${res.status} ${res.text.slice(0, 120)}`);
        else expect(res.headers.get('content-type'), path).toMatch(/^application\/problem\+json/);
      }
    }
    expect(bad).toEqual([]);
    const after = await snapshot();
    expect(after.api).toEqual(before.api);
  });

  it('a deeply nested JSON value (10 000 levels, 20 KB) is a 4xx problem, never a 500, and nothing is written', async () => {
    const depth = 10_000;
    const bodies: [string, string][] = [
      ['/v1/store/deep-array', `{"value":${'['.repeat(depth)}${']'.repeat(depth)}}`],
      ['/v1/store/deep-object', `{"value":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`],
    ];
    const bad: string[] = [];
    for (const [path, raw] of bodies) {
      const res = await core.call('PUT', path, undefined, { raw, headers: JSON_CT });
      if (res.status < 400 || res.status >= 500) bad.push(`PUT ${path} (${raw.length} bytes) → ${res.status} ${res.text.slice(0, 100)}`);
      else expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
    expect(bad).toEqual([]);
    const after = await snapshot();
    expect(after.api).toEqual(before.api);
  });

  it('a chunked body (no Content-Length) over 6 MiB → 413 payload_too_large, nothing written', async () => {
    const u = new URL(core.url);
    const res = await new Promise<{ status: number; type: string; text: string }>((resolve, reject) => {
      const req = httpRequest(
        {
          host: u.hostname,
          port: Number(u.port),
          method: 'PUT',
          path: '/v1/store/chunked',
          headers: { authorization: `Bearer ${core.key}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        },
        (r) => {
          let text = '';
          r.on('data', (c: Buffer) => (text += c.toString()));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, type: String(r.headers['content-type']), text }));
        },
      );
      req.on('error', reject);
      req.write('{"value":"');
      const chunk = 'x'.repeat(64 * 1024);
      let sent = 0;
      const pump = () => {
        while (sent < 7 * 16) {
          sent++;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end('"}');
      };
      pump();
    });
    expect(res.status, res.text.slice(0, 200)).toBe(413);
    expect(res.type).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(res.text).code).toBe('payload_too_large');
    expect((await snapshot()).api).toEqual(before.api);
    expect((await core.call('GET', '/healthz')).status).toBe(200);
  });

  it('a file named like an Object.prototype member is kept or refused, never silently dropped', async () => {
    const dropped: string[] = [];
    for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      const raw = `{"files": {"index.ts": ${JSON.stringify(BUN_CODE)}, "${name}": "export const a = 1"}}`;
      const res = await core.call('POST', '/v1/snippets/bi-py/versions', undefined, {
        raw: raw.replace('index.ts', 'main.py'),
        headers: JSON_CT,
      });
      if (res.status === 201) {
        const read = await core.call('GET', `/v1/snippets/bi-py/versions/${res.json.version}`);
        if (!Object.hasOwn(read.json.files, name))
          dropped.push(`${name}: 201 but the file is gone (${Object.keys(read.json.files).join(', ')})`);
        expect(res.json.manifest.map((f: { path: string }) => f.path)).toContain(name);
      } else {
        expectProblem(res, 422, 'validation_failed');
      }
    }
    expect(dropped).toEqual([]);
  });

  it('the snapshot does see writes (so the checks above can fail)', async () => {
    // Writes to things of its own only (created, then changed): the table's cases rely on what beforeAll set
    // up (bi has one version, nothing in prod, EXISTING's value), and they may run after this test.
    const writes: [string, string, unknown, boolean?][] = [
      ['POST', '/v1/snippets', { name: 'probe', runtime: 'bun' }],
      ['POST', '/v1/snippets/probe/versions', { code: BUN_CODE }],
      ['PUT', '/v1/snippets/probe/environments/prod', { version: 1 }],
      ['PUT', '/v1/secrets/PROBE', { value: 'first' }],
      ['PUT', '/v1/secrets/PROBE', { value: 'changed' }],
      ['PUT', '/v1/store/probe', { value: { n: 1 } }],
      ['PUT', '/v1/store/probe', { value: { n: 2 } }],
      ['PUT', '/v1/integrations/probe-int', { provider: 'openai', auth: { type: 'bearer', secret: 'PROBE' } }],
      ['PUT', '/v1/integrations/probe-int', { provider: 'openai', auth: { type: 'none' } }],
      ['POST', '/v1/environments', { name: 'probe-env' }],
      ['POST', '/_emu/tenants', { name: 'probe-tenant' }, true],
      ['PATCH', '/_emu/tenants/probe-tenant/limits', { max_concurrency: 3 }, true],
    ];
    let prev = await snapshot();
    for (const [m, p, b, admin] of writes) {
      const r = await core.call(m, p, b, admin ? { key: core.admin } : {});
      expect(r.status, `${m} ${p} ${r.text}`).toBeLessThan(300);
      const now = await snapshot();
      expect(now.api, `${m} ${p}`).not.toEqual(prev.api);
      expect(now.db).not.toBe(prev.db);
      prev = now;
    }
  });
});
