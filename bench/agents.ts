import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { client, ROOT, serveCore, stats } from './lib';
import { startFakeProvider } from '../fixtures/fake-openai/server';

/**
 * Issue 7's figures, against the built core as a separate process and the fake provider (which answers
 * at once): cold start (a new version's first invocation, a spare runner ready) and warm invoke of the
 * Mastra and LangGraph agent examples, and the peak memory of an agent invocation against a plain hello
 * that imports no framework, in the same run.
 */
const EXAMPLES = join(ROOT, 'fixtures', 'workspace', 'snippets');
const AGENTS = [
  { name: 'mastra-agent', runtime: 'bun', entry: 'index.ts' },
  { name: 'langgraph-agent', runtime: 'python', entry: 'main.py' },
] as const;
const HELLO = {
  bun: 'export default async function handler(input) { return { hello: input.name ?? "world" }; }\n',
  python: 'def handler(input):\n    return {"hello": input.get("name", "world")}\n',
};
const PROMPT = { prompt: 'What is the weather in Paris?' };

export async function agentsBench(opts: { warm: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-agents-'));
  const fake = await startFakeProvider();
  const core = await serveCore(dir);
  const call = client(core.url, core.apiKey);
  const ok = async (m: string, p: string, b?: unknown) => {
    const r = await call(m, p, b);
    if (r.status >= 300) throw new Error(`${m} ${p}: ${r.status} ${r.body}`);
    return JSON.parse(r.body || 'null');
  };
  const port = new URL(fake.url).port;
  try {
    for (const [k, v] of Object.entries({ OPENAI_API_KEY: fake.apiKey, OPENAI_BASE_URL: `http://localhost:${port}/v1`, OPENAI_MODEL: 'fake-model', WEATHER_TOKEN: fake.restToken })) {
      await ok('PUT', `/v1/secrets/${k}`, { value: v });
    }
    await ok('PUT', '/v1/integrations/weather', { provider: 'http', base_url: `http://127.0.0.1:${port}/api`, auth: { type: 'bearer', secret: 'WEATHER_TOKEN' } });
    const invoke = async (name: string, body: unknown) => {
      const t = performance.now();
      const r = await call('POST', `/v1/invoke/${name}`, body);
      const ms = performance.now() - t;
      if (r.status !== 200) throw new Error(`${name}: ${r.status} ${r.body}`);
      return ms;
    };
    const usageOfLast = async (name: string) => {
      const [rec] = (await ok('GET', `/v1/invocations?snippet=${name}&limit=1`)).data;
      return rec.usage as { peak_memory_mb: number; init_ms: number; duration_ms: number };
    };
    const out: Record<string, unknown> = {};
    for (const a of AGENTS) {
      const config = JSON.parse(readFileSync(join(EXAMPLES, a.name, 'snippet.json'), 'utf8'));
      const code = readFileSync(join(EXAMPLES, a.name, a.entry), 'utf8');
      await ok('POST', '/v1/snippets', { name: a.name, runtime: a.runtime });
      const cold: number[] = [];
      const init: number[] = [];
      for (let i = 0; i < 5; i++) {
        // A new version each time (a comment changes the bundle): its first invocation starts a sandbox.
        await ok('POST', `/v1/snippets/${a.name}/versions`, { code: `${code}\n${a.runtime === 'bun' ? '//' : '#'} cold ${i}\n`, timeout_ms: config.timeout_ms, max_memory_mb: config.max_memory_mb, max_cpu_percent: config.max_cpu_percent });
        await new Promise((r) => setTimeout(r, 300)); // a spare runner is ready, as at a human pace
        cold.push(await invoke(a.name, PROMPT));
        init.push((await usageOfLast(a.name)).init_ms);
      }
      const warm: number[] = [];
      for (let i = -3; i < opts.warm; i++) {
        const ms = await invoke(a.name, PROMPT);
        if (i >= 0) warm.push(ms);
      }
      const usage = await usageOfLast(a.name);
      const name = `hello-${a.runtime}`;
      await ok('POST', '/v1/snippets', { name, runtime: a.runtime });
      await ok('POST', `/v1/snippets/${name}/versions`, { code: HELLO[a.runtime], max_memory_mb: 512, max_cpu_percent: 100 });
      for (let i = 0; i < 3; i++) await invoke(name, {});
      const hello = await usageOfLast(name);
      out[a.name] = {
        cold_start: stats(cold),
        cold_init_ms: stats(init),
        warm_invoke: stats(warm),
        peak_memory_mb: usage.peak_memory_mb,
        [`plain_hello_${a.runtime}_peak_memory_mb`]: hello.peak_memory_mb,
      };
    }
    out.note = 'each agent invocation: two model calls (tool call, then answer) through the egress proxy and one integration call made by the core; the fake provider answers at once';
    return out;
  } finally {
    await core.stop();
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
