import type { CoreDeps } from '../core-deps';
import type { InvocationRecord } from '../storage/schema';
import type { AgentGraphEvent, AgentStepEvent } from '../../executor';
import type { AgentGraph, AgentRun, AgentStep, ProviderCall } from '../../contract/schemas/agent';

/** Characters of step input/output kept per run (the runners cap each value at ~16 KiB already). */
export const AGENT_DATA_MAX_CHARS = 8 * 1024 * 1024;

/** What an agent run's blob holds (`agent_blob` on the record). */
export interface StoredAgentRun {
  framework: AgentRun['framework'];
  graph: AgentGraph | null;
  steps: AgentStep[];
  truncated: boolean;
}

interface Live {
  steps: Map<string, AgentStep>;
  graph: AgentGraph | null;
  framework: AgentRun['framework'];
  chars: number;
  truncated: boolean;
}

/** The hooks one run hands the executor (InvokeService.execute). */
export interface AgentObserver {
  onStep(step: AgentStepEvent): void;
  onGraph(graph: AgentGraphEvent): void;
}

/**
 * What agent frameworks did in each invocation (LangGraph nodes, Mastra steps, tool and model calls), as the
 * runners report it from the frameworks' own hooks (executor/protocol.ts StepFrame / GraphFrame): kept in memory
 * while the run goes on, announced as `invocation.step` events (start and end), and kept with the invocation as a
 * blob named by `agent_blob` when it ends (so it goes when the history drops the record: the blob sweep). Served
 * as `AgentRun` by `GET /_emu/invocations/{id}/agent`, with the run's model calls from `providerCalls`.
 */
export class AgentStepService {
  private readonly live = new Map<string, Live>();

  constructor(
    private readonly deps: CoreDeps,
    private readonly opts: {
      /** The run's calls to OpenAI-compatible providers, assembled from the egress log (server/index.ts wires it). */
      providerCalls?: (invocationId: string) => Promise<ProviderCall[]>;
      /** A run's steps could not be kept (only the stored copy is lost). */
      onError?: (message: string, err: unknown) => void;
    } = {},
  ) {}

  /** The hooks for one run; nothing is held until its first step arrives. */
  observer(invocationId: string): AgentObserver {
    return {
      onStep: (step) => this.step(invocationId, step),
      onGraph: (graph) => {
        const live = this.open(invocationId);
        // The first graph is the run's own; a subgraph compiled inside one of its nodes reports later.
        if (!live.graph) live.graph = { nodes: graph.nodes, edges: graph.edges };
        live.framework ??= graph.framework;
      },
    };
  }

  private open(invocationId: string): Live {
    let live = this.live.get(invocationId);
    if (!live) {
      live = { steps: new Map(), graph: null, framework: null, chars: 0, truncated: false };
      this.live.set(invocationId, live);
    }
    return live;
  }

  /** A value kept while the run's budget lasts; after it, a note saying so. */
  private keep(live: Live, value: unknown): unknown {
    if (value === undefined) return null;
    const chars = (JSON.stringify(value) ?? '').length;
    if (live.chars + chars > AGENT_DATA_MAX_CHARS) return `[not kept: the run's steps passed ${AGENT_DATA_MAX_CHARS} characters of data]`;
    live.chars += chars;
    return value;
  }

  private step(invocationId: string, e: AgentStepEvent): void {
    const live = this.open(invocationId);
    live.framework ??= e.framework;
    let step = live.steps.get(e.step_id);
    if (!step) {
      step = {
        id: e.step_id,
        parent_id: e.parent_id ?? null,
        kind: e.kind,
        framework: e.framework,
        name: e.name,
        started_ms: e.at_ms,
        ended_ms: null,
        input: this.keep(live, e.input),
        output: null,
        error: null,
        meta: { ...(e.meta ?? {}) },
      };
      live.steps.set(e.step_id, step);
    }
    if (e.phase === 'end') {
      step.ended_ms = e.at_ms;
      if (e.output !== undefined) step.output = this.keep(live, e.output);
      if (e.input !== undefined && step.input === null) step.input = this.keep(live, e.input);
      step.error = e.error ?? null;
      if (e.meta) Object.assign(step.meta, e.meta);
      if (e.name && e.name !== step.name) step.name = e.name;
    }
    this.deps.events.publish('invocation.step', {
      invocation_id: invocationId,
      step_id: e.step_id,
      kind: step.kind,
      name: step.name,
      phase: e.phase,
    });
  }

  /**
   * The run ended (every way out): its steps go into a blob named on the record, then the live copy goes.
   * `dropped`: steps the executor did not pass (over MAX_STEPS_PER_RUN). Never rejects; a run without steps
   * or a graph stores nothing.
   */
  async close(invocationId: string, dropped = 0): Promise<void> {
    const live = this.live.get(invocationId);
    if (!live) return;
    // Before the first await: a reader of the live copy meanwhile (the caller has its answer) sees it too.
    if (dropped > 0) live.truncated = true;
    try {
      const stored: StoredAgentRun = {
        framework: live.framework,
        graph: live.graph,
        steps: [...live.steps.values()],
        truncated: live.truncated,
      };
      const blob = await this.deps.blobs.put(JSON.stringify(stored));
      this.deps.repo.mutateLazy((db) => {
        const rec = db.invocations.find((i) => i.id === invocationId);
        if (rec) rec.agent_blob = blob;
      });
    } catch (err) {
      this.opts.onError?.(`the agent steps of ${invocationId} could not be kept`, err);
    } finally {
      this.live.delete(invocationId);
    }
  }

  /** Runs with steps held in memory now (the soak and retention checks read it: back to 0 after the runs). */
  get liveCount(): number {
    return this.live.size;
  }

  async read(rec: InvocationRecord): Promise<StoredAgentRun> {
    const live = this.live.get(rec.id);
    if (live) {
      return {
        framework: live.framework,
        graph: live.graph,
        steps: [...live.steps.values()].map((s) => ({ ...s, meta: { ...s.meta } })),
        truncated: live.truncated,
      };
    }
    const blob = this.deps.repo.read((db) => db.invocations.find((i) => i.id === rec.id)?.agent_blob);
    if (!blob) return { framework: null, graph: null, steps: [], truncated: false };
    return JSON.parse(await this.deps.blobs.getText(blob)) as StoredAgentRun;
  }

  /** `GET /_emu/invocations/{id}/agent`. */
  async run(rec: InvocationRecord): Promise<AgentRun> {
    const [stored, providerCalls] = await Promise.all([this.read(rec), this.opts.providerCalls?.(rec.id) ?? Promise.resolve([])]);
    return {
      invocation_id: rec.id,
      framework: stored.framework,
      graph: stored.graph,
      steps: stored.steps,
      provider_calls: providerCalls,
      live: rec.status === 'running' || rec.status === 'queued',
      truncated: stored.truncated,
    };
  }
}
