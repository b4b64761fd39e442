/**
 * Defences of a server on the user's own machine (issue 2): Host allow-list (DNS rebinding), Origin and
 * Sec-Fetch-Site checks, no CORS, the two kinds of credentials kept apart, emulator.json's mode and
 * content, and logs that never carry a credential or a secret value.
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { BUN_CODE, expectProblem, newTenant, rawRequest, type RawRes } from './_util';

let core: TestCore;
let port: number;

beforeAll(async () => {
  core = await startTestCore();
  port = core.emu.port;
});
afterAll(async () => {
  await core?.stop();
});

const raw = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
  rawRequest(core.url, method, path, { headers, ...(body !== undefined ? { body } : {}) });
const withKey = (h: Record<string, string> = {}) => ({ authorization: `Bearer ${core.key}`, ...h });

async function snippetNames(): Promise<string[]> {
  const r = await core.call('GET', '/v1/snippets?limit=1000');
  return r.json.data.map((s: { name: string }) => s.name);
}

describe('Host header (DNS rebinding)', () => {
  it.each([
    'evil.example',
    'evil.example:PORT',
    'attacker.test:80',
    '127.0.0.1.nip.io',
    'localhost.evil.example',
    '10.0.0.1',
    '192.168.1.10:8080',
  ])('Host %s → 421 misdirected_request', async (hostTemplate) => {
    const host = hostTemplate.replace('PORT', String(port));
    for (const path of ['/healthz', '/v1/snippets', '/_emu/info', '/openapi.json', '/']) {
      const r = await raw('GET', path, withKey({ host }));
      expectProblem(r, 421, 'misdirected_request');
    }
  });

  it('evil.example:PORT (with the real port) → 421, even with a valid key; a write is refused and nothing is written', async () => {
    const r = await raw('GET', '/v1/snippets', withKey({ host: `evil.example:${port}` }));
    expectProblem(r, 421, 'misdirected_request');
    const w = await raw(
      'POST',
      '/v1/snippets',
      withKey({ host: `evil.example:${port}`, 'content-type': 'application/json' }),
      JSON.stringify({ name: 'rebound', runtime: 'bun' }),
    );
    expectProblem(w, 421, 'misdirected_request');
    expect(await snippetNames()).not.toContain('rebound');
    const a = await raw('GET', '/_emu/info', { host: `evil.example:${port}`, authorization: `Bearer ${core.admin}` });
    expectProblem(a, 421, 'misdirected_request');
    expect(a.text).not.toContain(core.key);
  });

  it.each(['localhost:PORT', '127.0.0.1:PORT', '[::1]:PORT', 'localhost', '127.0.0.1', 'LOCALHOST:PORT'])(
    'Host %s is served',
    async (hostTemplate) => {
      const host = hostTemplate.replace('PORT', String(port));
      const h = await raw('GET', '/healthz', { host });
      expect(h.status, h.text).toBe(200);
      const v = await raw('GET', '/v1/snippets', withKey({ host }));
      expect(v.status, v.text).toBe(200);
    },
  );
});

describe('Origin and Sec-Fetch-Site', () => {
  const post = (headers: Record<string, string>, name: string) =>
    raw('POST', '/v1/snippets', withKey({ 'content-type': 'application/json', ...headers }), JSON.stringify({ name, runtime: 'bun' }));

  it.each([
    ['foreign origin', { origin: 'http://evil.example' }],
    ['foreign origin on the same port', { origin: `http://evil.example:PORT` }],
    ['same host, other port', { origin: 'http://127.0.0.1:1' }],
    ['other scheme', { origin: 'file://' }],
    ['Origin: null', { origin: 'null' }],
    ['garbage origin', { origin: 'not a url' }],
    ['Sec-Fetch-Site: cross-site', { 'sec-fetch-site': 'cross-site' }],
  ] as const)('%s → 403 forbidden_origin, nothing written', async (label, hdrs) => {
    const headers = Object.fromEntries(Object.entries(hdrs).map(([k, v]) => [k, v.replace('PORT', String(port))]));
    const name = `origin-${label
      .replace(/[^a-z]/gi, '')
      .toLowerCase()
      .slice(0, 30)}`;
    const w = await post(headers, name);
    expectProblem(w, 403, 'forbidden_origin');
    expect(w.headers['access-control-allow-origin']).toBeUndefined();
    expect(await snippetNames()).not.toContain(name);
    // reads too: a page elsewhere must not read a response either
    const r = await raw('GET', '/v1/snippets', withKey(headers));
    expectProblem(r, 403, 'forbidden_origin');
    const e = await raw('GET', '/_emu/info', { authorization: `Bearer ${core.admin}`, ...headers });
    expectProblem(e, 403, 'forbidden_origin');
    expect(e.text).not.toContain(core.key);
  });

  it('same origin is served: 127.0.0.1 and localhost, each with its own Host', async () => {
    const a = await post({ origin: `http://127.0.0.1:${port}` }, 'same-origin-a');
    expect(a.status, a.text).toBe(201);
    const b = await post({ origin: `http://localhost:${port}`, host: `localhost:${port}` }, 'same-origin-b');
    expect(b.status, b.text).toBe(201);
    const c = await post({ 'sec-fetch-site': 'same-origin' }, 'same-origin-c');
    expect(c.status, c.text).toBe(201);
    const d = await post({ 'sec-fetch-site': 'none' }, 'same-origin-d');
    expect(d.status, d.text).toBe(201);
  });

  it('an Origin of localhost does not pass for a request whose Host is 127.0.0.1 (different origins)', async () => {
    const r = await post({ origin: `http://localhost:${port}`, host: `127.0.0.1:${port}` }, 'cross-loopback');
    expectProblem(r, 403, 'forbidden_origin');
  });
});

describe('no CORS, ever', () => {
  const checks: [string, string, Record<string, string>][] = [
    ['GET', '/healthz', {}],
    ['GET', '/v1/snippets', { authorization: 'KEY' }],
    ['GET', '/v1/snippets', { origin: 'http://evil.example' }],
    ['GET', '/openapi.json', { origin: 'http://evil.example' }],
    ['GET', '/metrics', {}],
    ['GET', '/v1/nope', {}],
    ['GET', '/v1/snippets', {}],
    [
      'OPTIONS',
      '/v1/snippets',
      {
        origin: 'http://evil.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    ],
    [
      'OPTIONS',
      '/v1/snippets',
      {
        origin: 'http://127.0.0.1:PORT',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    ],
    ['OPTIONS', '/v1/invoke/x', { origin: 'null', 'access-control-request-method': 'POST' }],
    ['OPTIONS', '/_emu/tenants', { origin: 'http://evil.example', 'access-control-request-method': 'POST' }],
    ['OPTIONS', '/healthz', {}],
  ];

  it('no Access-Control-* header on any response, preflights included; a preflight is never a 2xx', async () => {
    for (const [method, path, h] of checks) {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(h)) {
        headers[k] = v === 'KEY' ? `Bearer ${core.key}` : v.replace('PORT', String(port));
      }
      const r: RawRes = await raw(method, path, headers);
      const acHeaders = Object.keys(r.headers).filter((k) => k.startsWith('access-control-'));
      expect(acHeaders, `${method} ${path} ${JSON.stringify(headers)}`).toEqual([]);
      expect(r.headers.vary ?? '').not.toMatch(/origin/i);
      if (method === 'OPTIONS') {
        expect(r.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
        expect(r.status).toBeLessThan(500);
        expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
      }
    }
  });
});

describe('credentials', () => {
  it('/_emu/* without a token, with a wrong one, or with a tenant API key → 401', async () => {
    const wrong = 'emu_' + 'A'.repeat(40);
    for (const path of ['/_emu/info', '/_emu/tenants', '/_emu/doctor', '/_emu/tenants/local']) {
      expectProblem(await core.call('GET', path, undefined, { key: null }), 401, 'unauthenticated');
      expectProblem(await core.call('GET', path, undefined, { key: wrong }), 401, 'unauthenticated');
      expectProblem(await core.call('GET', path, undefined, { key: core.key }), 401, 'unauthenticated');
      expectProblem(await core.call('GET', path, undefined, { key: null, headers: { 'x-emu-admin': wrong } }), 401, 'unauthenticated');
      expectProblem(await core.call('GET', path, undefined, { key: null, headers: { 'x-emu-admin': core.key } }), 401, 'unauthenticated');
      expectProblem(await core.call('GET', path, undefined, { key: core.admin.slice(0, -1) }), 401, 'unauthenticated');
      expectProblem(await core.call('GET', path, undefined, { key: core.admin + 'x' }), 401, 'unauthenticated');
      expect((await core.call('GET', path, undefined, { key: core.admin })).status).toBe(200);
    }
    // writes too, and nothing happens
    expectProblem(await core.call('POST', '/_emu/tenants', { name: 'sneaky' }, { key: core.key }), 401, 'unauthenticated');
    expectProblem(
      await core.call('PATCH', '/_emu/tenants/local/limits', { max_memory_mb: 4096 }, { key: core.key }),
      401,
      'unauthenticated',
    );
    expectProblem(await core.call('POST', '/_emu/tenants/local/keys', undefined, { key: core.key }), 401, 'unauthenticated');
    const tenants = await core.call('GET', '/_emu/tenants', undefined, { key: core.admin });
    expect(tenants.json.data.map((t: { name: string }) => t.name)).not.toContain('sneaky');
    expect(tenants.json.data.find((t: { name: string }) => t.name === 'local').keys).toHaveLength(1);
    expect((await core.call('GET', '/v1/tenant/runtime-limits')).json.max_memory_mb).toBe(2048);
  });

  it('/v1/* without a key → 401 unauthenticated with WWW-Authenticate; wrong key, admin token, malformed → 401', async () => {
    const none = await core.call('GET', '/v1/snippets', undefined, { key: null });
    expectProblem(none, 401, 'unauthenticated');
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    const bad: [string, Record<string, string>][] = [
      ['wrong key', { authorization: `Bearer svc_${'a'.repeat(40)}` }],
      ['admin token', { authorization: `Bearer ${core.admin}` }],
      ['key without Bearer', { authorization: core.key }],
      ['Basic', { authorization: `Basic ${Buffer.from(`user:${core.key}`).toString('base64')}` }],
      ['Bearer and nothing', { authorization: 'Bearer ' }],
      ['truncated key', { authorization: `Bearer ${core.key.slice(0, -1)}` }],
      ['key plus a char', { authorization: `Bearer ${core.key}x` }],
      ['admin header only', { 'x-emu-admin': core.admin }],
      ['key in a query string', {}],
    ];
    for (const [label, headers] of bad) {
      const path = label === 'key in a query string' ? `/v1/snippets?api_key=${core.key}` : '/v1/snippets';
      const r = await core.call('GET', path, undefined, { key: null, headers });
      expectProblem(r, 401, 'unauthenticated');
      expect(r.headers.get('www-authenticate'), label).toMatch(/^Bearer/);
    }
    // a write without a valid key does nothing
    expectProblem(await core.call('POST', '/v1/snippets', { name: 'no-key', runtime: 'bun' }, { key: core.admin }), 401, 'unauthenticated');
    expect(await snippetNames()).not.toContain('no-key');
    // the scheme is case-insensitive (RFC 7235)
    expect(
      (await core.call('GET', '/v1/snippets', undefined, { key: null, headers: { authorization: `bearer ${core.key}` } })).status,
    ).toBe(200);
  });

  it('emulator.json is mode 0600 and holds port, pid and admin_token; secret.key is 0600 too', async () => {
    const path = join(core.dataDir, 'emulator.json');
    const st = await stat(path);
    expect((st.mode & 0o777).toString(8)).toBe('600');
    const lock = JSON.parse(await readFile(path, 'utf8'));
    expect(lock).toMatchObject({ port, pid: process.pid, admin_token: core.admin });
    expect(lock.admin_token).toMatch(/^emu_[0-9A-Za-z]{40}$/);
    expect(JSON.stringify(lock)).not.toContain(core.key);
    const key = await stat(join(core.dataDir, 'secret.key'));
    expect((key.mode & 0o777).toString(8)).toBe('600');
    const db = await stat(join(core.dataDir, 'db.json'));
    expect(db.mode & 0o077).toBe(0); // no access for group or others
  });
});

describe('logs', () => {
  it('refused requests (405, 403, 421, OPTIONS) are logged and counted without their raw path', async () => {
    const marker = 'rawpath-marker-7c1d';
    await core.call('POST', `/v1/store/${marker}-a`, { value: 1 }); // 405: the route has no POST
    await core.call('OPTIONS', `/v1/store/${marker}-b`); // preflight refusal
    await raw('GET', `/v1/store/${marker}-c`, withKey({ origin: 'http://evil.example' })); // 403
    await raw('GET', `/v1/store/${marker}-d`, withKey({ host: 'evil.example' })); // 421
    const metrics = await core.call('GET', '/metrics');
    expect(metrics.status).toBe(200);
    const logs = core.logs.join('');
    const leaks = ['a', 'b', 'c', 'd'].filter((s) => metrics.text.includes(`${marker}-${s}`) || logs.includes(`${marker}-${s}`));
    expect(leaks, 'paths of refused requests that reached /metrics labels or the logs').toEqual([]);
  });

  it('carry no key, no admin token, no secret value and no webhook secret after a session that uses them all', async () => {
    const secretValue = 'sk-LOG-CANARY-9f8e7d6c5b4a';
    const otherKey = await newTenant(core, 'log-tenant');
    const steps: [string, string, unknown, Record<string, unknown>][] = [
      ['PUT', '/v1/secrets/LOG_CANARY', { value: secretValue }, {}],
      ['PUT', '/v1/secrets/LOG_CANARY', { value: secretValue }, {}],
      ['GET', '/v1/secrets', undefined, {}],
      ['POST', '/v1/snippets', { name: 'log-snip', runtime: 'bun' }, {}],
      ['POST', '/v1/snippets/log-snip/versions', { code: BUN_CODE + `// ${secretValue}\n` }, {}],
      ['PUT', '/v1/store/log-key', { value: secretValue }, {}],
      ['GET', '/v1/store/log-key', undefined, {}],
      ['GET', '/v1/snippets', undefined, { key: otherKey }],
      ['GET', '/_emu/info', undefined, { key: core.admin }],
      ['POST', '/_emu/tenants/log-tenant/keys', undefined, { key: core.admin }],
      // credentials where they do not belong
      ['GET', '/v1/snippets', undefined, { key: core.admin }],
      ['GET', '/_emu/info', undefined, { key: core.key }],
      ['GET', '/v1/snippets', undefined, { key: null, headers: { authorization: `Basic ${core.key}` } }],
      ['PUT', '/v1/secrets/bad-name', { value: secretValue }, {}],
      ['PUT', '/v1/secrets/LOG_CANARY', { value: 5, note: secretValue }, {}],
      ['POST', '/v1/snippets', undefined, { raw: `{"name": "${secretValue}"`, headers: { 'content-type': 'application/json' } }],
      ['GET', `/v1/store/${secretValue}`, undefined, {}],
      ['GET', `/v1/nope?token=${core.admin}`, undefined, {}],
    ];
    const keysCreated: string[] = [];
    for (const [m, p, b, o] of steps) {
      const r = await core.call(m, p, b, o);
      if (r.json?.key && typeof r.json.key === 'string' && r.json.key.startsWith('svc_')) keysCreated.push(r.json.key);
    }
    const rot = await core.call('POST', '/v1/tenant/webhook-secret');
    const wh = rot.json.secret as string;
    await core.call('GET', '/v1/tenant/webhook-secret');
    expect(keysCreated).toHaveLength(1);

    const logs = core.logs.join('');
    expect(core.logs.length).toBeGreaterThan(steps.length); // one line a request at least: the logs were captured
    expect(logs).toContain('"route":"/v1/secrets/{name}"');
    for (const [label, needle] of [
      ['local key', core.key],
      ['other key', otherKey],
      ['created key', keysCreated[0]!],
      ['admin token', core.admin],
      ['secret value', secretValue],
      ['webhook secret', wh],
      ['webhook secret body', wh.slice('whsec_'.length)],
    ] as const) {
      expect(logs.includes(needle), `${label} appears in the logs`).toBe(false);
    }
  });
});
