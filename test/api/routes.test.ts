/**
 * Every /v1, /_emu and meta route of the core, driven over HTTP against a core on port 0 with a temp
 * data dir (issue 2).
 */
import {
  afterAll,
  beforeAll,
  describe,
  expect,
  it,
  onTestFinished,
  type RunnerTask,
  type RunnerTestFile,
  type RunnerTestSuite,
} from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { allRoutes } from '../../server/api/routes';
import { BUN_CODE, PY_CODE, expectProblem, newTenant, sleep } from './_util';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT, tempDir } from '../helpers/core';
import { agentInFakeVm, fakeLimactl } from '../helpers/fake-limactl';
import { parseSse } from '../../contract/sse';

let core: TestCore;
/** How far the core's clock runs ahead of the wall clock: a test that moves time sets it back in `finally`. */
let clockAhead = 0;
beforeAll(async () => {
  core = await startTestCore({ config: { clock: () => new Date(Date.now() + clockAhead) } });
});
// vitest reads the hook's first parameter as fixtures and wants it destructured: the file is the second.
// eslint-disable-next-line no-empty-pattern
afterAll(async ({}, file) => {
  try {
    await expectEveryRouteServed(file);
  } finally {
    await core?.stop();
  }
});

/** Every test of a file or suite, depth first. */
function testsOf(suite: Readonly<RunnerTestSuite | RunnerTestFile>): RunnerTask[] {
  return suite.tasks.flatMap((t) => (t.type === 'suite' ? testsOf(t) : [t]));
}

/**
 * The coverage claim: every declared route was driven to a success by this file's tests, as /metrics counted.
 * It holds only once all of them have run, in whatever order they ran (--sequence.shuffle), so it is checked in
 * the file's afterAll, while the core still answers. A run that left a test out (a -t filter, .only: the
 * summary lists those as skipped) or saw one fail cannot make the claim, and does not try.
 */
async function expectEveryRouteServed(file: Readonly<RunnerTestSuite | RunnerTestFile>): Promise<void> {
  if (!core || !testsOf(file).every((t) => t.mode === 'run' && t.result?.state === 'pass')) return;
  const served = new Set([...(await served2xx(core)), ...vmServed]);
  const missing = allRoutes.map((r) => `${r.method.toUpperCase()} ${r.path}`).filter((r) => !served.has(r));
  expect(missing, 'declared routes no test in test/api/routes.test.ts drove to a 2xx').toEqual([]);
  expect(served.has('GET /metrics')).toBe(true);
  expect(served.has('GET /openapi.json')).toBe(true);
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

async function createSnippet(name: string, runtime: 'bun' | 'python' = 'bun', key?: string) {
  const r = await core.call('POST', '/v1/snippets', { name, runtime }, key ? { key } : {});
  expect(r.status, r.text).toBe(201);
  return r.json;
}
async function createVersion(snippet: string, body: Record<string, unknown> = { code: BUN_CODE }, key?: string) {
  const r = await core.call('POST', `/v1/snippets/${snippet}/versions`, body, key ? { key } : {});
  expect(r.status, r.text).toBe(201);
  return r.json;
}

/** Follows next_cursor until the end; returns every item and the number of pages. */
async function walk(path: string, limit: number) {
  const items: any[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const r = await core.call('GET', `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(r.status, r.text).toBe(200);
    expect(r.json.data.length).toBeLessThanOrEqual(limit);
    items.push(...r.json.data);
    cursor = r.json.next_cursor;
    pages++;
    expect(pages).toBeLessThan(100);
  } while (cursor);
  return { items, pages };
}

describe('meta routes', () => {
  it('/healthz answers 200 {status: ok} without a key', async () => {
    const r = await core.call('GET', '/healthz', undefined, { key: null });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ status: 'ok' });
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('/readyz answers 200 ready with no reasons', async () => {
    const r = await core.call('GET', '/readyz', undefined, { key: null });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ status: 'ready', reasons: [] });
  });

  it('/metrics is Prometheus text with svc_emu_http_requests_total counting requests by route template', async () => {
    await core.call('GET', '/healthz', undefined, { key: null });
    await core.call('GET', '/v1/snippets/no-such-snippet');
    const r = await core.call('GET', '/metrics', undefined, { key: null });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(r.text).toContain('# TYPE svc_emu_http_requests_total counter');
    const line = r.text
      .split('\n')
      .find((l) => l.startsWith('svc_emu_http_requests_total{') && l.includes('route="/healthz"') && l.includes('status="200"'));
    expect(line, r.text).toBeDefined();
    expect(Number(line!.split(' ').pop())).toBeGreaterThanOrEqual(1);
    // the route template, not the raw path, labels a matched route
    expect(r.text).toContain('route="/v1/snippets/{id}"');
    expect(r.text).not.toContain('no-such-snippet');
    expect(r.text).toMatch(/^svc_emu_http_request_duration_seconds_bucket\{.*le="\+Inf"\} \d+$/m);
    // every sample line is `name{labels} value` or `name value`
    for (const l of r.text.split('\n').filter((x) => x && !x.startsWith('#'))) {
      expect(l).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? -?[0-9.e+Inf-]+$/);
    }
  });

  it('/openapi.json is an OpenAPI 3.1.0 document describing every declared route', async () => {
    const r = await core.call('GET', '/openapi.json', undefined, { key: null });
    expect(r.status).toBe(200);
    expect(r.json.openapi).toBe('3.1.0');
    expect(r.json.info.title).toBeTruthy();
    for (const route of allRoutes) {
      expect(r.json.paths[route.path]?.[route.method], `${route.method} ${route.path}`).toBeDefined();
    }
  });

  it('an unknown route is a 404 problem', async () => {
    const r = await core.call('GET', '/v1/no-such-route');
    expectProblem(r, 404, 'not_found');
  });
});

describe('X-Request-Id', () => {
  it('is on every response, successes and errors alike, and errors carry it as request_id', async () => {
    const responses = [
      await core.call('GET', '/healthz'),
      await core.call('GET', '/v1/snippets'),
      await core.call('GET', '/v1/snippets', undefined, { key: null }), // 401
      await core.call('GET', '/v1/snippets/nope'), // 404
      await core.call('POST', '/v1/snippets', undefined, { raw: '{', headers: { 'content-type': 'application/json' } }), // 400
      await core.call('PATCH', '/v1/tenant/runtime-limits', {}), // 405
      await core.call('GET', '/_emu/info', undefined, { key: null }), // 401
    ];
    const ids = new Set<string>();
    for (const r of responses) {
      const id = r.headers.get('x-request-id');
      expect(id, `${r.status} ${r.text}`).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
      ids.add(id!);
      if (r.status >= 400) expect(r.json.request_id).toBe(id);
    }
    expect(ids.size).toBe(responses.length); // a fresh id each time
  });

  it('echoes a sane incoming X-Request-Id, on success and on error', async () => {
    const ok = await core.call('GET', '/healthz', undefined, { headers: { 'x-request-id': 'trace-abc.123:XYZ_9' } });
    expect(ok.headers.get('x-request-id')).toBe('trace-abc.123:XYZ_9');
    const err = await core.call('GET', '/v1/snippets/nope', undefined, { headers: { 'x-request-id': 'mine-42' } });
    expect(err.status).toBe(404);
    expect(err.headers.get('x-request-id')).toBe('mine-42');
    expect(err.json.request_id).toBe('mine-42');
  });

  it('replaces an insane incoming X-Request-Id with its own', async () => {
    for (const bad of ['has spaces in it', 'x'.repeat(129), 'semi;colon', '<script>']) {
      const r = await core.call('GET', '/healthz', undefined, { headers: { 'x-request-id': bad } });
      const id = r.headers.get('x-request-id');
      expect(id).not.toBe(bad);
      expect(id).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
    }
  });
});

describe('snippets', () => {
  it('create, read by id and by name, list, delete', async () => {
    const created = await core.call('POST', '/v1/snippets', { name: 'crud-one', runtime: 'python', description: 'first' });
    expect(created.status).toBe(201);
    expect(created.headers.get('content-type')).toMatch(/^application\/json/);
    const s = created.json;
    expect(s).toMatchObject({ name: 'crud-one', runtime: 'python', description: 'first', latest_version: null, deployments: {} });
    expect(s.id).toMatch(/^snp_[0-9A-Za-z]{20}$/);
    expect(s.created_at).toMatch(ISO);
    expect(s.updated_at).toMatch(ISO);

    const byId = await core.call('GET', `/v1/snippets/${s.id}`);
    expect(byId.status).toBe(200);
    expect(byId.json).toEqual(s);
    const byName = await core.call('GET', '/v1/snippets/crud-one');
    expect(byName.status).toBe(200);
    expect(byName.json).toEqual(s);

    const noDesc = await createSnippet('crud-two');
    expect(noDesc.description).toBe('');

    const list = await core.call('GET', '/v1/snippets');
    expect(list.status).toBe(200);
    const names = list.json.data.map((x: any) => x.name);
    expect(names).toEqual(expect.arrayContaining(['crud-one', 'crud-two']));
    expect([...names].sort()).toEqual(names); // by name
    expect(list.json).toHaveProperty('next_cursor');

    const del = await core.call('DELETE', `/v1/snippets/${s.id}`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expectProblem(await core.call('GET', '/v1/snippets/crud-one'), 404, 'not_found');
    expectProblem(await core.call('GET', `/v1/snippets/${s.id}`), 404, 'not_found');
    expectProblem(await core.call('DELETE', '/v1/snippets/crud-one'), 404, 'not_found');
    const del2 = await core.call('DELETE', '/v1/snippets/crud-two');
    expect(del2.status).toBe(204);
  });

  it('a duplicate name is 409 conflict and changes nothing', async () => {
    const first = await createSnippet('dup-name', 'bun');
    const again = await core.call('POST', '/v1/snippets', { name: 'dup-name', runtime: 'python' });
    expectProblem(again, 409, 'conflict');
    const now = await core.call('GET', '/v1/snippets/dup-name');
    expect(now.json).toEqual(first);
  });

  it('a 63-character name (the maximum) is accepted', async () => {
    const name = 'a' + '-b'.repeat(31);
    expect(name).toHaveLength(63);
    await createSnippet(name);
    expect((await core.call('GET', `/v1/snippets/${name}`)).status).toBe(200);
  });

  it('list paginates by cursor without repeats or gaps', async () => {
    for (const n of ['pg-a', 'pg-b', 'pg-c', 'pg-d', 'pg-e']) await createSnippet(n);
    const all = (await core.call('GET', '/v1/snippets?limit=1000')).json.data.map((x: any) => x.name);
    const { items, pages } = await walk('/v1/snippets', 2);
    expect(items.map((x) => x.name)).toEqual(all);
    expect(pages).toBe(Math.ceil(all.length / 2));
    const first = await core.call('GET', '/v1/snippets?limit=2');
    expect(first.json.data).toHaveLength(2);
    expect(typeof first.json.next_cursor).toBe('string');
    const last = await core.call('GET', '/v1/snippets?limit=1000');
    expect(last.json.next_cursor).toBeNull();
  });

  it('deleting a snippet deletes its versions and deployments; the name can be reused from scratch', async () => {
    await createSnippet('reborn');
    await createVersion('reborn');
    await createVersion('reborn');
    expect((await core.call('PUT', '/v1/snippets/reborn/environments/prod', { version: 2 })).status).toBe(200);
    expect((await core.call('DELETE', '/v1/snippets/reborn')).status).toBe(204);
    expectProblem(await core.call('GET', '/v1/snippets/reborn/versions/1'), 404, 'not_found');
    const again = await createSnippet('reborn');
    expect(again.latest_version).toBeNull();
    expect(again.deployments).toEqual({});
    const v = await createVersion('reborn');
    expect(v.version).toBe(1);
    const envs = await core.call('GET', '/v1/snippets/reborn/environments');
    expect(envs.json.data.every((d: any) => d.version === null)).toBe(true);
  });
});

describe('versions', () => {
  it('single `code`: 201 with version 1, defaults 60000/200/10, the runtime default entrypoint', async () => {
    const snip = await createSnippet('v-single');
    const r = await core.call('POST', '/v1/snippets/v-single/versions', { code: BUN_CODE });
    expect(r.status).toBe(201);
    const v = r.json;
    expect(v).toMatchObject({
      snippet: 'v-single',
      snippet_id: snip.id,
      version: 1,
      runtime: 'bun',
      entrypoint: 'index.ts',
      timeout_ms: 60000,
      max_memory_mb: 200,
      max_cpu_percent: 10,
      source: 'api',
      size_bytes: Buffer.byteLength(BUN_CODE),
    });
    expect(v.created_at).toMatch(ISO);
    expect(v.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(v.manifest).toEqual([{ path: 'index.ts', size: Buffer.byteLength(BUN_CODE), sha256: expect.stringMatching(/^[0-9a-f]{64}$/) }]);
    expect(v.files).toBeUndefined();

    const read = await core.call('GET', '/v1/snippets/v-single/versions/1');
    expect(read.status).toBe(200);
    expect(read.json).toEqual({ ...v, files: { 'index.ts': BUN_CODE } });
    // by id too
    const byId = await core.call('GET', `/v1/snippets/${snip.id}/versions/1`);
    expect(byId.json).toEqual(read.json);

    const s = await core.call('GET', '/v1/snippets/v-single');
    expect(s.json.latest_version).toBe(1);

    const v2 = await createVersion(snip.id, { code: BUN_CODE, timeout_ms: 1234, max_memory_mb: 64, max_cpu_percent: 50 });
    expect(v2).toMatchObject({ version: 2, timeout_ms: 1234, max_memory_mb: 64, max_cpu_percent: 50 });
    expect((await core.call('GET', '/v1/snippets/v-single')).json.latest_version).toBe(2);
  });

  it('python: main.py is the default entrypoint', async () => {
    await createSnippet('v-py', 'python');
    const v = await createVersion('v-py', { code: PY_CODE });
    expect(v.entrypoint).toBe('main.py');
    expect(v.runtime).toBe('python');
    const read = await core.call('GET', '/v1/snippets/v-py/versions/1');
    expect(read.json.files).toEqual({ 'main.py': PY_CODE });
  });

  it('multi-file `files`: default entrypoint found, explicit entrypoint honoured, manifest sorted, contents read back', async () => {
    await createSnippet('v-multi');
    const files = { 'lib/util.ts': 'export const x = 1;\n', 'index.ts': BUN_CODE };
    const v = await createVersion('v-multi', { files });
    expect(v.entrypoint).toBe('index.ts');
    expect(v.manifest.map((f: any) => f.path)).toEqual(['index.ts', 'lib/util.ts']);
    expect(v.size_bytes).toBe(Buffer.byteLength(files['lib/util.ts']) + Buffer.byteLength(files['index.ts']));
    const read = await core.call('GET', '/v1/snippets/v-multi/versions/1');
    expect(read.json.files).toEqual(files);

    const v2 = await createVersion('v-multi', { files: { 'src/app.ts': BUN_CODE, 'src/dep.ts': 'export {}\n' }, entrypoint: 'src/app.ts' });
    expect(v2.entrypoint).toBe('src/app.ts');

    await createSnippet('v-multi-py', 'python');
    const p = await createVersion('v-multi-py', { files: { 'main.py': PY_CODE, 'helpers/util.py': 'X = 1\n' } });
    expect(p.entrypoint).toBe('main.py');
  });

  it('entrypoint rules: not among the files, none of the defaults present, wrong extension → 422 validation_failed', async () => {
    await createSnippet('v-entry');
    const cases: [Record<string, unknown>, string][] = [
      [{ files: { 'index.ts': BUN_CODE }, entrypoint: 'other.ts' }, 'body.entrypoint'],
      [{ files: { 'app.ts': BUN_CODE } }, 'body.entrypoint'],
      [{ files: { 'main.py': PY_CODE } }, 'body.entrypoint'], // a bun snippet's default is index.ts
      [{ code: BUN_CODE, entrypoint: 'main.py' }, 'body.entrypoint'],
      [{ files: { 'index.ts': BUN_CODE, 'README.md': '# hi' }, entrypoint: 'README.md' }, 'body.entrypoint'],
    ];
    for (const [body, location] of cases) {
      const r = await core.call('POST', '/v1/snippets/v-entry/versions', body);
      expectProblem(r, 422, 'validation_failed');
      expect(
        r.json.errors.map((e: any) => e.location),
        JSON.stringify(body),
      ).toContain(location);
    }
    const list = await core.call('GET', '/v1/snippets/v-entry/versions');
    expect(list.json.data).toEqual([]);
  });

  it('versions are immutable: PUT, PATCH and DELETE on a version are 405 with an Allow header', async () => {
    await createSnippet('v-immut');
    const v = await createVersion('v-immut');
    for (const method of ['PUT', 'PATCH', 'DELETE']) {
      const r = await core.call(method, '/v1/snippets/v-immut/versions/1', { code: 'export default async function handler(){return 2}' });
      expectProblem(r, 405, 'method_not_allowed');
      const allow = r.headers.get('allow');
      expect(allow, method).toBeTruthy();
      expect(allow!.split(/,\s*/)).toContain('GET');
      expect(allow!.split(/,\s*/)).not.toContain(method);
    }
    const read = await core.call('GET', '/v1/snippets/v-immut/versions/1');
    expect(read.json.files['index.ts']).toBe(BUN_CODE);
    expect(read.json.sha256).toBe(v.sha256);
  });

  it('listing is newest first, without file contents, with cursor pagination', async () => {
    await createSnippet('v-list');
    for (let i = 0; i < 5; i++) await createVersion('v-list', { code: BUN_CODE + `// ${i}\n` });
    const all = await core.call('GET', '/v1/snippets/v-list/versions');
    expect(all.status).toBe(200);
    expect(all.json.data.map((v: any) => v.version)).toEqual([5, 4, 3, 2, 1]);
    expect(all.json.next_cursor).toBeNull();
    for (const v of all.json.data) expect(v.files).toBeUndefined();

    const p1 = await core.call('GET', '/v1/snippets/v-list/versions?limit=2');
    expect(p1.json.data.map((v: any) => v.version)).toEqual([5, 4]);
    const p2 = await core.call('GET', `/v1/snippets/v-list/versions?limit=2&cursor=${p1.json.next_cursor}`);
    expect(p2.json.data.map((v: any) => v.version)).toEqual([3, 2]);
    const p3 = await core.call('GET', `/v1/snippets/v-list/versions?limit=2&cursor=${p2.json.next_cursor}`);
    expect(p3.json.data.map((v: any) => v.version)).toEqual([1]);
    expect(p3.json.next_cursor).toBeNull();
  });

  it('a missing version or a missing snippet is 404', async () => {
    await createSnippet('v-missing');
    await createVersion('v-missing');
    expectProblem(await core.call('GET', '/v1/snippets/v-missing/versions/2'), 404, 'not_found');
    expectProblem(await core.call('GET', '/v1/snippets/nope-nope/versions/1'), 404, 'not_found');
    expectProblem(await core.call('GET', '/v1/snippets/nope-nope/versions'), 404, 'not_found');
    expectProblem(await core.call('POST', '/v1/snippets/nope-nope/versions', { code: BUN_CODE }), 404, 'not_found');
  });
});

describe('environments, deploy, rollback, undeploy', () => {
  it('every tenant has dev, staging and prod, built in', async () => {
    const r = await core.call('GET', '/v1/environments');
    expect(r.status).toBe(200);
    const builtin = r.json.data.filter((e: any) => e.builtin).map((e: any) => e.name);
    expect(builtin.sort()).toEqual(['dev', 'prod', 'staging']);
    for (const e of r.json.data) expect(e.created_at).toMatch(ISO);
  });

  it('create → 201, duplicate → 409, delete a custom one → 204, builtin → 409, missing → 404', async () => {
    const c = await core.call('POST', '/v1/environments', { name: 'qa' });
    expect(c.status).toBe(201);
    expect(c.json).toMatchObject({ name: 'qa', builtin: false });
    expect(c.json.created_at).toMatch(ISO);
    expectProblem(await core.call('POST', '/v1/environments', { name: 'qa' }), 409, 'conflict');
    expectProblem(await core.call('POST', '/v1/environments', { name: 'prod' }), 409, 'conflict');
    const list = (await core.call('GET', '/v1/environments')).json.data.map((e: any) => e.name);
    expect(list).toContain('qa');
    expect(list.filter((n: string) => n === 'qa')).toHaveLength(1);

    for (const b of ['dev', 'staging', 'prod']) expectProblem(await core.call('DELETE', `/v1/environments/${b}`), 409, 'conflict');
    expect((await core.call('DELETE', '/v1/environments/qa')).status).toBe(204);
    expectProblem(await core.call('DELETE', '/v1/environments/qa'), 404, 'not_found');
    const after = (await core.call('GET', '/v1/environments')).json.data.map((e: any) => e.name);
    expect(after).not.toContain('qa');
    expect(after).toEqual(expect.arrayContaining(['dev', 'staging', 'prod']));
  });

  it('environment list paginates', async () => {
    for (const n of ['pe-1', 'pe-2', 'pe-3']) expect((await core.call('POST', '/v1/environments', { name: n })).status).toBe(201);
    const all = (await core.call('GET', '/v1/environments')).json.data.map((e: any) => e.name);
    const { items } = await walk('/v1/environments', 2);
    expect(items.map((e) => e.name)).toEqual(all);
  });

  it('an environment still running a snippet cannot be deleted (409) until undeployed', async () => {
    await createSnippet('env-busy');
    await createVersion('env-busy');
    expect((await core.call('POST', '/v1/environments', { name: 'busy' })).status).toBe(201);
    expect((await core.call('PUT', '/v1/snippets/env-busy/environments/busy', { version: 1 })).status).toBe(200);
    expectProblem(await core.call('DELETE', '/v1/environments/busy'), 409, 'conflict');
    expect((await core.call('DELETE', '/v1/snippets/env-busy/environments/busy')).status).toBe(204);
    expect((await core.call('DELETE', '/v1/environments/busy')).status).toBe(204);
  });

  it('deploy, deploy again (previous_version), roll back, list what runs where, undeploy', async () => {
    const snip = await createSnippet('deploy-me');
    await createVersion('deploy-me');
    await createVersion('deploy-me');

    const before = await core.call('GET', '/v1/snippets/deploy-me/environments');
    expect(before.status).toBe(200);
    const envNames = before.json.data.map((d: any) => d.env);
    expect(envNames).toEqual(expect.arrayContaining(['dev', 'staging', 'prod']));
    for (const d of before.json.data) expect(d).toEqual({ env: d.env, version: null, previous_version: null, deployed_at: null });

    const d1 = await core.call('PUT', '/v1/snippets/deploy-me/environments/prod', { version: 1 });
    expect(d1.status).toBe(200);
    expect(d1.json).toMatchObject({ env: 'prod', version: 1, previous_version: null });
    expect(d1.json.deployed_at).toMatch(ISO);

    const d2 = await core.call('PUT', `/v1/snippets/${snip.id}/environments/prod`, { version: 2 });
    expect(d2.json).toMatchObject({ env: 'prod', version: 2, previous_version: 1 });

    const rb = await core.call('PUT', '/v1/snippets/deploy-me/environments/prod', { version: 1 });
    expect(rb.status).toBe(200);
    expect(rb.json).toMatchObject({ env: 'prod', version: 1, previous_version: 2 });

    // the same version again keeps previous_version
    const same = await core.call('PUT', '/v1/snippets/deploy-me/environments/prod', { version: 1 });
    expect(same.json).toMatchObject({ version: 1, previous_version: 2 });

    expect((await core.call('PUT', '/v1/snippets/deploy-me/environments/dev', { version: 2 })).status).toBe(200);

    const where = await core.call('GET', '/v1/snippets/deploy-me/environments');
    const byEnv = Object.fromEntries(where.json.data.map((d: any) => [d.env, d]));
    expect(byEnv.prod).toMatchObject({ version: 1, previous_version: 2 });
    expect(byEnv.dev).toMatchObject({ version: 2, previous_version: null });
    expect(byEnv.staging).toMatchObject({ version: null, previous_version: null, deployed_at: null });

    const view = await core.call('GET', '/v1/snippets/deploy-me');
    expect(view.json.deployments).toEqual({ dev: 2, prod: 1 });

    const un = await core.call('DELETE', '/v1/snippets/deploy-me/environments/prod');
    expect(un.status).toBe(204);
    const after = await core.call('GET', '/v1/snippets/deploy-me/environments');
    expect(after.json.data.find((d: any) => d.env === 'prod')).toEqual({
      env: 'prod',
      version: null,
      previous_version: null,
      deployed_at: null,
    });
    expect((await core.call('GET', '/v1/snippets/deploy-me')).json.deployments).toEqual({ dev: 2 });
    // nothing deployed there any more
    expectProblem(await core.call('DELETE', '/v1/snippets/deploy-me/environments/prod'), 404, 'not_found');
    // a missing env
    expectProblem(await core.call('DELETE', '/v1/snippets/deploy-me/environments/nowhere'), 404, 'not_found');
  });

  it('deploying to a custom environment works', async () => {
    await createSnippet('deploy-custom');
    await createVersion('deploy-custom');
    expect((await core.call('POST', '/v1/environments', { name: 'canary' })).status).toBe(201);
    const d = await core.call('PUT', '/v1/snippets/deploy-custom/environments/canary', { version: 1 });
    expect(d.status).toBe(200);
    expect(d.json).toMatchObject({ env: 'canary', version: 1 });
    const where = await core.call('GET', '/v1/snippets/deploy-custom/environments');
    expect(where.json.data.find((x: any) => x.env === 'canary')).toMatchObject({ version: 1 });
  });
});

describe('tenant runtime limits', () => {
  it('a new tenant has 900000 / 2048 / 100 / 10', async () => {
    const key = await newTenant(core, 'limits-fresh');
    const r = await core.call('GET', '/v1/tenant/runtime-limits', undefined, { key });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ timeout_ms: 900000, max_memory_mb: 2048, max_cpu_percent: 100, max_concurrency: 10 });
    const local = await core.call('GET', '/v1/tenant/runtime-limits');
    expect(local.json).toEqual({ timeout_ms: 900000, max_memory_mb: 2048, max_cpu_percent: 100, max_concurrency: 10 });
  });

  it('is read-only over /v1 (405)', async () => {
    for (const m of ['PUT', 'PATCH', 'POST', 'DELETE']) {
      const r = await core.call(m, '/v1/tenant/runtime-limits', { max_memory_mb: 4096 });
      expectProblem(r, 405, 'method_not_allowed');
      expect(r.headers.get('allow')).toContain('GET');
    }
    expect((await core.call('GET', '/v1/tenant/runtime-limits')).json.max_memory_mb).toBe(2048);
  });

  it('PATCH /_emu/tenants/{name}/limits changes the caps; a version above the new cap → 422 limit_exceeds_tenant_cap naming field and cap', async () => {
    const key = await newTenant(core, 'limits-op');
    const p = await core.call('PATCH', '/_emu/tenants/limits-op/limits', { max_memory_mb: 256, timeout_ms: 5000 }, { key: core.admin });
    expect(p.status, p.text).toBe(200);
    expect(p.json).toEqual({ timeout_ms: 5000, max_memory_mb: 256, max_cpu_percent: 100, max_concurrency: 10 });
    const seen = await core.call('GET', '/v1/tenant/runtime-limits', undefined, { key });
    expect(seen.json).toEqual(p.json);
    const t = await core.call('GET', '/_emu/tenants/limits-op', undefined, { key: core.admin });
    expect(t.json.caps).toEqual(p.json);

    await createSnippet('capped', 'bun', key);
    const over = await core.call('POST', '/v1/snippets/capped/versions', { code: BUN_CODE, max_memory_mb: 257, timeout_ms: 5000 }, { key });
    expectProblem(over, 422, 'limit_exceeds_tenant_cap');
    expect(over.json.field).toBe('max_memory_mb');
    expect(over.json.cap).toBe(256);
    expect(over.json.detail).toContain('max_memory_mb');
    expect(over.json.detail).toContain('256');
    expect(over.json.errors).toEqual([{ location: 'body.max_memory_mb', message: expect.stringContaining('256') }]);

    const overT = await core.call('POST', '/v1/snippets/capped/versions', { code: BUN_CODE, timeout_ms: 5001 }, { key });
    expectProblem(overT, 422, 'limit_exceeds_tenant_cap');
    expect(overT.json).toMatchObject({ field: 'timeout_ms', cap: 5000 });

    // the default timeout (60000) is above a 5000 cap too: the default is checked like a given value
    const overDefault = await core.call('POST', '/v1/snippets/capped/versions', { code: BUN_CODE, max_memory_mb: 256 }, { key });
    expectProblem(overDefault, 422, 'limit_exceeds_tenant_cap');
    expect(overDefault.json).toMatchObject({ field: 'timeout_ms', cap: 5000 });

    expect((await core.call('GET', '/v1/snippets/capped/versions', undefined, { key })).json.data).toEqual([]);

    const atCap = await core.call(
      'POST',
      '/v1/snippets/capped/versions',
      { code: BUN_CODE, max_memory_mb: 256, timeout_ms: 5000 },
      { key },
    );
    expect(atCap.status, atCap.text).toBe(201);
    expect(atCap.json).toMatchObject({ version: 1, max_memory_mb: 256, timeout_ms: 5000, max_cpu_percent: 10 });

    // raising the cap again lets a bigger version through at once
    expect((await core.call('PATCH', '/_emu/tenants/limits-op/limits', { max_memory_mb: 1024 }, { key: core.admin })).status).toBe(200);
    const bigger = await core.call(
      'POST',
      '/v1/snippets/capped/versions',
      { code: BUN_CODE, max_memory_mb: 1024, timeout_ms: 10 },
      { key },
    );
    expect(bigger.status, bigger.text).toBe(201);
  });

  it('PATCH limits of a missing tenant is 404; the local tenant is unaffected by another tenant’s caps', async () => {
    expectProblem(await core.call('PATCH', '/_emu/tenants/nobody/limits', { max_memory_mb: 5 }, { key: core.admin }), 404, 'not_found');
    expect((await core.call('GET', '/v1/tenant/runtime-limits')).json.max_memory_mb).toBe(2048);
  });
});

describe('/_emu operator routes', () => {
  it('info, doctor, tenants list/create/read, keys', async () => {
    const info = await core.call('GET', '/_emu/info', undefined, { key: core.admin });
    expect(info.status).toBe(200);
    expect(info.json).toMatchObject({ url: core.url, data_dir: expect.any(String), pid: process.pid, local_api_key: core.key });
    expect(info.json.tenants.map((t: any) => t.name)).toContain('local');

    const doc = await core.call('GET', '/_emu/doctor', undefined, { key: core.admin });
    expect(doc.status).toBe(200);
    expect(doc.json).toHaveProperty('parity');
    expect(doc.json).toHaveProperty('cgroup');

    const c = await core.call('POST', '/_emu/tenants', { name: 'emu-t' }, { key: core.admin });
    expect(c.status).toBe(201);
    expect(c.json).toMatchObject({
      name: 'emu-t',
      caps: { timeout_ms: 900000, max_memory_mb: 2048, max_cpu_percent: 100, max_concurrency: 10 },
      keys: [],
    });
    expect(c.json.id).toMatch(/^ten_/);
    expectProblem(await core.call('POST', '/_emu/tenants', { name: 'emu-t' }, { key: core.admin }), 409, 'conflict');

    const k = await core.call('POST', '/_emu/tenants/emu-t/keys', undefined, { key: core.admin });
    expect(k.status).toBe(201);
    expect(k.json).toMatchObject({ tenant: 'emu-t', key: expect.stringMatching(/^svc_[0-9A-Za-z]{40}$/) });
    expect(k.json.prefix).toBe(k.json.key.slice(0, k.json.prefix.length));
    expect(k.json.key.length).toBeGreaterThan(k.json.prefix.length + 20); // the prefix is not most of the key

    const read = await core.call('GET', '/_emu/tenants/emu-t', undefined, { key: core.admin });
    expect(read.status).toBe(200);
    expect(read.json.keys).toEqual([{ id: k.json.id, prefix: k.json.prefix, created_at: k.json.created_at }]);
    expect(read.text).not.toContain(k.json.key);

    const list = await core.call('GET', '/_emu/tenants', undefined, { key: core.admin });
    expect(list.json.data.map((t: any) => t.name)).toEqual(expect.arrayContaining(['local', 'emu-t']));
    expect(list.text).not.toContain(k.json.key);

    // the new key acts for the new tenant
    const own = await core.call('GET', '/v1/snippets', undefined, { key: k.json.key });
    expect(own.status).toBe(200);
    expect(own.json.data).toEqual([]);

    expectProblem(await core.call('GET', '/_emu/tenants/nobody', undefined, { key: core.admin }), 404, 'not_found');
    expectProblem(await core.call('POST', '/_emu/tenants/nobody/keys', undefined, { key: core.admin }), 404, 'not_found');
  });

  it('the admin token is also accepted as X-Emu-Admin', async () => {
    const r = await core.call('GET', '/_emu/tenants', undefined, { key: null, headers: { 'x-emu-admin': core.admin } });
    expect(r.status).toBe(200);
  });
});

describe('webhook secret', () => {
  it('reads a whsec_ secret, stable until rotated; rotation changes it', async () => {
    const a = await core.call('GET', '/v1/tenant/webhook-secret');
    expect(a.status).toBe(200);
    expect(a.json.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32,}$/);
    expect(a.json.created_at).toMatch(ISO);
    const again = await core.call('GET', '/v1/tenant/webhook-secret');
    expect(again.json).toEqual(a.json);

    const rot = await core.call('POST', '/v1/tenant/webhook-secret');
    expect(rot.status).toBe(200);
    expect(rot.json.secret).toMatch(/^whsec_/);
    expect(rot.json.secret).not.toBe(a.json.secret);
    const after = await core.call('GET', '/v1/tenant/webhook-secret');
    expect(after.json.secret).toBe(rot.json.secret);

    // another tenant has its own
    const key = await newTenant(core, 'whsec-other');
    const other = await core.call('GET', '/v1/tenant/webhook-secret', undefined, { key });
    expect(other.json.secret).toMatch(/^whsec_/);
    expect(other.json.secret).not.toBe(rot.json.secret);
  });
});

describe('secrets', () => {
  it('PUT creates (201) then replaces (200); list has names and times, never values; DELETE', async () => {
    const value = 'sk-routes-test-value-1234567890';
    const c = await core.call('PUT', '/v1/secrets/OPENAI_API_KEY', { value });
    expect(c.status).toBe(201);
    expect(c.json).toEqual({ name: 'OPENAI_API_KEY', created_at: expect.stringMatching(ISO), updated_at: expect.stringMatching(ISO) });
    expect(c.text).not.toContain(value);

    const value2 = 'sk-routes-test-value-replaced';
    const r = await core.call('PUT', '/v1/secrets/OPENAI_API_KEY', { value: value2 });
    expect(r.status).toBe(200);
    expect(r.json.name).toBe('OPENAI_API_KEY');
    expect(r.json.created_at).toBe(c.json.created_at);
    expect(r.text).not.toContain(value2);

    expect((await core.call('PUT', '/v1/secrets/_UNDERSCORE_1', { value: 'x' })).status).toBe(201);

    const list = await core.call('GET', '/v1/secrets');
    expect(list.status).toBe(200);
    expect(list.json.data.map((s: any) => s.name)).toEqual(expect.arrayContaining(['OPENAI_API_KEY', '_UNDERSCORE_1']));
    for (const s of list.json.data) expect(Object.keys(s).sort()).toEqual(['created_at', 'name', 'updated_at']);
    expect(list.text).not.toContain(value);
    expect(list.text).not.toContain(value2);

    const tenant = core.emu.services.tenants.get('local');
    expect(core.emu.services.secrets.reveal(tenant).OPENAI_API_KEY).toBe(value2);

    expect((await core.call('DELETE', '/v1/secrets/OPENAI_API_KEY')).status).toBe(204);
    expectProblem(await core.call('DELETE', '/v1/secrets/OPENAI_API_KEY'), 404, 'not_found');
    expect((await core.call('GET', '/v1/secrets')).json.data.map((s: any) => s.name)).not.toContain('OPENAI_API_KEY');
  });

  it('names must match [A-Z_][A-Z0-9_]*; SVC_ is reserved → 422', async () => {
    for (const name of ['lower', 'Mixed_Case', '1LEADING_DIGIT', 'HAS-DASH', 'HAS.DOT']) {
      const r = await core.call('PUT', `/v1/secrets/${name}`, { value: 'v' });
      expectProblem(r, 422, 'validation_failed');
      expect(r.json.errors[0].location).toBe('path.name');
    }
    const svc = await core.call('PUT', '/v1/secrets/SVC_TOKEN', { value: 'v' });
    expectProblem(svc, 422, 'validation_failed');
    expect(svc.json.detail).toMatch(/SVC_.*reserved|reserved.*SVC_/);
    const names = (await core.call('GET', '/v1/secrets')).json.data.map((s: any) => s.name);
    expect(names).not.toContain('SVC_TOKEN');
    expect(names).not.toContain('lower');
  });
});

describe('store', () => {
  it('any JSON value round-trips: object, array, string, number, boolean, null', async () => {
    const values: [string, unknown][] = [
      ['t-object', { a: 1, nested: { b: [1, 2, { c: 'd' }] } }],
      ['t-array', [1, 'two', null, { three: 3 }]],
      ['t-string', 'just a string'],
      ['t-number', 42.5],
      ['t-bool', false],
      ['t-null', null],
      ['t-empty-string', ''],
    ];
    for (const [key, value] of values) {
      const put = await core.call('PUT', `/v1/store/${key}`, { value });
      expect(put.status, `${key}: ${put.text}`).toBe(201);
      expect(put.json).toEqual({ key, value, expires_at: null, updated_at: expect.stringMatching(ISO) });
      const get = await core.call('GET', `/v1/store/${key}`);
      expect(get.status, key).toBe(200);
      expect(get.json).toEqual({ key, value, expires_at: null, updated_at: put.json.updated_at });
    }
    const replaced = await core.call('PUT', '/v1/store/t-object', { value: { replaced: true } });
    expect(replaced.status).toBe(200);
    expect((await core.call('GET', '/v1/store/t-object')).json.value).toEqual({ replaced: true });
  });

  it('a large value (kept in a blob file) round-trips', async () => {
    const value = { text: 'x'.repeat(200_000), list: Array.from({ length: 100 }, (_, i) => i) };
    expect((await core.call('PUT', '/v1/store/t-large', { value })).status).toBe(201);
    const get = await core.call('GET', '/v1/store/t-large');
    expect(get.json.value).toEqual(value);
  });

  it('ttl_seconds is honoured: expires_at is set, and after it the key reads as missing', async () => {
    const put = await core.call('PUT', '/v1/store/ttl-key', { value: 'soon gone', ttl_seconds: 1 });
    expect(put.status).toBe(201);
    const exp = Date.parse(put.json.expires_at);
    expect(exp - Date.now()).toBeGreaterThan(0);
    expect(exp - Date.now()).toBeLessThanOrEqual(1000);
    expect((await core.call('GET', '/v1/store/ttl-key')).status).toBe(200);
    const listed = (await core.call('GET', '/v1/store?prefix=ttl-')).json.data;
    expect(listed.map((e: any) => e.key)).toEqual(['ttl-key']);
    expect(listed[0].expires_at).toBe(put.json.expires_at);

    // The core's clock moves past expires_at (server/services/store.ts judges expiry by the injected clock).
    clockAhead = 1_000;
    try {
      expectProblem(await core.call('GET', '/v1/store/ttl-key'), 404, 'not_found');
      expect((await core.call('GET', '/v1/store?prefix=ttl-')).json.data).toEqual([]);
      // re-setting an expired key creates it afresh, without a TTL unless given
      const again = await core.call('PUT', '/v1/store/ttl-key', { value: 'back' });
      expect(again.status).toBe(201);
      expect(again.json.expires_at).toBeNull();
    } finally {
      clockAhead = 0;
    }
  });

  it('prefix listing: only matching keys, sorted, without values; cursor pagination', async () => {
    for (const k of ['user:3', 'user:1', 'user:2', 'usex', 'other:1']) {
      expect((await core.call('PUT', `/v1/store/${encodeURIComponent(k)}`, { value: { k } })).status).toBe(201);
    }
    const r = await core.call('GET', '/v1/store?prefix=user%3A');
    expect(r.status).toBe(200);
    expect(r.json.data.map((e: any) => e.key)).toEqual(['user:1', 'user:2', 'user:3']);
    for (const e of r.json.data) {
      expect(Object.keys(e).sort()).toEqual(['expires_at', 'key', 'size', 'updated_at']);
      expect(e.size).toBe(Buffer.byteLength(JSON.stringify({ k: e.key })));
    }
    const { items } = await walk('/v1/store?prefix=user%3A', 2);
    expect(items.map((e) => e.key)).toEqual(['user:1', 'user:2', 'user:3']);
    const all = (await core.call('GET', '/v1/store')).json.data.map((e: any) => e.key);
    expect(all).toEqual(expect.arrayContaining(['user:1', 'usex', 'other:1']));
  });

  it('keys with "/" work when sent as %2F', async () => {
    const put = await core.call('PUT', '/v1/store/path%2Fto%2Fkey', { value: 7 });
    expect(put.status, put.text).toBe(201);
    expect(put.json.key).toBe('path/to/key');
    const get = await core.call('GET', '/v1/store/path%2Fto%2Fkey');
    expect(get.status).toBe(200);
    expect(get.json).toMatchObject({ key: 'path/to/key', value: 7 });
    const list = await core.call('GET', '/v1/store?prefix=path%2F');
    expect(list.json.data.map((e: any) => e.key)).toEqual(['path/to/key']);
    expect((await core.call('DELETE', '/v1/store/path%2Fto%2Fkey')).status).toBe(204);
    expectProblem(await core.call('GET', '/v1/store/path%2Fto%2Fkey'), 404, 'not_found');
  });

  it('a value over 1 MiB → 413 payload_too_large, nothing stored', async () => {
    const r = await core.call('PUT', '/v1/store/too-big', { value: 'x'.repeat(1024 * 1024) });
    expectProblem(r, 413, 'payload_too_large');
    expectProblem(await core.call('GET', '/v1/store/too-big'), 404, 'not_found');
    // exactly at the limit (as JSON) is fine
    const atLimit = 'y'.repeat(1024 * 1024 - 2);
    const ok = await core.call('PUT', '/v1/store/at-limit', { value: atLimit });
    expect(ok.status, ok.text.slice(0, 200)).toBe(201);
    // replacing an existing key with an oversize value keeps the old value
    const over = await core.call('PUT', '/v1/store/at-limit', { value: atLimit + 'zz' });
    expectProblem(over, 413, 'payload_too_large');
    expect((await core.call('GET', '/v1/store/at-limit')).json.value).toBe(atLimit);
  });

  it('DELETE → 204, then 404', async () => {
    expect((await core.call('PUT', '/v1/store/del-me', { value: 1 })).status).toBe(201);
    expect((await core.call('DELETE', '/v1/store/del-me')).status).toBe(204);
    expectProblem(await core.call('DELETE', '/v1/store/del-me'), 404, 'not_found');
    expectProblem(await core.call('GET', '/v1/store/del-me'), 404, 'not_found');
  });
});

describe('integrations', () => {
  it('PUT creates (201) then replaces (200); GET, list, secret_present tracks the secret; DELETE', async () => {
    const body = { provider: 'http', base_url: 'https://api.example.com/v2', auth: { type: 'bearer', secret: 'EXAMPLE_TOKEN' } };
    const c = await core.call('PUT', '/v1/integrations/example', body);
    expect(c.status, c.text).toBe(201);
    expect(c.json).toEqual({
      name: 'example',
      provider: 'http',
      base_url: 'https://api.example.com/v2',
      auth: { type: 'bearer', secret: 'EXAMPLE_TOKEN', header: null },
      secret_present: false,
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
    });
    expect((await core.call('PUT', '/v1/secrets/EXAMPLE_TOKEN', { value: 'tok-123' })).status).toBe(201);
    const g = await core.call('GET', '/v1/integrations/example');
    expect(g.status).toBe(200);
    expect(g.json.secret_present).toBe(true);
    expect(g.text).not.toContain('tok-123');

    const r = await core.call('PUT', '/v1/integrations/example', {
      ...body,
      auth: { type: 'header', secret: 'EXAMPLE_TOKEN', header: 'X-Api-Key' },
    });
    expect(r.status).toBe(200);
    expect(r.json.auth).toEqual({ type: 'header', secret: 'EXAMPLE_TOKEN', header: 'X-Api-Key' });
    expect(r.json.created_at).toBe(c.json.created_at);

    const oa = await core.call('PUT', '/v1/integrations/llm', { provider: 'openai', auth: { type: 'bearer', secret: 'OPENAI_KEY' } });
    expect(oa.status).toBe(201);
    expect(oa.json.base_url).toBe('https://api.openai.com/v1');
    expect(oa.json.secret_present).toBe(false);

    const none = await core.call('PUT', '/v1/integrations/public', {
      provider: 'http',
      base_url: 'http://localhost:9999',
      auth: { type: 'none' },
    });
    expect(none.status).toBe(201);
    expect(none.json.auth).toEqual({ type: 'none', secret: null, header: null });
    expect(none.json.secret_present).toBe(true);

    const list = await core.call('GET', '/v1/integrations');
    expect(list.json.data.map((i: any) => i.name)).toEqual(['example', 'llm', 'public']);
    expect(list.json.next_cursor).toBeNull();

    expect((await core.call('DELETE', '/v1/secrets/EXAMPLE_TOKEN')).status).toBe(204);
    expect((await core.call('GET', '/v1/integrations/example')).json.secret_present).toBe(false);

    expect((await core.call('DELETE', '/v1/integrations/example')).status).toBe(204);
    expectProblem(await core.call('GET', '/v1/integrations/example'), 404, 'not_found');
    expectProblem(await core.call('DELETE', '/v1/integrations/example'), 404, 'not_found');
  });

  it('validation refinements → 422 with the location of each problem; nothing stored', async () => {
    const cases: [unknown, string][] = [
      [{ provider: 'http', auth: { type: 'none' } }, 'body.base_url'],
      [{ provider: 'http', base_url: 'https://x.example', auth: { type: 'bearer' } }, 'body.auth.secret'],
      [{ provider: 'http', base_url: 'https://x.example', auth: { type: 'basic' } }, 'body.auth.secret'],
      [{ provider: 'http', base_url: 'https://x.example', auth: { type: 'none', secret: 'TOKEN' } }, 'body.auth.secret'],
      [{ provider: 'http', base_url: 'https://x.example', auth: { type: 'header', secret: 'TOKEN' } }, 'body.auth.header'],
      [
        { provider: 'http', base_url: 'https://x.example', auth: { type: 'header', secret: 'TOKEN', header: 'Bad Header' } },
        'body.auth.header',
      ],
      [{ provider: 'http', base_url: 'ftp://x.example', auth: { type: 'none' } }, 'body.base_url'],
      [{ provider: 'http', base_url: 'not a url', auth: { type: 'none' } }, 'body.base_url'],
      [{ provider: 'smtp', base_url: 'https://x.example', auth: { type: 'none' } }, 'body.provider'],
      [{ provider: 'http', base_url: 'https://x.example', auth: { type: 'oauth' } }, 'body.auth.type'],
      [{ provider: 'openai', auth: { type: 'bearer', secret: 'SVC_KEY' } }, 'body.auth.secret'],
      [{ provider: 'openai', auth: { type: 'bearer', secret: 'lower' } }, 'body.auth.secret'],
      [{ provider: 'openai' }, 'body.auth'],
    ];
    for (const [body, location] of cases) {
      const r = await core.call('PUT', '/v1/integrations/refine', body);
      expectProblem(r, 422, 'validation_failed');
      expect(
        r.json.errors.map((e: any) => e.location),
        JSON.stringify(body),
      ).toContain(location);
    }
    expectProblem(
      await core.call('PUT', '/v1/integrations/Bad_Name', { provider: 'openai', auth: { type: 'none' } }),
      422,
      'validation_failed',
    );
    expectProblem(await core.call('GET', '/v1/integrations/refine'), 404, 'not_found');
  });
});

describe('every error is problem+json', () => {
  it('across a spread of failures', async () => {
    const cases: [string, string, unknown, Record<string, unknown>, number, string][] = [
      ['GET', '/v1/snippets', undefined, { key: null }, 401, 'unauthenticated'],
      ['GET', '/v1/snippets/none', undefined, {}, 404, 'not_found'],
      ['POST', '/v1/snippets', undefined, { raw: '{bad', headers: { 'content-type': 'application/json' } }, 400, 'malformed_json'],
      [
        'POST',
        '/v1/snippets',
        undefined,
        { raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
        415,
        'unsupported_media_type',
      ],
      ['POST', '/v1/snippets', { name: 'x', runtime: 'cobol' }, {}, 422, 'validation_failed'],
      ['GET', '/v1/snippets?limit=0', undefined, {}, 400, 'validation_failed'],
      ['PUT', '/v1/snippets', {}, {}, 405, 'method_not_allowed'],
      ['GET', '/_emu/tenants', undefined, { key: null }, 401, 'unauthenticated'],
    ];
    for (const [method, path, body, opts, status, code] of cases) {
      expectProblem(await core.call(method, path, body, opts), status, code);
    }
  });

  it('validation problems list errors with location and message', async () => {
    const r = await core.call('POST', '/v1/snippets', { name: 'BAD', runtime: 'cobol' });
    expectProblem(r, 422, 'validation_failed');
    expect(r.json.errors).toEqual(
      expect.arrayContaining([
        { location: 'body.name', message: expect.any(String) },
        { location: 'body.runtime', message: expect.any(String) },
      ]),
    );
  });
});

describe('races', () => {
  it('concurrent creates of one snippet name: exactly one 201, the rest 409', async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, () => core.call('POST', '/v1/snippets', { name: 'race-name', runtime: 'bun' })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(11);
    const list = (await core.call('GET', '/v1/snippets?limit=1000')).json.data.filter((s: any) => s.name === 'race-name');
    expect(list).toHaveLength(1);
  });

  it('concurrent versions of one snippet get distinct, gapless numbers', async () => {
    await createSnippet('race-versions');
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => core.call('POST', '/v1/snippets/race-versions/versions', { code: BUN_CODE + `// ${i}\n` })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(201));
    expect(results.map((r) => r.json.version).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const listed = (await core.call('GET', '/v1/snippets/race-versions/versions')).json.data.map((v: any) => v.version);
    expect(listed).toEqual(Array.from({ length: 20 }, (_, i) => 20 - i));
    // each number holds the code that was sent with it
    for (const r of results) {
      const v = await core.call('GET', `/v1/snippets/race-versions/versions/${r.json.version}`);
      expect(v.json.sha256).toBe(r.json.sha256);
    }
    expect((await core.call('GET', '/v1/snippets/race-versions')).json.latest_version).toBe(20);
  });
});

describe('invoke and invocations (the HTTP surface; limits and sandboxes are in test/executor)', () => {
  it('sync invoke answers the return value with the run named in headers; the record, list and logs follow', async () => {
    await createSnippet('inv-bun');
    await createVersion('inv-bun', {
      code: 'export default async function handler(input) { console.log("hello log"); return { got: input }; }\n',
    });
    const r = await core.call('POST', '/v1/invoke/inv-bun', { a: 1 });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ got: { a: 1 } });
    const id = r.headers.get('x-invocation-id')!;
    expect(id).toMatch(/^inv_/);
    expect(r.headers.get('x-snippet-version')).toBe('1');
    expect(r.headers.get('x-snippet-env')).toBe('none');

    const rec = await core.call('GET', `/v1/invocations/${id}`);
    expect(rec.status).toBe(200);
    expect(rec.json).toMatchObject({
      id,
      snippet: 'inv-bun',
      version: 1,
      mode: 'sync',
      status: 'succeeded',
      outcome: 'success',
      output: { got: { a: 1 } },
    });
    expect(rec.json.usage.duration_ms).toBeGreaterThanOrEqual(0);
    expect(rec.json.created_at).toMatch(ISO);

    const list = await core.call('GET', '/v1/invocations?snippet=inv-bun&status=succeeded');
    expect(list.status).toBe(200);
    expect(list.json.data.map((i: { id: string }) => i.id)).toContain(id);

    const logs = await core.call('GET', `/v1/invocations/${id}/logs`);
    expect(logs.status).toBe(200);
    expect(logs.json).toMatchObject({ invocation_id: id, truncated: false });
    expect(logs.json.logs).toContain('hello log');

    const emu = await core.call('GET', `/_emu/invocations/${id}`, undefined, { key: core.admin });
    expect(emu.status).toBe(200);
    expect(emu.json).toMatchObject({ id, warm: false });
    expect(Array.isArray(emu.json.timeline)).toBe(true);
    // a sync invocation streamed nothing: no events to inspect
    const events = await core.call('GET', `/_emu/invocations/${id}/events`, undefined, { key: core.admin });
    expect(events.status).toBe(200);
    expect(events.json).toEqual({ invocation_id: id, live: false, truncated: false, data: [] });
    expectProblem(
      await core.call('GET', `/_emu/invocations/${id}/events?follow=maybe`, undefined, { key: core.admin }),
      400,
      'validation_failed',
    );
  });

  it('a running invocation can be cancelled: 202, and the sync caller gets 409 cancelled', async () => {
    await createSnippet('inv-slow', 'python');
    await createVersion('inv-slow', { code: 'import time\ndef handler(input):\n    time.sleep(5)\n    return {}\n', max_cpu_percent: 100 });
    const pending = core.call('POST', '/v1/invoke/inv-slow', {});
    let id: string | undefined;
    for (let i = 0; i < 100 && !id; i++) {
      await sleep(50);
      id = (await core.call('GET', '/v1/invocations?status=running')).json.data[0]?.id;
    }
    expect(id).toBeTruthy();
    const c = await core.call('POST', `/v1/invocations/${id}/cancel`);
    expect(c.status, c.text).toBe(202);
    const r = await pending;
    expectProblem(r, 409, 'cancelled');
    expect(r.json.invocation_id).toBe(id);
    expectProblem(await core.call('POST', `/v1/invocations/${id}/cancel`), 409, 'conflict');
  });

  it('a repeat with the same Idempotency-Key answers the earlier invocation instead of running again', async () => {
    await createSnippet('inv-once');
    await createVersion('inv-once', {
      code: 'import { store } from "@svc/store";\nexport default async function handler() { const n = ((await store.get("once")) ?? 0) + 1; await store.set("once", n); return { n }; }\n',
    });
    const headers = { 'idempotency-key': 'order-42' };
    const a = await core.call('POST', '/v1/invoke/inv-once', {}, { headers });
    const b = await core.call('POST', '/v1/invoke/inv-once', {}, { headers });
    expect(a.status, a.text).toBe(200);
    expect(b.status).toBe(200);
    expect(b.json).toEqual(a.json);
    expect(b.headers.get('x-invocation-id')).toBe(a.headers.get('x-invocation-id'));
    expect((await core.call('GET', '/v1/store/once')).json.value).toBe(1);
    // another key (or none) runs again
    expect((await core.call('POST', '/v1/invoke/inv-once', {}, { headers: { 'idempotency-key': 'order-43' } })).json).toEqual({ n: 2 });
    expect((await core.call('POST', '/v1/invoke/inv-once', {})).json).toEqual({ n: 3 });
    expectProblem(
      await core.call('POST', '/v1/invoke/inv-once', {}, { headers: { 'idempotency-key': 'has space' } }),
      400,
      'validation_failed',
    );
    // the key names one request: reusing it for another snippet is refused, not answered with the other's result
    await createSnippet('inv-other');
    await createVersion('inv-other');
    expectProblem(await core.call('POST', '/v1/invoke/inv-other', {}, { headers }), 422, 'idempotency_key_reused');
  });

  it('a pinned version with an environment that does not exist is 404, not echoed', async () => {
    await createSnippet('inv-pinned');
    await createVersion('inv-pinned');
    expectProblem(await core.call('POST', '/v1/invoke/inv-pinned?version=1&env=nope', {}), 404, 'not_found');
    const r = await core.call('POST', '/v1/invoke/inv-pinned?version=1&env=dev', {});
    expect(r.status).toBe(200);
    expect(r.headers.get('x-snippet-env')).toBe('dev');
  });

  it('the workspace status says when no workspace is watched', async () => {
    const r = await core.call('GET', '/_emu/workspace', undefined, { key: core.admin });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ workspace: null, watching: false, folders: [], skipped: [] });
    expectProblem(await core.call('GET', '/_emu/workspace'), 401, 'unauthenticated');
  });

  it('the runtime manifest and the executor facts are on the operator surface', async () => {
    const rt = await core.call('GET', '/_emu/runtime', undefined, { key: core.admin });
    expect(rt.status).toBe(200);
    expect(rt.json.manifest.bun.version).toBeTruthy();
    const ex = await core.call('GET', '/_emu/executor', undefined, { key: core.admin });
    expect(ex.status).toBe(200);
    expect(ex.json).toHaveProperty('backend');
    expect(ex.json).toHaveProperty('parity.status');
    expect(ex.json).toHaveProperty('pool.idle');
  });

  it("the core's own memory is on the operator surface; a forced GC needs --expose-gc", async () => {
    const m = await core.call('GET', '/_emu/memory', undefined, { key: core.admin });
    expect(m.status).toBe(200);
    expect(m.json).toMatchObject({ gc: 'not_asked', rss_bytes: expect.any(Number), heap_used_bytes: expect.any(Number) });
    const gc = await core.call('GET', '/_emu/memory?gc=1', undefined, { key: core.admin });
    if (typeof (globalThis as { gc?: unknown }).gc === 'function') expect(gc.json.gc).toBe('forced');
    else expectProblem(gc, 409, 'gc_unavailable');
    expectProblem(await core.call('GET', '/_emu/memory'), 401, 'unauthenticated');
  });
});

describe('async mode, callbacks and the callback inbox (the HTTP surface; delivery semantics in async.test.ts)', () => {
  const admin = () => ({ key: core.admin });
  async function settled(id: string, until: (rec: any) => boolean) {
    let rec = (await core.call('GET', `/v1/invocations/${id}`)).json;
    for (let i = 0; i < 200 && !until(rec); i++) {
      await sleep(25);
      rec = (await core.call('GET', `/v1/invocations/${id}`)).json;
    }
    return rec;
  }

  it('202 after storing, the record, a verified callback in the inbox, redelivery with the same webhook-id', async () => {
    await createSnippet('inv-async');
    await createVersion('inv-async', { code: 'export default async function handler(input) { return { got: input }; }\n' });
    const callback = `${core.url}/_emu/inbox/routes-test`;
    const r = await core.call('POST', '/v1/invoke/inv-async', { a: 1, callback_url: callback }, { headers: { 'x-invoke-mode': 'async' } });
    expect(r.status, r.text).toBe(202);
    const id = r.json.invocation_id;
    expect(r.json).toEqual({ invocation_id: id, status: 'queued', status_url: `/v1/invocations/${id}` });
    expect(r.headers.get('location')).toBe(`/v1/invocations/${id}`);
    expect(r.headers.get('x-invocation-id')).toBe(id);
    expect(r.headers.get('x-snippet-version')).toBe('1');

    const rec = await settled(id, (x) => x.callback?.status === 'delivered');
    expect(rec).toMatchObject({ mode: 'async', status: 'succeeded', outcome: 'success', attempts: 1, output: { got: { a: 1 } } });
    expect(rec.callback).toMatchObject({ url: callback, status: 'delivered', attempts: 1, webhook_id: expect.stringMatching(/^msg_/) });
    expect(rec.callback.last_attempt.status_code).toBe(200);
    // loopback is allowed under the default local profile, and the record says production would refuse it
    expect(rec.parity_warnings.join(' ')).toMatch(/production would refuse.*127\.0\.0\.1.*loopback/);

    const inbox = await core.call('GET', '/_emu/inbox/routes-test', undefined, admin());
    expect(inbox.status).toBe(200);
    expect(inbox.json.data).toHaveLength(1);
    const got = inbox.json.data[0];
    expect(got.signature).toEqual({ verified: true, tenant: 'local', timestamp_ok: true, reason: null });
    expect(got.headers['webhook-id']).toBe(rec.callback.webhook_id);
    expect(got.json).toMatchObject({ id, status: 'succeeded', output: { got: { a: 1 } } });

    const again = await core.call('POST', `/v1/invocations/${id}/callback/redeliver`);
    expect(again.status, again.text).toBe(200);
    expect(again.json.callback).toMatchObject({ status: 'delivered', attempts: 2 });
    const twice = await core.call('GET', '/_emu/inbox/routes-test', undefined, admin());
    expect(twice.json.data.map((d: any) => d.headers['webhook-id'])).toEqual([rec.callback.webhook_id, rec.callback.webhook_id]);
    const emu = await core.call('GET', `/_emu/invocations/${id}`, undefined, admin());
    expect(emu.json.callback_deliveries.map((d: any) => d.scheduled)).toEqual([true, false]);

    // a sync invocation has no callback to redeliver
    const sync = await core.call('POST', '/v1/invoke/inv-async', {});
    expectProblem(await core.call('POST', `/v1/invocations/${sync.headers.get('x-invocation-id')}/callback/redeliver`), 409, 'conflict');
  });

  it('a callback_url that is not an http(s) URL is 422 naming body.callback_url; nothing is queued', async () => {
    await createSnippet('inv-bad-callback');
    await createVersion('inv-bad-callback');
    for (const url of ['ftp://example.com/x', 'not a url', 42]) {
      const r = await core.call('POST', '/v1/invoke/inv-bad-callback', { callback_url: url }, { headers: { 'x-invoke-mode': 'async' } });
      expectProblem(r, 422, 'validation_failed');
      expect(r.json.errors[0].location).toBe('body.callback_url');
    }
    expect((await core.call('GET', '/v1/invocations?snippet=inv-bad-callback')).json.data).toEqual([]);
  });

  it('the inbox answers the status chosen (for a number of deliveries, or by ?status=), lists and clears', async () => {
    const put = await core.call('PUT', '/_emu/inbox/rehearse/response', { status: 503, times: 1, retry_after_seconds: 7 }, admin());
    expect(put.status, put.text).toBe(200);
    expect(put.json).toEqual({ status: 503, times: 1, retry_after_seconds: 7 });
    const first = await core.call('POST', '/_emu/inbox/rehearse', { hi: 1 }, { key: null });
    expect(first.status).toBe(503);
    expect(first.headers.get('retry-after')).toBe('7');
    expect((await core.call('POST', '/_emu/inbox/rehearse', { hi: 2 }, { key: null })).status).toBe(200);
    expect(
      (
        await core.call('POST', '/_emu/inbox/rehearse?status=410', 'plain text', {
          key: null,
          raw: 'plain text',
          headers: { 'content-type': 'text/plain' },
        })
      ).status,
    ).toBe(410);

    const got = await core.call('GET', '/_emu/inbox/rehearse', undefined, admin());
    expect(got.json.data.map((d: any) => d.answered)).toEqual([410, 200, 503]);
    expect(got.json.data[0]).toMatchObject({ body: 'plain text', json: null, query: 'status=410' });
    expect(got.json.data[2].signature).toMatchObject({ verified: false, tenant: null, reason: 'missing webhook-id header' });
    const list = await core.call('GET', '/_emu/inbox', undefined, admin());
    expect(list.json.data.find((i: any) => i.name === 'rehearse')).toMatchObject({ deliveries: 3 });
    expect((await core.call('DELETE', '/_emu/inbox/rehearse', undefined, admin())).status).toBe(204);
    expect((await core.call('GET', '/_emu/inbox/rehearse', undefined, admin())).json.data).toEqual([]);

    expectProblem(await core.call('GET', '/_emu/inbox/rehearse'), 401, 'unauthenticated');
    expectProblem(await core.call('PUT', '/_emu/inbox/rehearse/response', { status: 99 }, admin()), 422, 'validation_failed');
    expectProblem(await core.call('POST', '/_emu/inbox/Bad_Name', {}, { key: null }), 422, 'validation_failed');
    expectProblem(await core.call('POST', '/_emu/inbox/x?status=99', {}, { key: null }), 400, 'validation_failed');
  });

  it('/_emu/info and /metrics report the egress profile and the async queue', async () => {
    const info = await core.call('GET', '/_emu/info', undefined, admin());
    expect(info.json.egress).toEqual({ profile: 'local', allow: [] });
    expect(info.json.async_queue).toMatchObject({ max_workers: 8 });
    const metrics = (await core.call('GET', '/metrics')).text;
    expect(metrics).toMatch(/^svc_emu_async_jobs_queued \d+$/m);
    expect(metrics).toMatch(/^svc_emu_async_jobs_running \d+$/m);
  });
});

describe('the egress inspector and fault rules (the HTTP surface; behaviour in egress-proxy.test.ts and agents tests)', () => {
  const admin = () => ({ key: core.admin });
  it('lists the log with the profile, clears it; adds, lists and removes fault rules', async () => {
    const log = await core.call('GET', '/_emu/egress', undefined, admin());
    expect(log.status).toBe(200);
    expect(log.json).toMatchObject({ profile: 'local', allow: [] });
    expect(Array.isArray(log.json.data)).toBe(true);
    expect((await core.call('DELETE', '/_emu/egress', undefined, admin())).status).toBe(204);

    const add = await core.call('POST', '/_emu/egress/faults', { host: 'api.example.com', action: { type: 'latency', ms: 250 } }, admin());
    expect(add.status, add.text).toBe(201);
    expect(add.json).toMatchObject({
      id: expect.stringMatching(/^flt_/),
      host: 'api.example.com',
      action: { type: 'latency', ms: 250 },
      times: null,
      hits: 0,
    });
    const second = await core.call(
      'POST',
      '/_emu/egress/faults',
      { integration: 'weather', action: { type: 'status', status: 503 }, times: 2 },
      admin(),
    );
    expect(second.status).toBe(201);
    expect((await core.call('GET', '/_emu/egress/faults', undefined, admin())).json.data.map((f: any) => f.id)).toEqual([
      add.json.id,
      second.json.id,
    ]);
    expect((await core.call('DELETE', `/_emu/egress/faults/${add.json.id}`, undefined, admin())).status).toBe(204);
    expectProblem(await core.call('DELETE', `/_emu/egress/faults/${add.json.id}`, undefined, admin()), 404, 'not_found');
    expect((await core.call('DELETE', '/_emu/egress/faults', undefined, admin())).status).toBe(204);
    expect((await core.call('GET', '/_emu/egress/faults', undefined, admin())).json.data).toEqual([]);

    expectProblem(await core.call('POST', '/_emu/egress/faults', { action: { type: 'drop' } }, admin()), 422, 'validation_failed');
    expectProblem(
      await core.call('POST', '/_emu/egress/faults', { host: 'x', action: { type: 'status', status: 200 } }, admin()),
      422,
      'validation_failed',
    );
    expectProblem(await core.call('GET', '/_emu/egress'), 401, 'unauthenticated');
  });
});

describe('the live event feed (the HTTP surface; behaviour in test/server/events.test.ts)', () => {
  it('GET /_emu/events streams each change to an admin, filtered by types=; 401 without the token, 400 for a bad filter', async () => {
    const ac = new AbortController();
    const res = await core.client.fetchPath('GET', '/_emu/events?types=snippet.*', { auth: 'admin', signal: ac.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await createSnippet('feed-route');
    let seen: { event: string; data: string } | undefined;
    for await (const e of parseSse(res.body!, { signal: ac.signal })) {
      seen = e;
      break;
    }
    ac.abort();
    expect(seen?.event).toBe('snippet.created');
    expect(JSON.parse(seen!.data)).toMatchObject({ type: 'snippet.created', data: { snippet: 'feed-route', runtime: 'bun' } });
    expectProblem(await core.call('GET', '/_emu/events'), 401, 'unauthenticated');
    expectProblem(await core.call('GET', '/_emu/events?types=NOT%20A%20TYPE', undefined, { key: core.admin }), 400, 'validation_failed');
  });
});

describe('the GUI session (the HTTP surface; behaviour in test/server/gui-session.test.ts and test/gui/session.test.ts)', () => {
  it('GET /_emu/gui-session answers whether the request is signed in, never a 401; rotate needs the admin token', async () => {
    const anonymous = await core.call('GET', '/_emu/gui-session', undefined, { key: null });
    expect(anonymous.status, anonymous.text).toBe(200);
    expect(anonymous.json).toEqual({ signed_in: false, via: null, admin_token: null });
    const admin = await core.call('GET', '/_emu/gui-session', undefined, { key: core.admin });
    expect(admin.json).toEqual({ signed_in: true, via: 'token', admin_token: core.admin });
    const rotated = await core.call('POST', '/_emu/gui-session/rotate', undefined, { key: core.admin });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.json.sign_in_url).toMatch(/\/\?token=/);
    expectProblem(await core.call('POST', '/_emu/gui-session/rotate', undefined, { key: null }), 401, 'unauthenticated');
  });
});

describe('the agent run view (the HTTP surface; behaviour in test/agents/agent-steps.test.ts)', () => {
  it('GET /_emu/invocations/{id}/agent: a run that used no framework and called no model has empty lists; 404 for an unknown id', async () => {
    await createSnippet('agent-route');
    await createVersion('agent-route');
    const run = await core.call('POST', '/v1/invoke/agent-route', { a: 1 });
    expect(run.status, run.text).toBe(200);
    const id = run.headers.get('x-invocation-id')!;
    const r = await core.call('GET', `/_emu/invocations/${id}/agent`, undefined, { key: core.admin });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ invocation_id: id, framework: null, graph: null, steps: [], provider_calls: [], live: false });
    expectProblem(await core.call('GET', '/_emu/invocations/inv_missing/agent', undefined, { key: core.admin }), 404, 'not_found');
    expectProblem(await core.call('GET', `/_emu/invocations/${id}/agent`, undefined, { key: null }), 401, 'unauthenticated');
  });
});

describe('the run report (the HTTP surface; behaviour in test/report/report.test.ts)', () => {
  it('GET /_emu/report is one HTML attachment; POST /_emu/report/import makes a version and an imported invocation', async () => {
    await createSnippet('report-route');
    await createVersion('report-route');
    const run = await core.call('POST', '/v1/invoke/report-route', { a: 1 });
    expect(run.status, run.text).toBe(200);
    const id = run.headers.get('x-invocation-id')!;
    const r = await core.call('GET', `/_emu/report?ids=${id}`, undefined, { key: core.admin });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('content-disposition')).toMatch(/^attachment; filename="svc-emu-report-/);
    const imported = await core.call('POST', '/_emu/report/import', { html: r.text }, { key: core.admin });
    expect(imported.status, imported.text).toBe(201);
    expect(imported.json.invocations[0]).toMatchObject({ source_id: id, snippet: 'report-route', version: 2, outcome: 'success' });
    expectProblem(await core.call('POST', '/_emu/report/import', { html: '<p>hi</p>' }, { key: core.admin }), 422, 'invalid_report');
    expectProblem(await core.call('GET', `/_emu/report?ids=${id}`, undefined, { key: null }), 401, 'unauthenticated');
  });
});

describe('state export and import (the HTTP surface; behaviour in test/state/*.test.ts)', () => {
  it('POST /_emu/state/export is the archive; POST /_emu/state/import takes it into a fresh core (served there)', async () => {
    const exp = await fetch(`${core.url}/_emu/state/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${core.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ passphrase: 'routes passphrase' }),
    });
    expect(exp.status).toBe(200);
    expect(exp.headers.get('content-type')).toBe('application/vnd.svc-emu.state+gzip');
    expect(exp.headers.get('x-emu-secrets')).toBe('encrypted');
    const archive = Buffer.from(await exp.arrayBuffer());
    // Importing replaces a state: into a core of its own (this file's core keeps its state for the other tests).
    const fresh = await startTestCore();
    try {
      const send = (headers: Record<string, string>) =>
        fresh.call('POST', '/_emu/state/import', undefined, {
          key: fresh.admin,
          raw: archive,
          headers: { 'content-type': 'application/vnd.svc-emu.state+gzip', ...headers },
        });
      expectProblem(await send({}), 422, 'passphrase_required');
      const ok = await send({ 'x-emu-passphrase': encodeURIComponent('routes passphrase') });
      expect(ok.status, ok.text).toBe(200);
      expect(ok.json.secrets).toMatchObject({ mode: 'encrypted', left_out: [] });
      vmServed.push(...(await served2xx(fresh))); // counted with the VM core's: served by a core of this file
    } finally {
      await fresh.stop();
    }
    expectProblem(await core.call('POST', '/_emu/state/export', {}, { key: null }), 401, 'unauthenticated');
  });
});

describe('egress modes and cassettes (the HTTP surface; behaviour in test/server/egress-record-replay.test.ts)', () => {
  it('GET|PUT /_emu/egress/mode; a snippet’s cassettes written, listed, read and deleted', async () => {
    const admin = { key: core.admin };
    const mode = await core.call('GET', '/_emu/egress/mode', undefined, admin);
    expect(mode.status, mode.text).toBe(200);
    expect(mode.json).toEqual({ mode: 'live', replay_speed: 1 });
    const set = await core.call('PUT', '/_emu/egress/mode', { replay_speed: 3 }, admin);
    expect(set.json).toEqual({ mode: 'live', replay_speed: 3 });
    expect((await core.call('PUT', '/_emu/egress/mode', { replay_speed: 1 }, admin)).status).toBe(200);
    expectProblem(await core.call('PUT', '/_emu/egress/mode', { mode: 'tape' }, admin), 422, 'validation_failed');

    await createSnippet('cassette-route');
    const doc = {
      log: {
        version: '1.2',
        creator: { name: 'test', version: '1' },
        entries: [],
        _svcEmu: { format: 1, tenant: 'local', snippet: 'cassette-route' },
      },
    };
    const put = await core.call('PUT', '/_emu/snippets/cassette-route/cassettes/take', doc, admin);
    expect(put.status, put.text).toBe(200);
    expect(put.json).toMatchObject({ name: 'take', entries: 0, episodes: [] });
    const list = await core.call('GET', '/_emu/snippets/cassette-route/cassettes', undefined, admin);
    expect(list.json.data.map((c: { name: string }) => c.name)).toEqual(['take']);
    const one = await core.call('GET', '/_emu/snippets/cassette-route/cassettes/take', undefined, admin);
    expect(one.json.log.version).toBe('1.2');
    expect((await core.call('DELETE', '/_emu/snippets/cassette-route/cassettes/take', undefined, admin)).status).toBe(204);
    expectProblem(await core.call('GET', '/_emu/snippets/cassette-route/cassettes/take', undefined, admin), 404, 'not_found');
    expectProblem(await core.call('GET', '/_emu/snippets/nosuch/cassettes', undefined, admin), 404, 'not_found');
    expectProblem(await core.call('GET', '/_emu/egress/mode', undefined, { key: null }), 401, 'unauthenticated');
  });
});

describe('debug sessions (the HTTP surface; behaviour in test/api/debug.test.ts)', () => {
  it('GET /_emu/debug/sessions lists none when no debug run is in progress; admin only', async () => {
    const list = await core.call('GET', '/_emu/debug/sessions', undefined, { key: core.admin });
    expect(list.status, list.text).toBe(200);
    expect(list.json).toEqual({ data: [] });
    expectProblem(await core.call('GET', '/_emu/debug/sessions', undefined, { key: null }), 401, 'unauthenticated');
  });
});

describe('terminals (the HTTP surface; behaviour in test/server/terminal.test.ts)', () => {
  const admin = () => ({ key: core.admin });
  it('opens a shell, resizes it, types `exit`, reads its output, lists and deletes it', async () => {
    // A HOME of its own, as test/server/terminal.test.ts does: this machine's ~/.bashrc runs `pyenv rehash`, whose
    // lock file, left by a shell killed mid-start-up, makes every later shell wait (a fresh-clone CI run hung here).
    const realHome = process.env.HOME;
    process.env.HOME = await tempDir('svc-emu-routes-home-');
    onTestFinished(() => void (process.env.HOME = realHome));
    const open = await core.call('POST', '/_emu/terminals', { cols: 90, rows: 20 }, admin());
    expect(open.status, open.text).toBe(201);
    const id = open.json.id as string;
    expect((await core.call('GET', `/_emu/terminals/${id}`, undefined, admin())).json).toMatchObject({
      id,
      target: 'workspace',
      cols: 90,
      rows: 20,
    });
    expect((await core.call('POST', `/_emu/terminals/${id}/resize`, { cols: 100, rows: 30 }, admin())).status).toBe(204);
    expect((await core.call('POST', `/_emu/terminals/${id}/input`, { data: 'exit 3\n' }, admin())).status).toBe(204);
    for (let i = 0; i < 200 && (await core.call('GET', `/_emu/terminals/${id}`, undefined, admin())).json.status === 'running'; i++)
      await sleep(50);
    const output = await core.call('GET', `/_emu/terminals/${id}/output`, undefined, admin()); // exited: the scrollback and the exit, then the end
    expect(output.status).toBe(200);
    expect(output.text).toContain('event: exit\ndata: {"exit_code":3,"signal":null}');
    expect((await core.call('GET', '/_emu/terminals', undefined, admin())).json.data.map((t: { id: string }) => t.id)).toContain(id);
    expect((await core.call('DELETE', `/_emu/terminals/${id}`, undefined, admin())).status).toBe(204);
    expectProblem(await core.call('GET', '/_emu/terminals'), 401, 'unauthenticated');
  });
});

/** `METHOD /route` of every request a core answered with a 2xx, as its /metrics counted. */
async function served2xx(c: TestCore): Promise<string[]> {
  const m = await c.call('GET', '/metrics');
  return m.text
    .split('\n')
    .map((l) => /^svc_emu_http_requests_total\{method="(\w+)",route="([^"]+)",status="2\d\d"\}/.exec(l))
    .filter((x): x is RegExpExecArray => x !== null)
    .map((x) => `${x[1]} ${x[2]}`);
}

/** What the VM core below served (it runs behind the fake VM's agent, so it has a core of its own). */
const vmServed: string[] = [];

describe('the executor VM (a second core behind a fake limactl; behaviour in test/server/vm-*.test.ts)', () => {
  it('status, create, start (the core connects), connect, stop', async () => {
    const fake = await fakeLimactl();
    const bunBin = (JSON.parse(readFileSync(join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json'), 'utf8')) as { bun: { bin: string } }).bun
      .bin;
    const vmCore = await startTestCore({
      config: {
        limactl: fake.path,
        projectRoot: PROJECT_ROOT,
        executorAgent: agentInFakeVm(fake, { projectRoot: PROJECT_ROOT, bunBin, workDir: await tempDir('svc-emu-agent-') }),
      },
    });
    try {
      const admin = { key: vmCore.admin };
      const settle = async () => {
        for (let i = 0; i < 400; i++) {
          const op = (await vmCore.call('GET', '/_emu/vm', undefined, admin)).json.operation;
          if (op?.state !== 'running') return op;
          await sleep(50);
        }
        throw new Error('the VM operation never ended');
      };
      expect((await vmCore.call('GET', '/_emu/vm', undefined, admin)).json.vm.status).toBe('missing');
      for (const action of ['create', 'start']) {
        expect((await vmCore.call('POST', `/_emu/vm/${action}`, undefined, admin)).status).toBe(202);
        expect((await settle()).state).toBe('succeeded');
      }
      const connect = await vmCore.call('POST', '/_emu/vm/connect', undefined, admin);
      expect(connect.status, connect.text).toBe(200);
      expect(connect.json.transport).toMatch(/^agent: /);
      expect((await vmCore.call('POST', '/_emu/vm/stop', undefined, admin)).status).toBe(202);
      expect((await settle()).state).toBe('succeeded');
      expectProblem(await vmCore.call('POST', '/_emu/vm/connect', undefined, admin), 502, 'agent_unreachable');
      vmServed.push(...(await served2xx(vmCore)));
    } finally {
      await vmCore.stop();
      await fake.remove();
    }
  }, 60_000);
});
