/**
 * Agent steps (issue 17): the example workspace's LangGraph agent (Python) and Mastra agent (Bun) run for real
 * in the sandbox against the project's fake OpenAI-compatible provider, and what their frameworks' own hooks
 * report inside the runner reaches the core: `invocation.step` events live, `GET /_emu/invocations/{id}/agent`
 * after (the shared promises: test/conformance/agent-steps.ts). Here beside them: the LangGraph graph's shape,
 * the 2,000-step cap, and the steps' blob going with a record the history drops.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, startTestCore, type TestCore } from '../helpers/core';
import { configureAgentTenant } from '../helpers/agents';
import { runtimeBinary } from '../runners/helpers';
import { startFakeProvider, type FakeProvider } from '../../fixtures/fake-openai/server';
import { agentRun, agentStepsConformance } from '../conformance/agent-steps';
import { operations as ops } from '../../contract';

const EXAMPLES = join(PROJECT_ROOT, 'fixtures', 'workspace', 'snippets');
const AGENTS = {
  'mastra-agent': { runtime: 'bun', entry: 'index.ts' },
  'langgraph-agent': { runtime: 'python', entry: 'main.py' },
} as const;
const PROMPT = { prompt: 'What is the weather in Paris?' };

const PROBES = {
  'loaded-python': {
    runtime: 'python',
    code: `import sys


def handler(input):
    roots = ("langchain", "langchain_core", "langgraph", "_svc_agent_hooks")
    return sorted(m for m in sys.modules if m.split(".")[0] in roots)
`,
  },
  'loaded-bun': {
    runtime: 'bun',
    code: `export default function handler() {
  return Object.keys(require.cache).filter((k) => k.includes('/@mastra/') || k.endsWith('agent-hooks.ts'));
}
`,
  },
  // 2,100 tool runs through LangChain's callbacks: past the 2,000 steps a run keeps.
  'many-tools': {
    runtime: 'python',
    code: `from langchain_core.tools import tool


@tool
def inc(x: int) -> int:
    """Adds one."""
    return x + 1


def handler(input):
    n = 0
    for _ in range(input.get("n", 2100)):
        n = inc.invoke({"x": n})
    return n
`,
  },
  // A Mastra agent with hooks of its own: they still run (first), with what Mastra gives them.
  'mastra-own-hooks': {
    runtime: 'bun',
    code: `import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { z } from 'zod';

const echo = createTool({
  id: 'echo',
  description: 'Echoes a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => ({ city, sky: 'sunny' }),
});

export default async function handler() {
  const provider = createOpenAICompatible({ name: 'openai', baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY });
  const agent = new Agent({ id: 'own', name: 'own', instructions: 'x', model: provider('fake-model'), tools: { echo } });
  const seen = { steps: [] as string[], toolChunks: 0, finished: 0 };
  const r = await agent.generate('Weather in Paris?', {
    maxSteps: 3,
    onStepFinish: (s) => void seen.steps.push(s.finishReason),
    onChunk: (c) => void (c.type === 'tool-result' && seen.toolChunks++),
    onFinish: () => void seen.finished++,
  });
  return { text: r.text, ...seen };
}
`,
  },
  // Two tool runs, then past its timeout (created with timeout_ms 1500 below).
  'cut-short': {
    runtime: 'python',
    code: `import time

from langchain_core.tools import tool


@tool
def inc(x: int) -> int:
    """Adds one."""
    return x + 1


def handler(input):
    inc.invoke({"x": inc.invoke({"x": 0})})
    time.sleep(30)
`,
  },
} as const;

let fake: FakeProvider;
let core: TestCore | null = null;
const have = { bun: !!runtimeBinary('bun'), python: !!runtimeBinary('python') };

async function setUp(c: TestCore) {
  await configureAgentTenant(c, fake);
  for (const [name, { runtime, entry }] of Object.entries(AGENTS)) {
    const dir = join(EXAMPLES, name);
    const config = JSON.parse(await readFile(join(dir, 'snippet.json'), 'utf8'));
    expect((await c.call('POST', '/v1/snippets', { name, runtime })).status).toBe(201);
    const v = await c.call('POST', `/v1/snippets/${name}/versions`, {
      code: await readFile(join(dir, entry), 'utf8'),
      timeout_ms: config.timeout_ms,
      max_memory_mb: config.max_memory_mb,
      max_cpu_percent: config.max_cpu_percent,
    });
    expect(v.status, v.text).toBe(201);
  }
  for (const [name, { runtime, code }] of Object.entries(PROBES)) {
    expect((await c.call('POST', '/v1/snippets', { name, runtime })).status).toBe(201);
    const timeout_ms = name === 'cut-short' ? 1500 : 60_000;
    const v = await c.call('POST', `/v1/snippets/${name}/versions`, { code, timeout_ms, max_memory_mb: 512, max_cpu_percent: 100 });
    expect(v.status, v.text).toBe(201);
  }
}

beforeAll(async () => {
  fake = await startFakeProvider();
  if (!have.bun || !have.python) return;
  core = await startTestCore();
  await setUp(core);
}, 60_000);
afterAll(async () => {
  await core?.stop();
  await fake?.close();
});

agentStepsConformance('LangGraph (Python)', () => (have.python ? core : null), {
  runtime: 'python',
  framework: 'langgraph',
  agent: 'langgraph-agent',
  input: PROMPT,
  stepKind: 'node',
  sequence: ['model', 'tools', 'model'],
  toolName: 'get_weather',
  toolParent: 1,
  loadedProbe: { name: 'loaded-python', code: PROBES['loaded-python'].code },
});

agentStepsConformance('Mastra (Bun)', () => (have.bun ? core : null), {
  runtime: 'bun',
  framework: 'mastra',
  agent: 'mastra-agent',
  input: PROMPT,
  stepKind: 'step',
  sequence: ['step 1', 'step 2'],
  toolName: 'getWeather',
  toolParent: 0,
  loadedProbe: { name: 'loaded-bun', code: PROBES['loaded-bun'].code },
});

describe('LangGraph only', () => {
  it('the graph as compiled (get_graph): __start__, model, tools, __end__, with the conditional edges marked; each node with its LangGraph step and triggers', async (ctx) => {
    if (!core) ctx.skip('no Bun or Python runtime on this host (node scripts/setup.mjs --for=test installs them)');
    const r = await core!.call('POST', '/v1/invoke/langgraph-agent', PROMPT);
    expect(r.status, r.text).toBe(200);
    const run = await agentRun(core!, r.headers.get('x-invocation-id')!);
    expect(run.graph).not.toBeNull();
    expect(run.graph!.nodes.map((n) => n.id).sort()).toEqual(['__end__', '__start__', 'model', 'tools']);
    expect(run.graph!.edges).toContainEqual({ from: '__start__', to: 'model', conditional: false });
    expect(run.graph!.edges.filter((e) => e.conditional).length).toBeGreaterThan(0);
    const nodes = run.steps.filter((s) => s.kind === 'node');
    expect(nodes.map((n) => n.meta.langgraph_step)).toEqual([1, 2, 3]);
    expect(nodes[0]!.meta.langgraph_triggers).toEqual(['branch:to:model']);
    // The model's calls, as LangChain saw them: under their node, with the model's name.
    const llm = run.steps.filter((s) => s.kind === 'llm');
    expect(llm).toHaveLength(2);
    expect(llm.map((s) => s.parent_id)).toEqual([nodes[0]!.id, nodes[2]!.id]);
    expect(llm[0]!.meta.model).toBe('fake-model');
    expect(JSON.stringify(nodes[0]!.input)).toContain('What is the weather in Paris?');
  });

  it('keeps the first 2,000 steps of a run and says it is truncated', async (ctx) => {
    if (!core) ctx.skip('no Bun or Python runtime on this host (node scripts/setup.mjs --for=test installs them)');
    const r = await core!.call('POST', '/v1/invoke/many-tools', { n: 2100 });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toBe(2100);
    const run = await agentRun(core!, r.headers.get('x-invocation-id')!);
    expect(run.truncated).toBe(true);
    expect(run.steps).toHaveLength(2000);
    expect(run.steps.every((s) => s.kind === 'tool' && s.name === 'inc' && s.ended_ms !== null)).toBe(true);
  }, 60_000);
});

describe('Mastra only', () => {
  it('the snippet’s own onStepFinish, onChunk and onFinish still run, with what Mastra gives them, beside the steps', async (ctx) => {
    if (!core) ctx.skip('no Bun or Python runtime on this host (node scripts/setup.mjs --for=test installs them)');
    const r = await core!.call('POST', '/v1/invoke/mastra-own-hooks', {});
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({
      text: expect.stringMatching(/^Tool said: .*sunny/),
      steps: ['tool-calls', 'stop'],
      toolChunks: 1,
      finished: 1,
    });
    const run = await agentRun(core!, r.headers.get('x-invocation-id')!);
    expect(run.steps.map((s) => [s.kind, s.name, s.meta.finish_reason ?? null])).toEqual([
      ['step', 'step 1', 'tool-calls'],
      ['tool', 'echo', null],
      ['step', 'step 2', 'stop'],
    ]);
  });
});

describe('every way out', () => {
  it('a run cut by its timeout keeps the steps it reported; no run keeps anything in memory once it has ended', async (ctx) => {
    if (!core) ctx.skip('no Bun or Python runtime on this host (node scripts/setup.mjs --for=test installs them)');
    // Warm the sandbox first: the timeout then cuts the handler, not the framework's import.
    const r = await core!.call('POST', '/v1/invoke/cut-short', {});
    const again = r.status === 504 ? await core!.call('POST', '/v1/invoke/cut-short', {}) : r;
    expect(again.status, again.text).toBe(504);
    expect(again.json.code).toBe('timeout');
    const run = await agentRun(core!, again.json.invocation_id as string);
    expect(run.live).toBe(false);
    expect(run.steps.map((s) => [s.kind, s.name, s.input, s.output])).toEqual([
      ['tool', 'inc', { x: 0 }, 1],
      ['tool', 'inc', { x: 1 }, 2],
    ]);
    const agentSteps = core!.emu.services.agentSteps;
    for (const until = Date.now() + 5_000; agentSteps.liveCount > 0 && Date.now() < until;) await new Promise((res) => setTimeout(res, 20));
    expect(agentSteps.liveCount, 'runs with steps still held in memory').toBe(0);
  }, 60_000);
});

describe('from a framework spare (the default of serve and the desktop app)', () => {
  it('a runner that imported its framework before the bundle (and ran its warm-up) reports the same steps, and the warm-up none', async (ctx) => {
    if (!have.bun || !have.python) ctx.skip('no Bun or Python runtime on this host (node scripts/setup.mjs --for=test installs them)');
    const spared = await startTestCore({ config: { spares: 'all' } });
    const seen: string[] = [];
    const sub = spared.emu.events.subscribe((e) => {
      if (e.type === 'invocation.step') seen.push(e.data.invocation_id);
    });
    try {
      await setUp(spared);
      const spares = async () =>
        (await spared.call('GET', '/_emu/executor', undefined, { key: spared.admin })).json.pool.spares as {
          spares?: { profile: string; state: string }[];
          claimed_by_profile?: Record<string, number>;
        };
      // Both framework spares ready (imported, warmed up) before the runs, so the runs claim them.
      const frameworkReady = (s: Awaited<ReturnType<typeof spares>>) =>
        ['langgraph', 'mastra'].every((p) => s.spares?.some((x) => x.profile === p && x.state === 'ready'));
      for (const until = Date.now() + 90_000; Date.now() < until && !frameworkReady(await spares());) {
        await new Promise((res) => setTimeout(res, 100));
      }
      expect(frameworkReady(await spares()), 'the framework spares came up').toBe(true);
      for (const [name, expected] of [
        ['langgraph-agent', ['model', 'tools', 'model']],
        ['mastra-agent', ['step 1', 'step 2']],
      ] as const) {
        const r = await spared.call('POST', `/v1/invoke/${name}`, PROMPT);
        expect(r.status, r.text).toBe(200);
        const run = await agentRun(spared, r.headers.get('x-invocation-id')!);
        expect(run.steps.filter((s) => s.kind === 'node' || s.kind === 'step').map((s) => s.name)).toEqual([...expected]);
        expect(run.steps.filter((s) => s.kind === 'tool')).toHaveLength(1);
      }
      expect((await spares()).claimed_by_profile).toMatchObject({ langgraph: 1, mastra: 1 });
      // Every step event named one of the two runs: the spares' warm-up runs (before any invocation) reported nothing.
      expect(new Set(seen).size).toBe(2);
    } finally {
      sub.close();
      await spared.stop();
    }
  }, 120_000);
});

describe('with the record', () => {
  it('the steps’ blob goes when the history drops the record', async (ctx) => {
    if (!have.bun) ctx.skip('no Bun runtime on this host (node scripts/setup.mjs --for=test installs it)');
    const small = await startTestCore({ config: { historyLimit: 1, blobSweepMs: 20 } });
    try {
      await setUp(small);
      const r = await small.call('POST', '/v1/invoke/mastra-agent', PROMPT);
      expect(r.status, r.text).toBe(200);
      const id = r.headers.get('x-invocation-id')!;
      const run = await agentRun(small, id);
      expect(run.steps.length).toBeGreaterThan(0);
      // The blob holding this run's steps (named by content: found by a step id only it holds). It is written
      // once the run has ended, beside the answer (until then the steps are read from memory).
      const blobs = join(small.dataDir, 'blobs');
      const find = async () => {
        const mine: string[] = [];
        for (const d of await readdir(blobs)) {
          if (d.length !== 2) continue;
          for (const f of await readdir(join(blobs, d))) {
            if (f.startsWith('.')) continue; // a blob being written
            const text = await readFile(join(blobs, d, f), 'utf8').catch(() => '');
            if (text.includes(`"id":"${run.steps[0]!.id}"`)) mine.push(join(blobs, d, f));
          }
        }
        return mine;
      };
      let mine = await find();
      for (const until = Date.now() + 5_000; mine.length === 0 && Date.now() < until; mine = await find()) {
        await new Promise((res) => setTimeout(res, 20));
      }
      expect(mine).toHaveLength(1);
      const blob = mine[0]!;

      for (let i = 0; i < 2; i++) expect((await small.call('POST', '/v1/invoke/loaded-bun', {})).status).toBe(200);
      expect((await small.call('GET', `/v1/invocations/${id}`)).status, 'trimmed').toBe(404);
      expect((await small.client.send(ops.emuInvocationAgent, { params: { id } })).status).toBe(404);
      const then = new Date(Date.now() - 120_000);
      await utimes(blob, then, then); // past the sweep's minimum age (60 s) without waiting for it
      const deadline = Date.now() + 10_000;
      while (existsSync(blob) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
      expect(existsSync(blob), 'the trimmed record’s steps blob was swept').toBe(false);
    } finally {
      await small.stop();
    }
  }, 60_000);
});
