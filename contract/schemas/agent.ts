import { z } from 'zod';

/**
 * What an agent run did, for the GUI's agent run view: the steps the framework reported from its own hooks
 * inside the runner (LangGraph callbacks, Mastra's step hooks), the graph's shape, and every call to an
 * OpenAI-compatible provider the egress log saw, assembled. `GET /_emu/invocations/{id}/agent`.
 */

export const AgentStep = z
  .object({
    id: z.string(),
    parent_id: z.string().nullable(),
    kind: z.enum(['node', 'step', 'tool', 'llm']).meta({
      description: 'node: a LangGraph node; step: a Mastra agent step; tool: a tool call; llm: a model call seen by the framework.',
    }),
    framework: z.enum(['langgraph', 'mastra']),
    name: z.string(),
    started_ms: z.number().meta({ description: 'Since the run started (the same clock as the usage timeline).' }),
    ended_ms: z.number().nullable(),
    input: z.unknown(),
    output: z.unknown(),
    error: z.string().nullable(),
    meta: z
      .record(z.string(), z.unknown())
      .meta({ description: 'Framework facts: LangGraph step number, triggers; Mastra finish reason, usage.' }),
  })
  .meta({ id: 'AgentStep' });

export const AgentGraph = z
  .object({
    nodes: z.array(z.object({ id: z.string(), name: z.string() })),
    edges: z.array(z.object({ from: z.string(), to: z.string(), conditional: z.boolean() })),
  })
  .meta({ id: 'AgentGraph', description: 'A LangGraph graph as compiled (`get_graph()`), including `__start__` and `__end__`.' });

export const ProviderToolCall = z.object({
  id: z.string().nullable(),
  name: z.string(),
  arguments: z.string().meta({ description: 'As the model sent them (JSON text, possibly partial when the call was cut).' }),
  result: z.string().nullable().meta({
    description:
      'What the tool answered, as a later request of the same run carried it back to the model (a `tool` message or a `function_call_output` item); null when none did.',
  }),
});

export const ProviderCall = z
  .object({
    egress_id: z.number().int(),
    host: z.string(),
    path: z.string(),
    api: z.enum(['chat.completions', 'responses', 'other']),
    model: z.string().nullable(),
    stream: z.boolean(),
    status: z.number().int().nullable(),
    started_ms: z.number(),
    first_token_ms: z.number().nullable().meta({ description: 'Time to first token, since the request left.' }),
    duration_ms: z.number(),
    text: z.string().meta({ description: 'The assistant text, assembled from the deltas of a streamed answer.' }),
    tool_calls: z.array(ProviderToolCall),
    usage: z.object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int() }).nullable(),
    truncated: z.boolean().meta({ description: 'The exchange was larger than what the egress log keeps.' }),
    error: z
      .string()
      .nullable()
      .meta({ description: 'The provider’s own error message, when it answered with an error status (or a fault rule did).' }),
  })
  .meta({ id: 'ProviderCall' });

export const AgentRun = z
  .object({
    invocation_id: z.string(),
    framework: z.enum(['langgraph', 'mastra']).nullable(),
    graph: AgentGraph.nullable(),
    steps: z.array(AgentStep),
    provider_calls: z.array(ProviderCall),
    live: z.boolean().meta({ description: 'The run is still going: more steps may come (`invocation.step` on /_emu/events).' }),
    truncated: z.boolean().meta({ description: 'More steps than are kept (2,000): the first ones are here.' }),
  })
  .meta({ id: 'AgentRun' });

export type AgentStep = z.infer<typeof AgentStep>;
export type AgentGraph = z.infer<typeof AgentGraph>;
export type ProviderCall = z.infer<typeof ProviderCall>;
export type ProviderToolCall = z.infer<typeof ProviderToolCall>;
export type AgentRun = z.infer<typeof AgentRun>;
