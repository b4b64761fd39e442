import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { NAME_RE } from '../../contract/schemas/common';
import { FlagError, oneOf } from './flags';
import { runningEmulators } from './locate';

/**
 * `svc-emu init [DIR] --runtime bun|python --template hello|mastra-agent|langgraph-agent [--name NAME]`:
 * writes `DIR/snippets/<name>/` (the handler file and a snippet.json with limits that suit it) in the
 * workspace layout the loader watches (docs/contract.md, "Workspace loader"), so an emulator watching DIR
 * makes it a version at once. It never overwrites: an existing folder of that name is refused.
 */
export const INIT_OPTIONS = {
  runtime: { type: 'string' },
  template: { type: 'string' },
  name: { type: 'string' },
} as const;

export const INIT_USAGE = `  svc-emu init [DIR] [--template hello|mastra-agent|langgraph-agent] [--runtime bun|python] [--name NAME]
                                 (writes DIR/snippets/NAME/, DIR defaults to .; agents read the OPENAI_* secrets)`;

const TEMPLATES = ['hello', 'mastra-agent', 'langgraph-agent'] as const;
const RUNTIMES = ['bun', 'python'] as const;
type Template = (typeof TEMPLATES)[number];
type Runtime = (typeof RUNTIMES)[number];

export interface InitIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  cwd: string;
}

/** A failure that is not a usage error (the folder exists): exit 1. */
class InitRefused extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export async function runInit(args: string[], values: Record<string, unknown>, io: InitIO): Promise<number> {
  const json = values.json === true;
  if (args.length > 1) throw new FlagError(`unexpected argument '${args[1]}' (usage: svc-emu init [DIR] --template T --runtime R)`);
  const template = oneOf('template', (values.template as string | undefined) ?? 'hello', TEMPLATES);
  const fixed: Runtime | null = template === 'mastra-agent' ? 'bun' : template === 'langgraph-agent' ? 'python' : null;
  const runtime = values.runtime === undefined ? (fixed ?? 'bun') : oneOf('runtime', values.runtime as string, RUNTIMES);
  if (fixed && runtime !== fixed) {
    throw new FlagError(
      `--template ${template} is a ${fixed === 'bun' ? 'Bun' : 'Python'} snippet: drop --runtime ${runtime}${fixed === 'bun' ? ', or use --template langgraph-agent' : ', or use --template mastra-agent'}`,
    );
  }
  const name = (values.name as string | undefined) ?? (template === 'hello' ? (runtime === 'bun' ? 'hello' : 'hello-python') : template);
  if (!NAME_RE.test(name))
    throw new FlagError(`--name: '${name}' is not a snippet name (1–63 characters of a-z, 0-9 and "-", starting with a letter or digit)`);

  const workspace = resolve(io.cwd, args[0] ?? '.');
  const folder = join(workspace, 'snippets', name);
  try {
    if (existsSync(folder)) {
      throw new InitRefused(
        'exists',
        `${relative(io.cwd, folder) || folder} already exists: nothing was written. Choose another --name, or remove that folder first.`,
      );
    }
    const files = templateFiles(template, runtime, name);
    await mkdir(folder, { recursive: true });
    for (const [file, text] of Object.entries(files)) await writeFile(join(folder, file), text, { flag: 'wx' });
    const watcher = (await runningEmulators().catch(() => [])).find((r) => r.workspace && resolve(r.workspace) === workspace);
    const written = Object.keys(files).map((f) => join('snippets', name, f));
    if (json) {
      io.stdout(
        JSON.stringify({ name, runtime, template, workspace, folder, files: written, watched_by: watcher ? watcher.url : null }) + '\n',
      );
      return 0;
    }
    const lines = [`created ${name} (${runtime}, template ${template}) in ${workspace}:`, ...written.map((f) => `  ${f}`)];
    const tryIt = `svc-emu invoke ${name} --data '${template === 'hello' ? '{"name":"Ada"}' : '{"prompt":"How many words are in this sentence?"}'}'`;
    if (watcher) lines.push(`The emulator at ${watcher.url} watches this folder: ${name} is loading now. Try: ${tryIt}`);
    else
      lines.push(
        `No running emulator watches ${workspace}: start one with \`svc-emu serve --workspace ${relative(io.cwd, workspace) || '.'}\` (or \`npm start\` there), then: ${tryIt}`,
      );
    if (template !== 'hello')
      lines.push(
        'The agent calls an OpenAI-compatible model named by tenant secrets: OPENAI_API_KEY, OPENAI_BASE_URL (optional) and OPENAI_MODEL (the GUI’s Secrets page, or PUT /v1/secrets/NAME).',
      );
    io.stdout(lines.join('\n') + '\n');
    return 0;
  } catch (err) {
    if (!(err instanceof InitRefused)) throw err;
    if (json) io.stdout(JSON.stringify({ code: err.code, detail: err.message, folder }) + '\n');
    else io.stderr(`svc-emu: ${err.message}\n`);
    return 1;
  }
}

const json = (v: unknown) => JSON.stringify(v, null, 2) + '\n';

/** The files of a template: the handler, and snippet.json with limits that suit it (agents need 512 MB). */
export function templateFiles(template: Template, runtime: Runtime, name: string): Record<string, string> {
  if (template === 'hello' && runtime === 'bun') {
    return {
      'index.ts': `// ${name}: a Bun snippet (svc-emu init). \`handler\` gets the invoke request's body; what it returns is the
// output. console.log lines are the invocation's logs (svc-emu logs --follow shows them as runs end).
export default async function handler(input: { name?: string }) {
  const name = input.name ?? 'world';
  console.log(\`greeting \${name}\`);
  return { message: \`Hello, \${name}!\` };
}
`,
      'snippet.json': json({
        runtime: 'bun',
        description: 'Says hello (svc-emu init)',
        timeout_ms: 10000,
        max_memory_mb: 128,
        max_cpu_percent: 10,
      }),
    };
  }
  if (template === 'hello') {
    return {
      'main.py': `# ${name}: a Python snippet (svc-emu init). \`handler\` gets the invoke request's body as a dict; what it
# returns is the output. print() lines are the invocation's logs (svc-emu logs --follow shows them as runs end).


def handler(input):
    name = input.get("name") or "world"
    print(f"greeting {name}")
    return {"message": f"Hello, {name}!"}
`,
      'snippet.json': json({
        runtime: 'python',
        description: 'Says hello from Python (svc-emu init)',
        timeout_ms: 10000,
        max_memory_mb: 128,
        max_cpu_percent: 10,
      }),
    };
  }
  // Agents: a framework's memory is the snippet's memory (Mastra ~120 MB, LangGraph more), and a model call
  // takes seconds; the full CPU so start-up and the framework's work are not throttled to a crawl.
  const agentLimits = { timeout_ms: 60000, max_memory_mb: 512, max_cpu_percent: 100 };
  if (template === 'mastra-agent') {
    return {
      'index.ts': `// ${name}: a Mastra agent with one tool (svc-emu init). Mastra and the AI SDK are pre-installed in the Bun
// runtime. The model is any OpenAI-compatible API (chat completions) named by tenant secrets:
// OPENAI_API_KEY, OPENAI_BASE_URL (optional) and OPENAI_MODEL.
//
// A generator: in stream mode each text delta of the answer is one \`event: chunk\` { token }; the return value
// (the answer and the tool calls made) is the output, which is all a sync invocation gets.
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { z } from 'zod';

const countWords = createTool({
  id: 'count-words',
  description: 'Counts the words of a text',
  inputSchema: z.object({ text: z.string().describe('The text to count') }),
  execute: async ({ text }) => ({ words: text.split(/\\s+/).filter(Boolean).length }),
});

function agent() {
  const provider = createOpenAICompatible({
    name: 'openai',
    baseURL: process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1',
    apiKey: process.env.OPENAI_API_KEY,
  });
  return new Agent({
    id: '${name}',
    name: '${name}',
    instructions: 'You answer questions about texts. Use the count-words tool to count words.',
    model: provider(process.env.OPENAI_MODEL ?? 'gpt-4o-mini'),
    tools: { countWords },
  });
}

export default async function* handler(input: { prompt?: string }) {
  const result = await agent().stream(input.prompt ?? 'How many words are in "the quick brown fox"?', { maxSteps: 3 });
  for await (const token of result.textStream) yield { token };
  // A provider error does not throw out of the stream (it just ends): fail the invocation with it.
  await result.finishReason;
  if (result.error) throw result.error;
  const calls = await result.toolCalls;
  return {
    answer: await result.text,
    tool_calls: calls.map((c) => ({ tool: c.payload.toolName, args: c.payload.args })),
  };
}
`,
      'snippet.json': json({ runtime: 'bun', description: 'A Mastra agent with a count-words tool (svc-emu init)', ...agentLimits }),
    };
  }
  return {
    'main.py': `# ${name}: a LangGraph agent with one tool (svc-emu init). LangGraph and LangChain are pre-installed in the
# Python runtime: \`create_agent\` builds the graph (a model node and a tools node), \`ChatOpenAI\` is the model:
# any OpenAI-compatible API named by tenant secrets: OPENAI_API_KEY, OPENAI_BASE_URL (optional), OPENAI_MODEL.
#
# A generator: in stream mode each token of the model's answer is one \`event: chunk\` {"token": …}; the
# return value (the answer and the tool calls made) is the output, which is all a sync invocation gets.
import os

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI


@tool
def count_words(text: str) -> dict:
    """Counts the words of a text."""
    return {"words": len(text.split())}


def agent():
    model = ChatOpenAI(
        model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
        base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=os.environ.get("OPENAI_API_KEY"),
    )
    return create_agent(model, tools=[count_words], system_prompt="You answer questions about texts. Use count_words to count words.")


def handler(input):
    question = input.get("prompt") or 'How many words are in "the quick brown fox"?'
    answer, calls = "", []
    stream = agent().stream({"messages": [{"role": "user", "content": question}]}, stream_mode=["messages", "updates"])
    for mode, data in stream:
        if mode == "messages":  # token by token, as the model produces them
            message, meta = data
            if isinstance(message, AIMessageChunk) and message.content and meta.get("langgraph_node") == "model":
                answer += message.content
                yield {"token": message.content}
        else:  # a node finished: the model's whole message, with its tool calls
            for update in data.values():
                for message in (update or {}).get("messages", []):
                    if isinstance(message, AIMessage):
                        calls += [{"tool": c["name"], "args": c["args"]} for c in message.tool_calls]
    return {"answer": answer, "tool_calls": calls}
`,
    'snippet.json': json({ runtime: 'python', description: 'A LangGraph agent with a count_words tool (svc-emu init)', ...agentLimits }),
  };
}
