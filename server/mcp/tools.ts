import { mkdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { operations as ops } from '../../contract';
import { ProblemError, type RawReply } from '../../contract/client';
import { InboxDelivery, InboxParams } from '../../contract/schemas/inbox';
import { EgressEntry } from '../../contract/schemas/egress';
import { INVOCATION_STATUSES, InvokeHeaders, InvokeParams, LimitOverrides, OUTCOMES } from '../../contract/schemas/invocations';
import { REPORT_MAX_INVOCATIONS } from '../../contract/schemas/report';
import { CreateSnippet, CreateVersion, VERSION_MAX } from '../../contract/schemas/snippets';
import { ResourceName, Runtime } from '../../contract/schemas/common';
import { McpToolError, whyUnreachable, type CoreConnection } from './connection';

/**
 * The tools of `svc-emu mcp`, in one list (`MCP_TOOLS`): docs/mcp.md describes each, and
 * test/mcp/mcp.test.ts holds the two to the same names. Each tool's input is a zod object built from the
 * contract's own schemas (contract/schemas/*), so an agent's arguments are checked as the core checks them;
 * each answers a short summary for people plus the JSON of `structuredContent`, and each failure is a
 * `McpToolError` the server turns into an `isError` result with a message saying what to do.
 */

export interface ToolOutput {
  /** One or a few lines, first in the text content. */
  summary: string;
  /** The tool's answer as JSON (structuredContent, and the text content's JSON). */
  data: Record<string, unknown>;
  /** More content items (a resource link to a written file). */
  extra?: { type: 'resource_link'; uri: string; name: string; mimeType?: string; description?: string }[];
}

/** Per MCP session: the per-run limit overrides `set_run_limits` chose (sent with every `invoke` as X-Emu-Limits). */
export interface McpSession {
  /** Overrides for every snippet (`*`) and per snippet name; a call's own `limits` win over both. */
  runLimits: Map<string, LimitOverrides>;
}
type LimitOverrides = z.infer<typeof LimitOverrides>;

export interface ToolContext {
  connect(): Promise<CoreConnection>;
  session: McpSession;
  /** Where relative paths (a report's `path`) resolve. */
  cwd: string;
}

export interface McpTool<S extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  input: S;
  readOnly: boolean;
  run(args: z.output<S>, ctx: ToolContext): Promise<ToolOutput>;
}

const tool = <S extends z.ZodObject>(t: McpTool<S>): McpTool => t;

// ---- shared argument shapes (from the contract) -----------------------------------------------------

const SnippetRef = InvokeParams.shape.snippet.max(64).describe('The snippet’s name (or its id, snp_…).');
const EnvName = ResourceName.describe('An environment: dev, staging, prod, or one created with POST /v1/environments.');
const VersionArg = z.number().int().min(1).max(VERSION_MAX);
const InvocationIdArg = z
  .string()
  .regex(/^inv_[0-9A-Za-z]{1,64}$/, 'must be an invocation id (inv_…)')
  .describe('An invocation id (inv_…), as invoke answers it.');
/** X-Emu-Limits' values are at most nine digits (LIMIT_OVERRIDES_RE in contract/schemas/invocations.ts). */
const OVERRIDE_MAX = 999_999_999;
const OverrideShape = {
  timeout_ms: LimitOverrides.shape.timeout_ms.unwrap().max(OVERRIDE_MAX).optional().describe('Wall-clock limit of the run, ms.'),
  max_memory_mb: LimitOverrides.shape.max_memory_mb.unwrap().max(OVERRIDE_MAX).optional().describe('Memory limit of the sandbox, MB.'),
  max_cpu_percent: LimitOverrides.shape.max_cpu_percent.unwrap().max(OVERRIDE_MAX).optional().describe('CPU cap, percent of one CPU.'),
};
const LimitsArg = z
  .object(OverrideShape)
  .strict()
  .describe('Per-run limit overrides (the emulator’s X-Emu-Limits, admin only): any of timeout_ms, max_memory_mb, max_cpu_percent.');
const WaitMs = z.number().int().min(0).max(120_000);

// ---- helpers ------------------------------------------------------------------------------------------

/** A call to the core; a request that got no answer is a tool error saying so. */
async function reach<T>(conn: CoreConnection, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof ProblemError || err instanceof McpToolError) throw err;
    throw new McpToolError(`the emulator at ${conn.url} did not answer (${whyUnreachable(err)}); is it still running?`, 'unreachable');
  }
}

/** A non-2xx answer as a tool error: what was being done, the core's detail, status and problem code, each field error. */
function refused(reply: { status: number; body?: unknown; text: string }, doing: string): McpToolError {
  const p = (reply.body && typeof reply.body === 'object' ? reply.body : {}) as Record<string, unknown>;
  const code = typeof p.code === 'string' ? p.code : `http_${reply.status}`;
  const detail = typeof p.detail === 'string' ? p.detail : reply.text.trim().slice(0, 500) || `HTTP ${reply.status}`;
  const lines = [`${doing}: ${detail} (${reply.status} ${code})`];
  if (Array.isArray(p.errors))
    for (const e of p.errors as { location?: string; message?: string }[]) lines.push(`  ${e.location ?? ''}: ${e.message ?? ''}`);
  return new McpToolError(lines.join('\n'), code, { status: reply.status, problem: p });
}

const ok = (reply: RawReply, doing: string, ...statuses: number[]) => {
  if (!(statuses.length ? statuses : [200]).includes(reply.status)) throw refused(reply, doing);
  return reply;
};

/** A value kept whole up to `max` characters of JSON, else a preview that says so. */
function clip(value: unknown, max = 20_000): unknown {
  if (value === undefined) return null;
  const text = JSON.stringify(value);
  if (text === undefined || text.length <= max) return value;
  return { truncated: true, json_chars: text.length, preview: text.slice(0, 2_000) };
}

/** The last `max` characters of a log, marked when cut. */
function tail(text: string, max: number): { text: string; cut: number } {
  return text.length <= max ? { text, cut: 0 } : { text: text.slice(text.length - max), cut: text.length - max };
}

const limitsHeader = (l: LimitOverrides) =>
  Object.entries(l)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');

interface PageBody<T> {
  data: T[];
  next_cursor: string | null;
}

async function allPages<T>(conn: CoreConnection, doing: string, page: (cursor: string | undefined) => Promise<RawReply>): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 100; i++) {
    const reply = ok(await reach(conn, () => page(cursor)), doing);
    const body = reply.body as PageBody<T>;
    out.push(...body.data);
    if (!body.next_cursor) break;
    cursor = body.next_cursor;
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every 100 ms until it answers something, or `waitMs` passed (then its last answer). */
async function waitFor<T>(waitMs: number, check: () => Promise<{ done: boolean; value: T }>): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const r = await check();
    if (r.done || Date.now() >= deadline) return r.value;
    await sleep(Math.min(100, Math.max(0, deadline - Date.now())));
  }
}

// ---- list_snippets ------------------------------------------------------------------------------------

interface SnippetRow {
  id: string;
  name: string;
  runtime: string;
  description: string;
  latest_version: number | null;
  deployments: Record<string, number>;
}

const listSnippets = tool({
  name: 'list_snippets',
  title: 'List snippets',
  description:
    'Lists the local tenant’s snippets: name, runtime (bun|python), latest version, which version each environment runs, and — for snippets loaded from the watched workspace folder (snippets/<name>/) — the loader’s state and the last load error with file and line (a refused save keeps the previous version serving). Start here to learn what exists before deploy or invoke.',
  input: z.object({}).strict(),
  readOnly: true,
  async run(_args, ctx) {
    const conn = await ctx.connect();
    const snippets = await allPages<SnippetRow>(conn, 'listing the snippets', (cursor) =>
      conn.v1.send(ops.listSnippets, { query: { limit: '1000', ...(cursor ? { cursor } : {}) } }),
    );
    const ws = await reach(conn, () => conn.admin.send(ops.emuWorkspace, {}));
    const folders =
      ws.status === 200
        ? (ws.body as { folders: { snippet: string; folder: string; state: string; error: unknown }[]; workspace: string | null })
        : null;
    const rows = snippets
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((s) => {
        const f = folders?.folders.find((x) => x.snippet === s.name);
        return {
          name: s.name,
          id: s.id,
          runtime: s.runtime,
          description: s.description,
          latest_version: s.latest_version,
          deployments: s.deployments,
          workspace: f ? { folder: f.folder, state: f.state, error: f.error } : null,
        };
      });
    const errors = (folders?.folders ?? []).filter((f) => f.error);
    const summary =
      rows.length === 0
        ? 'No snippets yet: create one with the deploy tool (or save snippets/<name>/index.ts or main.py in the watched workspace).'
        : rows
            .map(
              (r) =>
                `${r.name} (${r.runtime}) latest v${r.latest_version ?? '—'}; ${
                  Object.entries(r.deployments)
                    .map(([e, v]) => `${e} v${v}`)
                    .join(', ') || 'not deployed'
                }${r.workspace?.error ? `; workspace load error` : ''}`,
            )
            .join('\n');
    return {
      summary: `${rows.length} snippet${rows.length === 1 ? '' : 's'}${errors.length ? `, ${errors.length} with a workspace load error` : ''}:\n${summary}`,
      data: { url: conn.url, workspace: folders?.workspace ?? null, snippets: rows },
    };
  },
});

// ---- list_versions ------------------------------------------------------------------------------------

const listVersions = tool({
  name: 'list_versions',
  title: 'List versions of a snippet',
  description:
    'Lists a snippet’s versions (newest first) with their limits (timeout_ms, max_memory_mb, max_cpu_percent), entrypoint, files, source (api or workspace) and which environment runs which version. Give `version` to read that one version with its files’ contents.',
  input: z
    .object({
      snippet: SnippetRef,
      version: VersionArg.optional().describe('Read this version with the contents of its files.'),
    })
    .strict(),
  readOnly: true,
  async run(args, ctx) {
    const conn = await ctx.connect();
    const deployments = ok(
      await reach(conn, () => conn.v1.send(ops.listDeployments, { params: { id: args.snippet } })),
      `reading the snippet ${args.snippet}`,
    ).body as { data: { env: string; version: number | null }[] };
    const runs = Object.fromEntries(deployments.data.filter((d) => d.version !== null).map((d) => [d.env, d.version]));
    if (args.version !== undefined) {
      const v = ok(
        await reach(conn, () => conn.v1.send(ops.getVersion, { params: { id: args.snippet, version: String(args.version) } })),
        `reading version ${args.version} of ${args.snippet}`,
      ).body as Record<string, unknown>;
      return {
        summary: `${args.snippet} v${args.version}: ${Object.keys((v.files as Record<string, string> | undefined) ?? {}).join(', ')}`,
        data: { snippet: args.snippet, deployments: runs, version: v },
      };
    }
    const versions = await allPages<Record<string, unknown>>(conn, `listing the versions of ${args.snippet}`, (cursor) =>
      conn.v1.send(ops.listVersions, { params: { id: args.snippet }, query: { limit: '1000', ...(cursor ? { cursor } : {}) } }),
    );
    const rows = versions.map((v) => ({
      version: v.version,
      created_at: v.created_at,
      source: v.source,
      entrypoint: v.entrypoint,
      files: ((v.manifest as { path: string }[] | undefined) ?? []).map((m) => m.path),
      timeout_ms: v.timeout_ms,
      max_memory_mb: v.max_memory_mb,
      max_cpu_percent: v.max_cpu_percent,
      environments: Object.entries(runs)
        .filter(([, n]) => n === v.version)
        .map(([e]) => e),
    }));
    return {
      summary: `${args.snippet}: ${rows.length} version${rows.length === 1 ? '' : 's'}${
        Object.keys(runs).length
          ? `; ${Object.entries(runs)
              .map(([e, n]) => `${e} runs v${n}`)
              .join(', ')}`
          : '; deployed nowhere'
      }`,
      data: { snippet: args.snippet, deployments: runs, versions: rows },
    };
  },
});

// ---- deploy -------------------------------------------------------------------------------------------

const DeployInput = z
  .object({
    snippet: ResourceName.describe('The snippet’s name; created when it does not exist yet (then give runtime, or files that say it).'),
    runtime: z
      .enum(Runtime.options)
      .optional()
      .describe('bun or python: needed only to create the snippet (else guessed from the entrypoint: .py → python, else bun).'),
    description: CreateSnippet.shape.description.describe('The snippet’s description, when it is created.'),
    ...CreateVersion.shape,
    env: EnvName.optional().describe(
      'Deploy the new version to this environment (dev, staging, prod, …). Omit to only create the version.',
    ),
  })
  .strict();

const deploy = tool({
  name: 'deploy',
  title: 'Create a version (and deploy it)',
  description:
    'Creates a new immutable version of a snippet from `code` (one file) or `files` (path → content; a Bun snippet exports `default async function handler(input)` from index.ts, a Python one defines `def handler(input)` in main.py), with optional limits (timeout_ms, max_memory_mb, max_cpu_percent; defaults 60000/200/10, above the tenant cap refused), and optionally deploys it to `env`. Creates the snippet when it does not exist. Code that does not compile or has no handler is refused with the error’s line. Then call invoke.',
  input: DeployInput,
  readOnly: false,
  async run(args, ctx) {
    const conn = await ctx.connect();
    const got = await reach(conn, () => conn.v1.send(ops.getSnippet, { params: { id: args.snippet } }));
    let created = false;
    if (got.status === 404) {
      const entry = args.entrypoint ?? (args.files ? Object.keys(args.files)[0] : undefined);
      const runtime = args.runtime ?? (entry?.endsWith('.py') ? 'python' : 'bun');
      ok(
        await reach(conn, () =>
          conn.v1.send(ops.createSnippet, {
            body: { name: args.snippet, runtime, ...(args.description !== undefined ? { description: args.description } : {}) },
          }),
        ),
        `creating the snippet ${args.snippet}`,
        201,
      );
      created = true;
    } else ok(got, `reading the snippet ${args.snippet}`);
    const body = {
      ...(args.code !== undefined ? { code: args.code } : {}),
      ...(args.files !== undefined ? { files: args.files } : {}),
      ...(args.entrypoint !== undefined ? { entrypoint: args.entrypoint } : {}),
      ...(args.timeout_ms !== undefined ? { timeout_ms: args.timeout_ms } : {}),
      ...(args.max_memory_mb !== undefined ? { max_memory_mb: args.max_memory_mb } : {}),
      ...(args.max_cpu_percent !== undefined ? { max_cpu_percent: args.max_cpu_percent } : {}),
    };
    const v = ok(
      await reach(conn, () => conn.v1.send(ops.createVersion, { params: { id: args.snippet }, body })),
      `creating a version of ${args.snippet}${created ? ' (the snippet was created; it has no version yet)' : ''}`,
      201,
    ).body as Record<string, unknown>;
    let deployment: Record<string, unknown> | null = null;
    if (args.env) {
      deployment = ok(
        await reach(conn, () =>
          conn.v1.send(ops.deploy, { params: { id: args.snippet, env: args.env! }, body: { version: v.version as number } }),
        ),
        `deploying ${args.snippet} v${String(v.version)} to ${args.env} (the version was created)`,
      ).body as Record<string, unknown>;
    }
    const { files: _files, ...version } = v;
    void _files;
    return {
      summary: `${created ? 'created snippet ' : ''}${args.snippet} v${String(v.version)} (timeout ${String(v.timeout_ms)} ms, ${String(v.max_memory_mb)} MB, ${String(v.max_cpu_percent)}% CPU)${
        deployment ? `, deployed to ${args.env}` : ', not deployed (invoke it with version, or deploy with env)'
      }`,
      data: { snippet_created: created, version, deployment },
    };
  },
});

// ---- set_run_limits -----------------------------------------------------------------------------------

const setRunLimits = tool({
  name: 'set_run_limits',
  title: 'Set per-run limit overrides (admin)',
  description:
    'Emulator-only operator power: sets the per-run limit overrides (timeout_ms, max_memory_mb, max_cpu_percent) that every following invoke in this MCP session sends as X-Emu-Limits with the admin token — for all snippets, or only `snippet`. They replace the version’s limits for those runs only (not above the host, never stored on the version); the record says `overridden`. Use it to reproduce a timeout or an OOM kill. `clear: true` removes them; an invoke’s own `limits` argument wins for that call. Answers the overrides now in force.',
  input: z
    .object({
      snippet: SnippetRef.optional().describe('Only for this snippet (default: every snippet).'),
      ...OverrideShape,
      clear: z.boolean().optional().describe('Remove the overrides (of `snippet`, or all when no snippet is given).'),
    })
    .strict(),
  readOnly: false,

  async run(args, ctx) {
    const key = args.snippet ?? '*';
    const limits: LimitOverrides = {
      ...(args.timeout_ms !== undefined ? { timeout_ms: args.timeout_ms } : {}),
      ...(args.max_memory_mb !== undefined ? { max_memory_mb: args.max_memory_mb } : {}),
      ...(args.max_cpu_percent !== undefined ? { max_cpu_percent: args.max_cpu_percent } : {}),
    };
    if (args.clear) {
      if (Object.keys(limits).length) throw new McpToolError('give either clear: true or limits to set, not both', 'validation_failed');
      if (args.snippet) ctx.session.runLimits.delete(key);
      else ctx.session.runLimits.clear();
    } else {
      if (!Object.keys(limits).length)
        throw new McpToolError('give at least one of timeout_ms, max_memory_mb, max_cpu_percent (or clear: true)', 'validation_failed');
      ctx.session.runLimits.set(key, { ...ctx.session.runLimits.get(key), ...limits });
    }
    const now = Object.fromEntries([...ctx.session.runLimits].map(([k, v]) => [k, v]));
    const lines = Object.entries(now).map(([k, v]) => `${k === '*' ? 'every snippet' : k}: ${limitsHeader(v)}`);
    return {
      summary: lines.length
        ? `per-run overrides sent with every invoke:\n${lines.join('\n')}`
        : 'no per-run overrides: runs use their version’s limits',
      data: { overrides: now },
    };
  },
});

// ---- invoke -------------------------------------------------------------------------------------------

const InvokeInput = z
  .object({
    snippet: SnippetRef,
    input: z.record(z.string(), z.unknown()).optional().describe('The handler’s input (a JSON object; default {}).'),
    mode: z
      .enum(['sync', 'async', 'stream'])
      .optional()
      .describe(
        'sync (default): wait for the result. async: answer the invocation id at once (read it with get_invocation). stream: read the SSE stream, summarised.',
      ),
    env: EnvName.optional().describe('Run the version deployed to this environment.'),
    version: VersionArg.optional().describe('Run this version (wins over env). Default: prod if deployed, else the latest.'),
    limits: LimitsArg.optional().describe(
      'This run’s limit overrides (X-Emu-Limits, admin only), over any set with set_run_limits: e.g. {"timeout_ms": 500} to reproduce a timeout.',
    ),
    callback_url: z
      .url()
      .optional()
      .describe('async: where the service POSTs the finished invocation record (signed per Standard Webhooks).'),
    callback_inbox: InboxParams.shape.name
      .optional()
      .describe('async: deliver the callback to the emulator’s own inbox of this name (read it with read_inbox) instead of callback_url.'),
    idempotency_key: InvokeHeaders.shape['idempotency-key'].describe(
      'A repeat with the same key within 24 h answers the earlier invocation.',
    ),
    chunks: z
      .number()
      .int()
      .min(0)
      .max(50)
      .optional()
      .describe('stream: how many of the first and of the last chunks to show (default 3).'),
  })
  .strict();

interface EmuRecord {
  id: string;
  snippet: string;
  version: number;
  env: string | null;
  mode: string;
  status: string;
  outcome: string | null;
  output: unknown;
  error: { code: string; message: string; stack?: string } | null;
  usage: { duration_ms: number; init_ms: number; cpu_ms: number; cpu_throttled_ms: number; peak_memory_mb: number } | null;
  limits: Record<string, number>;
  overridden: boolean;
  overrides: Record<string, number> | null;
  parity: { status: string; reasons: string[] };
  parity_warnings: string[];
  warm: boolean | null;
  queue_wait_ms: number | null;
  error_evidence: Record<string, unknown> | null;
  callback: Record<string, unknown> | null;
  callback_deliveries: unknown[];
  timeline: { t_ms: number; memory_mb: number; cpu_percent: number; throttled: boolean }[];
  logs_truncated: boolean;
  debug: unknown;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

async function readRecord(conn: CoreConnection, id: string): Promise<EmuRecord> {
  const reply = await reach(conn, () => conn.admin.send(ops.emuGetInvocation, { params: { id } }));
  if (reply.status === 404) throw new McpToolError(`invocation ${id} is unknown (or trimmed from the history)`, 'not_found');
  return ok(reply, `reading invocation ${id}`).body as EmuRecord;
}

const brief = (r: EmuRecord) => ({
  invocation_id: r.id,
  snippet: r.snippet,
  version: r.version,
  env: r.env,
  mode: r.mode,
  status: r.status,
  outcome: r.outcome,
  output: clip(r.output),
  error: r.error,
  usage: r.usage,
  limits: r.limits,
  overrides: r.overrides,
  parity_warnings: r.parity_warnings,
});

const invoke = tool({
  name: 'invoke',
  title: 'Invoke a snippet',
  description:
    'Runs a snippet over the production API (POST /v1/invoke/{snippet}) as the local tenant, in a real Bun or CPython sandbox under its limits. mode sync (default) answers the output or the failure (outcome handler_error with the message and stack, timeout, oom_killed, …) with usage; async answers the invocation id at once (give callback_inbox to have the signed callback land in read_inbox); stream reads the event stream and answers a summary: chunk count, the first and last chunks, the result or error, time to first chunk and total. `limits` (or set_run_limits) overrides this run’s limits. Follow with get_invocation for logs and evidence.',
  input: InvokeInput,
  readOnly: false,
  async run(args, ctx) {
    const conn = await ctx.connect();
    const mode = args.mode ?? 'sync';
    if ((args.callback_url || args.callback_inbox) && mode !== 'async')
      throw new McpToolError(
        'callback_url and callback_inbox are for mode async (sync and stream runs answer the caller directly)',
        'validation_failed',
      );
    if (args.callback_url && args.callback_inbox)
      throw new McpToolError('give callback_url or callback_inbox, not both', 'validation_failed');
    const overrides: LimitOverrides = { ...ctx.session.runLimits.get('*'), ...ctx.session.runLimits.get(args.snippet), ...args.limits };
    const limits = limitsHeader(overrides);
    const input: Record<string, unknown> = { ...args.input };
    if (args.callback_url) input.callback_url = args.callback_url;
    if (args.callback_inbox) input.callback_url = `${conn.url}/_emu/inbox/${args.callback_inbox}`;
    const headers: Record<string, string> = {
      ...(mode !== 'sync' ? { 'x-invoke-mode': mode } : {}),
      ...(args.idempotency_key ? { 'idempotency-key': args.idempotency_key } : {}),
      ...(limits ? { 'x-emu-limits': limits, 'x-emu-admin': conn.adminToken } : {}),
    };
    const request = {
      params: { snippet: args.snippet },
      query: { ...(args.env ? { env: args.env } : {}), ...(args.version !== undefined ? { version: String(args.version) } : {}) },
      body: input,
      headers,
    };
    const doing = `invoke ${args.snippet}${args.env ? ` (env ${args.env})` : ''}${args.version !== undefined ? ` (version ${args.version})` : ''}`;
    const t0 = performance.now();

    if (mode === 'stream') {
      const keep = args.chunks ?? 3;
      let stream;
      try {
        stream = await reach(conn, () => conn.v1.stream(ops.invoke, request));
      } catch (err) {
        if (err instanceof ProblemError) throw refused({ status: err.status, body: err.problem, text: err.text }, doing);
        throw err;
      }
      const first: unknown[] = [];
      const last: unknown[] = [];
      let count = 0;
      let firstChunkMs: number | null = null;
      let start: unknown = null;
      let end: { event: 'result' | 'error'; data: unknown } | null = null;
      try {
        for await (const e of stream) {
          if (e.event === 'start') start = e.data;
          else if (e.event === 'chunk') {
            count++;
            firstChunkMs ??= Math.round(performance.now() - t0);
            const data = clip(e.data.data, 4_000);
            if (first.length < keep) first.push(data);
            else if (keep > 0) {
              last.push(data);
              if (last.length > keep) last.shift();
            }
          } else if (e.event === 'result' || e.event === 'error') end = { event: e.event, data: e.data };
        }
      } catch (err) {
        throw new McpToolError(`${doing}: the stream broke after ${count} chunks (${whyUnreachable(err)})`, 'stream_broken');
      }
      const totalMs = Math.round(performance.now() - t0);
      const id = stream.headers.get('x-invocation-id') ?? (start as { invocation_id?: string } | null)?.invocation_id ?? null;
      const result = end?.event === 'result' ? (end.data as { output: unknown; usage: unknown }) : null;
      const error = end?.event === 'error' ? (end.data as { code: string; message: string }) : null;
      const data = {
        invocation_id: id,
        mode,
        version: Number(stream.headers.get('x-snippet-version')) || null,
        env: stream.headers.get('x-snippet-env'),
        chunks: count,
        first_chunks: first,
        last_chunks: last,
        omitted_chunks: Math.max(0, count - first.length - last.length),
        result: result ? { output: clip(result.output), usage: result.usage } : null,
        error,
        outcome: error ? error.code : end ? 'success' : null,
        timing: { first_chunk_ms: firstChunkMs, total_ms: totalMs },
        overrides: limits || null,
      };
      return {
        summary: `${doing} (stream) → ${error ? `${error.code}: ${error.message}` : end ? 'success' : 'ended without a result'}; ${count} chunk${count === 1 ? '' : 's'}, first after ${firstChunkMs ?? '—'} ms, ${totalMs} ms in all; invocation ${id ?? '?'}`,
        data,
      };
    }

    const reply = await reach(conn, () => conn.v1.send(ops.invoke, request));
    if (mode === 'async' && reply.status === 202) {
      const q = reply.body as { invocation_id: string; status: string; status_url: string };
      return {
        summary: `${doing} (async) → queued as ${q.invocation_id}; read it with get_invocation (wait_ms waits for the end)${args.callback_inbox ? `; its callback goes to read_inbox name ${args.callback_inbox}` : ''}`,
        data: { ...q, mode, callback_url: input.callback_url ?? null, overrides: limits || null },
      };
    }
    const id = reply.headers.get('x-invocation-id');
    if (!id) throw refused(reply, doing); // no run: unknown snippet, bad request, 429 …
    const record = await readRecord(conn, id);
    const out = brief(record);
    const ms = record.usage ? `${Math.round(record.usage.duration_ms)} ms` : `${Math.round(performance.now() - t0)} ms wall`;
    const head =
      record.outcome === 'success'
        ? `${doing} → success in ${ms}`
        : `${doing} → ${record.outcome ?? reply.status}: ${record.error?.message ?? ''}${record.error?.stack ? `\n${record.error.stack}` : ''}`;
    return {
      summary: `${head}\ninvocation ${id}, v${record.version}${record.env ? ` env ${record.env}` : ''}${limits ? `, overrides ${limits}` : ''}; logs and evidence: get_invocation`,
      data: { ...out, http_status: reply.status },
    };
  },
});

// ---- get_invocation -----------------------------------------------------------------------------------

/** One outbound call (contract/schemas/egress.ts). */
type EgressRow = z.infer<typeof EgressEntry>;

const failedCall = (e: EgressRow) => Boolean(e.error || e.refused || e.fault || (e.status !== null && e.status >= 400));

function egressCounts(rows: EgressRow[]) {
  const hosts: Record<string, number> = {};
  for (const r of rows) hosts[`${r.host}:${r.port}`] = (hosts[`${r.host}:${r.port}`] ?? 0) + 1;
  return {
    calls: rows.length,
    failed: rows.filter(failedCall).length,
    refused: rows.filter((r) => r.refused).length,
    faulted: rows.filter((r) => r.fault).length,
    bytes_out: rows.reduce((s, r) => s + r.bytes_out, 0),
    bytes_in: rows.reduce((s, r) => s + r.bytes_in, 0),
    hosts,
  };
}

function timelineSummary(t: EmuRecord['timeline']) {
  if (!t.length) return { samples: 0 };
  return {
    samples: t.length,
    span_ms: Math.round(t[t.length - 1]!.t_ms - t[0]!.t_ms),
    peak_memory_mb: Math.max(...t.map((s) => s.memory_mb)),
    max_cpu_percent: Math.max(...t.map((s) => s.cpu_percent)),
    mean_cpu_percent: Math.round((t.reduce((s, x) => s + x.cpu_percent, 0) / t.length) * 10) / 10,
    throttled_samples: t.filter((s) => s.throttled).length,
  };
}

const getInvocation = tool({
  name: 'get_invocation',
  title: 'Get an invocation with logs and evidence',
  description:
    'Reads one invocation with what explains it: status and outcome (success, handler_error, timeout, oom_killed, cancelled, failed), output, error with stack, usage (duration, init, CPU, throttling, peak memory), the limits it ran under and any per-run overrides, the outcome’s evidence (e.g. what the watchdog saw at an OOM kill), a summary of its memory/CPU timeline, parity status and parity warnings (where production would behave differently), its outbound calls counted by host, the callback’s deliveries, and the snippet’s stdout/stderr logs. wait_ms waits for a queued or running invocation to end first.',
  input: z
    .object({
      id: InvocationIdArg,
      logs: z.boolean().optional().describe('Include the logs (default true).'),
      log_chars: z
        .number()
        .int()
        .min(0)
        .max(1_000_000)
        .optional()
        .describe('At most this many of the logs’ last characters (default 20000).'),
      wait_ms: WaitMs.optional().describe('Wait up to this long for the invocation to end (default 0: read it as it is).'),
    })
    .strict(),
  readOnly: true,
  async run(args, ctx) {
    const conn = await ctx.connect();
    const r = await waitFor(args.wait_ms ?? 0, async () => {
      const rec = await readRecord(conn, args.id);
      return { done: rec.status !== 'queued' && rec.status !== 'running', value: rec };
    });
    const egress = await reach(conn, () => conn.admin.send(ops.emuListEgress, { query: { invocation: args.id } }));
    const calls = egress.status === 200 ? ((egress.body as { data: EgressRow[] }).data ?? []) : [];
    let logs: { text: string; truncated: boolean; omitted_chars: number } | null = null;
    let logsNote: string | null = null;
    if (args.logs !== false) {
      const l = await reach(conn, () => conn.v1.send(ops.getInvocationLogs, { params: { id: args.id } }));
      if (l.status === 200) {
        const body = l.body as { logs: string; truncated: boolean };
        const t = tail(body.logs, args.log_chars ?? 20_000);
        logs = { text: t.text, truncated: body.truncated, omitted_chars: t.cut };
      } else logsNote = `logs unreadable as the local tenant (${l.status}): the invocation belongs to another tenant`;
    }
    const data = {
      ...brief(r),
      created_at: r.created_at,
      started_at: r.started_at,
      finished_at: r.finished_at,
      warm: r.warm,
      queue_wait_ms: r.queue_wait_ms,
      overridden: r.overridden,
      parity: r.parity,
      error_evidence: r.error_evidence,
      timeline: timelineSummary(r.timeline),
      egress: egressCounts(calls),
      callback: r.callback,
      callback_deliveries: r.callback_deliveries,
      debug: r.debug ?? null,
      logs,
      ...(logsNote ? { logs_note: logsNote } : {}),
    };
    const lines = [
      `${r.id}: ${r.snippet} v${r.version}${r.env ? ` env ${r.env}` : ''} · ${r.mode} · ${r.outcome ?? r.status}${r.usage ? ` · ${Math.round(r.usage.duration_ms)} ms, peak ${r.usage.peak_memory_mb} MB` : ''}`,
    ];
    if (r.error) lines.push(`error ${r.error.code}: ${r.error.message}`);
    if (r.parity_warnings.length) lines.push(`parity warnings: ${r.parity_warnings.join('; ')}`);
    if (calls.length) lines.push(`outbound calls: ${calls.length} (${data.egress.failed} failed)`);
    if (logs)
      lines.push(`logs (${logs.text.length} chars${logs.omitted_chars ? `, ${logs.omitted_chars} earlier omitted` : ''}):\n${logs.text}`);
    return { summary: lines.join('\n'), data };
  },
});

// ---- list_invocations ---------------------------------------------------------------------------------

const listInvocations = tool({
  name: 'list_invocations',
  title: 'List recent invocations',
  description:
    'Lists the local tenant’s invocations, newest first — from any client: this agent, the GUI, the CLI, curl, async jobs — with snippet, version, env, mode, status, outcome, the error’s code and message, and duration. Filter by snippet, status or outcome (e.g. outcome timeout to find what timed out). Follow with get_invocation for one run’s logs and evidence.',
  input: z
    .object({
      snippet: SnippetRef.optional().describe('Only this snippet’s invocations.'),
      status: z.enum(INVOCATION_STATUSES).optional().describe('Only invocations in this status.'),
      outcome: z.enum(OUTCOMES).optional().describe('Only invocations that ended with this outcome.'),
      limit: z.number().int().min(1).max(200).optional().describe('At most this many (default 20).'),
    })
    .strict(),
  readOnly: true,
  async run(args, ctx) {
    const conn = await ctx.connect();
    const want = args.limit ?? 20;
    const rows: EmuRecord[] = [];
    let cursor: string | undefined;
    // The outcome is filtered here (/v1 filters by status): pages are read until enough match, 10 at most.
    for (let i = 0; i < 10 && rows.length < want; i++) {
      const page = ok(
        await reach(conn, () =>
          conn.v1.send(ops.listInvocations, {
            query: {
              limit: String(args.outcome ? 1000 : want),
              ...(args.snippet ? { snippet: args.snippet } : {}),
              ...(args.status ? { status: args.status } : {}),
              ...(cursor ? { cursor } : {}),
            },
          }),
        ),
        'listing the invocations',
      ).body as PageBody<EmuRecord>;
      rows.push(...page.data.filter((r) => !args.outcome || r.outcome === args.outcome));
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    const list = rows.slice(0, want).map((r) => ({
      id: r.id,
      snippet: r.snippet,
      version: r.version,
      env: r.env,
      mode: r.mode,
      status: r.status,
      outcome: r.outcome,
      error: r.error ? { code: r.error.code, message: r.error.message.split('\n')[0] } : null,
      duration_ms: r.usage ? Math.round(r.usage.duration_ms) : null,
      created_at: r.created_at,
    }));
    return {
      summary: list.length
        ? list
            .map(
              (r) =>
                `${r.id} ${r.snippet} v${r.version} · ${r.mode} · ${r.outcome ?? r.status}${r.duration_ms !== null ? ` · ${r.duration_ms} ms` : ''}${r.error && r.outcome !== 'success' ? ` · ${r.error.code}: ${r.error.message}` : ''}`,
            )
            .join('\n')
        : 'no invocations match',
      data: { invocations: list },
    };
  },
});

// ---- read_inbox ---------------------------------------------------------------------------------------

/** One delivery the inbox received (contract/schemas/inbox.ts). */
type Delivery = z.infer<typeof InboxDelivery>;

const readInbox = tool({
  name: 'read_inbox',
  title: 'Read the callback inbox',
  description:
    'Reads the emulator’s callback inbox: the deliveries a webhook sender POSTed to {emulator}/_emu/inbox/{name} (what invoke’s callback_inbox points an async run’s callback_url at), newest first, each with whether its Standard Webhooks signature verifies against the tenant’s signing secret, its webhook-id, the status the inbox answered, and the delivered invocation record. Without `name`, lists the inboxes. `invocation_id` keeps that invocation’s deliveries; wait_ms waits for a first matching one.',
  input: z
    .object({
      name: InboxParams.shape.name.optional().describe('The inbox (default: list every inbox).'),
      invocation_id: InvocationIdArg.optional().describe('Only deliveries of this invocation’s record.'),
      limit: z.number().int().min(1).max(200).optional().describe('At most this many deliveries (default 20).'),
      wait_ms: WaitMs.optional().describe('Wait up to this long for at least one matching delivery.'),
    })
    .strict(),
  readOnly: true,
  async run(args, ctx) {
    const conn = await ctx.connect();
    if (!args.name) {
      if (args.invocation_id || args.wait_ms)
        throw new McpToolError('invocation_id and wait_ms need the inbox’s name', 'validation_failed');
      const list = ok(await reach(conn, () => conn.admin.send(ops.emuListInboxes, {})), 'listing the inboxes').body as {
        data: { name: string; deliveries: number; last_received_at: string | null }[];
      };
      return {
        summary: list.data.length
          ? list.data.map((i) => `${i.name}: ${i.deliveries} deliveries, last ${i.last_received_at ?? '—'}`).join('\n')
          : `no inbox has deliveries yet: invoke with mode async and callback_inbox NAME (its callback_url is ${conn.url}/_emu/inbox/NAME)`,
        data: { url: `${conn.url}/_emu/inbox/{name}`, inboxes: list.data },
      };
    }
    const name = args.name;
    const matches = (d: Delivery) => !args.invocation_id || (d.json as { id?: string } | null)?.id === args.invocation_id;
    const inbox = await waitFor(args.wait_ms ?? 0, async () => {
      const body = ok(await reach(conn, () => conn.admin.send(ops.emuGetInbox, { params: { name } })), `reading the inbox ${name}`)
        .body as { name: string; response: unknown; data: Delivery[] };
      return { done: body.data.some(matches), value: body };
    });
    const picked = inbox.data.filter(matches).slice(0, args.limit ?? 20);
    const deliveries = picked.map((d) => ({
      id: d.id,
      received_at: d.received_at,
      webhook_id: d.headers['webhook-id'] ?? null,
      signature: d.signature,
      answered: d.answered,
      body_truncated: d.body_truncated,
      record: d.json === null || d.json === undefined ? null : clip(d.json),
      ...(d.json === null || d.json === undefined ? { body: d.body.slice(0, 4_000) } : {}),
    }));
    return {
      summary: picked.length
        ? `${name}: ${picked.length} deliver${picked.length === 1 ? 'y' : 'ies'}${args.invocation_id ? ` of ${args.invocation_id}` : ''}\n${deliveries
            .map(
              (d) =>
                `${d.received_at} ${d.webhook_id ?? ''} signature ${d.signature.verified ? 'verified' : `NOT verified (${d.signature.reason ?? '?'})`}, answered ${d.answered}${
                  d.record && typeof d.record === 'object' && 'outcome' in d.record ? `, outcome ${String(d.record.outcome)}` : ''
                }`,
            )
            .join('\n')}`
        : `${name}: no deliveries${args.invocation_id ? ` of ${args.invocation_id}` : ''} yet${args.wait_ms ? ` (waited ${args.wait_ms} ms)` : ''}`,
      data: { name, response: inbox.response, total: inbox.data.length, deliveries },
    };
  },
});

// ---- read_egress_log ----------------------------------------------------------------------------------

const readEgressLog = tool({
  name: 'read_egress_log',
  title: 'Read the egress log',
  description:
    'Reads the emulator’s egress log: every outbound call a snippet made (through the egress proxy, or an integration call made by the host), newest first, with method, host, port, path, status, bytes, duration, the fault rule applied (fault injection) and why a call was refused (the production egress profile refuses private addresses). Filter by invocation, tenant, host, status or only_problems; answers counts by host too, and the egress profile.',
  input: z
    .object({
      invocation_id: InvocationIdArg.optional().describe('Only this invocation’s calls.'),
      tenant: z.string().max(63).optional().describe('Only this tenant’s calls (a tenant id).'),
      host: z.string().min(1).max(253).optional().describe('Only calls to this host (exact, case-insensitive).'),
      status: z.number().int().min(100).max(599).optional().describe('Only calls answered with this status.'),
      only_problems: z.boolean().optional().describe('Only failed, refused or faulted calls and statuses ≥ 400.'),
      limit: z.number().int().min(1).max(1000).optional().describe('At most this many entries (default 50).'),
    })
    .strict(),
  readOnly: true,
  async run(args, ctx) {
    const conn = await ctx.connect();
    const body = ok(
      await reach(conn, () =>
        conn.admin.send(ops.emuListEgress, {
          query: { ...(args.invocation_id ? { invocation: args.invocation_id } : {}), ...(args.tenant ? { tenant: args.tenant } : {}) },
        }),
      ),
      'reading the egress log',
    ).body as { profile: string; allow: string[]; data: EgressRow[] };
    const host = args.host?.toLowerCase();
    const matching = body.data.filter(
      (e) =>
        (!host || e.host.toLowerCase() === host) &&
        (args.status === undefined || e.status === args.status) &&
        (!args.only_problems || failedCall(e)),
    );
    const entries = matching.slice(0, args.limit ?? 50);
    return {
      summary: `${matching.length} outbound call${matching.length === 1 ? '' : 's'} (egress profile ${body.profile})${entries
        .slice(0, 20)
        .map(
          (e) =>
            `\n${e.at} ${e.invocation_id ?? '—'} ${e.method} ${e.host}:${e.port}${e.path ?? ''} → ${e.status ?? e.refused ?? e.error ?? '—'} (${Math.round(e.duration_ms)} ms${e.fault ? `, fault ${e.fault}` : ''})`,
        )
        .join('')}${entries.length > 20 ? `\n… ${entries.length - 20} more in the JSON` : ''}`,
      data: { profile: body.profile, allow: body.allow, counts: egressCounts(matching), entries },
    };
  },
});

// ---- export_run_report --------------------------------------------------------------------------------

const exportRunReport = tool({
  name: 'export_run_report',
  title: 'Export a run report (HTML)',
  description:
    'Writes the run report of the given invocations: one self-contained HTML file (snippet, version, limits, input with secrets redacted, output, logs, the memory/CPU timeline against the limits, the outcome’s evidence, outbound calls, stream frames, parity) to hand to a person, which `svc-emu import-report` turns back into a rerunnable invocation. Answers the file’s absolute path (and a file:// resource link). Default path: the system temp folder’s svc-emu-reports/.',
  input: z
    .object({
      invocation_ids: z.array(InvocationIdArg).min(1).max(REPORT_MAX_INVOCATIONS).describe('The invocations to report on.'),
      path: z
        .string()
        .min(1)
        .max(4096)
        .optional()
        .describe('Where to write: a file path (.html) or an existing folder; relative to the MCP server’s working folder.'),
    })
    .strict(),
  readOnly: false,
  async run(args, ctx) {
    const conn = await ctx.connect();
    const ids = [...new Set(args.invocation_ids)];
    const reply = ok(await reach(conn, () => conn.admin.send(ops.emuGetReport, { query: { ids: ids.join(',') } })), 'making the report');
    const suggested = /filename="([^"/\\]+)"/.exec(reply.headers.get('content-disposition') ?? '')?.[1] ?? `svc-emu-report-${ids[0]}.html`;
    let path = args.path ? resolve(ctx.cwd, args.path) : join(tmpdir(), 'svc-emu-reports', suggested);
    if (args.path && (await stat(path).catch(() => null))?.isDirectory()) path = join(path, suggested);
    try {
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, reply.text, { mode: 0o600 });
    } catch (err) {
      throw new McpToolError(`cannot write the report to ${path}: ${(err as Error).message}`, 'unwritable', { path });
    }
    const bytes = Buffer.byteLength(reply.text);
    return {
      summary: `wrote ${path} (${Math.ceil(bytes / 1024)} KiB, ${ids.length} invocation${ids.length === 1 ? '' : 's'})`,
      data: { path, bytes, invocations: ids },
      extra: [
        { type: 'resource_link', uri: pathToFileURL(path).href, name: suggested, mimeType: 'text/html', description: 'The run report' },
      ],
    };
  },
});

/** Every tool `svc-emu mcp` serves, in the order it lists them (docs/mcp.md describes each). */
export const MCP_TOOLS: readonly McpTool[] = [
  listSnippets,
  listVersions,
  deploy,
  invoke,
  listInvocations,
  getInvocation,
  setRunLimits,
  readInbox,
  readEgressLog,
  exportRunReport,
];

export const MCP_TOOL_NAMES = MCP_TOOLS.map((t) => t.name);
