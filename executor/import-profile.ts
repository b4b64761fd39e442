import type { Runtime } from './types';

/**
 * Which framework a bundle imports, read from its files: it picks the spare runner a cold start claims
 * (executor/local-host.ts), one that has already imported that framework, or the plain one. It never changes
 * what the snippet does: a snippet runs the same on any spare (the framework's modules are the ones its own
 * imports would load), so a wrong guess costs only time — a framework snippet on the plain spare imports the
 * framework itself, under its version's CPU quota; a plain snippet on a framework spare would carry the
 * framework's memory, which is why the guess leans to `plain` when a bundle does not name one.
 */
export type ImportProfile = 'plain' | 'mastra' | 'langgraph';

export interface FrameworkProfile {
  profile: Exclude<ImportProfile, 'plain'>;
  /**
   * What the spare imports ahead, as snippet code would name it (Bun: package specifiers, resolved from the
   * app dir's parent, where /opt/svc/node_modules is; Python: module names). The examples'
   * (fixtures/workspace/snippets/mastra-agent, langgraph-agent, ai-token-stream, langgraph-stream) imports.
   */
  preload: readonly string[];
  /**
   * Imported ahead too: what the examples' first run imports lazily (the model client's HTTP stack, its chat
   * resources, tracers), found by listing the modules a first invocation of mastra-agent / langgraph-agent added.
   * Only imports, like the rest: the first run would have made them.
   */
  lazy: readonly string[];
  /**
   * The warm-up the spare runs after those imports, before any bundle (a file beside the runner in
   * executor/runtimes/<runtime>/): one agent run of our own against a model answered in process (no socket, no
   * egress), so what a first run does once (Bun: compile the framework's functions; Python: its lazy first-use
   * work) is done ahead. It leaves nothing a snippet could see but the framework's own caches (docs/parity.md).
   */
  warmup: string;
  /** A bundle imports the framework when one of its import specifiers (module names) matches. */
  imports: RegExp;
}

/** The one framework per runtime a spare can hold (the runtimes' pre-installed packages, executor/runtimes/manifest.json). */
export const FRAMEWORKS: Record<Runtime, FrameworkProfile> = {
  bun: {
    profile: 'mastra',
    preload: ['@mastra/core/agent', '@mastra/core/tools', 'ai', '@ai-sdk/openai', '@ai-sdk/openai-compatible', 'zod'],
    lazy: ['p-retry', 'p-map'],
    warmup: 'warmup-mastra.ts',
    imports: /^(?:@mastra\/[^/]+|ai|@ai-sdk\/[^/]+)(?:\/.*)?$/,
  },
  python: {
    profile: 'langgraph',
    preload: ['langgraph.graph', 'langchain.agents', 'langchain_core.messages', 'langchain_core.tools', 'langchain_openai'],
    lazy: [
      'openai.resources.chat.chat',
      'openai.resources.chat.completions.completions',
      'openai.resources.chat.completions.messages',
      'openai.types.chat.completions.message_list_params',
      'openai.lib._chat_completion_resources',
      'openai.lib.streaming.chat',
      'openai.pagination',
      'httpcore2',
      'httpcore2._backends.sync',
      'httpcore2._backends.anyio',
      'h11',
      'anyio.abc',
      'anyio.streams.tls',
      'truststore',
      'jiter',
      'langchain_core.tracers.context',
      'langchain_core.tracers.stdout',
      'langchain_core.tracers.run_collector',
      'langchain_core.messages.block_translators.langchain_v0',
    ],
    warmup: '_svc_warmup_langgraph.py',
    imports: /^(?:langgraph|langchain|langchain_[a-z0-9_]+|langsmith)(?:\..*)?$/,
  },
};

const JS_FILE = /\.(?:[cm]?[jt]sx?)$/;
const PY_FILE = /\.py$/;

/** `import … from 'x'`, `import 'x'`, `export … from 'x'`, `import('x')`, `require('x')`. */
const JS_SPECIFIERS = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)(['"])([^'"\n]+)\1/g;
/** `import a.b, c`, `from a.b import …` at the start of a line (indented too: imports inside a function count). */
const PY_IMPORT = /^[ \t]*import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)/gm;
const PY_FROM = /^[ \t]*from[ \t]+([\w.]+)[ \t]+import\b/gm;

/** The module names a file imports (a cheap scan: an import inside a comment or string is counted too — harmless, see above). */
export function importedModules(runtime: Runtime, source: string): string[] {
  const out: string[] = [];
  if (runtime === 'bun') {
    for (const m of source.matchAll(JS_SPECIFIERS)) out.push(m[2]!);
    return out;
  }
  for (const m of source.matchAll(PY_IMPORT)) for (const part of m[1]!.split(',')) out.push(part.trim().split(/\s+/)[0]!);
  for (const m of source.matchAll(PY_FROM)) out.push(m[1]!);
  return out;
}

/** The spare a bundle's cold start should claim: its runtime's framework when any of its source files imports it. */
export function importProfile(runtime: Runtime, files: Record<string, string>): ImportProfile {
  const fw = FRAMEWORKS[runtime];
  const source = runtime === 'bun' ? JS_FILE : PY_FILE;
  // A bundle that brings its own node_modules resolves its imports there, not to the preloaded copies.
  if (runtime === 'bun' && Object.keys(files).some((p) => p.split('/').includes('node_modules'))) return 'plain';
  for (const [path, text] of Object.entries(files)) {
    if (!source.test(path)) continue;
    if (importedModules(runtime, text).some((m) => fw.imports.test(m))) return fw.profile;
  }
  return 'plain';
}

/**
 * Python: the top-level module names a bundle defines (`x.py`, `x/…` at its root). Its directory is first on
 * sys.path, so in a fresh runner these would shadow same-named modules a framework imports; a spare that
 * already imported one of them would not see the bundle's: such a bundle takes the plain spare.
 */
export function topLevelModules(files: Record<string, string>): string[] {
  const names = new Set<string>();
  for (const path of Object.keys(files)) {
    const [first, ...rest] = path.split('/');
    if (!first) continue;
    if (rest.length) names.add(first);
    else if (PY_FILE.test(first)) names.add(first.slice(0, -3));
  }
  return [...names];
}
