/**
 * Agent steps from Mastra's own hooks (the `step` frames of executor/protocol.ts), for the agent run view.
 *
 * Mastra 1.71 has no process-wide registry to listen on: its observability (tracing exporters) belongs to a
 * `Mastra` instance, and an `Agent` a snippet builds on its own has none. What every agent run does offer is
 * its per-call hooks: `onChunk` (each chunk: `tool-call`, `tool-result`, `tool-error`, …), `onStepFinish`
 * (each step's text, finish reason, usage, tool calls and results) and `onFinish`. So the runner
 * wraps `Agent.prototype.stream` and `.generate` (loaded by the runner only once the snippet has imported
 * `@mastra/core`, see runner.ts) to add those hooks to each call, after the snippet's own (which still run,
 * first, with the same arguments). Outside an invocation (a spare's warm-up) the wrapper adds nothing.
 *
 * What is reported: one `step` per agent step (start: when the call is made or the previous step finished;
 * end: its onStepFinish, with text, finish reason, usage and model), and one `tool` per tool call, a child of
 * its step (start: the `tool-call` chunk, when the model's call is complete and the tool is about to run;
 * end: its `tool-result` or `tool-error` chunk). Nothing here may fail a run: each hook swallows its errors.
 */

/** Each input/output is cut to about this much JSON (the frame carries it; the core keeps 2,000 steps). */
export const VALUE_CAP_CHARS = 16 * 1024;

export interface AgentHooksContext {
  /** The running invocation (null outside one): its id and the performance.now() it started at. */
  current(): { id: string; t0: number } | null;
  /** Writes one frame to fd 3 (the runner's writeLine of JSON). */
  send(frame: Record<string, unknown>): void;
  note(message: string): void;
}

/** A JSON-safe copy: cycles, functions, BigInts and symbols made printable; capped at VALUE_CAP_CHARS. */
export function safeValue(value: unknown): unknown {
  if (value === undefined) return null;
  const seen = new WeakSet<object>();
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (_k, v: unknown) => {
      if (typeof v === 'bigint') return v.toString();
      if (typeof v === 'function') return `[function ${(v as { name?: string }).name || 'anonymous'}]`;
      if (typeof v === 'symbol') return v.toString();
      if (v instanceof Error) return { name: v.name, message: v.message };
      if (v && typeof v === 'object') {
        if (seen.has(v)) return '[circular]';
        seen.add(v);
      }
      return v;
    });
  } catch (err) {
    return `[not JSON: ${err instanceof Error ? err.message : String(err)}]`;
  }
  if (text === undefined) return null;
  if (text.length <= VALUE_CAP_CHARS) return JSON.parse(text) as unknown;
  return { _truncated: true, chars: text.length, preview: text.slice(0, VALUE_CAP_CHARS) };
}

const HOOKED = Symbol.for('svc.agentSteps');

function describeError(err: unknown): string {
  if (err instanceof Error) return err.message.slice(0, 4000);
  if (typeof err === 'string') return err.slice(0, 4000);
  const v = safeValue(err);
  return (v === null ? 'the tool failed' : JSON.stringify(v)).slice(0, 4000);
}
let seq = 0;

type Hook = ((arg: unknown) => unknown) | undefined;

/** The snippet's hook first (its result awaited as Mastra would), then ours; ours never throws. */
function chain(theirs: Hook, ours: (arg: unknown) => void): (arg: unknown) => unknown {
  if (typeof theirs !== 'function') return ours;
  return (arg: unknown) => {
    const r = theirs(arg);
    if (r && typeof (r as PromiseLike<unknown>).then === 'function') {
      return (r as Promise<unknown>).finally(() => ours(arg));
    }
    ours(arg);
    return r;
  };
}

interface ToolChunk {
  type?: string;
  payload?: { toolCallId?: string; toolName?: string; args?: unknown; result?: unknown; error?: unknown; isError?: boolean };
}

interface StepResult {
  text?: string;
  finishReason?: string;
  usage?: unknown;
  toolCalls?: { payload?: { toolCallId?: string; toolName?: string; args?: unknown } }[];
  model?: { modelId?: string; provider?: string } | string;
  response?: { modelId?: string };
}

/** The hooks for one agent call within one invocation. */
function runHooks(ctx: AgentHooksContext, inv: { id: string; t0: number }, agentName: string, method: string, input: unknown) {
  const run = `m${++seq}`;
  const at = () => Math.round((performance.now() - inv.t0) * 1000) / 1000;
  const live = () => ctx.current()?.id === inv.id;
  const frame = (f: Record<string, unknown>) => {
    if (!live()) return; // the invocation ended (a stream read after it): nothing goes out under its name
    ctx.send({ t: 'step', id: inv.id, framework: 'mastra', ...f });
  };
  let stepNo = 0;
  let open: string | null = null;
  let nextStart = at();
  const tools = new Map<string, string>();
  const startStep = (withInput: boolean) => {
    stepNo++;
    open = `${run}-s${stepNo}`;
    frame({
      phase: 'start',
      step_id: open,
      parent_id: null,
      kind: 'step',
      name: `step ${stepNo}`,
      at_ms: nextStart,
      input: withInput ? safeValue(input) : null,
      meta: { agent: agentName, method, step: stepNo },
    });
  };
  const ensureStep = () => {
    if (!open) startStep(false);
    return open!;
  };
  const guard =
    <T>(fn: (arg: T) => void) =>
    (arg: unknown) => {
      try {
        fn(arg as T);
      } catch (err) {
        ctx.note(`an agent step hook failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    };
  startStep(true);
  return {
    onChunk: guard<ToolChunk>((chunk) => {
      const p = chunk?.payload ?? {};
      if (chunk?.type === 'tool-call') {
        const parent = ensureStep();
        const id = `${run}-t${p.toolCallId ?? tools.size + 1}`;
        tools.set(String(p.toolCallId), id);
        frame({
          phase: 'start',
          step_id: id,
          parent_id: parent,
          kind: 'tool',
          name: String(p.toolName ?? 'tool'),
          at_ms: at(),
          input: safeValue(p.args),
          meta: { tool_call_id: p.toolCallId ?? null },
        });
      } else if (chunk?.type === 'tool-result' || chunk?.type === 'tool-error') {
        const id = tools.get(String(p.toolCallId));
        if (!id) return;
        tools.delete(String(p.toolCallId));
        const failed = chunk.type === 'tool-error' || p.isError === true;
        frame({
          phase: 'end',
          step_id: id,
          kind: 'tool',
          name: String(p.toolName ?? ''),
          at_ms: at(),
          ...(failed ? { error: describeError(p.error ?? p.result) } : {}),
          output: safeValue(failed ? null : p.result),
        });
      } else if (chunk?.type === 'text-delta' || chunk?.type === 'reasoning-delta') {
        ensureStep();
      }
    }),
    onStepFinish: guard<StepResult>((s) => {
      const id = ensureStep();
      const model = typeof s.model === 'string' ? s.model : (s.model?.modelId ?? s.response?.modelId ?? null);
      frame({
        phase: 'end',
        step_id: id,
        kind: 'step',
        name: '',
        at_ms: at(),
        output: safeValue({
          text: s.text ?? '',
          tool_calls: (s.toolCalls ?? []).map((c) => ({ id: c.payload?.toolCallId, name: c.payload?.toolName, args: c.payload?.args })),
        }),
        meta: { finish_reason: s.finishReason ?? null, usage: safeValue(s.usage), model },
      });
      open = null;
      nextStart = at();
    }),
    onFinish: guard<unknown>(() => {
      if (open) frame({ phase: 'end', step_id: open, kind: 'step', name: '', at_ms: at() });
      open = null;
    }),
    /** The invocation is ending: what is still open ends here, as unfinished (an error, an abort, a stream left unread). */
    endOpen: guard<string>((why) => {
      for (const id of tools.values()) frame({ phase: 'end', step_id: id, kind: 'tool', name: '', at_ms: at(), error: why });
      tools.clear();
      if (open) frame({ phase: 'end', step_id: open, kind: 'step', name: '', at_ms: at(), error: why });
      open = null;
    }),
  };
}

/** The agent calls of the running invocation, to end what they left open (endInvocation). */
const running = new Set<{ endOpen: (why: unknown) => void }>();

/** Called by the runner before an invocation's last frame: ends the steps and tools still open, forgets the calls. */
export function endInvocation(): void {
  for (const run of running) run.endOpen('the invocation ended before this step finished');
  running.clear();
}

/**
 * Wraps `Agent.prototype.stream` and `.generate` once. A call made with options we already hooked (Mastra's
 * `generate` may go through `stream`) is passed on unchanged.
 */
export function installMastraHooks(Agent: unknown, ctx: AgentHooksContext): boolean {
  const proto = (Agent as { prototype?: Record<string | symbol, unknown> } | null)?.prototype;
  if (!proto || proto[HOOKED]) return false;
  Object.defineProperty(proto, HOOKED, { value: true });
  for (const method of ['stream', 'generate']) {
    const real = proto[method];
    if (typeof real !== 'function') continue;
    const wrapped = function (this: { name?: string; id?: string }, messages: unknown, options?: Record<string | symbol, unknown>) {
      const inv = ctx.current();
      if (!inv || (options && options[HOOKED])) return (real as (...a: unknown[]) => unknown).call(this, messages, options);
      let opts: Record<string | symbol, unknown> | undefined;
      try {
        const hooks = runHooks(ctx, inv, String(this?.name ?? this?.id ?? 'agent'), method, messages);
        opts = { ...(options ?? {}), [HOOKED]: true };
        opts.onChunk = chain(options?.onChunk as Hook, hooks.onChunk);
        opts.onStepFinish = chain(options?.onStepFinish as Hook, hooks.onStepFinish);
        opts.onFinish = chain(options?.onFinish as Hook, hooks.onFinish);
        // No onError: giving one would silence Mastra's own report of the error; endInvocation closes what is open.
        running.add(hooks);
      } catch (err) {
        ctx.note(`agent steps are off for this call: ${err instanceof Error ? err.message : String(err)}`);
        opts = options;
      }
      return (real as (...a: unknown[]) => unknown).call(this, messages, opts);
    };
    Object.defineProperty(wrapped, 'name', { value: method });
    proto[method] = wrapped;
  }
  return true;
}
