/**
 * Tenant isolation (issue 2): another tenant's resource answers exactly the same 404 as a missing one.
 *
 * Tenant A is `local`; tenant B is created through /_emu. For every route that takes an id or a name,
 * B's request for A's resource and B's request for a never-existing resource of the same shape both
 * answer 404, and their bodies are byte-identical once the request id is replaced. Where the path can be
 * known before A creates the resource, B's answer for the very same path before and after A created it
 * is compared too (the strongest form: same bytes for the same request).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type Res, type TestCore } from '../helpers/core';
import { allRoutes } from '../../server/api/routes';
import { BUN_CODE, expectProblem, newTenant } from './_util';

let core: TestCore;
let bKey: string;
let aSnippetId: string;
let neverSnippetId: string;

const A = {
  snippet: 'alpha-snip',
  env: 'alpha-env',
  secret: 'ALPHA_SECRET',
  secretValue: 'alpha-secret-value-do-not-leak',
  storeKey: 'alpha/key',
  storeValue: { owner: 'alpha', n: 1 },
  integration: 'alpha-int',
  invocation: '',
};
const B_OWN_SNIPPET = 'bravo-own';

/** Same-shape names that exist for no tenant. */
const NEVER = {
  snippet: 'zzzzz-snip',
  env: 'zzzzz-env',
  secret: 'ZZZZZ_SECRET',
  storeKey: 'zzzzz/key',
  integration: 'zzzzz-int',
  invocation: 'inv_' + 'Z'.repeat(20),
};

interface Row {
  name: string;
  method: string;
  /** B's request for A's resource, and the same request for a never-existing one. */
  path: (ids: { snippet: string; env: string; secret: string; storeKey: string; integration: string; invocation: string }) => string;
  body?: unknown;
  /** Whether the path is known before A creates anything (everything but snippet ids). */
  knownBefore: boolean;
  /** Use the snippet's id rather than its name. */
  byId?: boolean;
}

const enc = encodeURIComponent;
const rows: Row[] = [
  { name: 'GET snippet by name', method: 'GET', path: (i) => `/v1/snippets/${i.snippet}`, knownBefore: true },
  { name: 'GET snippet by id', method: 'GET', path: (i) => `/v1/snippets/${i.snippet}`, knownBefore: false, byId: true },
  { name: 'DELETE snippet by name', method: 'DELETE', path: (i) => `/v1/snippets/${i.snippet}`, knownBefore: true },
  { name: 'DELETE snippet by id', method: 'DELETE', path: (i) => `/v1/snippets/${i.snippet}`, knownBefore: false, byId: true },
  { name: 'POST version', method: 'POST', path: (i) => `/v1/snippets/${i.snippet}/versions`, body: { code: BUN_CODE }, knownBefore: true },
  {
    name: 'POST version by id',
    method: 'POST',
    path: (i) => `/v1/snippets/${i.snippet}/versions`,
    body: { code: BUN_CODE },
    knownBefore: false,
    byId: true,
  },
  { name: 'GET versions', method: 'GET', path: (i) => `/v1/snippets/${i.snippet}/versions`, knownBefore: true },
  { name: 'GET versions by id', method: 'GET', path: (i) => `/v1/snippets/${i.snippet}/versions`, knownBefore: false, byId: true },
  { name: 'GET version 1', method: 'GET', path: (i) => `/v1/snippets/${i.snippet}/versions/1`, knownBefore: true },
  { name: 'GET version 2 by id', method: 'GET', path: (i) => `/v1/snippets/${i.snippet}/versions/2`, knownBefore: false, byId: true },
  { name: 'GET environments of snippet', method: 'GET', path: (i) => `/v1/snippets/${i.snippet}/environments`, knownBefore: true },
  {
    name: 'PUT deploy (A snippet, builtin env)',
    method: 'PUT',
    path: (i) => `/v1/snippets/${i.snippet}/environments/prod`,
    body: { version: 1 },
    knownBefore: true,
  },
  {
    name: 'PUT deploy by id',
    method: 'PUT',
    path: (i) => `/v1/snippets/${i.snippet}/environments/prod`,
    body: { version: 1 },
    knownBefore: false,
    byId: true,
  },
  {
    name: 'PUT deploy (A snippet, A env)',
    method: 'PUT',
    path: (i) => `/v1/snippets/${i.snippet}/environments/${i.env}`,
    body: { version: 1 },
    knownBefore: true,
  },
  {
    name: 'PUT deploy (B snippet, A env)',
    method: 'PUT',
    path: (i) => `/v1/snippets/${B_OWN_SNIPPET}/environments/${i.env}`,
    body: { version: 1 },
    knownBefore: true,
  },
  {
    name: 'DELETE undeploy (A snippet, prod)',
    method: 'DELETE',
    path: (i) => `/v1/snippets/${i.snippet}/environments/prod`,
    knownBefore: true,
  },
  {
    name: 'DELETE undeploy by id',
    method: 'DELETE',
    path: (i) => `/v1/snippets/${i.snippet}/environments/prod`,
    knownBefore: false,
    byId: true,
  },
  {
    name: 'DELETE undeploy (B snippet, A env)',
    method: 'DELETE',
    path: (i) => `/v1/snippets/${B_OWN_SNIPPET}/environments/${i.env}`,
    knownBefore: true,
  },
  { name: 'DELETE environment', method: 'DELETE', path: (i) => `/v1/environments/${i.env}`, knownBefore: true },
  { name: 'DELETE secret', method: 'DELETE', path: (i) => `/v1/secrets/${i.secret}`, knownBefore: true },
  { name: 'GET store key', method: 'GET', path: (i) => `/v1/store/${enc(i.storeKey)}`, knownBefore: true },
  { name: 'DELETE store key', method: 'DELETE', path: (i) => `/v1/store/${enc(i.storeKey)}`, knownBefore: true },
  { name: 'GET integration', method: 'GET', path: (i) => `/v1/integrations/${i.integration}`, knownBefore: true },
  { name: 'DELETE integration', method: 'DELETE', path: (i) => `/v1/integrations/${i.integration}`, knownBefore: true },
  { name: 'POST invoke by name', method: 'POST', path: (i) => `/v1/invoke/${i.snippet}`, body: {}, knownBefore: true },
  { name: 'POST invoke by id', method: 'POST', path: (i) => `/v1/invoke/${i.snippet}`, body: {}, knownBefore: false, byId: true },
  { name: 'POST invoke pinned version', method: 'POST', path: (i) => `/v1/invoke/${i.snippet}?version=1`, body: {}, knownBefore: true },
  {
    name: 'POST invoke (A snippet, A env)',
    method: 'POST',
    path: (i) => `/v1/invoke/${i.snippet}?env=${i.env}`,
    body: {},
    knownBefore: true,
  },
  { name: 'GET invocation', method: 'GET', path: (i) => `/v1/invocations/${i.invocation}`, knownBefore: false },
  { name: 'GET invocation logs', method: 'GET', path: (i) => `/v1/invocations/${i.invocation}/logs`, knownBefore: false },
  { name: 'POST cancel invocation', method: 'POST', path: (i) => `/v1/invocations/${i.invocation}/cancel`, knownBefore: false },
  {
    name: 'POST redeliver callback',
    method: 'POST',
    path: (i) => `/v1/invocations/${i.invocation}/callback/redeliver`,
    knownBefore: false,
  },
];

const aIds = () => ({ ...A, snippet: A.snippet });
const aIdsById = () => ({ ...A, snippet: aSnippetId });
const neverIds = () => ({ ...NEVER });
const neverIdsById = () => ({ ...NEVER, snippet: neverSnippetId });

/** The raw body with the request id replaced, so two answers can be compared byte for byte. */
function normalized(res: Res): string {
  const id = res.headers.get('x-request-id');
  expect(id).toBeTruthy();
  expect(res.text).toContain(id!);
  return res.text.split(id!).join('<request-id>');
}

/** The response headers that may differ between two otherwise identical answers. */
const VARYING_HEADERS = new Set(['x-request-id', 'date']);
function headerShape(res: Res): [string, string][] {
  return [...res.headers.entries()].filter(([k]) => !VARYING_HEADERS.has(k)).sort(([a], [b]) => a.localeCompare(b));
}

const asB = (method: string, path: string, body?: unknown) => core.call(method, path, body, { key: bKey });

const beforeAnswers = new Map<string, Res>();

beforeAll(async () => {
  core = await startTestCore();
  bKey = await newTenant(core, 'bravo');
  // B has a snippet of its own with a version, to aim at A's environment.
  expect((await asB('POST', '/v1/snippets', { name: B_OWN_SNIPPET, runtime: 'bun' })).status).toBe(201);
  expect((await asB('POST', `/v1/snippets/${B_OWN_SNIPPET}/versions`, { code: BUN_CODE })).status).toBe(201);

  // B's answers for A's paths before A has anything: these are answers for never-existing resources.
  for (const row of rows.filter((r) => r.knownBefore)) beforeAnswers.set(row.name, await asB(row.method, row.path(aIds()), row.body));

  // Tenant A (local) creates one of everything.
  const a = (m: string, p: string, b?: unknown) => core.call(m, p, b);
  const s = await a('POST', '/v1/snippets', { name: A.snippet, runtime: 'bun' });
  expect(s.status).toBe(201);
  aSnippetId = s.json.id;
  for (const [m, p, b] of [
    ['POST', `/v1/snippets/${A.snippet}/versions`, { code: BUN_CODE }],
    ['POST', `/v1/snippets/${A.snippet}/versions`, { code: BUN_CODE + '// 2\n' }],
    ['PUT', `/v1/snippets/${A.snippet}/environments/prod`, { version: 2 }],
    ['POST', '/v1/environments', { name: A.env }],
    ['PUT', `/v1/snippets/${A.snippet}/environments/${A.env}`, { version: 1 }],
    ['PUT', `/v1/secrets/${A.secret}`, { value: A.secretValue }],
    ['PUT', `/v1/store/${enc(A.storeKey)}`, { value: A.storeValue }],
    ['PUT', `/v1/integrations/${A.integration}`, { provider: 'openai', auth: { type: 'bearer', secret: A.secret } }],
  ] as [string, string, unknown][]) {
    const r = await a(m, p, b);
    expect(r.status, `${m} ${p}: ${r.text}`).toBeLessThan(300);
  }
  // An invocation of A's, for the invocation routes.
  const inv = await a('POST', `/v1/invoke/${A.snippet}`, { hello: 'alpha' });
  expect(inv.status, inv.text).toBe(200);
  A.invocation = inv.headers.get('x-invocation-id')!;
  expect(A.invocation).toMatch(/^inv_/);
  expect(A.invocation).toHaveLength(NEVER.invocation.length);
  // A never-existing snippet id of the same shape as A's.
  neverSnippetId = 'snp_' + 'Z'.repeat(aSnippetId.length - 4);
  expect(neverSnippetId).toHaveLength(aSnippetId.length);
  expect(neverSnippetId).not.toBe(aSnippetId);
});
afterAll(async () => {
  await core?.stop();
});

/** A's state as A sees it. */
async function aState() {
  const g = async (p: string) => {
    const r = await core.call('GET', p);
    expect(r.status, `${p}: ${r.text}`).toBe(200);
    return r.json;
  };
  return {
    snippet: await g(`/v1/snippets/${A.snippet}`),
    versions: (await g(`/v1/snippets/${A.snippet}/versions`)).data,
    envs: (await g(`/v1/snippets/${A.snippet}/environments`)).data,
    environments: (await g('/v1/environments')).data,
    secrets: (await g('/v1/secrets')).data,
    revealed: core.emu.services.secrets.reveal(core.emu.services.tenants.get('local')),
    store: await g(`/v1/store/${enc(A.storeKey)}`),
    integration: await g(`/v1/integrations/${A.integration}`),
  };
}

describe("cross-tenant: another tenant's resource is exactly as missing as one that never existed", () => {
  let aBefore: Awaited<ReturnType<typeof aState>>;
  beforeAll(async () => {
    aBefore = await aState();
  });

  it.each(rows.map((r) => [r.name, r] as const))('%s', async (_n, row) => {
    const ids = row.byId ? aIdsById() : aIds();
    const never = row.byId ? neverIdsById() : neverIds();
    const forA = await asB(row.method, row.path(ids), row.body);
    const forNever = await asB(row.method, row.path(never), row.body);

    expectProblem(forA, 404, 'not_found');
    expectProblem(forNever, 404, 'not_found');

    // Same bytes once the request id is replaced and the never-existing identifier is put back.
    let neverText = normalized(forNever);
    for (const k of Object.keys(never) as (keyof typeof never)[]) {
      if (never[k] !== ids[k]) neverText = neverText.split(never[k]).join(ids[k]);
    }
    expect(normalized(forA)).toBe(neverText);
    expect(headerShape(forA).map(([k]) => k)).toEqual(headerShape(forNever).map(([k]) => k));
    expect(forA.headers.get('content-type')).toBe(forNever.headers.get('content-type'));

    // Nothing of A's leaks into the answer.
    for (const leak of [aSnippetId, A.secretValue, JSON.stringify(A.storeValue), 'alpha']) {
      if (!row.path(ids).includes(leak)) expect(forA.text).not.toContain(leak);
    }

    if (row.knownBefore) {
      const before = beforeAnswers.get(row.name)!;
      expect(before.status).toBe(404);
      expect(normalized(forA)).toBe(normalized(before));
      expect(headerShape(forA)).toEqual(headerShape(before));
    }
  });

  it("B's refused requests changed nothing of A's", async () => {
    expect(await aState()).toEqual(aBefore);
  });

  it("B's lists hold none of A's resources", async () => {
    const lists = ['/v1/snippets', '/v1/environments', '/v1/secrets', '/v1/store', '/v1/integrations'];
    for (const p of lists) {
      const r = await asB('GET', p);
      expect(r.status).toBe(200);
      expect(r.text, p).not.toContain('alpha');
      expect(r.text, p).not.toContain('ALPHA');
      expect(r.text, p).not.toContain(aSnippetId);
    }
    const st = await asB('GET', '/v1/store?prefix=alpha');
    expect(st.json.data).toEqual([]);
  });

  it("tenant-wide reads answer B's own: runtime limits and webhook secret", async () => {
    const aw = await core.call('GET', '/v1/tenant/webhook-secret');
    const bw = await asB('GET', '/v1/tenant/webhook-secret');
    expect(bw.json.secret).toMatch(/^whsec_/);
    expect(bw.json.secret).not.toBe(aw.json.secret);
    expect((await core.call('PATCH', '/_emu/tenants/bravo/limits', { max_memory_mb: 300 }, { key: core.admin })).status).toBe(200);
    expect((await asB('GET', '/v1/tenant/runtime-limits')).json.max_memory_mb).toBe(300);
    expect((await core.call('GET', '/v1/tenant/runtime-limits')).json.max_memory_mb).toBe(2048);
    // B's rotation leaves A's secret alone
    expect((await asB('POST', '/v1/tenant/webhook-secret')).status).toBe(200);
    expect((await core.call('GET', '/v1/tenant/webhook-secret')).json.secret).toBe(aw.json.secret);
  });

  it("names are per tenant: B may reuse every one of A's names, creating B's own, and A's stay untouched", async () => {
    const aBeforeReuse = await aState();
    const s = await asB('POST', '/v1/snippets', { name: A.snippet, runtime: 'python' });
    expect(s.status, s.text).toBe(201);
    expect(s.json.id).not.toBe(aSnippetId);
    expect(s.json.latest_version).toBeNull();
    const v = await asB('POST', `/v1/snippets/${A.snippet}/versions`, { code: 'def handler(input):\n    return {}\n' });
    expect(v.status, v.text).toBe(201);
    expect(v.json.version).toBe(1); // B's own numbering, not A's 3
    expect((await asB('POST', '/v1/environments', { name: A.env })).status).toBe(201);
    expect((await asB('PUT', `/v1/snippets/${A.snippet}/environments/${A.env}`, { version: 1 })).status).toBe(200);

    // upserts by name create B's own (201, not 200 "replaced")
    const sec = await asB('PUT', `/v1/secrets/${A.secret}`, { value: 'bravo-value' });
    expect(sec.status).toBe(201);
    const st = await asB('PUT', `/v1/store/${enc(A.storeKey)}`, { value: 'bravo' });
    expect(st.status).toBe(201);
    const it = await asB('PUT', `/v1/integrations/${A.integration}`, {
      provider: 'http',
      base_url: 'https://bravo.example',
      auth: { type: 'none' },
    });
    expect(it.status).toBe(201);

    expect((await asB('GET', `/v1/store/${enc(A.storeKey)}`)).json.value).toBe('bravo');
    expect(core.emu.services.secrets.reveal(core.emu.services.tenants.get('bravo'))[A.secret]).toBe('bravo-value');

    // A sees exactly what it had (its snippet's updated_at included)
    expect(await aState()).toEqual(aBeforeReuse);

    // and B deleting its own copies leaves A's in place
    for (const p of [
      `/v1/snippets/${A.snippet}/environments/${A.env}`,
      `/v1/secrets/${A.secret}`,
      `/v1/store/${enc(A.storeKey)}`,
      `/v1/integrations/${A.integration}`,
      `/v1/snippets/${A.snippet}`,
      `/v1/environments/${A.env}`,
    ]) {
      const r = await asB('DELETE', p);
      expect(r.status, `${p}: ${r.text}`).toBe(204);
    }
    expect(await aState()).toEqual(aBeforeReuse);
  });

  it("A's own requests for those paths succeed (the table aimed at real resources)", async () => {
    for (const row of rows) {
      if (row.method !== 'GET') continue;
      const r = await core.call('GET', row.path(row.byId ? aIdsById() : aIds()).replace(B_OWN_SNIPPET, A.snippet));
      expect(r.status, `${row.name}: ${r.text}`).toBe(200);
    }
  });
});

it('the table covers every tenant route that takes an id or a name', () => {
  const template = (p: string) =>
    p
      .replace(/\/v1\/snippets\/[^/]+/, '/v1/snippets/{id}')
      .replace(/\/environments\/[^/]+$/, () => (p.startsWith('/v1/snippets/') ? '/environments/{env}' : '/environments/{name}'))
      .replace(/\/versions\/\d+$/, '/versions/{version}')
      .replace(/^\/v1\/(secrets|integrations)\/[^/]+$/, '/v1/$1/{name}')
      .replace(/^\/v1\/store\/[^/]+$/, '/v1/store/{key}')
      .replace(/^\/v1\/invoke\/[^/?]+(\?.*)?$/, '/v1/invoke/{snippet}')
      .replace(/^\/v1\/invocations\/[^/]+/, '/v1/invocations/{id}');
  const covered = new Set(rows.map((r) => `${r.method} ${template(r.path(aIds()))}`));
  // upserts by name are covered by the "names are per tenant" test: B's PUT creates B's own
  for (const u of ['PUT /v1/secrets/{name}', 'PUT /v1/store/{key}', 'PUT /v1/integrations/{name}']) covered.add(u);
  const needed = allRoutes.filter((r) => r.auth === 'tenant' && r.path.includes('{')).map((r) => `${r.method.toUpperCase()} ${r.path}`);
  expect(needed.length).toBeGreaterThan(10);
  expect(needed.filter((n) => !covered.has(n))).toEqual([]);
});

it('a key of a tenant never reaches another tenant even by the admin surface', async () => {
  const r = await core.call('GET', '/_emu/tenants/local', undefined, { key: bKey });
  expectProblem(r, 401, 'unauthenticated');
});
