import { z } from 'zod';

/**
 * The runner protocol: NDJSON frames on fd 3, one JSON object per line, both directions. The same
 * frames travel over a local pipe or through a remote agent (Lima). `id` names an invocation; `cid`
 * names one host call within it.
 *
 * executor → runner:  load (spares only), invoke, reply
 * runner → executor:  preloaded (spares only, once, before load), ready | init_error (once, after loading the bundle), then per invocation:
 *                     log* chunk* call* step* graph* … result | error
 */

/**
 * Host calls, as the libraries (@svc/store, @svc/integrations, svc.store, svc.integrations) make them.
 * Optional args are left out when the snippet did not give them (never sent as null). Reply `value`s the
 * libraries expect (they hand them to the snippet as they are):
 *   store.get          {key}                                   → the value, or null when missing/expired
 *   store.set          {key, value, ttl_seconds?}              → null
 *   store.delete       {key}                                   → true when a live key was removed, else false
 *   store.list         {prefix}  ('' = all)                    → an array (null reads as [])
 *   integrations.call  {name, method, path, query?, headers?, body?} → {status, headers, body}
 * A failed call is `{ok:false, error:{code, message}}`; the libraries raise it as an error carrying `code`.
 */
export const HostOp = z.enum(['store.get', 'store.set', 'store.delete', 'store.list', 'integrations.call']);
export type HostOp = z.infer<typeof HostOp>;

// ---- executor → runner -----------------------------------------------------------------------------

export const InvokeFrame = z.object({
  t: z.literal('invoke'),
  id: z.string(),
  input: z.record(z.string(), z.unknown()),
  /** Secrets (and SVC_* facts) to set in process.env / os.environ before the handler runs; variables
   * set by the previous invocation and absent here are removed. */
  env: z.record(z.string(), z.string()),
});

export const ReplyFrame = z.object({
  t: z.literal('reply'),
  cid: z.string(),
  ok: z.boolean(),
  value: z.unknown().optional(),
  /** `status` and `body`: an integration call the remote API answered with an HTTP error. */
  error: z.object({ code: z.string(), message: z.string(), status: z.number().int().optional(), body: z.unknown().optional() }).optional(),
});

/** To a spare runner (started without --entry): load this entry of the bundle dir, then answer ready | init_error. */
export const LoadFrame = z.object({ t: z.literal('load'), entry: z.string().min(1) });

export const ToRunner = z.discriminatedUnion('t', [InvokeFrame, ReplyFrame, LoadFrame]);
export type ToRunner = z.infer<typeof ToRunner>;

// ---- runner → executor -----------------------------------------------------------------------------

export const ReadyFrame = z.object({
  t: z.literal('ready'),
  /** ms the runner spent loading the bundle (imports included). */
  init_ms: z.number(),
  runtime: z.object({ name: z.enum(['bun', 'python']), version: z.string() }),
});

/**
 * A spare (started without --entry) is up, and a framework spare (--preload) has imported its framework
 * (executor/import-profile.ts): ms the imports took, those that failed (left to the snippet), and (Python) the
 * top-level modules they added. The host caps a spare and hands it a bundle only after this frame.
 */
export const PreloadedFrame = z.object({
  t: z.literal('preloaded'),
  ms: z.number(),
  failed: z.array(z.string()).optional(),
  modules: z.array(z.string()).optional(),
  /** The framework's warm-up after the imports (executor/import-profile.ts `warmup`): how long, and why it failed. */
  warmup_ms: z.number().optional(),
  warmup_failed: z.string().optional(),
});

/** The bundle could not be loaded (syntax error, import error, no handler): every invocation fails with it. */
export const InitErrorFrame = z.object({
  t: z.literal('init_error'),
  message: z.string(),
  stack: z.string().optional(),
});

export const LogFrame = z.object({
  t: z.literal('log'),
  id: z.string(),
  stream: z.enum(['stdout', 'stderr']),
  data: z.string(),
});

export const ChunkFrame = z.object({ t: z.literal('chunk'), id: z.string(), data: z.unknown() });

export const CallFrame = z.object({
  t: z.literal('call'),
  id: z.string(),
  cid: z.string(),
  op: HostOp,
  args: z.record(z.string(), z.unknown()),
});

/** `logs_dropped`: bytes of stdout/stderr the runner dropped past its 1 MiB cap (absent when none). */
export const ResultFrame = z.object({
  t: z.literal('result'),
  id: z.string(),
  output: z.unknown(),
  logs_dropped: z.number().int().min(0).optional(),
});

export const ErrorFrame = z.object({
  t: z.literal('error'),
  id: z.string(),
  /** Always handler_error from a runner: the tenant's own code failed (or returned non-JSON). */
  code: z.literal('handler_error'),
  message: z.string(),
  stack: z.string().optional(),
  logs_dropped: z.number().int().min(0).optional(),
});

/**
 * What an agent framework did, from its own hooks inside the runner (LangGraph/LangChain callbacks, Mastra's
 * step and tool hooks): one frame when a step starts and one when it ends (same `step_id`). `at_ms` is ms since
 * the runner received the invoke frame (≈ the executor's run clock, the usage timeline's). `input`/`output` are
 * JSON made safe and capped by the runner (about 16 KiB each). The executor keeps at most MAX_STEPS_PER_RUN.
 */
export const StepFrame = z.object({
  t: z.literal('step'),
  id: z.string(),
  phase: z.enum(['start', 'end']),
  step_id: z.string().min(1).max(200),
  parent_id: z.string().max(200).nullable().optional(),
  kind: z.enum(['node', 'step', 'tool', 'llm']),
  framework: z.enum(['langgraph', 'mastra']),
  name: z.string().max(500),
  at_ms: z.number(),
  input: z.unknown().optional(),
  output: z.unknown().optional(),
  error: z.string().max(4000).nullable().optional(),
  meta: z.record(z.string(), z.unknown()).optional(),
});

/** A compiled LangGraph graph's shape (`get_graph()`), once per run and graph: nodes, and edges (conditional marked). */
export const GraphFrame = z.object({
  t: z.literal('graph'),
  id: z.string(),
  framework: z.literal('langgraph'),
  nodes: z.array(z.object({ id: z.string().max(500), name: z.string().max(500) })).max(1000),
  edges: z.array(z.object({ from: z.string().max(500), to: z.string().max(500), conditional: z.boolean() })).max(5000),
});

/** Steps kept per run (a `start` of a new step past it is dropped and counted: `steps_dropped`). */
export const MAX_STEPS_PER_RUN = 2000;

export const FromRunner = z.discriminatedUnion('t', [
  PreloadedFrame,
  ReadyFrame,
  InitErrorFrame,
  LogFrame,
  ChunkFrame,
  CallFrame,
  StepFrame,
  GraphFrame,
  ResultFrame,
  ErrorFrame,
]);
export type FromRunner = z.infer<typeof FromRunner>;
export type InvokeFrame = z.infer<typeof InvokeFrame>;
export type ReplyFrame = z.infer<typeof ReplyFrame>;
export type ReadyFrame = z.infer<typeof ReadyFrame>;
export type PreloadedFrame = z.infer<typeof PreloadedFrame>;
export type InitErrorFrame = z.infer<typeof InitErrorFrame>;
export type LogFrame = z.infer<typeof LogFrame>;
export type ChunkFrame = z.infer<typeof ChunkFrame>;
export type CallFrame = z.infer<typeof CallFrame>;
export type ResultFrame = z.infer<typeof ResultFrame>;
export type ErrorFrame = z.infer<typeof ErrorFrame>;
export type StepFrame = z.infer<typeof StepFrame>;
export type GraphFrame = z.infer<typeof GraphFrame>;

/** Longest frame line accepted (a chunk or result is JSON; 8 MiB leaves room over the 6 MiB body limit). */
export const MAX_FRAME_BYTES = 8 * 1024 * 1024;
