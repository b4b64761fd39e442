// The agent steps' conformance suite: what every runner promises about the steps it reports from its agent
// framework's own hooks (executor/protocol.ts StepFrame; Python: executor/runtimes/python/_svc_agent_hooks.py for
// LangChain/LangGraph, Bun: executor/runtimes/bun/agent-hooks.ts for Mastra), seen where users see them: the
// `invocation.step` events of the core's bus and `GET /_emu/invocations/{id}/agent` (services/agent-steps.ts).
// Run against a real core with the real runtimes and the fake OpenAI-compatible provider, from
// test/agents/agent-steps.test.ts. What differs between runtimes is data in `AgentStepFixtures`.
import { describe, expect, it, type TestContext } from 'vitest';
import { operations as ops } from '../../contract';
import type { AgentRun, AgentStep } from '../../contract/schemas/agent';
import type { EmuEvent } from '../../contract/schemas/events';
import type { TestCore } from '../helpers/core';

export interface AgentStepFixtures {
  runtime: 'bun' | 'python';
  framework: 'langgraph' | 'mastra';
  /** A snippet (created with its limits) whose agent calls the `weather` tool once, then answers. */
  agent: string;
  /** The agent's input. */
  input: Record<string, unknown>;
  /** The kind of the steps a tool call is made in (LangGraph: its nodes; Mastra: the agent's steps). */
  stepKind: 'node' | 'step';
  /** The names of those steps, in order, for one tool call and the answer. */
  sequence: string[];
  /** The tool's name as the framework reports it. */
  toolName: string;
  /** Which of those steps the tool call is a child of (its index in `sequence`). */
  toolParent: number;
  /** A plain snippet (no framework) that returns what of the framework and of our hooks the process has loaded: [] */
  loadedProbe: { name: string; code: string };
}

type StepEvent = Extract<EmuEvent, { type: 'invocation.step' }>;

/** Collects the bus's step and finish events for one invocation (from now until `stop`). */
export function watchSteps(core: TestCore) {
  const got: { event: EmuEvent; at: number }[] = [];
  const sub = core.emu.events.subscribe((event) => {
    if (event.type === 'invocation.step' || event.type === 'invocation.finished') got.push({ event, at: performance.now() });
  });
  return {
    of(id: string) {
      return got.filter(
        ({ event }) => (event.type === 'invocation.step' ? event.data.invocation_id : (event.data as { id: string }).id) === id,
      );
    },
    stop: () => sub.close(),
  };
}

export async function agentRun(core: TestCore, id: string): Promise<AgentRun> {
  // Through the typed client: the answer is checked against the contract's AgentRun.
  return core.client.call(ops.emuInvocationAgent, { params: { id } });
}

export function agentStepsConformance(label: string, getCore: () => TestCore | null, fx: AgentStepFixtures): void {
  const core = (ctx: TestContext): TestCore => {
    const c = getCore();
    if (c) return c;
    ctx.skip(`no ${fx.runtime} runtime on this host (node scripts/setup.mjs --for=test installs it)`);
    throw new Error('skipped');
  };

  describe(`agent steps: ${label}`, () => {
    it(`reports the ${fx.stepKind} sequence ${fx.sequence.join(' → ')}, the tool call inside it with its arguments and result, with timings inside the run`, async (ctx) => {
      const c = core(ctx);
      const r = await c.call('POST', `/v1/invoke/${fx.agent}`, fx.input);
      expect(r.status, r.text).toBe(200);
      const id = r.headers.get('x-invocation-id')!;
      const run = await agentRun(c, id);
      expect(run.framework).toBe(fx.framework);
      expect(run.live).toBe(false);
      expect(run.truncated).toBe(false);
      const top = run.steps.filter((s) => s.kind === fx.stepKind);
      expect(top.map((s) => s.name)).toEqual(fx.sequence);
      const tools = run.steps.filter((s) => s.kind === 'tool');
      expect(tools).toHaveLength(1);
      const tool = tools[0]!;
      expect(tool.name).toBe(fx.toolName);
      expect(JSON.stringify(tool.input)).toContain('Paris');
      expect(JSON.stringify(tool.output)).toMatch(/sunny/);
      expect(tool.error).toBeNull();
      expect(tool.parent_id).toBe(top[fx.toolParent]!.id);

      const usage = (await c.call('GET', `/v1/invocations/${id}`)).json.usage as { duration_ms: number };
      const within = (s: AgentStep) => {
        expect(s.ended_ms, `${s.name} ended`).not.toBeNull();
        expect(s.started_ms).toBeGreaterThanOrEqual(0);
        expect(s.ended_ms!).toBeGreaterThanOrEqual(s.started_ms);
        expect(s.ended_ms!, `${s.name} ended within the run`).toBeLessThanOrEqual(usage.duration_ms + 5);
      };
      for (const s of run.steps) within(s);
      // In order, one after the other; the tool inside its step.
      for (let i = 1; i < top.length; i++) expect(top[i]!.started_ms).toBeGreaterThanOrEqual(top[i - 1]!.ended_ms! - 1);
      const parent = top[fx.toolParent]!;
      expect(tool.started_ms).toBeGreaterThanOrEqual(parent.started_ms);
      expect(tool.ended_ms!).toBeLessThanOrEqual(parent.ended_ms! + 1);
      // The answer step says what it answered (text or messages).
      expect(JSON.stringify(top.at(-1)!.output)).toContain('Tool said');
      console.info(
        `[agent-steps] ${label}: ${top.map((s) => `${s.name} ${(s.ended_ms! - s.started_ms).toFixed(1)} ms`).join(', ')}; ` +
          `${fx.toolName} ${(tool.ended_ms! - tool.started_ms).toFixed(1)} ms; run ${usage.duration_ms} ms`,
      );
    });

    it('steps arrive live as invocation.step events (start, then end, each), before the run finishes', async (ctx) => {
      const c = core(ctx);
      const watch = watchSteps(c);
      try {
        // Stream mode: the first step's event must come before the stream's result reaches the caller.
        const got: { event: string; at: number }[] = [];
        const stream = await c.client.stream(ops.invoke, {
          params: { snippet: fx.agent },
          body: fx.input,
          headers: { 'x-invoke-mode': 'stream' },
        });
        let id = '';
        for await (const e of stream) {
          got.push({ event: e.event, at: performance.now() });
          if (e.event === 'start') id = (e.data as { invocation_id: string }).invocation_id;
        }
        expect(got.at(-1)!.event).toBe('result');
        const seen = watch.of(id);
        const steps = seen.filter((e) => e.event.type === 'invocation.step').map((e) => e as { event: StepEvent; at: number });
        const finished = seen.find((e) => e.event.type === 'invocation.finished');
        expect(steps.length).toBeGreaterThanOrEqual(2 * (fx.sequence.length + 1));
        expect(steps[0]!.at, 'the first step was announced before the result reached the caller').toBeLessThan(got.at(-1)!.at);
        if (finished) expect(steps[0]!.at).toBeLessThan(finished.at);
        const run = await agentRun(c, id);
        for (const s of run.steps) {
          const phases = steps.filter((e) => e.event.data.step_id === s.id).map((e) => e.event.data.phase);
          expect(phases, s.name).toEqual(['start', 'end']);
        }
        const firstTool = steps.find((e) => e.event.data.kind === 'tool')!;
        expect(firstTool.event.data).toMatchObject({ name: fx.toolName, phase: 'start' });
      } finally {
        watch.stop();
      }
    });

    it('a plain snippet reports nothing and pays nothing: neither the framework nor our hooks are loaded', async (ctx) => {
      const c = core(ctx);
      const watch = watchSteps(c);
      try {
        const r = await c.call('POST', `/v1/invoke/${fx.loadedProbe.name}`, {});
        expect(r.status, r.text).toBe(200);
        expect(r.json).toEqual([]);
        const id = r.headers.get('x-invocation-id')!;
        const run = await agentRun(c, id);
        expect(run).toMatchObject({ framework: null, graph: null, steps: [], truncated: false, live: false });
        expect(watch.of(id).filter((e) => e.event.type === 'invocation.step')).toEqual([]);
      } finally {
        watch.stop();
      }
    });
  });
}
