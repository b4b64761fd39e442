import { dataDirPaths, liveOwner } from '../storage/data-dir';
import { NAME_RE } from '../../contract/schemas/common';
import { patientFetch } from './patient-fetch';
import {
  createClient,
  ProblemError,
  type AnyOperation,
  type CallInput,
  type Client,
  type EventStream,
  type RawReply,
} from '../../contract/client';
import { operations as ops } from '../../contract';
import { OUTCOMES } from '../../contract/schemas/invocations';
import { REPORT_CASSETTE_PREFIX } from '../../contract/schemas/report';
import type { EmuEventData } from '../../contract/schemas/events';
import type { Target } from './locate';
import { followEvents, type FollowState } from '../../contract/events-client';
import { debugArgsFrom, debugRun, type DebugArgs } from './debug';

/**
 * The client commands (`invoke`, `logs`, `deploy`, `list`, `invocations`): a user's `/v1` calls from the
 * terminal, for people who prefer files and a shell to the GUI. Unlike the operator commands they need a
 * running core: found from any folder (server/cli/locate.ts), then through `<data-dir>/emulator.json`; the
 * local tenant's key is read from `GET /_emu/info` with the admin token, and every call then goes through
 * `/v1` with that key, as any client's would. `logs --follow` reads the live feed (`GET /_emu/events`).
 *
 * Every argument is checked before anything touches the network (exit 2); a failed call or a failed
 * outcome exits 1.
 */

export const CLIENT_COMMANDS = ['invoke', 'logs', 'deploy', 'list', 'invocations', 'cassettes'] as const;
export type ClientCommand = (typeof CLIENT_COMMANDS)[number];
export const isClientCommand = (cmd: string | undefined): cmd is ClientCommand => CLIENT_COMMANDS.includes(cmd as ClientCommand);

/** The options only the client commands take (merged into the CLI's option table). */
export const CLIENT_OPTIONS = {
  data: { type: 'string' },
  env: { type: 'string' },
  version: { type: 'string' },
  async: { type: 'boolean' },
  stream: { type: 'boolean' },
  replay: { type: 'string' },
  mode: { type: 'string' },
  snippet: { type: 'string' },
  outcome: { type: 'string' },
  limit: { type: 'string' },
  follow: { type: 'boolean', short: 'f' },
  'egress-mode': { type: 'string' },
  cassette: { type: 'string' },
  debug: { type: 'boolean' },
  'debug-port': { type: 'string' },
} as const;

export const CLIENT_USAGE = `  svc-emu invoke NAME [--data JSON] [--env E] [--version V] [--async | --stream | --mode M]
                 [--egress-mode live|record|replay] [--cassette C]
                                 (this run's outbound calls: go out, recorded to the cassette, or replayed from it)
                 [--debug [--debug-port N]]
                                 (a debug run: prints where to attach a debugger — Bun inspector or debugpy, on loopback —
                                  as soon as it listens; the timeout is paused while one holds it; no CPU cap)
  svc-emu invoke --replay ID [--data JSON] [--mode sync|async|stream]
                                 (runs an invocation again: its snippet, version, env, mode, overrides and stored input)
  svc-emu deploy NAME --version V --env E
  svc-emu list                   (snippets: runtime, latest version, which environment runs which version)
  svc-emu invocations [--snippet S] [--outcome O] [--limit N]   (newest first; default 20)
  svc-emu logs ID                (one invocation's logs)
  svc-emu logs [--snippet S] [--outcome O] [--limit N]          (the last N invocations' logs; default 10)
  svc-emu logs --follow [--snippet S] [--outcome O]             (every new invocation's logs as it ends, until Ctrl+C)
  svc-emu cassettes SNIPPET      (the snippet's cassettes: recorded outbound calls, by name)`;

/** The options each command accepts beyond the global ones (server/cli/main.ts checks them first). */
export const CLIENT_ACCEPTS: Record<ClientCommand, readonly string[]> = {
  invoke: ['data', 'env', 'version', 'async', 'stream', 'replay', 'mode', 'egress-mode', 'cassette', 'debug', 'debug-port'],
  logs: ['snippet', 'outcome', 'limit', 'follow'],
  deploy: ['env', 'version'],
  list: [],
  invocations: ['snippet', 'outcome', 'limit'],
  cassettes: [],
};
const ACCEPTS = CLIENT_ACCEPTS;
const GLOBAL_OPTIONS = ['data-dir', 'json', 'help'];

const SNIPPET_ID_RE = /^snp_[0-9A-Za-z]{1,64}$/;
const INVOCATION_ID_RE = /^inv_[0-9A-Za-z]{1,64}$/;
const VERSION_RE = /^[1-9]\d{0,8}$/;

export interface ClientIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Resolves when the process is asked to stop (`logs --follow` runs until then). */
  untilSignal?: () => Promise<string>;
}

export type ClientValues = Record<string, string | boolean | string[] | undefined>;

class ClientUsageError extends Error {}

/** A failure to report: `detail` for people, `json` (a problem or our own) for `--json`. */
class ClientFailure extends Error {
  constructor(
    message: string,
    readonly json: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** What a command does once connected; `extra` adds to an invoke's request (a debug run's headers, `onAccepted`). */
type Plan = (conn: Connection, io: ClientIO, json: boolean, extra?: Pick<InvokeArgs, 'headers' | 'onAccepted'>) => Promise<number>;

/**
 * Runs a client command; returns the exit code (0 ok, 1 failed, 2 usage). With --json, a failure is one
 * object `{code, detail, …}` on stdout. Throws only what it does not own (the locator's LocateError).
 */
export async function runClient(
  cmd: ClientCommand,
  args: string[],
  values: ClientValues,
  target: () => Promise<Target>,
  io: ClientIO,
): Promise<number> {
  const json = values.json === true;
  let plan: Plan;
  try {
    plan = planCommand(cmd, args, values);
  } catch (err) {
    if (!(err instanceof ClientUsageError)) throw err;
    if (json) io.stdout(JSON.stringify({ code: 'usage', detail: err.message }) + '\n');
    else io.stderr(`svc-emu: ${err.message}\nRun \`svc-emu --help\` for usage.\n`);
    return 2;
  }
  try {
    const conn = await connect(await target());
    return await plan(conn, io, json);
  } catch (err) {
    if (!(err instanceof ClientFailure)) throw err;
    if (json) io.stdout(JSON.stringify({ ...err.json, code: err.json.code ?? 'error', detail: err.json.detail ?? err.message }) + '\n');
    else io.stderr(`svc-emu: ${err.message}\n`);
    return 1;
  }
}

/** The running emulator's snippet names (for shell completion); [] when none runs. */
export async function snippetNames(target: Target): Promise<string[]> {
  const conn = await connect(target);
  return (await allSnippets(conn)).map((s) => s.name);
}

// ---- arguments ------------------------------------------------------------------------------------

/** Checks every argument of the command and returns what to do once connected. */
function planCommand(cmd: ClientCommand, args: string[], values: ClientValues): Plan {
  for (const [opt, value] of Object.entries(values)) {
    if (value === undefined || GLOBAL_OPTIONS.includes(opt) || ACCEPTS[cmd].includes(opt)) continue;
    throw new ClientUsageError(`${cmd} does not take --${opt}`);
  }
  switch (cmd) {
    case 'invoke': {
      const debugArgs = debugArgsFrom(values);
      if (typeof debugArgs === 'string') throw new ClientUsageError(debugArgs);
      if (values.replay !== undefined) {
        const replayPlan = planReplay(args, values);
        if (!debugArgs) return replayPlan;
        // --replay --debug: the same run again, as a debug run.
        return (conn, io, json) =>
          debugRun(conn.admin, io, json, debugArgs, (headers, accepted) =>
            replayPlan(conn, io, json, { headers, onAccepted: accepted }),
          ).catch((err: unknown) => {
            if (err instanceof ClientFailure || err instanceof ProblemError) throw err;
            throw unreachable(conn.url, err);
          });
      }
      const [name] = positionals(args, 1, 'invoke NAME [--data JSON] [--env E] [--version V] [--async | --stream]');
      const snippet = snippetRef(name!);
      const input = inputFrom(values.data as string | undefined);
      const env = values.env === undefined ? undefined : envName(values.env as string);
      const version = values.version === undefined ? undefined : versionNumber(values.version as string);
      const mode = modeFrom(values) ?? null;
      const egress = runEgressFrom(values);
      const debug = debugArgsFrom(values) as DebugArgs | undefined;
      const run = (conn: Connection, io: ClientIO, json: boolean, extra: Partial<InvokeArgs> = {}) => {
        const headers = { ...(egress ? runEgressHeaders(conn, egress) : {}), ...extra.headers };
        return invoke(conn, io, json, { snippet, input, env, version, mode, ...extra, headers });
      };
      if (debug) {
        return (conn, io, json) =>
          debugRun(conn.admin, io, json, debug, (headers, accepted) => run(conn, io, json, { headers, onAccepted: accepted })).catch(
            (err: unknown) => {
              if (err instanceof ClientFailure || err instanceof ProblemError) throw err;
              throw unreachable(conn.url, err);
            },
          );
      }
      return (conn, io, json) => run(conn, io, json);
    }
    case 'cassettes': {
      const [name] = positionals(args, 1, 'cassettes SNIPPET');
      const snippet = snippetRef(name!, 'SNIPPET');
      return (conn, io, json) => listCassettes(conn, io, json, snippet);
    }
    case 'logs': {
      const filter = filterFrom(values, 10);
      if (values.follow) {
        if (args.length) throw new ClientUsageError(`logs --follow takes no ID (got '${args[0]}'): it prints every new invocation`);
        if (values.limit !== undefined)
          throw new ClientUsageError('logs --follow takes no --limit: it prints every new invocation until Ctrl+C');
        return (conn, io, json) => follow(conn, io, json, filter);
      }
      if (args.length === 0) return (conn, io, json) => recentLogs(conn, io, json, filter);
      const [id] = positionals(args, 1, 'logs ID');
      if (!INVOCATION_ID_RE.test(id!))
        throw new ClientUsageError(`ID: '${id}' is not an invocation id (inv_…, from X-Invocation-Id or \`svc-emu invoke\`)`);
      if (values.snippet !== undefined || values.outcome !== undefined || values.limit !== undefined)
        throw new ClientUsageError('logs ID takes no --snippet, --outcome or --limit (they choose invocations; ID names one)');
      return (conn, io, json) => logs(conn, io, json, id!);
    }
    case 'list': {
      positionals(args, 0, 'list');
      return (conn, io, json) => list(conn, io, json);
    }
    case 'invocations': {
      positionals(args, 0, 'invocations [--snippet S] [--outcome O] [--limit N]');
      const filter = filterFrom(values, 20);
      return (conn, io, json) => invocations(conn, io, json, filter);
    }
    case 'deploy': {
      const [name] = positionals(args, 1, 'deploy NAME --version V --env E');
      const snippet = snippetRef(name!);
      if (values.version === undefined) throw new ClientUsageError('deploy needs --version V');
      if (values.env === undefined) throw new ClientUsageError('deploy needs --env E');
      const version = versionNumber(values.version as string);
      const env = envName(values.env as string);
      return (conn, io, json) => deploy(conn, io, json, { snippet, version, env });
    }
  }
}

interface Filter {
  snippet: string | undefined;
  outcome: (typeof OUTCOMES)[number] | undefined;
  limit: number;
}

function filterFrom(values: ClientValues, defaultLimit: number): Filter {
  const snippet = values.snippet === undefined ? undefined : snippetRef(values.snippet as string, '--snippet');
  const o = values.outcome as string | undefined;
  if (o !== undefined && !(OUTCOMES as readonly string[]).includes(o))
    throw new ClientUsageError(`--outcome: one of ${OUTCOMES.join(', ')}; not '${o}'`);
  const l = values.limit as string | undefined;
  if (l !== undefined && !/^(?:[1-9]\d{0,2}|1000)$/.test(l)) throw new ClientUsageError(`--limit: an integer from 1 to 1000, not '${l}'`);
  return { snippet, outcome: o as Filter['outcome'], limit: l === undefined ? defaultLimit : Number(l) };
}

function positionals(args: string[], n: number, form: string): string[] {
  if (args.length < n) throw new ClientUsageError(`usage: svc-emu ${form}`);
  if (args.length > n) throw new ClientUsageError(`unexpected argument '${args[n]}'`);
  return args;
}

function snippetRef(name: string, what = 'NAME'): string {
  if (NAME_RE.test(name) || SNIPPET_ID_RE.test(name)) return name;
  throw new ClientUsageError(
    `${what}: '${name}' is not a snippet name (1–63 characters of a-z, 0-9 and "-", starting with a letter or digit) or id`,
  );
}

function envName(env: string): string {
  if (NAME_RE.test(env)) return env;
  throw new ClientUsageError(`--env: '${env}' is not an environment name (1–63 characters of a-z, 0-9 and "-")`);
}

function versionNumber(v: string): number {
  if (VERSION_RE.test(v)) return Number(v);
  throw new ClientUsageError(`--version: must be a version number (1, 2, 3, …), got '${v}'`);
}

function inputFrom(data: string | undefined): Record<string, unknown> {
  if (data === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch (err) {
    throw new ClientUsageError(`--data: not JSON (${(err as Error).message})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    const got = parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `a ${typeof parsed}`;
    throw new ClientUsageError(`--data: must be a JSON object (the handler's input), got ${got}`);
  }
  return parsed as Record<string, unknown>;
}

// ---- the connection -------------------------------------------------------------------------------

type Reply = RawReply;

/** The typed client (contract/client.ts) with the local tenant's key; `send` never throws on a status. */
interface Connection {
  url: string;
  /** The local tenant's id (to keep its invocations from the live feed, which carries every tenant's). */
  tenantId: string | null;
  /** The same core with the admin token (the live feed). */
  admin: Client;
  send<O extends AnyOperation>(op: O, input: CallInput<O>): Promise<Reply>;
  /** An event stream read as it arrives; an answer that is not one is a failure. */
  stream<O extends AnyOperation>(op: O, input: CallInput<O>): Promise<EventStream<O>>;
}

/** A request the core never answered (refused connection, reset) as the failure people see. */
function unreachable(url: string, err: unknown): ClientFailure {
  const why = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
  return new ClientFailure(`the emulator at ${url} did not answer (${why}); is it still running?`, {
    code: 'unreachable',
    url,
    detail: why,
  });
}

async function reach<T>(url: string, request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (err) {
    if (err instanceof ProblemError || err instanceof ClientFailure) throw err;
    throw unreachable(url, err);
  }
}

function connection(url: string, client: Client, admin: Client = client, tenantId: string | null = null): Connection {
  return {
    url,
    admin,
    tenantId,
    send: (op, input) => reach(url, () => (client.send as (o: AnyOperation, i: CallInput<AnyOperation>) => Promise<Reply>)(op, input)),
    stream: (op, input) =>
      reach(url, () =>
        (client.stream as (o: AnyOperation, i: CallInput<AnyOperation>) => Promise<EventStream<typeof op>>)(op, input).catch(
          (err: unknown) => {
            if (!(err instanceof ProblemError)) throw err;
            const body: unknown = err.text ? err.problem : undefined;
            throw problemFailure({ status: err.status, headers: err.headers, text: err.text, body });
          },
        ),
      ),
  };
}

async function connect(target: Target): Promise<Connection> {
  if (target.kind === 'url') {
    if (!target.adminToken) {
      throw new ClientFailure(
        `SVC_EMU_URL is set (${target.url}) but SVC_EMU_ADMIN_TOKEN is not: set it to the admin token (in the emulator's <data-dir>/emulator.json)`,
        { code: 'no_admin_token', url: target.url, detail: 'SVC_EMU_URL needs SVC_EMU_ADMIN_TOKEN' },
      );
    }
    return connectTo(target.url, target.adminToken, target.url);
  }
  const dataDir = target.dataDir;
  const owner = await liveOwner(dataDirPaths(dataDir));
  if (!owner || owner.kind !== 'core') {
    throw new ClientFailure(
      `no emulator is running on ${dataDir}: start it with \`npm start\` or \`svc-emu serve\` (or point --data-dir at the data dir of the one that runs)`,
      {
        code: 'no_emulator',
        data_dir: dataDir,
        detail: 'no emulator is running on this data dir',
      },
    );
  }
  if (!owner.url || !owner.admin_token) {
    throw new ClientFailure(`an emulator (pid ${owner.pid}) is still starting on ${dataDir}: try again in a moment`, {
      code: 'starting',
      data_dir: dataDir,
      detail: 'the emulator is still starting',
    });
  }
  return connectTo(owner.url, owner.admin_token, dataDir);
}

async function connectTo(url: string, adminToken: string, where: string): Promise<Connection> {
  const admin = createClient({ baseUrl: url, adminToken, fetch: patientFetch });
  const info = await connection(url, admin).send(ops.emuInfo, {});
  if (info.status !== 200) throw problemFailure(info, `reading the local key from ${url}/_emu/info`);
  const body = info.body as { local_api_key?: string | null; tenants?: { id: string; name: string }[] } | undefined;
  const key = body?.local_api_key;
  if (!key) {
    throw new ClientFailure(
      `the emulator on ${where} cannot show the local tenant's API key (its data dir lost the key file, or tenant local has no key)`,
      { code: 'no_local_key', data_dir: where, detail: 'GET /_emu/info returned no local_api_key' },
    );
  }
  const tenantId = body?.tenants?.find((t) => t.name === 'local')?.id ?? null;
  return connection(url, createClient({ baseUrl: url, key, fetch: patientFetch }), admin, tenantId);
}

/** A problem+json answer (or anything not 2xx) as a failure naming its code and detail. */
function problemFailure(reply: Reply, doing?: string): ClientFailure {
  const p = (reply.body && typeof reply.body === 'object' ? reply.body : {}) as Record<string, unknown>;
  const code = typeof p.code === 'string' ? p.code : 'error';
  const detail = typeof p.detail === 'string' ? p.detail : reply.text.trim().slice(0, 500) || `HTTP ${reply.status}`;
  const lines = [`${doing ? `${doing}: ` : ''}${detail} (${reply.status} ${code})`];
  if (Array.isArray(p.errors)) {
    for (const e of p.errors as { location?: string; message?: string }[]) lines.push(`  ${e.location ?? ''}: ${e.message ?? ''}`);
  }
  const retry = reply.headers.get('retry-after');
  if (reply.status === 429 && retry) lines.push(`  retry after ${retry} s`);
  return new ClientFailure(lines.join('\n'), Object.keys(p).length ? p : { code, status: reply.status, detail });
}

const pretty = (value: unknown) => JSON.stringify(value, null, 2) + '\n';

// ---- the commands ---------------------------------------------------------------------------------

interface InvokeArgs {
  snippet: string;
  input: Record<string, unknown>;
  env: string | undefined;
  version: number | undefined;
  mode: 'async' | 'stream' | null;
  /** Sent as they are (a replay's X-Emu-Limits and X-Emu-Admin). */
  headers?: Record<string, string>;
  /** An async run was queued under this id (a debug run waits for it to finish). */
  onAccepted?: (invocationId: string) => void;
}

interface InvocationRecord {
  id: string;
  snippet: string;
  version: number;
  env: string | null;
  outcome: string | null;
  usage: { duration_ms: number; init_ms: number } | null;
}

async function invoke(conn: Connection, io: ClientIO, json: boolean, a: InvokeArgs): Promise<number> {
  const input = {
    params: { snippet: a.snippet },
    query: { ...(a.env !== undefined ? { env: a.env } : {}), ...(a.version !== undefined ? { version: String(a.version) } : {}) },
    body: a.input,
    headers: { ...a.headers, ...(a.mode ? { 'x-invoke-mode': a.mode } : {}) },
  };
  if (a.mode === 'stream') {
    // Each chunk printed the moment it arrives: one JSON line per yielded value (every event with --json).
    const stream = await conn.stream(ops.invoke, input);
    let failed = false;
    for await (const e of stream) {
      const data = e.data as { data?: unknown; output?: unknown; code?: string; message?: string };
      if (json) io.stdout(JSON.stringify({ id: Number(e.id), event: e.event, data: e.data }) + '\n');
      else if (e.event === 'chunk') io.stdout(JSON.stringify(data.data) + '\n');
      else if (e.event === 'result') io.stdout(pretty(data.output));
      if (e.event === 'error') {
        failed = true;
        if (!json) io.stderr(`svc-emu: ${a.snippet} failed: ${data.code}: ${data.message}\n`);
      }
    }
    const id = stream.headers.get('x-invocation-id');
    if (!json && id) io.stderr(`invocation ${id} — streamed${failed ? `; logs: svc-emu logs ${id}` : ''}\n`);
    return failed ? 1 : 0;
  }
  const reply = await conn.send(ops.invoke, input);
  if (a.mode === 'async' && reply.status === 202) {
    io.stdout(json ? JSON.stringify(reply.body) + '\n' : pretty(reply.body));
    const queued = (reply.body as { invocation_id?: unknown } | undefined)?.invocation_id;
    if (typeof queued === 'string') a.onAccepted?.(queued);
    return 0;
  }

  const id = reply.headers.get('x-invocation-id');
  if (!id) throw problemFailure(reply, `invoke ${a.snippet}`); // no run: unknown snippet, bad request, 429, 501…

  const recordReply = await conn.send(ops.getInvocation, { params: { id } });
  const record = recordReply.status === 200 ? (recordReply.body as InvocationRecord) : null;
  const ok = reply.status === 200;
  if (json) {
    // The run's record (output or error, usage, version, env) is the one answer worth scripting against.
    io.stdout(JSON.stringify(record ?? reply.body) + '\n');
    return ok ? 0 : 1;
  }
  if (ok) {
    io.stdout(pretty(reply.body));
    io.stderr(runLine(id, a, reply, record) + '\n');
    return 0;
  }
  const p = (reply.body ?? {}) as { code?: string; detail?: string; stack?: string };
  const lines = [`svc-emu: ${a.snippet} failed: ${p.code ?? reply.status}: ${p.detail ?? reply.text.trim()}`];
  if (p.stack) lines.push(indent(stackWithoutMessage(p.stack, p.detail)));
  lines.push(`${runLine(id, a, reply, record)}; logs: svc-emu logs ${id}`);
  io.stderr(lines.filter(Boolean).join('\n') + '\n');
  return 1;
}

/** `invocation inv_… — hello v2, env dev, 12 ms (+85 ms init)`; `env none (latest)` when no environment chose it. */
function runLine(id: string, a: InvokeArgs, reply: Reply, record: InvocationRecord | null): string {
  const version = record?.version ?? reply.headers.get('x-snippet-version');
  const env = record ? record.env : reply.headers.get('x-snippet-env');
  const parts = [
    `${record?.snippet ?? a.snippet} v${version}`,
    env && env !== 'none' ? `env ${env}` : `env none (${a.version ? 'pinned' : 'latest'})`,
  ];
  if (record?.usage) parts.push(`${record.usage.duration_ms} ms${record.usage.init_ms ? ` (+${record.usage.init_ms} ms init)` : ''}`);
  return `invocation ${id} — ${parts.join(', ')}`;
}

/** A stack's first line usually repeats the message the line above already shows. */
function stackWithoutMessage(stack: string, message: string | undefined): string {
  const lines = stack.replace(/\s+$/, '').split('\n');
  if (message && lines[0] && lines[0].includes(message)) lines.shift();
  return lines.join('\n');
}

const indent = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => `  ${l}`)
    .join('\n');

async function logs(conn: Connection, io: ClientIO, json: boolean, id: string): Promise<number> {
  const reply = await conn.send(ops.getInvocationLogs, { params: { id } });
  if (reply.status !== 200) throw problemFailure(reply);
  const body = reply.body as { logs: string; truncated: boolean };
  if (json) {
    io.stdout(JSON.stringify(body) + '\n');
    return 0;
  }
  io.stdout(body.logs);
  if (body.logs === '') io.stderr(`svc-emu: ${id} logged nothing\n`);
  if (body.truncated)
    io.stderr(
      `svc-emu: these logs were truncated: the invocation wrote more than the 1 MiB kept (the mark at the end says how much was dropped)\n`,
    );
  return 0;
}

interface DeployArgs {
  snippet: string;
  version: number;
  env: string;
}

async function deploy(conn: Connection, io: ClientIO, json: boolean, a: DeployArgs): Promise<number> {
  // What ran there before, read first: the deployment's previous_version is the one before the last
  // change, which is not "what ran before this command" when the same version is deployed again.
  const before = await conn.send(ops.listDeployments, { params: { id: a.snippet } });
  if (before.status !== 200) throw problemFailure(before);
  const previous =
    ((before.body as { data: { env: string; version: number | null }[] }).data ?? []).find((d) => d.env === a.env)?.version ?? null;

  const reply = await conn.send(ops.deploy, { params: { id: a.snippet, env: a.env }, body: { version: a.version } });
  if (reply.status !== 200) throw problemFailure(reply);
  if (json) {
    io.stdout(JSON.stringify(reply.body) + '\n');
    return 0;
  }
  const was = previous === null ? 'nothing ran there before' : previous === a.version ? `was v${previous} already` : `was v${previous}`;
  io.stdout(`deployed ${a.snippet} v${a.version} to ${a.env} (${was})\n`);
  return 0;
}

// ---- list, invocations, logs of many, logs --follow -------------------------------------------------

interface SnippetRecord {
  id: string;
  name: string;
  runtime: string;
  latest_version: number | null;
  deployments: Record<string, number>;
  description?: string | null;
}

interface InvocationRow extends InvocationRecord {
  mode: string;
  status: string;
  error: { code: string; message: string } | null;
  created_at: string;
}

/** Every page of a cursor-paginated list. */
async function allPages<T>(conn: Connection, fetchPage: (cursor: string | undefined) => Promise<Reply>, enough?: (got: T[]) => boolean) {
  const out: T[] = [];
  let cursor: string | undefined;
  for (;;) {
    const reply = await fetchPage(cursor);
    if (reply.status !== 200) throw problemFailure(reply);
    const page = reply.body as { data: T[]; next_cursor: string | null };
    out.push(...page.data);
    if (!page.next_cursor || enough?.(out)) return out;
    cursor = page.next_cursor;
  }
}

const allSnippets = (conn: Connection) =>
  allPages<SnippetRecord>(conn, (cursor) => conn.send(ops.listSnippets, { query: { limit: '1000', ...(cursor ? { cursor } : {}) } }));

/** A table with columns padded to their widest cell. */
function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  return [head, ...rows].map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}

async function list(conn: Connection, io: ClientIO, json: boolean): Promise<number> {
  const snippets = (await allSnippets(conn)).sort((a, b) => a.name.localeCompare(b.name));
  if (json) {
    io.stdout(JSON.stringify({ data: snippets }) + '\n');
    return 0;
  }
  if (!snippets.length) {
    io.stderr('svc-emu: no snippets yet: `svc-emu init` writes one into the workspace, or POST /v1/snippets\n');
    return 0;
  }
  const envs = (d: Record<string, number>) =>
    Object.entries(d)
      .sort(([a], [b]) => envOrder(a) - envOrder(b) || a.localeCompare(b))
      .map(([env, v]) => `${env} v${v}`)
      .join(', ') || '—';
  io.stdout(
    table(
      ['NAME', 'RUNTIME', 'LATEST', 'ENVIRONMENTS'],
      snippets.map((s) => [s.name, s.runtime, s.latest_version === null ? '—' : `v${s.latest_version}`, envs(s.deployments)]),
    ),
  );
  return 0;
}
const envOrder = (env: string) => ['dev', 'staging', 'prod'].indexOf(env) >>> 0;

/** The newest invocations matching the filter (the outcome is filtered here: /v1 filters by status). */
async function matching(conn: Connection, f: Filter): Promise<InvocationRow[]> {
  const keep = (r: InvocationRow) => !f.outcome || r.outcome === f.outcome;
  const rows = await allPages<InvocationRow>(
    conn,
    (cursor) =>
      conn.send(ops.listInvocations, {
        query: { limit: String(f.outcome ? 1000 : f.limit), ...(f.snippet ? { snippet: f.snippet } : {}), ...(cursor ? { cursor } : {}) },
      }),
    (got) => got.filter(keep).length >= f.limit,
  );
  return rows.filter(keep).slice(0, f.limit);
}

const durationOf = (r: { usage: { duration_ms: number } | null }) => (r.usage ? `${Math.round(r.usage.duration_ms)} ms` : '—');
const stateOf = (r: { outcome: string | null; status: string }) => r.outcome ?? r.status;

async function invocations(conn: Connection, io: ClientIO, json: boolean, f: Filter): Promise<number> {
  const rows = await matching(conn, f);
  if (json) {
    io.stdout(JSON.stringify({ data: rows }) + '\n');
    return 0;
  }
  if (!rows.length) {
    io.stderr(`svc-emu: no invocations${f.snippet ? ` of ${f.snippet}` : ''}${f.outcome ? ` with outcome ${f.outcome}` : ''}\n`);
    return 0;
  }
  io.stdout(
    table(
      ['ID', 'SNIPPET', 'VERSION', 'ENV', 'MODE', 'OUTCOME', 'DURATION', 'CREATED'],
      rows.map((r) => [r.id, r.snippet, `v${r.version}`, r.env ?? '—', r.mode, stateOf(r), durationOf(r), r.created_at]),
    ),
  );
  return 0;
}

/** `── inv_… hello v2 · dev · sync · success · 12 ms` (and the error's code and message when it failed). */
function header(r: {
  id: string;
  snippet: string;
  version: number;
  env: string | null;
  mode: string;
  outcome: string | null;
  status: string;
  error: { code: string; message: string } | null;
  usage?: { duration_ms: number } | null;
  duration_ms?: number | null;
}) {
  const ms = r.usage ? r.usage.duration_ms : r.duration_ms;
  const parts = [
    `${r.snippet} v${r.version}`,
    r.env ?? 'no env',
    r.mode,
    stateOf(r),
    ...(ms !== null && ms !== undefined ? [`${Math.round(ms)} ms`] : []),
  ];
  const err = r.error && r.outcome !== 'success' ? `\n   ${r.error.code}: ${r.error.message.split('\n')[0]}` : '';
  return `── ${r.id}  ${parts.join(' · ')}${err}\n`;
}

async function readLogs(conn: Connection, id: string): Promise<{ logs: string; truncated: boolean }> {
  const reply = await conn.send(ops.getInvocationLogs, { params: { id } });
  if (reply.status !== 200) throw problemFailure(reply);
  return reply.body as { logs: string; truncated: boolean };
}

const withNewline = (text: string) => (text === '' || text.endsWith('\n') ? text : text + '\n');

async function recentLogs(conn: Connection, io: ClientIO, json: boolean, f: Filter): Promise<number> {
  const rows = (await matching(conn, f)).reverse(); // oldest first, as a terminal reads
  for (const r of rows) {
    const l = await readLogs(conn, r.id);
    if (json) io.stdout(JSON.stringify({ invocation: r, logs: l.logs, truncated: l.truncated }) + '\n');
    else io.stdout(header(r) + withNewline(l.logs));
  }
  if (!rows.length && !json)
    io.stderr(`svc-emu: no invocations${f.snippet ? ` of ${f.snippet}` : ''}${f.outcome ? ` with outcome ${f.outcome}` : ''}\n`);
  return 0;
}

type Summary = EmuEventData<'invocation.finished'>;

/** How long a run goes before `--follow` says it started (streams: at once), so a quick run prints once. */
const SAY_STARTED_AFTER_MS = 1_000;

/**
 * `logs --follow`, like `wrangler tail`: reads the live feed (`GET /_emu/events`, invocation events only,
 * through followEvents: contract/events-client.ts) and prints each of the local tenant's invocations as it
 * ends, with its logs (a stream, or a run longer than a second, also when it starts). A dropped connection
 * is retried (said on stderr) and resumes where it left off. Runs until Ctrl+C (exit 0); a refusal (the
 * core restarted with another admin token) exits 1.
 */
async function follow(conn: Connection, io: ClientIO, json: boolean, f: Filter): Promise<number> {
  const aborter = new AbortController();
  const pending = new Map<string, NodeJS.Timeout>();
  let printing: Promise<void> = Promise.resolve();
  const print = (job: () => Promise<void> | void) => {
    printing = printing.then(job).catch((err: unknown) => io.stderr(`svc-emu: ${(err as Error).message}\n`));
  };
  const wanted = (s: Summary) => (!conn.tenantId || s.tenant_id === conn.tenantId) && (!f.snippet || s.snippet === f.snippet);
  const started = (s: Summary) =>
    print(() =>
      io.stdout(
        json
          ? JSON.stringify({ event: 'invocation.started', invocation: s }) + '\n'
          : `▶  ${s.id}  ${s.snippet} v${s.version} · ${s.env ?? 'no env'} · ${s.mode} · running\n`,
      ),
    );
  let opened = false;
  let down = false;
  const onState = (state: FollowState) => {
    if (state.state === 'open') {
      if (!opened)
        io.stderr(
          `following the invocations of ${conn.url}${f.snippet ? ` (snippet ${f.snippet})` : ''}${f.outcome ? ` (outcome ${f.outcome})` : ''}: Ctrl+C stops\n`,
        );
      else if (down) io.stderr(`svc-emu: reconnected to ${conn.url}\n`);
      opened = true;
      down = false;
    } else if (!down) {
      down = true;
      io.stderr(`svc-emu: lost the emulator at ${conn.url} (${state.error}); reconnecting…\n`);
    }
  };
  const stopped = (io.untilSignal ?? (() => new Promise<string>(() => {})))().then(() => aborter.abort());
  void stopped;
  try {
    for await (const e of followEvents(conn.admin, {
      types: ['invocation.started', 'invocation.finished'],
      signal: aborter.signal,
      onState,
    })) {
      if (e.type !== 'invocation.started' && e.type !== 'invocation.finished') continue;
      const s = e.data;
      if (!wanted(s)) continue;
      if (e.type === 'invocation.started') {
        if (f.outcome) continue; // the outcome is not known yet
        if (s.mode === 'stream') started(s);
        else
          pending.set(
            s.id,
            setTimeout(() => (pending.delete(s.id), started(s)), SAY_STARTED_AFTER_MS),
          );
        continue;
      }
      clearTimeout(pending.get(s.id));
      pending.delete(s.id);
      if (f.outcome && s.outcome !== f.outcome) continue;
      print(async () => {
        const l = await readLogs(conn, s.id);
        io.stdout(
          json
            ? JSON.stringify({ event: 'invocation.finished', invocation: s, logs: l.logs, truncated: l.truncated }) + '\n'
            : header(s) + withNewline(l.logs),
        );
      });
    }
    await printing;
    return 0;
  } catch (err) {
    if (err instanceof ProblemError) {
      throw new ClientFailure(
        `the emulator at ${conn.url} refused the live feed: ${err.detail || err.message} (${err.status} ${err.code})`,
        {
          ...err.problem,
          code: err.code || 'error',
          detail: err.detail || err.message,
        },
      );
    }
    throw err;
  } finally {
    aborter.abort();
    for (const t of pending.values()) clearTimeout(t);
    pending.clear();
  }
}

// ---- egress modes and cassettes ------------------------------------------------------------------

const EGRESS_MODES = ['live', 'record', 'replay'] as const;
const CASSETTE_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** --egress-mode and --cassette, checked (undefined when neither is given). */
function runEgressFrom(values: ClientValues): { mode?: string; cassette?: string } | undefined {
  const mode = values['egress-mode'] as string | undefined;
  const cassette = values.cassette as string | undefined;
  if (mode === undefined && cassette === undefined) return undefined;
  if (mode !== undefined && !(EGRESS_MODES as readonly string[]).includes(mode))
    throw new ClientUsageError(`--egress-mode: live, record or replay, not '${mode}'`);
  if (cassette !== undefined && !CASSETTE_RE.test(cassette))
    throw new ClientUsageError(`--cassette: '${cassette}' is not a cassette name (1–63 of a-z 0-9 . _ -, starting with a letter or digit)`);
  return { ...(mode ? { mode } : {}), ...(cassette ? { cassette } : {}) };
}

/** The run's egress headers, with the admin token they need (the CLI holds it: it found the emulator). */
function runEgressHeaders(conn: Connection, egress: { mode?: string; cassette?: string }): Record<string, string> {
  const token = conn.admin.options.adminToken;
  return {
    ...(egress.mode ? { 'x-emu-egress-mode': egress.mode } : {}),
    ...(egress.cassette ? { 'x-emu-cassette': egress.cassette } : {}),
    ...(token ? { 'x-emu-admin': token } : {}),
  };
}

interface CassetteRow {
  name: string;
  path: string;
  entries: number;
  episodes: string[];
  bytes: number;
  updated_at: string;
}

async function listCassettes(conn: Connection, io: ClientIO, json: boolean, snippet: string): Promise<number> {
  const reply = await conn.admin.send(ops.emuListCassettes, { params: { id: snippet }, query: {} }).catch((err: unknown) => {
    throw unreachable(conn.url, err);
  });
  if (reply.status !== 200) throw problemFailure(reply, `listing the cassettes of ${snippet}`);
  const rows = (reply.body as { data: CassetteRow[] }).data;
  if (json) {
    io.stdout(JSON.stringify(rows) + '\n');
    return 0;
  }
  if (!rows.length) {
    io.stdout(`${snippet} has no cassettes: record one with \`svc-emu invoke ${snippet} --egress-mode record\`\n`);
    return 0;
  }
  io.stdout(
    table(
      ['NAME', 'CALLS', 'RUNS', 'BYTES', 'UPDATED', 'FILE'],
      rows.map((r) => [r.name, String(r.entries), String(r.episodes.length), String(r.bytes), r.updated_at, r.path]),
    ),
  );
  return 0;
}

// ---- invoke --replay ---------------------------------------------------------------------------------

const MODES = ['sync', 'async', 'stream'] as const;
type Mode = (typeof MODES)[number];

/** The mode asked for by --mode, --async or --stream (one of them); undefined when none is given. */
function requestedMode(values: ClientValues): Mode | undefined {
  const given = (['mode', 'async', 'stream'] as const).filter((f) => (f === 'mode' ? values.mode !== undefined : values[f] === true));
  if (given.length > 1) throw new ClientUsageError(`${given.map((f) => `--${f}`).join(' and ')}: choose one mode`);
  if (values.async) return 'async';
  if (values.stream) return 'stream';
  if (values.mode === undefined) return undefined;
  const m = values.mode as string;
  if (!(MODES as readonly string[]).includes(m)) throw new ClientUsageError(`--mode: must be sync, async or stream, not '${m}'`);
  return m as Mode;
}

/** The invoke's mode: null for sync (no X-Invoke-Mode), undefined when none is given. */
function modeFrom(values: ClientValues): 'async' | 'stream' | null | undefined {
  const m = requestedMode(values);
  return m === undefined ? undefined : m === 'sync' ? null : m;
}

interface ReplayArgs {
  id: string;
  input: Record<string, unknown> | undefined;
  mode: Mode | undefined;
}

function planReplay(args: string[], values: ClientValues): Plan {
  const id = values.replay as string;
  if (args.length) throw new ClientUsageError(`invoke --replay ID takes no NAME (got '${args[0]}'): the invocation names its snippet`);
  if (!INVOCATION_ID_RE.test(id)) throw new ClientUsageError(`--replay: '${id}' is not an invocation id (inv_…)`);
  if (values.env !== undefined || values.version !== undefined)
    throw new ClientUsageError(
      '--replay runs the invocation’s own version and env: drop --env/--version (or `svc-emu invoke NAME --version V` to choose)',
    );
  const input = values.data === undefined ? undefined : inputFrom(values.data as string);
  const mode = requestedMode(values);
  return (conn, io, json, extra) => replay(conn, io, json, { id, input, mode }, extra);
}

interface ReplaySource {
  snippet: string;
  version: number;
  env: string | null;
  mode: Mode;
  input: Record<string, unknown> | null;
  input_truncated: boolean;
  overrides: Record<string, number> | null;
  callback: { url: string } | null;
  egress?: { mode: string; cassette: string | null } | null;
}

/** Runs an invocation again: its snippet, version, env, mode and X-Emu-Limits overrides, with its stored input (or --data). */
async function replay(
  conn: Connection,
  io: ClientIO,
  json: boolean,
  a: ReplayArgs,
  extra: Pick<InvokeArgs, 'headers' | 'onAccepted'> = {},
): Promise<number> {
  const reply = await conn.admin.send(ops.emuGetInvocation, { params: { id: a.id } }).catch((err: unknown) => {
    throw unreachable(conn.url, err);
  });
  if (reply.status === 404) {
    throw new ClientFailure(`invocation ${a.id} is unknown (or trimmed from the history)`, {
      code: 'not_found',
      invocation_id: a.id,
      detail: `invocation ${a.id} is unknown`,
    });
  }
  if (reply.status !== 200) throw problemFailure(reply, `reading ${a.id}`);
  const src = reply.body as ReplaySource;
  let input = a.input;
  if (!input) {
    if (!src.input) {
      const why = src.input_truncated ? 'was over 64 KiB of JSON, so it was not kept' : 'was not kept (the run predates stored inputs)';
      throw new ClientFailure(`the input of ${a.id} ${why}: give one with --data JSON`, {
        code: 'input_not_kept',
        invocation_id: a.id,
        detail: `the input ${why}`,
      });
    }
    input = { ...src.input };
  }
  const mode = a.mode ?? src.mode;
  // An async run's callback_url was taken out of its input: it goes back in, unless --data gave its own.
  if (mode === 'async' && src.callback?.url && input.callback_url === undefined) input = { ...input, callback_url: src.callback.url };
  const limits =
    src.overrides && Object.keys(src.overrides).length
      ? Object.entries(src.overrides)
          .map(([k, v]) => `${k}=${v}`)
          .join(',')
      : null;
  const token = conn.admin.options.adminToken;
  const headers: Record<string, string> = limits && token ? { 'x-emu-limits': limits, 'x-emu-admin': token } : {};
  // An invocation imported from a run report (server/report/import.ts) reruns against its report's cassette, nothing going out.
  const reportCassette = src.egress?.cassette?.startsWith(REPORT_CASSETTE_PREFIX) ? src.egress.cassette : null;
  if (reportCassette && token)
    Object.assign(headers, { 'x-emu-egress-mode': 'replay', 'x-emu-cassette': reportCassette, 'x-emu-admin': token });
  if (!json)
    io.stderr(
      `replaying ${a.id}: ${src.snippet} v${src.version}${src.env ? ` env ${src.env}` : ''}, ${mode}${limits ? `, overrides ${limits}` : ''}${reportCassette ? `, outbound calls replayed from cassette ${reportCassette}` : ''}\n`,
    );
  return invoke(conn, io, json, {
    snippet: src.snippet,
    input,
    env: src.env ?? undefined,
    version: src.version,
    mode: mode === 'sync' ? null : mode,
    headers: { ...headers, ...extra.headers },
    ...(extra.onAccepted ? { onAccepted: extra.onAccepted } : {}),
  });
}
