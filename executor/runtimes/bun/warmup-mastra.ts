/**
 * A Mastra spare's warm-up (executor/import-profile.ts names it; the runner runs it after the preload, before any
 * bundle is given): one agent run of our own, a tool call then a streamed answer, and the same as one `generate`,
 * against a chat-completions model answered in process by a fake `fetch` — no socket, no server, nothing through
 * the egress relay. JavaScriptCore compiles a function the first time it is called: run here, the framework's
 * functions that a tenant's first agent run calls are compiled already, and that run costs what a later one does.
 *
 * It leaves nothing a snippet could see beyond the framework's own state: it sets no env var, writes no file,
 * opens no socket, starts no timer that outlives it, and registers nothing (the agent and the tool are local
 * and dropped); its console output (a framework's warnings) is swallowed, not left in the spare's stderr.
 */
type Load = (specifier: string) => Promise<Record<string, unknown>>;

/** The parts of the framework's API the warm-up uses (its types are not visible to this project's checker). */
interface StreamResult {
  textStream: AsyncIterable<string>;
  finishReason: Promise<unknown>;
  toolCalls: Promise<unknown>;
  text: Promise<string>;
}
interface AgentLike {
  stream(prompt: string, opts: { maxSteps: number }): Promise<StreamResult>;
  generate(prompt: string, opts: { maxSteps: number }): Promise<unknown>;
}
interface Zod {
  object(shape: Record<string, unknown>): unknown;
  string(): { describe(text: string): unknown };
}
/** A chat-completions request body, as far as the fake model reads it. */
interface ChatBody {
  model?: unknown;
  stream?: unknown;
  messages?: { role?: unknown }[];
  tools?: { function?: { name?: unknown } }[];
}

const enc = new TextEncoder();

/** A chat-completions answer: a call of the first tool until a tool has answered, then a short text. */
function answer(body: ChatBody): { toolCall: { name: string; arguments: string } | null; text: string } {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const tool = Array.isArray(body.tools) ? body.tools[0]?.function?.name : undefined;
  if (typeof tool === 'string' && !messages.some((m) => m?.role === 'tool')) {
    return { toolCall: { name: tool, arguments: '{"city":"Paris"}' }, text: '' };
  }
  return { toolCall: null, text: 'It is sunny in Paris.' };
}

/** The fake model's `fetch`: a chat completion, streamed (SSE) or whole, as the OpenAI API answers. */
async function fakeFetch(_url: unknown, init?: { body?: unknown }): Promise<Response> {
  const body = JSON.parse(typeof init?.body === 'string' ? init.body : '{}') as ChatBody;
  const { toolCall, text } = answer(body);
  const base = {
    id: 'chatcmpl-warmup',
    created: 0,
    model: typeof body.model === 'string' ? body.model : 'warmup',
    system_fingerprint: 'fp_warmup',
  };
  const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
  const call = toolCall && { id: 'call_warmup', type: 'function', function: toolCall };
  if (body.stream !== true) {
    const message = call ? { role: 'assistant', content: null, tool_calls: [call] } : { role: 'assistant', content: text };
    const choice = { index: 0, message, logprobs: null, finish_reason: call ? 'tool_calls' : 'stop' };
    return Response.json({ ...base, object: 'chat.completion', choices: [choice], usage });
  }
  const chunk = (delta: unknown, finish: string | null = null) => ({
    ...base,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  });
  const chunks: unknown[] = [chunk({ role: 'assistant', content: call ? null : '' })];
  if (call) {
    chunks.push(
      chunk({ tool_calls: [{ index: 0, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }),
    );
    chunks.push(chunk({ tool_calls: [{ index: 0, function: { arguments: call.function.arguments } }] }));
    chunks.push(chunk({}, 'tool_calls'));
  } else {
    for (const word of text.split(/(?= )/)) chunks.push(chunk({ content: word }));
    chunks.push(chunk({}, 'stop'));
  }
  chunks.push({ ...base, object: 'chat.completion.chunk', choices: [], usage });
  const frames = [...chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`), 'data: [DONE]\n\n'];
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = frames.shift();
      if (next === undefined) controller.close();
      else controller.enqueue(enc.encode(next));
    },
  });
  return new Response(stream, { headers: { 'content-type': 'text/event-stream' } });
}

export async function warmUp(load: Load): Promise<void> {
  const { Agent } = (await load('@mastra/core/agent')) as { Agent: new (config: Record<string, unknown>) => AgentLike };
  const { createTool } = (await load('@mastra/core/tools')) as { createTool: (config: Record<string, unknown>) => unknown };
  const { createOpenAICompatible } = (await load('@ai-sdk/openai-compatible')) as {
    createOpenAICompatible: (opts: Record<string, unknown>) => (model: string) => unknown;
  };
  const { z } = (await load('zod')) as { z: Zod };
  const tool = createTool({
    id: 'get-weather',
    description: 'The weather forecast for a city',
    inputSchema: z.object({ city: z.string().describe("The city's name") }),
    execute: ({ city }: { city: string }) => Promise.resolve({ city, forecast: 'sunny' }),
  });
  const provider = createOpenAICompatible({ name: 'openai', baseURL: 'http://warmup.invalid/v1', apiKey: 'warmup', fetch: fakeFetch });
  const agent = new Agent({
    id: 'warmup-agent',
    name: 'warmup-agent',
    instructions: 'You answer questions about the weather. Use the get-weather tool.',
    model: provider('warmup-model'),
    tools: { tool },
  });
  const result = await agent.stream('What is the weather in Paris?', { maxSteps: 3 });
  for await (const token of result.textStream) void token;
  await result.finishReason;
  await result.toolCalls;
  await result.text;
  await agent.generate('What is the weather in Paris?', { maxSteps: 3 });
}
