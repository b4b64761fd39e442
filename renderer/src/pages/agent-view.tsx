// The agent run view, a section of one invocation's page (invocation.tsx) when its run has agent steps or
// model calls (`GET /_emu/invocations/{id}/agent`, contract/schemas/agent.ts). LangGraph Studio's view of a run
// — the graph drawn, its nodes lighting up in order as the run goes (`invocation.step` on the live feed), the
// node sequence with each node's input, output and timing — and Mastra's playground's — the agent's steps and
// tool calls with arguments, results and timing —, plus what neither has: every model call the egress path
// saw, assembled (text, tool calls, tokens, time to first token), and the run's memory and CPU against its
// limits on the same time axis as the steps (agent-timeline.tsx).
import { useMemo, useState } from 'react';
import type { AgentRun, AgentStep, ProviderCall } from '../../../contract/schemas/agent';
import type { EmuEvent } from '../../../contract/schemas/events';
import { operations } from '../api';
import { useApp } from '../context';
import { useLiveEvent, useLiveLoad } from '../live-react';
import { Json, ProblemNotice } from '../ui/kit';
import type { EgressEntry } from '../types';
import { AgentGraphView, type NodeRun } from './agent-graph';
import { AgentTimeline, type TimelineRow } from './agent-timeline';
import { dur, elapsed, isRunning, LiveDot, useNow, type InvocationDetail } from './invocation-common';
import './agent.css';

const FRAMEWORK_LABEL = { langgraph: 'LangGraph', mastra: 'Mastra' } as const;

/** The events that change what this section shows, for this invocation only. */
const belongs = (id: string) => (e: EmuEvent) => {
  const d = e.data as { invocation_id?: unknown; id?: unknown };
  return (d.invocation_id ?? (e.type.startsWith('invocation.') ? d.id : null)) === id;
};

interface Data {
  run: AgentRun;
  /** The run's HTTPS calls: tunnels whose bytes cannot be read, so they are not assembled. */
  tunnels: EgressEntry[];
}

export function AgentSection({ inv }: { inv: InvocationDetail }) {
  const { api } = useApp();
  const id = inv.id;
  const [loaded] = useLiveLoad<Data>(
    async () => {
      const [run, egress] = await Promise.all([
        api.client.call(operations.emuInvocationAgent, { params: { id } }),
        api.client.call(operations.emuListEgress, { query: { invocation: id } }).then(
          (r) => r.data,
          () => [] as EgressEntry[],
        ),
      ]);
      return { run, tunnels: egress.filter((e) => e.method === 'CONNECT') };
    },
    [api, id],
    ['invocation.step', 'invocation.finished', 'egress.call'],
    belongs(id),
  );
  // Nodes light up the moment their step starts, before the next read of the run comes back.
  const [started, setStarted] = useState<Map<string, { name: string; kind: AgentStep['kind']; ended: boolean }>>(new Map());
  useLiveEvent(
    ['invocation.step'],
    (e) => {
      if (e.type !== 'invocation.step') return;
      const d = e.data;
      setStarted((m) => new Map(m).set(d.step_id, { name: d.name, kind: d.kind, ended: d.phase === 'end' }));
    },
    { filter: belongs(id) },
  );
  const running = isRunning(inv);
  const now = useNow(250, running);

  if (loaded.state === 'loading') return null;
  if (loaded.state === 'error') {
    return (
      <section className="card inv-card agent" aria-labelledby="agent-h">
        <h2 id="agent-h">Agent run</h2>
        <ProblemNotice error={loaded.error} title="Could not read what the agent did" />
      </section>
    );
  }
  const { run, tunnels } = loaded.data;
  if (run.steps.length === 0 && run.provider_calls.length === 0 && tunnels.length === 0 && !run.graph && started.size === 0) return null;
  const endMs = inv.usage?.duration_ms ?? (running ? elapsed(inv, now) : 0);
  return <AgentRunView run={run} tunnels={tunnels} inv={inv} started={started} endMs={endMs} live={running || run.live} />;
}

function AgentRunView({
  run,
  tunnels,
  inv,
  started,
  endMs,
  live,
}: {
  run: AgentRun;
  tunnels: EgressEntry[];
  inv: InvocationDetail;
  started: Map<string, { name: string; kind: AgentStep['kind']; ended: boolean }>;
  endMs: number;
  live: boolean;
}) {
  const steps = useMemo(() => [...run.steps].sort((a, b) => a.started_ms - b.started_ms), [run.steps]);
  const framework = run.framework ?? steps[0]?.framework ?? null;
  const isGraph = framework === 'langgraph' || run.graph !== null;
  const nodes = steps.filter((s) => s.kind === 'node');

  // The graph's state: each node's positions in the sequence, which one runs now, the edges taken.
  const graphState = useMemo(() => {
    const runs = new Map<string, NodeRun>();
    const idOf = (name: string) => run.graph?.nodes.find((n) => n.name === name || n.id === name)?.id ?? name;
    const seq: string[] = nodes.map((s) => idOf(s.name));
    // Starts announced on the feed that the last read did not have yet.
    const known = new Set(run.steps.map((s) => s.id));
    for (const [stepId, s] of started) if (s.kind === 'node' && !known.has(stepId)) seq.push(idOf(s.name));
    seq.forEach((nodeId, i) => {
      const r = runs.get(nodeId) ?? { order: [], active: false };
      r.order.push(i + 1);
      runs.set(nodeId, r);
    });
    const activeNames = new Set<string>();
    for (const s of nodes) if (s.ended_ms === null) activeNames.add(idOf(s.name));
    for (const [stepId, s] of started) {
      if (s.kind !== 'node') continue;
      const nodeId = idOf(s.name);
      if (s.ended) activeNames.delete(nodeId);
      else if (!known.has(stepId) || nodes.find((n) => n.id === stepId)?.ended_ms === null) activeNames.add(nodeId);
    }
    for (const n of activeNames) {
      const r = runs.get(n);
      if (r) r.active = true;
    }
    const taken = new Set<string>();
    if (seq.length) taken.add(`__start__>${seq[0]}`);
    for (let i = 1; i < seq.length; i++) taken.add(`${seq[i - 1]}>${seq[i]}`);
    if (seq.length && !live) taken.add(`${seq.at(-1)}>__end__`);
    return { runs, taken };
  }, [nodes, run.graph, run.steps, started, live]);

  const rows = useMemo(() => timelineRows(steps, run.provider_calls), [steps, run.provider_calls]);
  const tools = steps.filter((s) => s.kind === 'tool').length;
  const tokens = run.provider_calls.reduce((n, c) => n + (c.usage?.total_tokens ?? 0), 0);

  return (
    <section className="card inv-card agent" aria-labelledby="agent-h" data-testid="agent-view" data-framework={framework ?? 'none'}>
      <div className="inv-card-head">
        <h2 id="agent-h">
          Agent run {framework && <span className={`inv-chip agent-fw agent-fw-${framework}`}>{FRAMEWORK_LABEL[framework]}</span>}{' '}
          {live && <LiveDot label="the run is going: steps appear as they happen" />}
        </h2>
        <span className="muted agent-small" data-testid="agent-summary">
          {isGraph
            ? `${nodes.length} node ${nodes.length === 1 ? 'run' : 'runs'}`
            : `${steps.filter((s) => s.kind === 'step').length} steps`}
          {` · ${tools} tool ${tools === 1 ? 'call' : 'calls'} · ${run.provider_calls.length} model ${run.provider_calls.length === 1 ? 'call' : 'calls'}`}
          {tokens > 0 && ` · ${tokens.toLocaleString('en-US')} tokens`}
        </span>
      </div>
      {run.truncated && <p className="inv-note">More than 2,000 steps: the first ones are kept and shown.</p>}

      <div className={run.graph ? 'agent-top' : undefined}>
        {run.graph && <AgentGraphView graph={run.graph} runs={graphState.runs} taken={graphState.taken} live={live} />}
        <div className="agent-top-main">
          <h3 className="agent-h3">Steps and limits on one time axis</h3>
          <AgentTimeline rows={rows} samples={inv.timeline} limits={inv.limits} endMs={endMs} />
        </div>
      </div>

      {steps.length > 0 && (
        <>
          <h3 className="agent-h3">{isGraph ? 'Node sequence' : 'Steps and tool calls'}</h3>
          <StepTree steps={steps} graph={isGraph} />
        </>
      )}

      {(run.provider_calls.length > 0 || tunnels.length > 0) && (
        <>
          <h3 className="agent-h3">Model calls</h3>
          <ProviderCalls calls={run.provider_calls} />
          <Tunnels tunnels={tunnels} />
        </>
      )}
    </section>
  );
}

/** Steps (top level, then each one's children) and model calls, as timeline rows. */
function timelineRows(steps: AgentStep[], calls: ProviderCall[]): TimelineRow[] {
  const rows: TimelineRow[] = [];
  const { roots, children } = tree(steps);
  const walk = (s: AgentStep, depth: number) => {
    rows.push({ key: s.id, label: s.name, depth, kind: s.kind, start: s.started_ms, end: s.ended_ms, failed: s.error !== null });
    for (const c of children.get(s.id) ?? []) walk(c, depth + 1);
  };
  for (const r of roots) walk(r, 0);
  calls.forEach((c, i) =>
    rows.push({
      key: `call-${c.egress_id}-${i}`,
      label: `model call ${i + 1}${c.model ? ` · ${c.model}` : ''}`,
      depth: 0,
      kind: 'call',
      start: c.started_ms,
      end: c.started_ms + c.duration_ms,
      firstToken: c.first_token_ms,
      failed: c.status === null || c.status >= 400,
    }),
  );
  return rows;
}

function tree(steps: AgentStep[]): { roots: AgentStep[]; children: Map<string, AgentStep[]> } {
  const ids = new Set(steps.map((s) => s.id));
  const children = new Map<string, AgentStep[]>();
  const roots: AgentStep[] = [];
  for (const s of steps) {
    if (s.parent_id && ids.has(s.parent_id)) children.set(s.parent_id, [...(children.get(s.parent_id) ?? []), s]);
    else roots.push(s);
  }
  return { roots, children };
}

const KIND_LABEL: Record<AgentStep['kind'], string> = { node: 'node', step: 'step', tool: 'tool', llm: 'model' };

function StepTree({ steps, graph }: { steps: AgentStep[]; graph: boolean }) {
  const { roots, children } = tree(steps);
  let order = 0;
  const render = (s: AgentStep, depth: number) => {
    const n = s.kind === 'node' || s.kind === 'step' ? ++order : null;
    return (
      <li key={s.id}>
        <StepRow step={s} n={graph || s.kind === 'step' ? n : null} depth={depth} />
        {(children.get(s.id)?.length ?? 0) > 0 && (
          <ol className="agent-steps agent-steps-nested">{children.get(s.id)!.map((c) => render(c, depth + 1))}</ol>
        )}
      </li>
    );
  };
  return (
    <ol className="agent-steps" data-testid="agent-steps">
      {roots.map((r) => render(r, 0))}
    </ol>
  );
}

function StepRow({ step, n, depth }: { step: AgentStep; n: number | null; depth: number }) {
  const tool = step.kind === 'tool';
  const meta = Object.entries(step.meta).filter(([, v]) => v !== null && v !== undefined);
  return (
    <details
      className={`agent-step agent-step-${step.kind}${step.error ? ' agent-step-failed' : ''}`}
      data-testid="agent-step"
      data-kind={step.kind}
      data-name={step.name}
      data-depth={depth}
    >
      <summary>
        {n !== null && <span className="agent-step-n">{n}</span>}
        <span className={`agent-kind agent-kind-${step.kind}`}>{KIND_LABEL[step.kind]}</span>
        <strong className="agent-step-name">{step.name}</strong>
        <span className="muted agent-step-time">
          +{dur(step.started_ms)} · {step.ended_ms === null ? <em>running</em> : dur(step.ended_ms - step.started_ms)}
        </span>
        {step.error && <span className="agent-step-error">{step.error}</span>}
      </summary>
      <div className="agent-io">
        <div data-testid="agent-step-input">
          <h4>{tool ? 'Arguments' : 'Input'}</h4>
          {step.input === null || step.input === undefined ? <p className="muted">—</p> : <Json value={step.input} />}
        </div>
        <div data-testid="agent-step-output">
          <h4>{tool ? 'Result' : 'Output'}</h4>
          {step.error ? (
            <pre className="inv-pre agent-error-text">{step.error}</pre>
          ) : step.output === null || step.output === undefined ? (
            <p className="muted">{step.ended_ms === null ? 'Not finished yet.' : '—'}</p>
          ) : (
            <Json value={step.output} />
          )}
        </div>
      </div>
      {meta.length > 0 && (
        <dl className="inv-dl inv-dl-tight agent-meta">
          {meta.map(([k, v]) => (
            <div key={k} className="agent-meta-row">
              <dt>{k.replace(/_/g, ' ')}</dt>
              <dd>{typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v)}</dd>
            </div>
          ))}
        </dl>
      )}
    </details>
  );
}

/** JSON arguments shown formatted when they parse, as sent otherwise (a call cut mid-way). */
function Args({ text }: { text: string }) {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    return <pre className="json">{text || '—'}</pre>;
  }
  return <Json value={value} />;
}

function ProviderCalls({ calls }: { calls: ProviderCall[] }) {
  return (
    <ol className="agent-calls" data-testid="provider-calls">
      {calls.map((c, i) => (
        <li key={`${c.egress_id}-${i}`} className="agent-call" data-testid="provider-call" data-api={c.api} data-status={c.status ?? ''}>
          <div className="agent-call-head">
            <span className="agent-step-n">{i + 1}</span>
            <strong>{c.model ?? 'unknown model'}</strong>
            <code className="agent-small">
              POST {c.host}
              {c.path}
            </code>
            <span className="inv-chip">{c.api}</span>
            {c.stream && <span className="inv-chip">streamed</span>}
            <span className={`inv-code-pill ${c.status !== null && c.status < 400 ? 'inv-ok' : 'inv-bad'}`}>{c.status ?? 'no answer'}</span>
          </div>
          <dl className="agent-call-stats">
            <div>
              <dt>started</dt>
              <dd>+{dur(c.started_ms)}</dd>
            </div>
            <div>
              <dt>first token</dt>
              <dd data-testid="provider-ttft">{c.first_token_ms === null ? '—' : dur(c.first_token_ms)}</dd>
            </div>
            <div>
              <dt>duration</dt>
              <dd>{dur(c.duration_ms)}</dd>
            </div>
            <div>
              <dt>tokens in / out</dt>
              <dd data-testid="provider-tokens">{c.usage ? `${c.usage.prompt_tokens} / ${c.usage.completion_tokens}` : '—'}</dd>
            </div>
          </dl>
          {c.error && <p className="agent-step-error">{c.error}</p>}
          {c.text && (
            <p className="agent-call-text" data-testid="provider-text">
              {c.text}
            </p>
          )}
          {c.tool_calls.length > 0 && (
            <div className="agent-toolcalls">
              {c.tool_calls.map((t, k) => (
                <div key={`${t.id ?? k}`} className="agent-toolcall" data-testid="provider-tool-call" data-name={t.name}>
                  <div className="agent-toolcall-head">
                    <span className="agent-kind agent-kind-tool">tool call</span> <strong>{t.name}</strong>{' '}
                    {t.id && <code className="muted agent-small">{t.id}</code>}
                  </div>
                  <div className="agent-io">
                    <div>
                      <h4>Arguments</h4>
                      <Args text={t.arguments} />
                    </div>
                    <div>
                      <h4>Result</h4>
                      {t.result === null ? <p className="muted">Not sent back to the model in this run.</p> : <Args text={t.result} />}
                    </div>
                  </div>
                </div>
              ))}
            </div>
          )}
          {c.truncated && <p className="muted agent-small">Larger than what is kept (1 MiB a body): assembled from the first part.</p>}
        </li>
      ))}
    </ol>
  );
}

/** HTTPS calls: a CONNECT tunnel carries encrypted bytes, so the emulator cannot read or assemble them. */
function Tunnels({ tunnels }: { tunnels: EgressEntry[] }) {
  if (!tunnels.length) return null;
  const hosts = [...new Set(tunnels.map((t) => `${t.host}:${t.port}`))];
  return (
    <p className="inv-note agent-tunnels" data-testid="agent-tunnels" role="note">
      {tunnels.length === 1 ? '1 HTTPS call' : `${tunnels.length} HTTPS calls`} ({hosts.join(', ')}) went through an encrypted tunnel the
      emulator cannot read, so {tunnels.length === 1 ? 'it is' : 'they are'} not assembled here (the egress log has their host, timing and
      sizes). To see a model call here, point the client at a plain-HTTP endpoint (the fake provider: OPENAI_BASE_URL=http://…) or make it
      with <code>integrations.call</code>, which the core makes itself.
    </p>
  );
}
