import { dataDirPaths, liveOwner } from '../storage/data-dir';
import { NAME_RE } from '../../contract/schemas/common';
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

/**
 * The client commands (`invoke`, `logs`, `deploy`): a user's `/v1` calls from the terminal, for people who
 * prefer files and a shell to the GUI. Unlike the operator commands they need a running core on the data
 * dir: it is found through `<data-dir>/emulator.json`, the local tenant's key is read from `GET /_emu/info`
 * with the admin token, and every call then goes through `/v1` with that key, as any client's would.
 *
 * Every argument is checked before anything touches the network (exit 2); a failed call or a failed
 * outcome exits 1.
 */

export const CLIENT_COMMANDS = ['invoke', 'logs', 'deploy'] as const;
export type ClientCommand = (typeof CLIENT_COMMANDS)[number];
export const isClientCommand = (cmd: string | undefined): cmd is ClientCommand => CLIENT_COMMANDS.includes(cmd as ClientCommand);

/** The options only the client commands take (merged into the CLI's option table). */
export const CLIENT_OPTIONS = {
  data: { type: 'string' },
  env: { type: 'string' },
  version: { type: 'string' },
  async: { type: 'boolean' },
  stream: { type: 'boolean' },
} as const;

export const CLIENT_USAGE = `  svc-emu invoke NAME [--data JSON] [--env E] [--version V] [--async | --stream]
  svc-emu logs ID
  svc-emu deploy NAME --version V --env E`;

/** The options each command accepts beyond the global ones. */
const ACCEPTS: Record<ClientCommand, readonly string[]> = {
  invoke: ['data', 'env', 'version', 'async', 'stream'],
  logs: [],
  deploy: ['env', 'version'],
};
const GLOBAL_OPTIONS = ['data-dir', 'json', 'help'];

const SNIPPET_ID_RE = /^snp_[0-9A-Za-z]{1,64}$/;
const INVOCATION_ID_RE = /^inv_[0-9A-Za-z]{1,64}$/;
const VERSION_RE = /^[1-9]\d{0,8}$/;

export interface ClientIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
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

type Plan = (conn: Connection, io: ClientIO, json: boolean) => Promise<number>;

/** Runs `invoke`, `logs` or `deploy`; returns the exit code (0 ok, 1 failed, 2 usage). Never throws. */
export async function runClient(cmd: ClientCommand, args: string[], values: ClientValues, dataDir: string, io: ClientIO): Promise<number> {
  const json = values.json === true;
  let plan: Plan;
  try {
    plan = planCommand(cmd, args, values);
  } catch (err) {
    if (!(err instanceof ClientUsageError)) throw err;
    io.stderr(`svc-emu: ${err.message}\nRun \`svc-emu --help\` for usage.\n`);
    return 2;
  }
  try {
    const conn = await connect(dataDir);
    return await plan(conn, io, json);
  } catch (err) {
    if (!(err instanceof ClientFailure)) throw err;
    io.stderr(json ? JSON.stringify(err.json) + '\n' : `svc-emu: ${err.message}\n`);
    return 1;
  }
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
      const [name] = positionals(args, 1, 'invoke NAME [--data JSON] [--env E] [--version V] [--async | --stream]');
      const snippet = snippetRef(name!);
      const input = inputFrom(values.data as string | undefined);
      const env = values.env === undefined ? undefined : envName(values.env as string);
      const version = values.version === undefined ? undefined : versionNumber(values.version as string);
      if (values.async && values.stream) throw new ClientUsageError('--async and --stream: choose one mode');
      const mode = values.async ? 'async' : values.stream ? 'stream' : null;
      return (conn, io, json) => invoke(conn, io, json, { snippet, input, env, version, mode });
    }
    case 'logs': {
      const [id] = positionals(args, 1, 'logs ID');
      if (!INVOCATION_ID_RE.test(id!))
        throw new ClientUsageError(`ID: '${id}' is not an invocation id (inv_…, from X-Invocation-Id or \`svc-emu invoke\`)`);
      return (conn, io, json) => logs(conn, io, json, id!);
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

function positionals(args: string[], n: number, form: string): string[] {
  if (args.length < n) throw new ClientUsageError(`usage: svc-emu ${form}`);
  if (args.length > n) throw new ClientUsageError(`unexpected argument '${args[n]}'`);
  return args;
}

function snippetRef(name: string): string {
  if (NAME_RE.test(name) || SNIPPET_ID_RE.test(name)) return name;
  throw new ClientUsageError(
    `NAME: '${name}' is not a snippet name (1–63 characters of a-z, 0-9 and "-", starting with a letter or digit) or id`,
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

function connection(url: string, client: Client): Connection {
  return {
    url,
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

async function connect(dataDir: string): Promise<Connection> {
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
  const url = owner.url;
  const info = await connection(url, createClient({ baseUrl: url, adminToken: owner.admin_token })).send(ops.emuInfo, {});
  if (info.status !== 200) throw problemFailure(info, `reading the local key from ${url}/_emu/info`);
  const key = (info.body as { local_api_key?: string | null } | undefined)?.local_api_key;
  if (!key) {
    throw new ClientFailure(
      `the emulator on ${dataDir} cannot show the local tenant's API key (its data dir lost the key file, or tenant local has no key)`,
      { code: 'no_local_key', data_dir: dataDir, detail: 'GET /_emu/info returned no local_api_key' },
    );
  }
  return connection(url, createClient({ baseUrl: url, key }));
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
    headers: a.mode ? { 'x-invoke-mode': a.mode } : {},
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
