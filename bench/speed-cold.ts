import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { leanClient } from './lean-http';
import { ROOT, stats, type Stats } from './lib';
import { HELLO, invokeTarget, RUNTIMES, setUpAgentTenant, waitSparesReady, type Runtime, type SpeedCtx } from './speed-core';
import { ms } from './table';
import { startFakeProvider } from '../fixtures/fake-openai/server';

/**
 * Cold start of a new version: the first invocation after the version is created, timed by the lean
 * client. Paced: before each version the bench waits until /_emu/executor reports the spares ready (a
 * human's pace), then creates the version and invokes at once; back to back (no wait, the spare's
 * replacement still starting) is kept as a figure too. Hello in Bun and Python, a LangGraph graph, and
 * the Mastra and LangGraph agent examples (fixtures/workspace/snippets) against the fake provider, whose
 * warm invoke and peak memory (against a plain hello's) are kept from the agents suite.
 */
export const EXAMPLES = join(ROOT, 'fixtures', 'workspace', 'snippets');
export const AGENTS = [
  { key: 'mastra', name: 'mastra-agent', runtime: 'bun', entry: 'index.ts', label: 'Mastra agent' },
  { key: 'langgraph', name: 'langgraph-agent', runtime: 'python', entry: 'main.py', label: 'LangGraph agent' },
] as const;
export const PROMPT = { prompt: 'What is the weather in Paris?' };
const GRAPH =
  'from typing import TypedDict\nfrom langgraph.graph import StateGraph, END\n\nclass S(TypedDict):\n    n: int\n\ng = StateGraph(S)\ng.add_node("inc", lambda s: {"n": s["n"] + 1})\ng.set_entry_point("inc")\ng.add_edge("inc", END)\napp = g.compile()\n\ndef handler(input):\n    return app.invoke({"n": input.get("n", 0)})\n';
const comment = (runtime: Runtime, tag: string) => (runtime === 'bun' ? `\n// ${tag}\n` : `\n# ${tag}\n`);

interface ColdRun {
  ms: number[];
  init_ms: number[];
  /** Spare waits that ran out (the version then started without one ready). */
  spares_not_ready: number;
}

/** `n` new versions of `name` (code + a distinct comment), each invoked once right after it is created. */
async function coldRuns(
  ctx: SpeedCtx,
  name: string,
  runtime: Runtime,
  code: string,
  limits: Record<string, number>,
  n: number,
  opts: { paced: boolean; body?: unknown; tag: string },
): Promise<ColdRun> {
  const client = leanClient(invokeTarget(ctx.core, name, (s) => s === 200, { body: opts.body }));
  const out: ColdRun = { ms: [], init_ms: [], spares_not_ready: 0 };
  try {
    for (let i = 0; i < n; i++) {
      if (opts.paced && (await waitSparesReady(ctx.asAdmin)) === null) out.spares_not_ready++;
      await ctx.ok('POST', `/v1/snippets/${name}/versions`, { code: code + comment(runtime, `${opts.tag} ${i}`), ...limits });
      const t = performance.now();
      await client.hit();
      out.ms.push(performance.now() - t);
      out.init_ms.push((await lastUsage(ctx, name)).init_ms);
    }
  } finally {
    client.close();
  }
  return out;
}

export async function lastUsage(ctx: SpeedCtx, name: string) {
  const page = (await ctx.ok('GET', `/v1/invocations?snippet=${name}&limit=1`)) as {
    data: { usage: { init_ms: number; peak_memory_mb: number; duration_ms: number } }[];
  };
  return page.data[0]!.usage;
}

const summary = (r: ColdRun) => ({ ...stats(r.ms), init_ms: stats(r.init_ms), spares_not_ready: r.spares_not_ready });
const noteOf = (r: ColdRun, s: Stats) =>
  [`init_ms p50 ${stats(r.init_ms).p50_ms}`, r.spares_not_ready ? `${r.spares_not_ready} of ${s.n} found no spare ready within 15 s` : '']
    .filter(Boolean)
    .join('; ');

export async function coldHelloPart(ctx: SpeedCtx): Promise<void> {
  const n = ctx.quick ? 5 : 20;
  const detail: Record<string, unknown> = {};
  for (const runtime of RUNTIMES) {
    const name = `cold-${runtime}`;
    await ctx.ok('POST', '/v1/snippets', { name, runtime });
    const paced = await coldRuns(ctx, name, runtime, HELLO[runtime], {}, n, { paced: true, tag: 'paced' });
    const burst = await coldRuns(ctx, name, runtime, HELLO[runtime], {}, n, { paced: false, tag: 'burst' });
    const s = stats(paced.ms);
    const b = stats(burst.ms);
    detail[runtime] = { paced: summary(paced), back_to_back: summary(burst) };
    const label = runtime === 'bun' ? 'Bun' : 'Python';
    ctx.add({
      key: `cold.hello.${runtime}`,
      figure: `cold start, new version, hello ${label} (spare ready)`,
      emulator: ms(s),
      measured: { p50: s.p50_ms, p99: s.p99_ms },
      note: noteOf(paced, s),
    });
    ctx.add({
      key: `cold.hello.${runtime}.burst`,
      figure: `cold start, hello ${label}, back to back`,
      emulator: ms(b),
      measured: { p50: b.p50_ms, p99: b.p99_ms },
    });
  }
  // A LangGraph graph (no model): the framework's import is the whole cold start.
  await ctx.ok('POST', '/v1/snippets', { name: 'graph', runtime: 'python' });
  const graph = await coldRuns(ctx, 'graph', 'python', GRAPH, { max_memory_mb: 512 }, ctx.quick ? 2 : 5, {
    paced: true,
    body: { n: 1 },
    tag: 'graph',
  });
  const g = stats(graph.ms);
  detail.python_langgraph_graph = summary(graph);
  ctx.detail.cold_hello = detail;
  ctx.add({
    key: 'cold.graph.langgraph',
    figure: 'cold start, LangGraph graph (Python, no model)',
    emulator: ms(g),
    measured: { p50: g.p50_ms, p99: g.p99_ms },
    note: noteOf(graph, g),
  });
}

export async function coldAgentsPart(ctx: SpeedCtx): Promise<void> {
  const fake = await startFakeProvider();
  const detail: Record<string, unknown> = {};
  try {
    await setUpAgentTenant(ctx.ok, fake);
    for (const a of AGENTS) {
      const config = JSON.parse(readFileSync(join(EXAMPLES, a.name, 'snippet.json'), 'utf8')) as Record<string, unknown>;
      const limits = {
        timeout_ms: config.timeout_ms,
        max_memory_mb: config.max_memory_mb,
        max_cpu_percent: config.max_cpu_percent,
      } as Record<string, number>;
      const code = readFileSync(join(EXAMPLES, a.name, a.entry), 'utf8');
      await ctx.ok('POST', '/v1/snippets', { name: a.name, runtime: a.runtime });
      const cold = await coldRuns(ctx, a.name, a.runtime, code, limits, ctx.quick ? 2 : 5, { paced: true, body: PROMPT, tag: 'cold' });
      const warm: number[] = [];
      const client = leanClient(invokeTarget(ctx.core, a.name, (s) => s === 200, { body: PROMPT }));
      try {
        for (let i = -3; i < (ctx.quick ? 5 : 30); i++) {
          const t = performance.now();
          await client.hit();
          if (i >= 0) warm.push(performance.now() - t);
        }
      } finally {
        client.close();
      }
      const usage = await lastUsage(ctx, a.name);
      // A plain hello at the same limits, for the framework's share of the peak memory.
      const hello = `hello-plain-${a.runtime}`;
      await ctx.ok('POST', '/v1/snippets', { name: hello, runtime: a.runtime });
      await ctx.ok('POST', `/v1/snippets/${hello}/versions`, { code: HELLO[a.runtime], max_memory_mb: 512, max_cpu_percent: 100 });
      const helloClient = leanClient(invokeTarget(ctx.core, hello, (s) => s === 200));
      for (let i = 0; i < 3; i++) await helloClient.hit();
      helloClient.close();
      const plain = await lastUsage(ctx, hello);
      const c = stats(cold.ms);
      const w = stats(warm);
      detail[a.name] = {
        cold_start: summary(cold),
        warm_invoke: w,
        peak_memory_mb: usage.peak_memory_mb,
        [`plain_hello_${a.runtime}_peak_memory_mb`]: plain.peak_memory_mb,
      };
      ctx.add({
        key: `cold.agent.${a.key}`,
        figure: `cold start, new version, ${a.label} (spare ready)`,
        emulator: ms(c),
        measured: { p50: c.p50_ms, p99: c.p99_ms },
        note: noteOf(cold, c),
      });
      ctx.add({
        key: `warm.agent.${a.key}`,
        figure: `warm invoke, ${a.label}`,
        emulator: ms(w),
        measured: { p50: w.p50_ms, p99: w.p99_ms },
        note: `peak memory ${usage.peak_memory_mb} MB (a plain ${a.runtime} hello: ${plain.peak_memory_mb} MB)`,
      });
    }
    detail.note =
      'each agent invocation: two model calls (tool call, then answer) through the egress proxy and one integration call made by the core; the fake provider answers at once';
    ctx.detail.agents = detail;
  } finally {
    await fake.close();
  }
}
