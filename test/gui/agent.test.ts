// The agent run view in Chromium against a real core running the example workspace's two agents for real
// (LangGraph in Python, Mastra in Bun) against the project's fake OpenAI-compatible provider, paced like a
// model: the LangGraph graph drawn with the nodes that ran lit, its node sequence with each node's input and
// output, a node lighting up while the run is still going; the Mastra agent's steps and tool call with its
// arguments and result; the model calls assembled (text, tool calls, tokens, time to first token); the
// stream inspector's assembled text beside the raw frames. Screenshots of the view for both frameworks go to
// test/.tmp/gui/, and to docs/images/ (referenced from docs/snippet-authors-guide.md) when SVC_EMU_DOC_IMAGES=1
// (`SVC_EMU_DOC_IMAGES=1 npx vitest run test/gui/agent.test.ts`), so an ordinary run leaves the checkout as it
// was. Skips loudly when Chromium or the build is missing.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../helpers/core';
import { configureAgentTenant } from '../helpers/agents';
import { SCREENSHOTS, shownText, skipReason, startGui, type Gui, type GuiPage } from '../helpers/gui';
import { startFakeProvider, type FakeProvider } from '../../fixtures/fake-openai/server';
import { operations as ops } from '../../contract';

if (skipReason) console.warn(`\n[agent.test] SKIPPING the agent view tests: ${skipReason}\n`);

const EXAMPLES = join(PROJECT_ROOT, 'fixtures', 'workspace', 'snippets');
/** The documentation's screenshots are retaken only when asked for. */
const IMAGES = process.env.SVC_EMU_DOC_IMAGES === '1' ? join(PROJECT_ROOT, 'docs', 'images') : SCREENSHOTS;
const PROMPT = { prompt: 'What is the weather in Paris?' };
/** Between the fake model's streamed frames: tokens arrive one by one, as from a real model. */
const PACE_MS = 40;

let gui: Gui;
let fake: FakeProvider;

async function addAgent(name: string, runtime: 'bun' | 'python', entry: string) {
  const config = JSON.parse(await readFile(join(EXAMPLES, name, 'snippet.json'), 'utf8'));
  await gui.core.call('POST', '/v1/snippets', { name, runtime });
  const v = await gui.core.call('POST', `/v1/snippets/${name}/versions`, {
    code: await readFile(join(EXAMPLES, name, entry), 'utf8'),
    timeout_ms: config.timeout_ms,
    max_memory_mb: config.max_memory_mb,
    max_cpu_percent: config.max_cpu_percent,
  });
  expect(v.status, v.text).toBe(201);
}

/** Streams a run to its end; resolves with its id and the events' data. */
async function stream(name: string): Promise<{ id: string; tokens: string[]; output: { answer: string } }> {
  const s = await gui.core.client.stream(ops.invoke, { params: { snippet: name }, body: PROMPT, headers: { 'x-invoke-mode': 'stream' } });
  let id = '';
  const tokens: string[] = [];
  let output: { answer: string } | null = null;
  for await (const e of s) {
    const d = e.data as Record<string, any>;
    if (e.event === 'start') id = d.invocation_id;
    if (e.event === 'chunk') tokens.push(d.data.token);
    if (e.event === 'result') output = d.output;
    if (e.event === 'error') throw new Error(`the run failed: ${JSON.stringify(d)}`);
  }
  return { id, tokens, output: output! };
}

async function openInvocation(id: string): Promise<GuiPage> {
  const p = await gui.open({ width: 1280, height: 900 });
  await p.go(`invocation/${id}`);
  return p;
}

describe.skipIf(!!skipReason)('the agent run view', () => {
  beforeAll(async () => {
    fake = await startFakeProvider({ streamDelayMs: PACE_MS });
    gui = await startGui();
    await configureAgentTenant(gui.core, fake);
    await addAgent('langgraph-agent', 'python', 'main.py');
    await addAgent('mastra-agent', 'bun', 'index.ts');
  }, 60_000);
  afterAll(async () => {
    await gui?.close();
    await fake?.close();
  });

  it('LangGraph: the graph drawn, nodes lighting up while the run goes, the node sequence with input and output, the model calls assembled', async () => {
    // Watch it live: the page is open before the run starts and goes to it at its first event; a node is lit
    // while the invocation still runs. A latency rule on the model's host keeps each model call going 700 ms.
    const p = await gui.open({ width: 1280, height: 900 });
    const slow = await gui.core.call(
      'POST',
      '/_emu/egress/faults',
      { host: 'localhost', action: { type: 'latency', ms: 700 }, times: 2 },
      { key: gui.core.admin },
    );
    expect(slow.status, slow.text).toBe(201);
    const s = await gui.core.client.stream(ops.invoke, {
      params: { snippet: 'langgraph-agent' },
      body: PROMPT,
      headers: { 'x-invoke-mode': 'stream' },
    });
    const it = s[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.value?.event).toBe('start');
    const id = (first.value!.data as { invocation_id: string }).invocation_id;
    const drained = (async () => {
      for (let n = await it.next(); !n.done; n = await it.next());
    })();
    await p.go(`invocation/${id}`);
    await p.page
      .waitForFunction(
        () =>
          document.querySelector('[data-testid="invocation"]')?.getAttribute('data-status') === 'running' &&
          document.querySelector('[data-testid="agent-graph-node"][data-node="model"]:is([data-state="active"],[data-state="ran"])') !==
            null,
        undefined,
        { timeout: 30_000 },
      )
      .catch(async (err: Error) => {
        const status = await p.page
          .getByTestId('invocation')
          .getAttribute('data-status')
          .catch(() => null);
        const nodes = await p.page
          .getByTestId('agent-graph-node')
          .evaluateAll((els) => els.map((e) => `${e.getAttribute('data-node')}:${e.getAttribute('data-state')}`));
        throw new Error(
          `no node lit while the run went (status ${status}, nodes ${nodes.join(' ')}; errors ${JSON.stringify(p.errors)}): ${err.message}`,
        );
      });
    await drained;
    await p.page.locator('[data-testid="invocation"][data-status="succeeded"]').waitFor({ timeout: 30_000 });
    await p.page
      .locator(
        '[data-testid="agent-view"][data-framework="langgraph"] [data-testid="agent-graph-edge"][data-from="model"][data-to="__end__"][data-taken="true"]',
      )
      .waitFor({ state: 'attached' }); // a straight vertical path has no width: attached, not "visible"

    const view = p.page.getByTestId('agent-view');
    // The graph: every node of create_agent's graph drawn; model and tools ran, and the edges the run took are marked.
    const nodes = await view
      .getByTestId('agent-graph-node')
      .evaluateAll((els) => els.map((e) => [e.getAttribute('data-node'), e.getAttribute('data-state')]));
    expect(Object.fromEntries(nodes)).toEqual({ __start__: 'idle', model: 'ran', tools: 'ran', __end__: 'idle' });
    expect(await view.locator('[data-testid="agent-graph-node"][data-node="model"] title').textContent()).toMatch(/ran 2× \(step 1, 3\)/);
    const taken = await view
      .locator('[data-testid="agent-graph-edge"][data-taken="true"]')
      .evaluateAll((els) => els.map((e) => `${e.getAttribute('data-from')}>${e.getAttribute('data-to')}`).sort());
    expect(taken).toEqual(['__start__>model', 'model>__end__', 'model>tools', 'tools>model']);

    // The node sequence: model, tools, model; each with its input and output.
    const seq = await view
      .locator('[data-testid="agent-step"][data-depth="0"]')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-name')));
    expect(seq).toEqual(['model', 'tools', 'model']);
    const firstNode = view.locator('[data-testid="agent-step"][data-depth="0"]').first();
    await firstNode.locator('summary').click();
    expect(await shownText(p, firstNode.getByTestId('agent-step-input'), 'the first node’s input')).toContain(
      'What is the weather in Paris?',
    );
    expect(await firstNode.getByTestId('agent-step-output').innerText()).toContain('get_weather');
    // The tool inside the tools node: its arguments and result.
    const tool = view.locator('[data-testid="agent-step"][data-kind="tool"]').first();
    await view.locator('[data-testid="agent-step"][data-name="tools"]').first().locator('> summary').click();
    await tool.locator('summary').click();
    expect(await shownText(p, tool.getByTestId('agent-step-input'), 'the tool’s arguments')).toContain('Paris');
    expect(await tool.getByTestId('agent-step-output').innerText()).toContain('sunny');

    // The model calls, assembled from the egress path: the tool call, then the answer; tokens and time to first token.
    const calls = view.getByTestId('provider-call');
    expect(await calls.count()).toBe(2);
    expect(await calls.nth(0).getByTestId('provider-tool-call').innerText()).toMatch(/get_weather[\s\S]*Paris[\s\S]*sunny/);
    expect(await calls.nth(1).getByTestId('provider-text').innerText()).toMatch(/^Tool said: .*sunny/);
    const ttft = await calls.nth(1).getByTestId('provider-ttft').innerText();
    expect(ttft).toMatch(/^\d+ ms$/);
    expect(Number.parseInt(ttft, 10)).toBeGreaterThanOrEqual(PACE_MS - 5);
    // Limits beside the steps: the rows and the memory/CPU panels share the axis.
    expect(await view.locator('[data-testid="agent-tl-row"][data-kind="node"]').count()).toBe(3);
    expect(await view.locator('[data-testid="agent-tl-row"][data-kind="call"]').count()).toBe(2);
    await view.getByTestId('agent-tl-limits').waitFor();
    expect(p.errors).toEqual([]);
    await view.screenshot({ path: join(IMAGES, 'agent-view-langgraph.png') });
    await p.screenshot('agent-langgraph');
    // The dark scheme: the same view, for a look (test/.tmp/gui/agent-langgraph-dark.png).
    const dark = await gui.browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 900 }, colorScheme: 'dark' });
    try {
      const d = await dark.newPage();
      const darkErrors: string[] = [];
      d.on('pageerror', (e) => darkErrors.push(e.message));
      await d.goto(`${gui.core.url}/?token=${gui.core.admin}#/invocation/${id}`);
      await d.locator('[data-testid="agent-view"] [data-testid="agent-graph-node"][data-node="model"][data-state="ran"]').waitFor();
      await d.getByTestId('agent-view').screenshot({ path: join(SCREENSHOTS, 'agent-langgraph-dark.png') });
      expect(darkErrors).toEqual([]);
    } finally {
      await dark.close();
    }
  }, 90_000);

  it('Mastra: the agent’s steps and its tool call with arguments and result; the stream inspector assembles the text beside the raw frames', async () => {
    const run = await stream('mastra-agent');
    expect(run.tokens.length).toBeGreaterThanOrEqual(3);
    const p = await openInvocation(run.id);
    const view = p.page.locator('[data-testid="agent-view"][data-framework="mastra"]');
    await view.waitFor({ timeout: 20_000 });
    await view.locator('[data-testid="agent-step"][data-kind="tool"]').first().waitFor();

    const steps = await view.locator('[data-testid="agent-step"][data-kind="step"]').count();
    expect(steps).toBeGreaterThanOrEqual(2); // the tool call, then the answer
    const tool = view.locator('[data-testid="agent-step"][data-kind="tool"]').first();
    expect(await tool.getAttribute('data-name')).toMatch(/weather/i);
    await tool.locator('summary').click();
    expect(await shownText(p, tool.getByTestId('agent-step-input'), 'the tool call’s arguments')).toContain('Paris');
    expect(await tool.getByTestId('agent-step-output').innerText()).toContain('sunny');
    expect(await tool.getByTestId('agent-step-input').locator('h4').innerText()).toMatch(/arguments/i);

    const calls = view.getByTestId('provider-call');
    expect(await calls.count()).toBe(2);
    expect(await calls.nth(1).getByTestId('provider-text').innerText()).toBe(run.output.answer);
    expect(p.errors).toEqual([]);
    await view.screenshot({ path: join(IMAGES, 'agent-view-mastra.png') });
    await p.screenshot('agent-mastra');

    // The stream inspector: the tokens ({token} chunks) assembled, beside the raw SSE frames.
    await p.go(`stream/${run.id}`);
    const text = await shownText(p, p.page.getByTestId('stream-text'), 'the assembled text');
    expect(text.trim()).toBe(run.tokens.join('').trim());
    expect(text.trim()).toBe(run.output.answer.trim());
    await p.page.getByTestId('raw-toggle').click();
    const raw = await shownText(p, p.page.getByTestId('raw-sse'), 'the raw frames');
    expect(raw).toContain('"token"');
    // Beside: both shown at once, side by side at this width.
    const [a, b] = await Promise.all([
      p.page.getByTestId('assembled-text-card').boundingBox(),
      p.page.getByTestId('raw-sse').boundingBox(),
    ]);
    expect(a && b && a.x + a.width <= b.x + 1).toBe(true);
    expect(p.errors).toEqual([]);
    await p.screenshot('agent-stream-assembled');

    // A phone's width: the view reflows (the graph, the time axis and the panels fit), nothing scrolls sideways.
    const narrow = await gui.open({ width: 390, height: 800 });
    await narrow.go(`invocation/${run.id}`);
    await narrow.page.locator('[data-testid="agent-view"] [data-testid="agent-tl-row"]').first().waitFor();
    const [scroll, client] = await narrow.page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
    await narrow.screenshot('agent-mastra-narrow');
    const wide = await narrow.page.evaluate((w) => {
      const out: string[] = [];
      for (const el of document.querySelectorAll('body *')) {
        const r = el.getBoundingClientRect();
        if (r.right > w + 1 && out.length < 8)
          out.push(`${el.tagName}.${el.getAttribute('class') ?? ''}[${el.getAttribute('data-testid') ?? ''}] ${Math.round(r.right)}`);
      }
      return out;
    }, client);
    expect(scroll, `wider than the window: ${wide.join(', ')}`).toBeLessThanOrEqual(client + 1);
    expect(narrow.errors).toEqual([]);
  }, 90_000);
});
