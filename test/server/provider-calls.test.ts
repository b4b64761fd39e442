/**
 * A run's model calls, assembled from the bodies the egress path kept (server/services/provider-calls.ts):
 * a real Bun snippet calls the project's fake OpenAI-compatible provider through the egress proxy (plain
 * HTTP on loopback), and an `openai` integration through the core — chat completions streamed and not,
 * the Responses API streamed and not, tool calls and their results, usage, time to first token. Plus the
 * pieces alone: SSE frames split anywhere, the memory caps, a CONNECT tunnel's error naming its host.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { startFakeProvider, type FakeProvider } from '../../fixtures/fake-openai/server';
import { assembleCalls, providerCallsOf, sseFrames } from '../../server/services/provider-calls';
import { isProviderCall, ProviderExchanges } from '../../server/egress/exchanges';
import type { ProviderCall } from '../../contract/schemas/agent';

/** Frames of a streamed answer arrive this far apart: the first token cannot come sooner. */
const DELAY_MS = 40;

/** Sends each request in turn to OPENAI_BASE_URL (through the egress proxy) and answers the bodies' lengths. */
const CALLER = `
export default async function handler(input) {
  const sizes = [];
  for (const r of input.requests) {
    const res = await fetch(process.env.OPENAI_BASE_URL + r.path, {
      method: 'POST',
      headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY, 'content-type': 'application/json' },
      body: JSON.stringify(r.body),
    });
    sizes.push((await res.text()).length);
  }
  return { sizes };
}
`;

/** The same through an \`openai\` integration: the core makes the call. */
const VIA_INTEGRATION = `
import { integrations } from '@svc/integrations';
export default async function handler(input) {
  const res = await integrations.call('model', { method: 'POST', path: '/chat/completions', body: input.body });
  return { status: res.status };
}
`;

const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const RESPONSES_TOOL = { type: 'function', name: 'get_weather', parameters: WEATHER_TOOL.function.parameters };
const USER = { role: 'user', content: 'What is the weather in Paris?' };
const TOOL_RESULT = '{"forecast":"sunny"}';

let fake: FakeProvider;
let core: TestCore;

const callsOf = (id: string) => providerCallsOf(core.emu.services)(id);

async function run(snippet: string, input: unknown): Promise<{ id: string; calls: ProviderCall[] }> {
  const r = await core.call('POST', `/v1/invoke/${snippet}`, input);
  expect(r.status, r.text).toBe(200);
  const id = r.headers.get('x-invocation-id')!;
  return { id, calls: await callsOf(id) };
}

beforeAll(async () => {
  fake = await startFakeProvider({ streamDelayMs: DELAY_MS });
  core = await startTestCore();
  const port = new URL(fake.url).port;
  for (const [name, value] of Object.entries({
    OPENAI_API_KEY: fake.apiKey,
    OPENAI_BASE_URL: `http://localhost:${port}/v1`,
  }))
    expect((await core.call('PUT', `/v1/secrets/${name}`, { value })).status).toBeLessThan(300);
  const i = await core.call('PUT', '/v1/integrations/model', {
    provider: 'openai',
    base_url: `http://127.0.0.1:${port}/v1`,
    auth: { type: 'bearer', secret: 'OPENAI_API_KEY' },
  });
  expect(i.status, i.text).toBeLessThan(300);
  for (const [name, code] of Object.entries({ caller: CALLER, 'via-integration': VIA_INTEGRATION })) {
    await core.call('POST', '/v1/snippets', { name, runtime: 'bun' });
    const v = await core.call('POST', `/v1/snippets/${name}/versions`, { code });
    expect(v.status, v.text).toBe(201);
  }
}, 60_000);
afterAll(async () => {
  await core?.stop();
  await fake?.close();
});

describe('through the egress proxy (a snippet’s own HTTP client)', () => {
  it('chat completions, streamed: a tool call with its arguments, then its result carried back, the answer assembled from the deltas, usage and time to first token', async () => {
    const { calls } = await run('caller', {
      requests: [
        { path: '/chat/completions', body: { model: 'fake-model', stream: true, messages: [USER], tools: [WEATHER_TOOL] } },
        {
          path: '/chat/completions',
          body: {
            model: 'fake-model',
            stream: true,
            stream_options: { include_usage: true },
            messages: [
              USER,
              {
                role: 'assistant',
                content: null,
                tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
              },
              { role: 'tool', tool_call_id: 'call_1', content: TOOL_RESULT },
            ],
            tools: [WEATHER_TOOL],
          },
        },
      ],
    });
    expect(calls).toHaveLength(2);
    const [tool, answer] = calls as [ProviderCall, ProviderCall];
    expect(tool).toMatchObject({
      api: 'chat.completions',
      model: 'fake-model',
      stream: true,
      status: 200,
      host: 'localhost',
      text: '',
      truncated: false,
      error: null,
    });
    expect(tool.path).toBe('/v1/chat/completions');
    expect(tool.tool_calls).toEqual([{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}', result: TOOL_RESULT }]);
    expect(tool.usage).toBeNull(); // not asked for (stream_options.include_usage)
    expect(answer.text).toBe(`Tool said: ${TOOL_RESULT}`);
    expect(answer.tool_calls).toEqual([]);
    expect(answer.usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) });
    expect(answer.usage!.completion_tokens).toBeGreaterThan(0);
    expect(answer.usage!.total_tokens).toBe(answer.usage!.prompt_tokens + answer.usage!.completion_tokens);
    for (const c of calls) {
      // The first frame (the role) comes at once, the first token DELAY_MS later, the last ones after more.
      expect(c.first_token_ms).not.toBeNull();
      expect(c.first_token_ms!).toBeGreaterThanOrEqual(DELAY_MS - 5);
      expect(c.duration_ms).toBeGreaterThan(c.first_token_ms!);
      expect(c.started_ms).toBeGreaterThanOrEqual(0);
    }
    // The answer's call starts after the tool call streamed (its first token). Not after the tool call's `duration_ms`:
    // a client goes on at `data: [DONE]`, and the response's own end (logged by the proxy) can come a few ms later
    // on a loaded machine (a full run at load ~15 saw the next call start 7 ms before it).
    expect(answer.started_ms).toBeGreaterThanOrEqual(tool.started_ms + tool.first_token_ms!);
    console.log(
      `chat stream: ttft ${tool.first_token_ms} / ${answer.first_token_ms} ms, duration ${tool.duration_ms} / ${answer.duration_ms} ms (frames ${DELAY_MS} ms apart)`,
    );
  });

  it('chat completions, not streamed: the message, its usage; the first token is the first byte', async () => {
    const { calls } = await run('caller', {
      requests: [{ path: '/chat/completions', body: { model: 'fake-model', messages: [USER] } }],
    });
    expect(calls).toHaveLength(1);
    const c = calls[0]!;
    expect(c).toMatchObject({
      api: 'chat.completions',
      stream: false,
      status: 200,
      text: 'Echo: What is the weather in Paris?',
      tool_calls: [],
    });
    expect(c.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(c.first_token_ms).not.toBeNull();
    expect(c.first_token_ms!).toBeLessThanOrEqual(c.duration_ms);
  });

  it('the Responses API, streamed: a function call, then the answer from the output_text deltas, with usage', async () => {
    const { calls } = await run('caller', {
      requests: [
        { path: '/responses', body: { model: 'fake-model', stream: true, input: [USER], tools: [RESPONSES_TOOL] } },
        {
          path: '/responses',
          body: {
            model: 'fake-model',
            stream: true,
            input: [
              USER,
              { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
              { type: 'function_call_output', call_id: 'call_1', output: TOOL_RESULT },
            ],
            tools: [RESPONSES_TOOL],
          },
        },
      ],
    });
    expect(calls).toHaveLength(2);
    const [tool, answer] = calls as [ProviderCall, ProviderCall];
    expect(tool).toMatchObject({ api: 'responses', model: 'fake-model', stream: true, text: '' });
    expect(tool.tool_calls).toEqual([{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}', result: TOOL_RESULT }]);
    expect(answer.text).toBe(`Tool said: ${TOOL_RESULT}`);
    for (const c of calls) {
      expect(c.usage!.completion_tokens).toBeGreaterThan(0);
      expect(c.first_token_ms!).toBeGreaterThanOrEqual(DELAY_MS - 5);
    }
  });

  it('the Responses API, not streamed', async () => {
    const { calls } = await run('caller', { requests: [{ path: '/responses', body: { model: 'fake-model', input: 'Hello there' } }] });
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ api: 'responses', stream: false, text: 'Echo: Hello there', status: 200 });
    expect(calls[0]!.usage!.prompt_tokens).toBeGreaterThan(0);
  });

  it('a provider error (a fault rule’s 500) is a call with its status and the provider’s message', async () => {
    const admin = { key: core.admin };
    const f = await core.call(
      'POST',
      '/_emu/egress/faults',
      { host: 'localhost', action: { type: 'status', status: 500, body: '{"error":{"message":"provider melted"}}' }, times: 1 },
      admin,
    );
    expect(f.status, f.text).toBe(201);
    const { calls } = await run('caller', { requests: [{ path: '/chat/completions', body: { model: 'fake-model', messages: [USER] } }] });
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ status: 500, error: 'provider melted', text: '', model: 'fake-model' });
  });

  it('no header is kept, only bodies; a run without model calls keeps nothing', async () => {
    const before = core.emu.services.egress.exchanges.size.invocations;
    const { id, calls } = await run('caller', { requests: [] });
    expect(calls).toEqual([]);
    expect(core.emu.services.egress.exchanges.size.invocations).toBe(before);
    expect(core.emu.services.egress.exchanges.list(id)).toEqual([]);
    // Bodies only: the API key (an Authorization header) is nowhere in what is kept.
    const all = [...(core.emu.services.egress.exchanges as unknown as { runs: Map<string, { calls: unknown[] }> }).runs.values()];
    expect(JSON.stringify(all)).not.toContain(fake.apiKey);
  });
});

describe('through the core (integrations.call on an openai integration)', () => {
  it('assembles the call the host made, credential never kept', async () => {
    const { id, calls } = await run('via-integration', { body: { model: 'fake-model', messages: [USER], tools: [WEATHER_TOOL] } });
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      api: 'chat.completions',
      host: '127.0.0.1',
      path: '/v1/chat/completions',
      status: 200,
      stream: false,
    });
    expect(calls[0]!.tool_calls).toEqual([{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}', result: null }]);
    expect(JSON.stringify(core.emu.services.egress.exchanges.list(id))).not.toContain(fake.apiKey);
  });
});

describe('the pieces', () => {
  it('SSE frames split at any byte (a multi-byte character too) come out whole, each timed by the piece that ends it', () => {
    const body = 'data: {"a":"é"}\n\nevent: x\ndata: 1\ndata: 2\n\n: comment\n\ndata: [DONE]\n\n';
    const bytes = Buffer.from(body);
    for (let cut = 1; cut < bytes.length; cut++) {
      const parts = [bytes.subarray(0, cut), bytes.subarray(cut)];
      const decoder = new TextDecoder();
      let text = '';
      const ends = parts.map((p, i) => {
        text += decoder.decode(p, { stream: i === 0 });
        return { end: text.length, t: (i + 1) * 10 };
      });
      const frames = sseFrames(text, ends);
      expect(frames.map((f) => [f.event, f.data])).toEqual([
        [null, '{"a":"é"}'],
        ['x', '1\n2'],
        [null, '[DONE]'],
      ]);
      expect(frames.at(-1)!.t).toBe(20);
    }
  });

  it('only model calls are kept: POST …/chat/completions and …/responses', () => {
    expect(isProviderCall('POST', '/v1/chat/completions')).toBe(true);
    expect(isProviderCall('post', '/openai/deployments/x/chat/completions')).toBe(true);
    expect(isProviderCall('POST', '/v1/responses')).toBe(true);
    expect(isProviderCall('GET', '/v1/responses')).toBe(false);
    expect(isProviderCall('POST', '/v1/embeddings')).toBe(false);
  });

  it('bodies are capped (the call says truncated), runs beyond the budget go oldest first, a gone run’s calls go', () => {
    const alive = new Set(['a', 'b', 'c']);
    const store = new ProviderExchanges((id) => alive.has(id), { maxBodyBytes: 16, maxInvocations: 2, maxTotalBytes: 1000 });
    const rec = store.open('a', { source: 'snippet', method: 'POST', host: 'h', path: '/v1/chat/completions' });
    rec.request(Buffer.from('{"model":"m","messages":[]}'));
    rec.head(200, 'application/json', undefined);
    rec.response(Buffer.from('{"choices":[{"message":{"content":"hello"}}]}'));
    rec.finish({ id: 7, duration_ms: 3, status: 200 });
    expect(store.size.bytes).toBe(32);
    const [call] = assembleCalls(store.list('a'), { runStartedAt: null });
    expect(call).toMatchObject({ egress_id: 7, truncated: true, status: 200 });
    store.open('b', { source: 'snippet', method: 'POST', host: 'h', path: '/v1/responses' });
    store.open('c', { source: 'snippet', method: 'POST', host: 'h', path: '/v1/responses' });
    expect(store.list('a')).toEqual([]); // the oldest went: two runs at most
    expect(store.size).toEqual({ bytes: 0, invocations: 2 });
    alive.delete('b');
    store.open('d', { source: 'snippet', method: 'POST', host: 'h', path: '/v1/responses' });
    expect(store.list('b')).toEqual([]);
    expect(store.list('c')).toHaveLength(1);
  });
});

describe('an HTTPS call the proxy cannot make', () => {
  const CODE = {
    bun: `export default async function handler() {
      try { await fetch('https://api.openai.com/v1/models'); return { ok: true }; } catch (e) { return { error: String(e.message ?? e) }; }
    }`,
    // httpx: what the openai SDK and langchain-openai use.
    python: `import httpx

def handler(input):
    try:
        httpx.get("https://api.openai.com/v1/models")
        return {"ok": True}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
`,
  } as const;
  it.for(['bun', 'python'] as const)(
    '%s: fails with an error naming the host and the fix (the client shows the tunnel’s status line)',
    async (runtime, ctx) => {
      const name = `offline-${runtime}`;
      await core.call('POST', '/v1/snippets', { name, runtime });
      expect((await core.call('POST', `/v1/snippets/${name}/versions`, { code: CODE[runtime] })).status).toBe(201);
      const r = await core.call('POST', `/v1/invoke/${name}`, {});
      expect(r.status, r.text).toBe(200);
      if (r.json.ok) ctx.skip('this machine reaches api.openai.com: there is no failure to read');
      expect(r.json.error).toMatch(/502 Bad Gateway \(egress: cannot reach api\.openai\.com:443: /);
      expect(r.json.error).toMatch(/OPENAI_BASE_URL/);
    },
  );
});
