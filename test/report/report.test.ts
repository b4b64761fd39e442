/**
 * The run report (server/report/, `GET /_emu/report`, `svc-emu report`) and import-report
 * (`POST /_emu/report/import`, `svc-emu import-report`): one self-contained HTML file that Chromium opens
 * from disk with no network request, shows the memory/CPU timeline as SVG, and cannot be scripted by what
 * a snippet printed or returned; imported on a second emulator (another core, another data dir) it reruns
 * with `svc-emu invoke --replay` to the same outcome. Real cores, real Bun, real Chromium.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../../contract';
import { REPORT_CASSETTE_PREFIX, ReportRepro } from '../../contract/schemas/report';
import { runCli } from '../helpers/cli';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { CHROMIUM } from '../helpers/gui';
import { startFakeProvider } from '../../fixtures/fake-openai/server';

/** What a hostile snippet prints and returns: must stay text in the report. */
const HOSTILE = `</script><img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`;

const CODE = {
  hostile: `export default async function handler(input) {\n  console.log(${JSON.stringify(HOSTILE)});\n  console.error("stderr line <b>bold</b>");\n  return { html: ${JSON.stringify(HOSTILE)}, n: input.n, echo: input };\n}\n`,
  oom: 'export default async function handler(input) {\n  console.log(`allocating ${input.mb} MB`);\n  const a = new Uint8Array(input.mb * 1024 * 1024).fill(1);\n  return { len: a.length };\n}\n',
  slow: 'export default async function handler(input) {\n  console.log("spinning now");\n  let n = 0;\n  while (true) n++;\n}\n',
  /** Its own HTTP client, through the egress proxy: two calls to the fake REST API. */
  caller:
    'export default async function handler(input) {\n  const a = await fetch(input.url + "/api/echo", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ city: input.city }) });\n  const echoed = await a.json();\n  const b = await fetch(input.url + "/api/weather?city=" + input.city);\n  return { echo: echoed.received, weather_status: b.status, weather: await b.json() };\n}\n',
};

let a: TestCore;
let b: TestCore;
let work: string;
let limitsReason: string | null = null;
const ids: Record<string, string> = {};

async function makeSnippet(core: TestCore, name: string, code: string, limits: Record<string, number> = {}) {
  expect((await core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
  const v = await core.call('POST', `/v1/snippets/${name}/versions`, { code, ...limits });
  expect(v.status, v.text).toBe(201);
}

beforeAll(async () => {
  work = await tempDir('svc-emu-report-');
  [a, b] = await Promise.all([startTestCore(), startTestCore()]);
  const info = (await a.call('GET', '/_emu/executor', undefined, { key: a.admin })).json as { backend?: string };
  if (!info.backend || info.backend === 'none')
    limitsReason = `the executor has no limit backend here (backend ${JSON.stringify(info.backend)})`;
  await makeSnippet(a, 'hostile', CODE.hostile);
  await makeSnippet(a, 'oom', CODE.oom, { max_memory_mb: 64 });
  await makeSnippet(a, 'slow', CODE.slow, { timeout_ms: 1000 });
  const ok = await a.call('POST', '/v1/invoke/hostile', { n: 7, note: '<i>x</i>' });
  expect(ok.status, ok.text).toBe(200);
  ids.hostile = ok.headers.get('x-invocation-id')!;
  if (!limitsReason) {
    const oom = await a.call('POST', '/v1/invoke/oom', { mb: 400 });
    expect(oom.json.code, oom.text).toBe('oom_killed');
    ids.oom = oom.headers.get('x-invocation-id')!;
    const slow = await a.call('POST', '/v1/invoke/slow', {});
    expect(slow.json.code, slow.text).toBe('timeout');
    ids.slow = slow.headers.get('x-invocation-id')!;
  }
}, 120_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  if (work) await rm(work, { recursive: true, force: true });
});

const reproOf = (html: string) => {
  const m = /<script type="application\/json" id="svc-emu-repro">([\s\S]*?)<\/script>/.exec(html);
  expect(m, 'the payload block').toBeTruthy();
  return ReportRepro.parse(JSON.parse(m![1]!));
};

describe('GET /_emu/report', () => {
  it('answers one HTML file as an attachment, with every hostile string escaped and the payload intact', async () => {
    const r = await a.call('GET', `/_emu/report?ids=${ids.hostile}`, undefined, { key: a.admin });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    expect(r.headers.get('content-disposition')).toMatch(
      new RegExp(`^attachment; filename="svc-emu-report-${ids.hostile}-[0-9T-]+\\.html"$`),
    );
    const html = r.text;
    // The page's own markup: exactly one payload block and one script of ours; nothing the snippet wrote became markup.
    expect(html.match(/<script\b/g)).toHaveLength(2);
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<b>bold</b>');
    expect(html).toContain('&lt;/script&gt;&lt;img src=x onerror=');
    expect(html).toContain('&lt;b&gt;bold&lt;/b&gt;');
    expect(html).toMatch(/<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;;/);
    const repro = reproOf(html);
    const inv = repro.invocations[0]!;
    expect(inv).toMatchObject({
      invocation_id: ids.hostile,
      runtime: 'bun',
      snippet: { name: 'hostile' },
      version: { version: 1, entrypoint: 'index.ts', timeout_ms: 60000, max_memory_mb: 200, max_cpu_percent: 10 },
      mode: 'sync',
      input: { n: 7, note: '<i>x</i>' },
      summary: { outcome: 'success', output: { html: HOSTILE, n: 7 } },
      cassette: null,
    });
    expect(inv.version.files['index.ts']).toBe(CODE.hostile);
  });

  it('is declared by the contract (typed client validates the answer); unknown ids are 404, bad ones 400', async () => {
    const r = await a.client.send(operations.emuGetReport, { query: { ids: ids.hostile! } });
    expect(r.status).toBe(200);
    expect((await a.call('GET', '/_emu/report?ids=inv_nope', undefined, { key: a.admin })).json).toMatchObject({
      status: 404,
      code: 'not_found',
    });
    expect((await a.call('GET', '/_emu/report?ids=a,,b', undefined, { key: a.admin })).status).toBe(400);
    expect((await a.call('GET', `/_emu/report?ids=${ids.hostile}`, undefined, { key: a.key })).status).toBe(401);
  });
});

describe('secrets', () => {
  it('no value of a tenant secret is in the file: output, logs and input show [secret NAME]', async () => {
    const value = 'tok-s3cret-' + Math.random().toString(36).slice(2);
    expect((await a.call('PUT', '/v1/secrets/API_TOKEN', { value })).status).toBeLessThan(300);
    await makeSnippet(
      a,
      'leaky',
      'export default async function handler(input) {\n  console.log("token is " + process.env.API_TOKEN);\n  return { token: process.env.API_TOKEN, got: input.t };\n}\n',
    );
    const run = await a.call('POST', '/v1/invoke/leaky', { t: value });
    expect(run.json).toEqual({ token: value, got: value });
    const html = (await a.call('GET', `/_emu/report?ids=${run.headers.get('x-invocation-id')}`, undefined, { key: a.admin })).text;
    expect(html).not.toContain(value);
    expect(html).toContain('token is [secret API_TOKEN]');
    expect(reproOf(html).invocations[0]).toMatchObject({
      input: { t: '[secret API_TOKEN]' },
      summary: { output: { token: '[secret API_TOKEN]', got: '[secret API_TOKEN]' } },
    });
  });
});

describe('secrets that occur inside ids', () => {
  it('a secret whose value is in every id (`inv_`): the ids stay as they are, the output is still redacted, and the import names the run', async () => {
    // On b: a's secrets are shared by the other tests of this file. Every invocation id starts with inv_.
    expect((await b.call('PUT', '/v1/secrets/SHORT', { value: 'inv_' })).status).toBeLessThan(300);
    try {
      await makeSnippet(
        b,
        'ids-kept',
        'export default async function handler(input) {\n  return { tag: process.env.SHORT + input.n };\n}\n',
      );
      const run = await b.call('POST', '/v1/invoke/ids-kept', { n: 3 });
      expect(run.json).toEqual({ tag: 'inv_3' });
      const id = run.headers.get('x-invocation-id')!;
      expect(id.startsWith('inv_')).toBe(true);
      const repro = reproOf((await b.call('GET', `/_emu/report?ids=${id}`, undefined, { key: b.admin })).text);
      expect(repro.invocations[0]).toMatchObject({ invocation_id: id, summary: { output: { tag: '[secret SHORT]3' } } });
      const imported = await a.client.call(operations.emuImportReport, { body: { repro } });
      expect(imported.invocations[0]).toMatchObject({ source_id: id, snippet: 'ids-kept', outcome: 'success' });
    } finally {
      await b.call('DELETE', '/v1/secrets/SHORT');
    }
  });
});

describe('the file in Chromium', () => {
  it('opens from file:// with no request but the file itself, shows the timeline as SVG with points, and runs no hostile script', async ({
    skip,
  }) => {
    if (!existsSync(CHROMIUM)) return skip(`${CHROMIUM} is missing`);
    if (limitsReason) return skip(limitsReason);
    const file = join(work, 'report.html');
    const r = await runCli(['report', ids.hostile!, ids.slow!, ids.oom!, '-o', file, '--data-dir', a.dataDir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^wrote .*report\.html \(\d+ KiB, 3 invocations\)/);
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const context = await browser.newContext();
      const page = await context.newPage();
      const requests: string[] = [];
      const errors: string[] = [];
      context.on('request', (req) => requests.push(req.url()));
      page.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning') errors.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(e.message));
      const url = pathToFileURL(file).href;
      await page.goto(url, { waitUntil: 'load' });
      await page.emulateMedia({ media: 'print' });
      expect(requests).toEqual([url]);
      expect(errors, 'no CSP refusal: our style and script match their hashes').toEqual([]);
      expect(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned)).toBeUndefined();
      expect(await page.locator('img').count()).toBe(0);
      expect(await page.locator('section.inv').count()).toBe(3);
      await expect.poll(() => page.locator('pre.logs').first().textContent()).toContain('</script><img src=x onerror=');

      const slow = page.locator(`section[data-invocation="${ids.slow}"]`);
      const mem = slow.locator('svg[data-chart="memory"]');
      const samples = Number(await mem.getAttribute('data-samples'));
      expect(samples, 'a 1 s run is sampled every ~50 ms').toBeGreaterThanOrEqual(5);
      const points = (await mem.locator('polyline.series').getAttribute('points'))!.trim().split(/\s+/);
      expect(points).toHaveLength(samples);
      expect(await mem.locator('line.limit').count()).toBe(1);
      expect(await slow.locator('svg[data-chart="cpu"] polyline.series').count()).toBe(1);
      expect(await slow.locator('.evidence').first().textContent()).toContain('Timed out: the limit was 1000 ms');
      const oom = page.locator(`section[data-invocation="${ids.oom}"]`);
      expect(await oom.locator('svg[data-chart="memory"] text.limit-label').textContent()).toBe('max_memory_mb 64');
      expect(await oom.textContent()).toContain('Killed for memory: the limit was 64 MB');
      // Printing opens every collapsed section (the page's one script).
      await page.evaluate(() => window.dispatchEvent(new Event('beforeprint')));
      expect(await page.locator('details:not([open])').count()).toBe(0);
      await mkdir(join(work, 'shots'), { recursive: true });
      await page.pdf({ path: join(work, 'shots', 'report.pdf') });
      expect(requests).toEqual([url]);
    } finally {
      await browser.close();
    }
  }, 60_000);
});

describe('import-report on another emulator', () => {
  const importFile = async (id: string) => {
    const file = join(work, `${id}.html`);
    const made = await runCli(['report', id, '-o', file, '--data-dir', a.dataDir]);
    expect(made.code, made.stderr).toBe(0);
    const r = await runCli(['import-report', file, '--data-dir', b.dataDir]);
    expect(r.code, r.stderr).toBe(0);
    const m = new RegExp(`^${id} → (inv_[0-9A-Za-z]+): .*\\n  rerun: svc-emu invoke --replay (inv_[0-9A-Za-z]+)\\n$`).exec(r.stdout);
    expect(m, r.stdout).toBeTruthy();
    expect(m![2]).toBe(m![1]);
    return m![1]!;
  };
  const rerun = async (id: string) => {
    const r = await runCli(['invoke', '--replay', id, '--json', '--data-dir', b.dataDir]);
    return { ...r, rec: JSON.parse(r.stdout) as { id: string; outcome: string; output: unknown; version: number; snippet: string } };
  };

  it('a handler that returns: same output on the rerun', async () => {
    const imported = await importFile(ids.hostile!);
    const view = await b.client.call(operations.emuGetInvocation, { params: { id: imported } });
    expect(view).toMatchObject({ snippet: 'hostile', status: 'succeeded', outcome: 'success', input: { n: 7, note: '<i>x</i>' } });
    expect(view.parity_warnings.join(' ')).toContain(`imported from a run report: invocation ${ids.hostile}`);
    const r = await rerun(imported);
    expect(r.code, r.stderr).toBe(0);
    expect(r.rec).toMatchObject({
      outcome: 'success',
      output: { html: HOSTILE, n: 7, echo: { n: 7, note: '<i>x</i>' } },
      snippet: 'hostile',
    });
    expect(r.rec.id).not.toBe(imported);
    const code = await b.call('GET', `/v1/snippets/hostile/versions/${r.rec.version}`);
    expect(code.json.files['index.ts']).toBe(CODE.hostile);
  });

  it('a handler killed for memory: oom_killed again, under the same 64 MB', async ({ skip }) => {
    if (limitsReason) return skip(limitsReason);
    const imported = await importFile(ids.oom!);
    const r = await rerun(imported);
    expect(r.code).toBe(1);
    expect(r.rec).toMatchObject({ outcome: 'oom_killed', snippet: 'oom' });
    const view = await b.client.call(operations.emuGetInvocation, { params: { id: r.rec.id } });
    expect(view.limits.max_memory_mb).toBe(64);
  }, 60_000);

  it('a handler that times out: timeout again, after the same 1000 ms', async ({ skip }) => {
    if (limitsReason) return skip(limitsReason);
    const imported = await importFile(ids.slow!);
    const r = await rerun(imported);
    expect(r.code).toBe(1);
    expect(r.rec).toMatchObject({ outcome: 'timeout', snippet: 'slow' });
    const view = await b.client.call(operations.emuGetInvocation, { params: { id: r.rec.id } });
    expect(view.limits.timeout_ms).toBe(1000);
    expect(view.usage!.duration_ms).toBeGreaterThanOrEqual(1000);
  }, 60_000);

  it('pinned overrides travel: a run under X-Emu-Limits timeout_ms=500 reruns under the same override', async ({ skip }) => {
    if (limitsReason) return skip(limitsReason);
    const run = await a.call('POST', '/v1/invoke/slow', {}, { headers: { 'X-Emu-Limits': 'timeout_ms=500', 'X-Emu-Admin': a.admin } });
    expect(run.json.code, run.text).toBe('timeout');
    const imported = await importFile(run.headers.get('x-invocation-id')!);
    const r = await rerun(imported);
    expect(r.rec).toMatchObject({ outcome: 'timeout', snippet: 'slow' });
    const view = await b.client.call(operations.emuGetInvocation, { params: { id: r.rec.id } });
    expect(view).toMatchObject({ overridden: true, overrides: { timeout_ms: 500 }, limits: { timeout_ms: 500 } });
  }, 60_000);

  it('a streamed run: the report lists its frames with their times, and the rerun streams the same chunks', async () => {
    await makeSnippet(
      a,
      'ticks',
      'export default async function* handler(input) {\n  for (let i = 0; i < input.n; i++) yield { i };\n  return { done: input.n };\n}\n',
    );
    const res = await fetch(`${a.url}/v1/invoke/ticks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json', 'x-invoke-mode': 'stream' },
      body: JSON.stringify({ n: 3 }),
    });
    await res.text();
    const id = res.headers.get('x-invocation-id')!;
    const html = (await a.call('GET', `/_emu/report?ids=${id}`, undefined, { key: a.admin })).text;
    expect(html).toContain('Stream frames (5)');
    expect(html).toMatch(/<td>chunk<\/td><td class="n">[\d.]+<\/td><td><code>\{&quot;data&quot;:\{&quot;i&quot;:2\}\}<\/code>/);
    const imported = await importFile(id);
    const r = await runCli(['invoke', '--replay', imported, '--data-dir', b.dataDir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(', stream');
    expect(r.stdout).toContain('{"i":2}');
  });

  it('a damaged or foreign file is refused with a clear error, and nothing is created', async () => {
    const before = (await b.call('GET', '/v1/snippets')).json.data.length as number;
    const newest = async () => ((await b.call('GET', '/v1/invocations?limit=1')).json.data[0]?.id as string | undefined) ?? null;
    const invBefore = await newest();
    const good = (await a.call('GET', `/_emu/report?ids=${ids.hostile}`, undefined, { key: a.admin })).text;
    const cases: [string, string, RegExp][] = [
      ['foreign.html', '<!doctype html><html><body><p>hello</p></body></html>', /not a svc-emu run report/],
      ['cut.html', good.slice(0, good.indexOf('id="svc-emu-repro"') + 40), /block never ends|payload is damaged/],
      ['bent.html', good.replace('"runtime":"bun"', '"runtime":"cobol"'), /payload is damaged: invocations\.0\.runtime/],
      ['newer.html', good.replace('"version":1,"generated_at"', '"version":99,"generated_at"'), /payload is version 99/],
      ['text.txt', 'just some notes', /not an HTML run report/],
    ];
    for (const [name, content, why] of cases) {
      const file = join(work, name);
      await writeFile(file, content);
      const r = await runCli(['import-report', file, '--data-dir', b.dataDir]);
      expect(r.code, `${name}: ${r.stdout}`).toBe(1);
      expect(r.stderr, name).toMatch(why);
      expect(r.stderr, name).toContain('nothing was imported');
    }
    // The same checks over HTTP: 422 invalid_report.
    const http = await b.call('POST', '/_emu/report/import', { html: cases[0]![1] }, { key: b.admin });
    expect(http.status).toBe(422);
    expect(http.json).toMatchObject({ code: 'invalid_report' });
    expect((await b.call('GET', '/v1/snippets')).json.data.length).toBe(before);
    expect(await newest()).toBe(invBefore);
  });

  it('several runs of one version in one report make one version here, an invocation each; snippet.json egress settings travel', async () => {
    await makeSnippet(a, 'twice', 'export default async function handler(input) {\n  return { twice: input.k };\n}\n');
    const runs = [];
    for (const k of [1, 2]) runs.push((await a.call('POST', '/v1/invoke/twice', { k })).headers.get('x-invocation-id')!);
    const html = (await a.call('GET', `/_emu/report?ids=${runs.join(',')}`, undefined, { key: a.admin })).text;
    const repro = reproOf(html);
    expect(repro.invocations.map((i) => i.input)).toEqual([{ k: 1 }, { k: 2 }]);
    repro.invocations.forEach((i) => (i.version.egress = { mode: 'record', cassette: 'kept', match: { ignore_query: ['ts'] } }));
    const r = await b.client.call(operations.emuImportReport, { body: { repro } });
    expect(r.invocations.map((i) => [i.source_id, i.version, i.snippet_created])).toEqual([
      [runs[0], 1, true],
      [runs[1], 1, true],
    ]);
    expect((await b.call('GET', '/v1/snippets/twice/versions')).json.data).toHaveLength(1);
    for (const [n, i] of r.invocations.entries()) {
      const again = await runCli(['invoke', '--replay', i.id, '--json', '--data-dir', b.dataDir]);
      expect(JSON.parse(again.stdout).output).toEqual({ twice: n + 1 });
    }
    // A plain run of the imported version takes its mode and cassette from the version (snippet.json's egress).
    const plain = await b.call('POST', '/v1/invoke/twice', { k: 3 });
    const view = await b.client.call(operations.emuGetInvocation, { params: { id: plain.headers.get('x-invocation-id')! } });
    expect(view.egress).toMatchObject({ mode: 'record', source: 'snippet', cassette: 'kept' });
  });

  it('a report this emulator cannot take is refused before anything is made: a runtime clash, a limit above the tenant cap', async () => {
    const html = (await a.call('GET', `/_emu/report?ids=${ids.hostile}`, undefined, { key: a.admin })).text;
    const repro = reproOf(html);
    expect((await b.call('POST', '/v1/snippets', { name: 'clash', runtime: 'python' })).status).toBe(201);
    const clash = { ...repro, invocations: [{ ...repro.invocations[0]!, snippet: { name: 'clash', description: null } }] };
    const r1 = await b.call('POST', '/_emu/report/import', { repro: clash }, { key: b.admin });
    expect(r1.status).toBe(422);
    expect(r1.json).toMatchObject({ code: 'invalid_report' });
    expect(r1.json.detail).toContain("snippet 'clash' exists here as a python snippet; the report's is bun");
    expect((await b.call('GET', '/v1/snippets/clash/versions')).json.data).toEqual([]);

    expect((await b.call('POST', '/_emu/tenants', { name: 'tight' }, { key: b.admin })).status).toBe(201);
    expect((await b.call('PATCH', '/_emu/tenants/tight/limits', { max_memory_mb: 100 }, { key: b.admin })).status).toBe(200);
    const file = join(work, 'tight.html');
    await writeFile(file, html);
    const r2 = await runCli(['import-report', file, '--tenant', 'tight', '--json', '--data-dir', b.dataDir]);
    expect(r2.code).toBe(1);
    expect(JSON.parse(r2.stdout)).toMatchObject({ code: 'limit_exceeds_tenant_cap', field: 'max_memory_mb', cap: 100 });
    const key = (await b.call('POST', '/_emu/tenants/tight/keys', undefined, { key: b.admin })).json.key as string;
    expect((await b.call('GET', '/v1/snippets', undefined, { key })).json.data).toEqual([]);
  });

  it('the payload over HTTP imports too; a report cassette is named report-<id>', async () => {
    const html = (await a.call('GET', `/_emu/report?ids=${ids.hostile}`, undefined, { key: a.admin })).text;
    const existed = (await b.call('GET', '/v1/snippets/hostile')).status === 200;
    const r = await b.client.call(operations.emuImportReport, { body: { repro: reproOf(html) } });
    expect(r.invocations).toHaveLength(1);
    expect(r.invocations[0]).toMatchObject({
      source_id: ids.hostile,
      snippet: 'hostile',
      snippet_created: !existed,
      cassette: null,
      outcome: 'success',
    });
    expect(REPORT_CASSETTE_PREFIX).toBe('report-');
  });
});

describe('an outbound call replayed from the embedded cassette', () => {
  it("the report carries the run's calls as a cassette; imported elsewhere, the rerun replays them with the provider gone", async () => {
    const fake = await startFakeProvider();
    let stopped = false;
    try {
      await makeSnippet(a, 'caller', CODE.caller);
      const live = await a.call('POST', '/v1/invoke/caller', { url: fake.url, city: 'Paris' });
      expect(live.status, live.text).toBe(200);
      expect(live.json).toMatchObject({ echo: { city: 'Paris' }, weather_status: 401 });
      const source = live.headers.get('x-invocation-id')!;
      expect(fake.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /api/echo', 'GET /api/weather']);

      const file = join(work, 'caller.html');
      expect((await runCli(['report', source, '-o', file, '--data-dir', a.dataDir])).code).toBe(0);
      const html = await readFile(file, 'utf8');
      const inv = reproOf(html).invocations[0]!;
      expect(inv.cassette?.log.entries.map((e) => `${e.request.method} ${new URL(e.request.url).pathname}`)).toEqual([
        'POST /api/echo',
        'GET /api/weather',
      ]);
      expect(html).toContain('Outbound calls (2)');

      // The provider goes away: whatever the rerun gets comes from the file.
      await fake.close();
      stopped = true;
      const r = await runCli(['import-report', file, '--data-dir', b.dataDir]);
      expect(r.code, r.stderr).toBe(0);
      const cassette = `report-${source.toLowerCase()}`;
      expect(r.stdout).toContain(`cassette ${cassette} (2 calls)`);
      const imported = /→ (inv_[0-9A-Za-z]+)/.exec(r.stdout)![1]!;
      const listed = await b.client.call(operations.emuListCassettes, { params: { id: 'caller' } });
      expect(listed.data.map((c) => [c.name, c.entries])).toEqual([[cassette, 2]]);

      const again = await runCli(['invoke', '--replay', imported, '--json', '--data-dir', b.dataDir]);
      expect(again.code, again.stdout + again.stderr).toBe(0);
      const rec = JSON.parse(again.stdout) as { id: string; output: unknown };
      expect(rec.output).toEqual(live.json);
      const view = await b.client.call(operations.emuGetInvocation, { params: { id: rec.id } });
      expect(view.egress).toMatchObject({ mode: 'replay', source: 'run', cassette, calls: 2, replayed: 2, unmatched: 0 });
      const human = await runCli(['invoke', '--replay', imported, '--data-dir', b.dataDir]);
      expect(human.stderr).toContain(`outbound calls replayed from cassette ${cassette}`);
    } finally {
      if (!stopped) await fake.close();
    }
  }, 60_000);
});
