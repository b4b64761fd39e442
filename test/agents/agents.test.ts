/**
 * Agent workflows (issue 7): the example workspace's Mastra agent (Bun) and LangGraph agent (Python) run
 * for real in the sandbox against the project's fake OpenAI-compatible provider (the suite's only fake).
 * Each answers through a tool call that reached the fake REST API with the credential the core added;
 * the model's traffic goes through the egress proxy (logged, faults applied, the production profile
 * enforced); the credentials never appear in logs or output.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { operations as ops } from '../../contract';
import { AGENT_NAMES, deployAgentExamples } from '../helpers/agents';
import { readmeRows } from '../helpers/workspace-readme';
import { startFakeProvider, type FakeProvider } from '../../fixtures/fake-openai/server';

const NAMES = AGENT_NAMES;
const PROMPT = { prompt: 'What is the weather in Paris?' };

let fake: FakeProvider;
let core: TestCore;

const setUp = (c: TestCore) => deployAgentExamples(c, fake);

async function events(c: TestCore, name: string, body: Record<string, unknown>) {
  const got: { event: string; data: any }[] = [];
  const stream = await c.client.stream(ops.invoke, { params: { snippet: name }, body, headers: { 'x-invoke-mode': 'stream' } });
  for await (const e of stream) got.push({ event: e.event, data: e.data });
  return got;
}

const admin = () => ({ key: core.admin });

beforeAll(async () => {
  fake = await startFakeProvider();
  core = await startTestCore();
  await setUp(core);
}, 60_000);
afterAll(async () => {
  await core?.stop();
  await fake?.close();
});

describe.each(NAMES)('%s', (name) => {
  it('answers through a tool call that reached the REST API with the credential the core added; no credential in logs or output', async () => {
    fake.requests.length = 0;
    const r = await core.call('POST', `/v1/invoke/${name}`, PROMPT);
    expect(r.status, r.text).toBe(200);
    expect(r.json.tool_calls).toEqual([{ tool: expect.stringMatching(/weather/i), args: { city: 'Paris' } }]);
    expect(r.json.answer).toMatch(/^Tool said: .*sunny/);

    const rest = fake.requests.filter((q) => q.path === '/api/weather');
    expect(rest).toHaveLength(1);
    expect(rest[0]!.headers.authorization).toBe(`Bearer ${fake.restToken}`);
    const llm = fake.requests.filter((q) => q.path.startsWith('/v1/'));
    expect(llm).toHaveLength(2); // the tool call, then the answer
    expect(llm[0]!.headers.authorization).toBe(`Bearer ${fake.apiKey}`);

    const id = r.headers.get('x-invocation-id')!;
    const logs = (await core.call('GET', `/v1/invocations/${id}/logs`)).json.logs as string;
    expect(logs).toMatch(/\[integration\] weather GET \/api\/weather\?city=Paris → 200/);
    for (const secret of [fake.restToken, fake.apiKey]) {
      expect(logs).not.toContain(secret);
      expect(r.text).not.toContain(secret);
    }
    // The model's calls went through the egress proxy, under this invocation's name; the tool's through the core.
    const egress = (await core.call('GET', `/_emu/egress?invocation=${id}`, undefined, admin())).json.data;
    expect(
      egress.filter((e: any) => e.source === 'snippet' && e.host === 'localhost' && e.path === llm[0]!.path && e.status === 200),
    ).toHaveLength(2);
    expect(egress.filter((e: any) => e.source === 'integration' && e.integration === 'weather' && e.status === 200)).toHaveLength(1);
    // Both went to loopback, which the local profile allows and production would not: the record says so.
    const warnings = (await core.call('GET', `/v1/invocations/${id}`)).json.parity_warnings as string[];
    expect(
      warnings.some(
        (w) =>
          /^egress: production would refuse .*localhost/.test(w) || /resolve to (127\.0\.0\.1|::1) .*--egress-allow localhost:/.test(w),
      ),
    ).toBe(true);
    expect(warnings.some((w) => /--egress-allow 127\.0\.0\.1:/.test(w))).toBe(true);
  });

  it('answers what the workspace README says it answers with the fake provider', async () => {
    const row = (await readmeRows()).get(name)!;
    expect(row.needsProvider).toBe(true);
    const r = await core.call('POST', `/v1/invoke/${name}`, JSON.parse(row.input));
    expect(r.json).toEqual(JSON.parse(row.answer));
  });

  it('streams the answer token by token, then the same result', async () => {
    const got = await events(core, name, PROMPT);
    expect(got[0]!.event).toBe('start');
    expect(got.at(-1)!.event).toBe('result');
    const tokens = got.filter((e) => e.event === 'chunk').map((e) => e.data.data.token as string);
    expect(tokens.length).toBeGreaterThanOrEqual(3); // one per word the fake sends: "Tool", " said:", …
    expect(tokens.join('')).toBe(got.at(-1)!.data.output.answer);
  });

  it('a latency fault on the model slows the agent and shows in the egress log; an error fault makes it fail', async () => {
    const slow = await core.call(
      'POST',
      '/_emu/egress/faults',
      { host: 'localhost', action: { type: 'latency', ms: 400 }, times: 2 },
      admin(),
    );
    expect(slow.status).toBe(201);
    const t = performance.now();
    const r = await core.call('POST', `/v1/invoke/${name}`, PROMPT);
    expect(r.status, r.text).toBe(200);
    expect(performance.now() - t).toBeGreaterThanOrEqual(780); // two model calls, 400 ms each
    const id = r.headers.get('x-invocation-id')!;
    const delayed = (await core.call('GET', `/_emu/egress?invocation=${id}`, undefined, admin())).json.data.filter((e: any) =>
      e.fault?.startsWith('latency 400 ms'),
    );
    expect(delayed).toHaveLength(2);

    const broken = await core.call(
      'POST',
      '/_emu/egress/faults',
      { host: 'localhost', action: { type: 'status', status: 500, body: '{"error":{"message":"provider melted"}}' } },
      admin(),
    );
    try {
      const failed = await core.call('POST', `/v1/invoke/${name}`, PROMPT);
      expect(failed.status, failed.text).toBe(500);
      expect(failed.json.code).toBe('handler_error');
      const faulted = (await core.call('GET', `/_emu/egress?invocation=${failed.json.invocation_id}`, undefined, admin())).json.data;
      expect(faulted.length).toBeGreaterThanOrEqual(1);
      expect(faulted.every((e: any) => e.status === 500 && e.fault.startsWith('status 500'))).toBe(true);
    } finally {
      await core.call('DELETE', `/_emu/egress/faults/${broken.json.id}`, undefined, admin());
    }
  });
});

describe('under the production egress profile, from inside the sandbox', () => {
  let prod: TestCore;
  beforeAll(async () => {
    const port = new URL(fake.url).port;
    prod = await startTestCore({ config: { egressProfile: 'production', egressAllow: [`localhost:${port}`, `127.0.0.1:${port}`] } });
    await setUp(prod);
    await prod.call('POST', '/v1/snippets', { name: 'probe', runtime: 'bun' });
    const v = await prod.call('POST', '/v1/snippets/probe/versions', {
      max_cpu_percent: 100,
      code: `export default async function handler(input) {
  const out = {};
  for (const url of input.urls) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
      out[url] = { status: r.status, egress: r.headers.get("x-svc-emu-egress"), body: (await r.text()).slice(0, 300) };
    } catch (e) { out[url] = { error: String(e) }; }
  }
  return out;
}
`,
    });
    expect(v.status, v.text).toBe(201);
  }, 60_000);
  afterAll(async () => prod?.stop());

  it('refuses the core’s own port, 10.0.0.1, 169.254.169.254, [::ffff:127.0.0.1] and a name resolving to loopback with a 403 naming the rule', async () => {
    const corePort = new URL(prod.url).port;
    const urls = [
      `http://127.0.0.1:${corePort}/healthz`,
      'http://10.0.0.1/',
      'http://169.254.169.254/latest/meta-data/',
      `http://[::ffff:127.0.0.1]:${corePort}/healthz`,
      `http://localhost:${corePort}/healthz`,
    ];
    const r = await prod.call('POST', '/v1/invoke/probe', { urls });
    expect(r.status, r.text).toBe(200);
    for (const url of urls) {
      expect(r.json[url], url).toMatchObject({ status: 403, egress: 'refused' });
      expect(JSON.parse(r.json[url].body)).toMatchObject({
        code: 'egress_refused',
        detail: expect.stringMatching(/^production refuses outbound connections that resolve to /),
      });
    }
  });

  it('allows the --egress-allow’ed fake provider: both agents still answer', async () => {
    for (const name of NAMES) {
      const r = await prod.call('POST', `/v1/invoke/${name}`, PROMPT);
      expect(r.status, `${name}: ${r.text}`).toBe(200);
      expect(r.json.answer).toMatch(/^Tool said: /);
    }
  });
});
