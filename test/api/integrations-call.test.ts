/**
 * `integrations.call` end to end (issue 7): real Bun and Python snippets call an integration; the core
 * adds the credential from the tenant's secret, sends the request through the egress path (profile,
 * faults, log) and writes a line to the invocation's logs — never the credential.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';

const SECRET = 's3cret-weather-token';
let api: Server;
let apiUrl: string;
const seen: { url: string; headers: IncomingHttpHeaders; body: string }[] = [];

const CODE = {
  bun: `import { integrations } from "@svc/integrations";
export default async function handler(input) {
  try {
    const res = await integrations.call("weather", { method: "GET", path: "/api/weather", query: { city: input.city } });
    return { ok: true, status: res.status, body: res.body };
  } catch (err) {
    return { ok: false, code: err.code, status: err.status ?? null, body: err.body ?? null, message: err.message };
  }
}
`,
  python: `from svc import integrations, HostCallError

def handler(input):
    try:
        res = integrations.call("weather", method="GET", path="/api/weather", query={"city": input["city"]})
        return {"ok": True, "status": res["status"], "body": res["body"]}
    except HostCallError as err:
        return {"ok": False, "code": err.code, "status": err.status, "body": err.body, "message": err.message}
`,
};

beforeAll(async () => {
  api = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      seen.push({ url: req.url ?? '', headers: req.headers, body });
      if (req.headers.authorization !== `Bearer ${SECRET}`)
        return res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"no token"}');
      const city = new URL(req.url ?? '', 'http://x').searchParams.get('city');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ city, forecast: 'sunny' }));
    });
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});
afterAll(() => api.close());

async function setUp(core: TestCore) {
  expect((await core.call('PUT', '/v1/secrets/WEATHER_TOKEN', { value: SECRET })).status).toBe(201);
  const i = await core.call('PUT', '/v1/integrations/weather', {
    provider: 'http',
    base_url: apiUrl,
    auth: { type: 'bearer', secret: 'WEATHER_TOKEN' },
  });
  expect(i.status, i.text).toBe(201);
  for (const runtime of ['bun', 'python'] as const) {
    await core.call('POST', '/v1/snippets', { name: `weather-${runtime}`, runtime });
    const v = await core.call('POST', `/v1/snippets/weather-${runtime}/versions`, { code: CODE[runtime], max_cpu_percent: 100 });
    expect(v.status, v.text).toBe(201);
  }
}

describe('under the local profile', () => {
  let core: TestCore;
  beforeAll(async () => {
    core = await startTestCore();
    await setUp(core);
  });
  afterAll(async () => core?.stop());

  it.each(['bun', 'python'] as const)(
    '%s: the call reaches the API with the credential the core added; logs name it, never the secret',
    async (runtime) => {
      seen.length = 0;
      const r = await core.call('POST', `/v1/invoke/weather-${runtime}`, { city: 'Paris' });
      expect(r.status, r.text).toBe(200);
      expect(r.json).toEqual({ ok: true, status: 200, body: { city: 'Paris', forecast: 'sunny' } });
      expect(seen).toHaveLength(1);
      expect(seen[0]!.headers.authorization).toBe(`Bearer ${SECRET}`);
      expect(seen[0]!.url).toBe('/api/weather?city=Paris');

      const id = r.headers.get('x-invocation-id')!;
      const logs = (await core.call('GET', `/v1/invocations/${id}/logs`)).json.logs as string;
      expect(logs).toMatch(/\[integration\] weather GET \/api\/weather\?city=Paris → 200 \(\d+ ms\)/);
      expect(logs).not.toContain(SECRET);
      expect(r.text).not.toContain(SECRET);
      const egress = (await core.call('GET', `/_emu/egress?invocation=${id}`, undefined, { key: core.admin })).json;
      expect(egress.data).toEqual([
        expect.objectContaining({
          source: 'integration',
          tenant: 'local',
          invocation_id: id,
          integration: 'weather',
          method: 'GET',
          path: '/api/weather',
          status: 200,
        }),
      ]);
      expect(JSON.stringify(egress)).not.toContain(SECRET);
      // The local profile let a loopback API through; the record says production would not.
      const rec = (await core.call('GET', `/v1/invocations/${id}`)).json;
      expect(rec.parity_warnings).toEqual([
        expect.stringMatching(
          /^egress: production would refuse outbound connections that resolve to 127\.0\.0\.1 \(loopback\); allow it with --egress-allow 127\.0\.0\.1:\d+$/,
        ),
      ]);
    },
  );

  it.each(['bun', 'python'] as const)(
    '%s: an HTTP error (here a fault rule’s 503) reaches the snippet as an exception with status and body',
    async (runtime) => {
      const fault = await core.call(
        'POST',
        '/_emu/egress/faults',
        { integration: 'weather', action: { type: 'status', status: 503, body: '{"busy":true}' }, times: 1 },
        { key: core.admin },
      );
      expect(fault.status).toBe(201);
      const r = await core.call('POST', `/v1/invoke/weather-${runtime}`, { city: 'Oslo' });
      expect(r.json).toMatchObject({ ok: false, code: 'integration_error', status: 503, body: { busy: true } });
      expect(r.json.message).toMatch(/weather GET \/api\/weather\?city=Oslo answered 503/);
    },
  );

  it('a latency fault slows the call, and the egress log says which rule acted', async () => {
    await core.call(
      'POST',
      '/_emu/egress/faults',
      { integration: 'weather', action: { type: 'latency', ms: 400 }, times: 1 },
      { key: core.admin },
    );
    const t = performance.now();
    const r = await core.call('POST', '/v1/invoke/weather-bun', { city: 'Rome' });
    expect(performance.now() - t).toBeGreaterThanOrEqual(390);
    expect(r.json.ok).toBe(true);
    const [entry] = (await core.call('GET', `/_emu/egress?invocation=${r.headers.get('x-invocation-id')}`, undefined, { key: core.admin }))
      .json.data;
    expect(entry.fault).toMatch(/^latency 400 ms \(flt_\d+\)$/);
    expect(entry.duration_ms).toBeGreaterThanOrEqual(390);
  });

  it('a missing secret or integration is an error that says what to set', async () => {
    await core.call('DELETE', '/v1/secrets/WEATHER_TOKEN');
    try {
      const r = await core.call('POST', '/v1/invoke/weather-python', { city: 'Paris' });
      expect(r.json).toMatchObject({ ok: false, code: 'secret_missing' });
      expect(r.json.message).toContain('PUT /v1/secrets/WEATHER_TOKEN');
    } finally {
      await core.call('PUT', '/v1/secrets/WEATHER_TOKEN', { value: SECRET });
    }
    await core.call('POST', '/v1/snippets', { name: 'no-such', runtime: 'bun' });
    await core.call('POST', '/v1/snippets/no-such/versions', {
      code: 'import { integrations } from "@svc/integrations";\nexport default async function handler() { try { await integrations.call("nope", { method: "GET", path: "/" }); } catch (e) { return { code: e.code, message: e.message }; } }\n',
    });
    const r = await core.call('POST', '/v1/invoke/no-such', {});
    expect(r.json).toEqual({ code: 'not_found', message: "no integration named 'nope': create it with PUT /v1/integrations/nope" });
  });
});

describe('under the production profile', () => {
  it('a loopback API is refused (egress_refused) unless --egress-allow names it', async () => {
    const refused = await startTestCore({ config: { egressProfile: 'production' } });
    try {
      await setUp(refused);
      seen.length = 0;
      const r = await refused.call('POST', '/v1/invoke/weather-bun', { city: 'Paris' });
      expect(r.json).toMatchObject({ ok: false, code: 'egress_refused' });
      expect(r.json.message).toMatch(
        /^production refuses outbound connections that resolve to 127\.0\.0\.1 \(loopback\); allow it with --egress-allow 127\.0\.0\.1:\d+$/,
      );
      expect(seen).toHaveLength(0);
    } finally {
      await refused.stop();
    }
    const allowed = await startTestCore({ config: { egressProfile: 'production', egressAllow: [new URL(apiUrl).host] } });
    try {
      await setUp(allowed);
      expect((await allowed.call('POST', '/v1/invoke/weather-python', { city: 'Lima' })).json).toMatchObject({
        ok: true,
        body: { city: 'Lima' },
      });
    } finally {
      await allowed.stop();
    }
  });
});
