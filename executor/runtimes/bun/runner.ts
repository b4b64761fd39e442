/**
 * The Bun runner: loads one version's bundle once, then serves invocations over fd 3 with the NDJSON
 * frames of `executor/protocol.ts` (read that file for the contract; this one does not import it, so
 * the runner's start-up pays for nothing but what it uses).
 *
 *   bun executor/runtimes/bun/runner.ts --bundle DIR --entry FILE      (fd 3: a bidirectional pipe)
 *
 * One invocation at a time. Console output and process.stdout/stderr writes made while an invocation runs
 * become its `log` frames (capped per invocation); the runner's own notes go to the real stderr. Host
 * calls (`@svc/store`, `@svc/integrations`) go through `globalThis[Symbol.for('svc.host')].call`.
 * Exits when fd 3 closes.
 */
import fs from 'node:fs';
import path from 'node:path';
import util from 'node:util';
import { startEgressRelay } from './egress-relay';

declare const Bun: {
  version: string;
  resolveSync(specifier: string, from: string): string;
  file(fd: number): { stream(): ReadableStream<Uint8Array> };
  sleepSync(ms: number): void;
};

const FD = 3;
/** Keep in step with MAX_FRAME_BYTES in executor/protocol.ts. */
const MAX_FRAME_BYTES = 8 * 1024 * 1024;
/** A chunk or result whose JSON is longer than this is refused (the envelope fits in the rest). */
const MAX_PAYLOAD_BYTES = MAX_FRAME_BYTES - 64 * 1024;
/** stdout + stderr kept per invocation; the rest is dropped and counted (logs_dropped on the result). */
const LOG_CAP_BYTES = 1024 * 1024;
const HOST_OPS = new Set(['store.get', 'store.set', 'store.delete', 'store.list', 'integrations.call']);

const RUNNER_FILE = fileOf(import.meta.url);
/** Frames of our own @svc libraries (a failed host call's stack starts at the tenant's line). */
const LIBRARY_FRAME = /^\s+at .*[/@]svc[-/](store|integrations)\/index\.[tj]s:\d+/;

// ---- arguments -------------------------------------------------------------------------------------

function argValue(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const bundleArg = argValue('--bundle');
/** Without --entry the runner is a spare: started ahead, it loads the entry named by a `load` frame. */
const entryArg = argValue('--entry');
/** A framework spare: packages to import before the `load` frame (comma-separated; executor/import-profile.ts). */
const preloadArg = argValue('--preload');
/** A framework spare: the warm-up run after the preload (a file beside this one; executor/import-profile.ts). */
const warmupArg = argValue('--warmup');
if (!bundleArg) {
  process.stderr.write('usage: bun runner.ts --bundle DIR [--entry FILE]   (fd 3 open)\n');
  process.exit(2);
}
const BUNDLE_DIR = path.resolve(bundleArg);

// ---- frames out ------------------------------------------------------------------------------------

/** Writes one whole line to fd 3, synchronously: frames never interleave and leave in the order made. */
function writeLine(line: string): void {
  let buf: Buffer | null = null;
  let off = 0;
  const total = Buffer.byteLength(line);
  while (off < total) {
    try {
      const n = buf ? fs.writeSync(FD, buf, off, total - off) : fs.writeSync(FD, line);
      off += n;
      if (off < total && !buf) buf = Buffer.from(line);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN' || code === 'EINTR') {
        if (!buf) buf = Buffer.from(line);
        Bun.sleepSync(1);
        continue;
      }
      if (code === 'EPIPE' || code === 'ECONNRESET' || code === 'EBADF') process.exit(0); // the executor is gone
      throw err;
    }
  }
}

function sendFrame(frame: Record<string, unknown>): void {
  // The invocation's last frame says how much of its output was dropped past the cap.
  if ((frame.t === 'result' || frame.t === 'error') && current && current.id === frame.id && current.dropped > 0) {
    frame = { ...frame, logs_dropped: current.dropped };
  }
  writeLine(JSON.stringify(frame) + '\n');
}

/** While a spare's warm-up runs (before any bundle): console and stdout/stderr output is dropped. */
let muted = false;

const realStderrWrite = process.stderr.write.bind(process.stderr);
const realStdoutWrite = process.stdout.write.bind(process.stdout);

/** The runner's own notes: straight to fd 2, synchronously. */
function note(message: string): void {
  try {
    fs.writeSync(2, `[svc-runner] ${message}\n`);
  } catch {
    /* nothing left to tell */
  }
}

// ---- JSON checks -----------------------------------------------------------------------------------

class NotJsonError extends Error {}

/** The JSON text of a handler's value, or a NotJsonError saying why there is none. */
function toJson(value: unknown, what: string): string {
  if (value === undefined) return 'null';
  const type = typeof value;
  if (type === 'function') throw new NotJsonError(`${what} is not JSON-serialisable: it is a function`);
  if (type === 'symbol') throw new NotJsonError(`${what} is not JSON-serialisable: it is a Symbol`);
  if (type === 'bigint') throw new NotJsonError(`${what} is not JSON-serialisable: it is a BigInt`);
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    let why = msg;
    if (/bigint/i.test(msg)) why = `it contains a BigInt (${msg})`;
    else if (/cycl|circular/i.test(msg)) why = `it contains a circular reference (${msg})`;
    throw new NotJsonError(`${what} is not JSON-serialisable: ${why}`);
  }
  if (text === undefined) throw new NotJsonError(`${what} is not JSON-serialisable: JSON.stringify produced nothing`);
  if (text.length > MAX_PAYLOAD_BYTES / 3) {
    const bytes = Buffer.byteLength(text);
    if (bytes > MAX_PAYLOAD_BYTES) {
      throw new NotJsonError(`${what} is too large to send: ${bytes} bytes of JSON, at most ${MAX_PAYLOAD_BYTES}`);
    }
  }
  return text;
}

// ---- stacks ----------------------------------------------------------------------------------------

function fileOf(url: string): string {
  return url.startsWith('file://') ? decodeURIComponent(new URL(url).pathname) : url;
}

/** The tenant's stack: the runner's own frames dropped, bundle file names made relative. */
function cleanStack(stack: string | undefined): string | undefined {
  if (typeof stack !== 'string') return undefined;
  const out: string[] = [];
  for (const line of stack.split('\n')) {
    if (line.includes(RUNNER_FILE) || LIBRARY_FRAME.test(line)) continue;
    out.push(line);
  }
  // Internal frames below the last tenant frame (the microtask queue, the module loader) say nothing.
  while (out.length > 1 && /^\s+at .*(\(native|\bnative:\d|\(unknown\)|processTicksAndRejections)/.test(out[out.length - 1]!)) {
    out.pop();
  }
  return relativise(out.join('\n'));
}

function relativise(text: string): string {
  const dir = BUNDLE_DIR.endsWith('/') ? BUNDLE_DIR : `${BUNDLE_DIR}/`;
  return text.split(`file://${dir}`).join('').split(dir).join('');
}

function describeThrown(err: unknown): { message: string; stack?: string } {
  if (err instanceof Error) {
    try {
      const stack = cleanStack(err.stack);
      return stack ? { message: String(err.message), stack } : { message: String(err.message) };
    } catch {
      return { message: 'an Error whose message or stack could not be read' };
    }
  }
  if (typeof err === 'string') return { message: err };
  try {
    return { message: util.inspect(err, { depth: 4, breakLength: Infinity }) };
  } catch {
    return { message: 'a non-Error value was thrown' };
  }
}

/** Bun's BuildMessage / ResolveMessage (syntax and resolution errors) carry a position instead of a stack. */
function describeInitError(err: unknown): { message: string; stack?: string } {
  const list: unknown[] = err instanceof AggregateError && Array.isArray(err.errors) && err.errors.length ? err.errors : [err];
  const first = list[0] as { message?: unknown; position?: unknown; name?: unknown } | null;
  const pos = first && typeof first === 'object' ? (first.position as Record<string, unknown> | null | undefined) : undefined;
  if (pos && typeof pos === 'object' && typeof pos.file === 'string') {
    const file = relativise(String(pos.file));
    const where = `${file}:${String(pos.line)}:${String(pos.column)}`;
    const kind = first!.name === 'ResolveMessage' ? 'ResolveError' : 'SyntaxError';
    const lines: string[] = [];
    for (const e of list) {
      const p = (e as { position?: Record<string, unknown> }).position;
      const msg = String((e as { message?: unknown }).message);
      if (p && typeof p.file === 'string') {
        const col = Math.max(0, Number(p.column) || 0);
        lines.push(`${relativise(String(p.file))}:${String(p.line)}:${String(p.column)}: ${msg}`);
        if (typeof p.lineText === 'string')
          lines.push(`  ${String(p.line)} | ${p.lineText}`, `  ${' '.repeat(String(p.line).length)} | ${' '.repeat(col)}^`);
      } else lines.push(msg);
    }
    return { message: `${kind}: ${String(first!.message)} (${where})`, stack: lines.join('\n') };
  }
  if (first && typeof first === 'object' && (first as { name?: unknown }).name === 'ResolveMessage') {
    return { message: relativise(`ResolveError: ${String(first.message)}`) };
  }
  const d = describeThrown(err);
  return err instanceof Error && err.name && err.name !== 'Error' ? { ...d, message: `${err.name}: ${d.message}` } : d;
}

// ---- the current invocation ------------------------------------------------------------------------

interface Invocation {
  id: string;
  /** performance.now() when the invoke frame was taken: the agent steps' clock (`at_ms`). */
  t0: number;
  logBytes: number;
  truncated: boolean;
  /** Bytes dropped past LOG_CAP_BYTES. */
  dropped: number;
  done: boolean;
  /** Ends the invocation from outside the handler (an uncaught error in its callbacks). */
  abort: (err: unknown) => void;
}

let current: Invocation | null = null;

function emitLog(inv: Invocation, stream: 'stdout' | 'stderr', data: string): void {
  if (inv.done || data.length === 0) return;
  const bytes = Buffer.byteLength(data);
  if (inv.truncated) {
    inv.dropped += bytes;
    return;
  }
  if (inv.logBytes + bytes > LOG_CAP_BYTES) {
    const room = LOG_CAP_BYTES - inv.logBytes;
    const head = room > 0 ? Buffer.from(data).subarray(0, room).toString() : '';
    inv.truncated = true;
    inv.dropped += bytes - Buffer.byteLength(head);
    inv.logBytes = LOG_CAP_BYTES;
    if (head) sendFrame({ t: 'log', id: inv.id, stream, data: head });
    return;
  }
  inv.logBytes += bytes;
  sendFrame({ t: 'log', id: inv.id, stream, data });
}

function chunkToString(chunk: unknown, encoding?: unknown): string {
  if (typeof chunk === 'string') return chunk;
  if (chunk instanceof Uint8Array)
    return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString(
      typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8',
    );
  return String(chunk);
}

// process.stdout/stderr.write: captured while an invocation runs, the originals otherwise.
for (const [stream, name, real] of [
  [process.stdout, 'stdout', realStdoutWrite],
  [process.stderr, 'stderr', realStderrWrite],
] as const) {
  (stream as { write: unknown }).write = function write(chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
    const inv = current;
    if (!inv && muted) return true;
    if (!inv) return (real as (...a: unknown[]) => boolean)(chunk, encoding, cb);
    emitLog(inv, name, chunkToString(chunk, encoding));
    const callback = typeof encoding === 'function' ? encoding : cb;
    if (typeof callback === 'function') queueMicrotask(() => (callback as () => void)());
    return true;
  };
}

// console.*: the same. log/info/debug/warn/error/trace/group* are formatted here (util.format, as Node's
// console does); the rarer methods (table, dir, count, time, assert…) go to a capturing Console made on
// first use, so the common path never loads node:console / node:stream.
type ConsoleLike = Record<string, (...args: unknown[]) => unknown>;
const CONSOLE_METHODS = [
  'log',
  'info',
  'debug',
  'warn',
  'error',
  'trace',
  'dir',
  'dirxml',
  'table',
  'group',
  'groupCollapsed',
  'groupEnd',
  'count',
  'countReset',
  'time',
  'timeEnd',
  'timeLog',
  'assert',
];
const CONSOLE_STREAM: Record<string, 'stdout' | 'stderr'> = {
  log: 'stdout',
  info: 'stdout',
  debug: 'stdout',
  warn: 'stderr',
  error: 'stderr',
};
let groupIndent = '';
let captureConsole: ConsoleLike | null = null;
function getCaptureConsole(): ConsoleLike {
  if (captureConsole) return captureConsole;
  // Loaded on the first capture, not at start-up (the runner's start pays only for what it uses).
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { Console } = require('node:console') as typeof import('node:console');
  const { Writable } = require('node:stream') as typeof import('node:stream');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const sink = (name: 'stdout' | 'stderr') =>
    new Writable({
      decodeStrings: false,
      write(chunk: unknown, encoding: unknown, cb: (err?: Error | null) => void) {
        const inv = current;
        if (inv) emitLog(inv, name, indent(chunkToString(chunk, encoding)));
        cb();
      },
    });
  captureConsole = new Console({ stdout: sink('stdout'), stderr: sink('stderr'), colorMode: false }) as unknown as ConsoleLike;
  return captureConsole;
}
function format(args: unknown[]): string {
  return util.formatWithOptions({ colors: false }, ...args);
}
function indent(text: string): string {
  if (!groupIndent) return text;
  const body = text.endsWith('\n') ? text.slice(0, -1) : text;
  return groupIndent + body.split('\n').join(`\n${groupIndent}`) + (body.length < text.length ? '\n' : '');
}
{
  const con = console as unknown as ConsoleLike;
  // A fixed list: reading console.Console would load node:console at start-up (~2 ms).
  for (const method of CONSOLE_METHODS) {
    const real = con[method];
    if (typeof real !== 'function') continue;
    const stream = CONSOLE_STREAM[method];
    con[method] = function (...args: unknown[]) {
      const inv = current;
      if (!inv && muted) return undefined;
      if (!inv) return real.apply(console, args);
      if (stream) {
        emitLog(inv, stream, indent(`${format(args)}\n`));
      } else if (method === 'group' || method === 'groupCollapsed') {
        if (args.length) emitLog(inv, 'stdout', indent(`${format(args)}\n`));
        groupIndent += '  ';
      } else if (method === 'groupEnd') {
        groupIndent = groupIndent.slice(0, -2);
      } else if (method === 'trace') {
        // Node's format, with the tenant's frames only.
        const msg = args.length ? `: ${format(args)}` : '';
        const frames = cleanStack(new Error().stack)!.split('\n').slice(1).join('\n');
        emitLog(inv, 'stderr', indent(`Trace${msg}\n${frames}\n`));
      } else {
        const cap = getCaptureConsole();
        return cap[method]!.apply(cap, args);
      }
      return undefined;
    };
  }
}

// ---- egress ----------------------------------------------------------------------------------------
// The way out of the sandbox: the relay of egress-relay.ts (docs/egress-relay.md), started before the bundle loads.

const egress = process.env.SVC_EGRESS_SOCKET
  ? startEgressRelay(process.env.SVC_EGRESS_SOCKET, { currentId: () => current?.id, note })
  : null;
if (egress) Object.assign(process.env, egress.env);

// ---- env -------------------------------------------------------------------------------------------

/** The runner's own environment: restored, never deleted, when an invocation stops setting a name. */
const baseEnv: Record<string, string | undefined> = { ...process.env };
let invocationEnvKeys: string[] = [];

function applyEnv(env: Record<string, string>): void {
  for (const key of invocationEnvKeys) {
    if (Object.prototype.hasOwnProperty.call(env, key)) continue;
    const base = baseEnv[key];
    if (base === undefined) delete process.env[key];
    else process.env[key] = base;
  }
  for (const key of Object.keys(env)) process.env[key] = env[key];
  invocationEnvKeys = Object.keys(env);
  // The way out stays the relay whatever the invocation's env says.
  if (egress) Object.assign(process.env, egress.env);
}

// ---- host calls ------------------------------------------------------------------------------------

interface PendingCall {
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  /** Made at call time, so a failed call's stack names the tenant's line. */
  origin: Error;
}
const pendingCalls = new Map<string, PendingCall>();
let callSeq = 0;

class HostCallError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'HostCallError';
  }
}

function hostCall(op: string, args: Record<string, unknown>): Promise<unknown> {
  const origin = new Error('host call');
  const inv = current;
  if (!inv || inv.done) {
    return Promise.reject(new HostCallError('no_invocation', `${op}: host calls can only be made while a handler runs`));
  }
  if (!HOST_OPS.has(op)) return Promise.reject(new HostCallError('unknown_op', `unknown host operation ${JSON.stringify(op)}`));
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    return Promise.reject(new HostCallError('bad_args', `${op}: the arguments must be an object`));
  }
  let argsJson: string;
  try {
    argsJson = toJson(args, `the arguments of ${op}`);
  } catch (err) {
    return Promise.reject(new HostCallError('bad_args', (err as Error).message));
  }
  const cid = `c${++callSeq}`;
  return new Promise((resolve, reject) => {
    pendingCalls.set(cid, { resolve, reject, origin });
    writeLine(`{"t":"call","id":${JSON.stringify(inv.id)},"cid":"${cid}","op":${JSON.stringify(op)},"args":${argsJson}}\n`);
  });
}

function onReply(frame: Record<string, unknown>): void {
  const cid = frame.cid as string;
  const pending = pendingCalls.get(cid);
  if (!pending) {
    note(`reply for unknown call ${JSON.stringify(cid)} ignored`);
    return;
  }
  pendingCalls.delete(cid);
  if (frame.ok === true) {
    pending.resolve(frame.value === undefined ? null : frame.value);
    return;
  }
  const e = (frame.error ?? {}) as { code?: unknown; message?: unknown; status?: unknown; body?: unknown };
  const code = typeof e.code === 'string' ? e.code : 'host_error';
  const message = typeof e.message === 'string' ? e.message : 'the host call failed';
  const err = new HostCallError(code, message);
  if (typeof e.status === 'number') Object.assign(err, { status: e.status, body: e.body ?? null }); // an integration's HTTP error
  const originFrames = (pending.origin.stack ?? '').split('\n').slice(1);
  err.stack = cleanStack([`HostCallError: ${message}`, ...originFrames].join('\n'));
  pending.reject(err);
}

Object.defineProperty(globalThis, Symbol.for('svc.host'), {
  value: Object.freeze({ call: hostCall }),
  enumerable: false,
  writable: false,
  configurable: false,
});

// ---- uncaught errors -------------------------------------------------------------------------------

function onUncaught(err: unknown): void {
  const inv = current;
  if (inv && !inv.done) inv.abort(err);
  else {
    const d = describeThrown(err);
    note(`uncaught error outside an invocation: ${d.stack ?? d.message}`);
  }
}
process.on('uncaughtException', onUncaught);
process.on('unhandledRejection', onUncaught);

// ---- agent steps -----------------------------------------------------------------------------------
// Mastra's steps and tool calls come from its own per-call hooks (agent-hooks.ts), added by wrapping
// Agent.prototype.stream / generate once the snippet has imported @mastra/core: checked before each invocation
// until it has (a dictionary lookup in Bun's module registry); agent-hooks.ts is loaded only then.

let agentHooks: 'pending' | 'installed' | 'none' = 'pending';
let mastraPaths: string[] | null = null;
let endAgentSteps: (() => void) | null = null;

/**
 * Where @mastra/core's entries are (~1 ms of file lookups): resolved once at start-up, before the bundle loads (a
 * spare: before its `preloaded` frame), so no invocation pays for it.
 */
function resolveMastra(): void {
  mastraPaths = [];
  for (const spec of ['@mastra/core/agent', '@mastra/core']) {
    try {
      mastraPaths.push(Bun.resolveSync(spec, BUNDLE_DIR));
    } catch {
      /* not installed here */
    }
  }
  if (mastraPaths.length === 0) agentHooks = 'none';
}

/** Has the snippet imported @mastra/core (a lookup in Bun's module registry, which holds ES modules too)? */
function mastraLoaded(): boolean {
  if (mastraPaths === null) resolveMastra();
  if (agentHooks !== 'pending' || !mastraPaths) return false;
  const cache = (require as unknown as { cache: Record<string, unknown> }).cache;
  return mastraPaths.some((p) => p in cache);
}

async function installAgentHooks(): Promise<void> {
  agentHooks = 'installed';
  try {
    const [{ Agent }, hooks] = await Promise.all([import(mastraPaths![0]!) as Promise<{ Agent?: unknown }>, import('./agent-hooks')]);
    hooks.installMastraHooks(Agent, {
      current: () => (current && !current.done ? current : null),
      send: (frame) => writeLine(JSON.stringify(frame) + '\n'),
      note,
    });
    endAgentSteps = hooks.endInvocation;
  } catch (err) {
    note(`agent steps are off: ${err instanceof Error ? err.message : String(err)}`);
  }
}

// ---- load the bundle -------------------------------------------------------------------------------

type Handler = (input: unknown) => unknown;

async function load(entry: string): Promise<Handler | null> {
  const ENTRY = path.resolve(BUNDLE_DIR, entry);
  const t0 = performance.now();
  let mod: Record<string, unknown>;
  try {
    mod = (await import(ENTRY)) as Record<string, unknown>;
  } catch (err) {
    sendFrame({ t: 'init_error', ...describeInitError(err) });
    return null;
  }
  const init_ms = performance.now() - t0;
  const def = mod.default;
  let handler: unknown;
  if (typeof def === 'function') handler = def;
  else if (typeof mod.handler === 'function') handler = mod.handler;
  else if (def && typeof def === 'object' && typeof (def as { handler?: unknown }).handler === 'function') {
    handler = (def as { handler: unknown }).handler; // CommonJS: module.exports = { handler }
  }
  if (typeof handler !== 'function') {
    sendFrame({
      t: 'init_error',
      message: `${path.relative(BUNDLE_DIR, ENTRY)} exports no handler: export a default function (or a function named \`handler\`)`,
    });
    return null;
  }
  sendFrame({ t: 'ready', init_ms: Math.round(init_ms * 1000) / 1000, runtime: { name: 'bun', version: Bun.version } });
  return handler as Handler;
}

/**
 * A spare's imports (a framework spare's; none for a plain one), made before any bundle is given, then a
 * `preloaded` frame: the spare is up, and the host may cap it and hand it a bundle. Each is resolved from
 * the bundle dir, as the snippet's own `import` will be: the same file, so the snippet's import finds the module
 * record made here (Bun keys modules by resolved path). One that fails is noted and left to the snippet.
 */
async function preload(list: string, warmup: string | undefined): Promise<void> {
  const t0 = performance.now();
  const failed: string[] = [];
  const load = (spec: string) => import(Bun.resolveSync(spec, BUNDLE_DIR)) as Promise<Record<string, unknown>>;
  for (const spec of list.split(',').filter(Boolean)) {
    try {
      await load(spec);
    } catch (err) {
      failed.push(spec);
      note(`preloading ${spec} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const ms = Math.round((performance.now() - t0) * 1000) / 1000;
  const warm = warmup && !failed.length ? await warmUp(warmup, load) : null;
  sendFrame({ t: 'preloaded', ms, ...(failed.length ? { failed } : {}), ...(warm ?? {}) });
}

/**
 * The framework's warm-up (warmup-*.ts beside this file): one agent run of our own, in this process, before any
 * bundle, so the framework's functions a first run calls are compiled. Its output is dropped; a failure is noted
 * and changes nothing else (the spare serves as it would have without it).
 */
async function warmUp(file: string, load: (spec: string) => Promise<Record<string, unknown>>): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const done = (extra: Record<string, unknown> = {}) => ({ warmup_ms: Math.round((performance.now() - t0) * 1000) / 1000, ...extra });
  if (!/^warmup-[\w-]+\.ts$/.test(file)) return done({ warmup_failed: `not a warm-up file: ${file}` });
  muted = true;
  try {
    const mod = (await import(path.join(path.dirname(RUNNER_FILE), file))) as { warmUp(load: unknown): Promise<void> };
    await mod.warmUp(load);
    return done();
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    note(`the warm-up ${file} failed: ${why}`);
    return done({ warmup_failed: why.slice(0, 500) });
  } finally {
    muted = false;
  }
}

// ---- serve -----------------------------------------------------------------------------------------

interface LoadFrame {
  t: 'load';
  entry: string;
}

interface InvokeFrame {
  t: 'invoke';
  id: string;
  input: Record<string, unknown>;
  env: Record<string, string>;
}

function isAsyncIterable(v: unknown): v is AsyncIterable<unknown> {
  return (
    v !== null &&
    (typeof v === 'object' || typeof v === 'function') &&
    typeof (v as Record<symbol, unknown>)[Symbol.asyncIterator] === 'function'
  );
}
function isSyncGenerator(v: unknown): v is Generator<unknown, unknown> {
  return v !== null && typeof v === 'object' && Object.prototype.toString.call(v) === '[object Generator]';
}
function isThenable(v: unknown): v is PromiseLike<unknown> {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function';
}

async function invoke(handler: Handler, frame: InvokeFrame): Promise<void> {
  try {
    applyEnv(frame.env);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    sendFrame({ t: 'error', id: frame.id, code: 'handler_error', message: `the invocation's environment could not be set: ${why}` });
    return;
  }
  const idJson = JSON.stringify(frame.id);
  const inv: Invocation = { id: frame.id, t0: performance.now(), logBytes: 0, truncated: false, dropped: 0, done: false, abort: () => {} };
  const aborted = new Promise<never>((_, reject) => {
    inv.abort = reject;
  });
  aborted.catch(() => {});
  groupIndent = '';
  egress?.closeAll(); // connections opened outside this invocation are not to be reused under its name
  if (agentHooks === 'pending' && mastraLoaded()) await installAgentHooks();
  current = inv;

  const finishError = (err: unknown) => {
    if (inv.done) return;
    const d = err instanceof NotJsonError ? { message: err.message } : describeThrown(err);
    endAgentSteps?.();
    inv.done = true;
    sendFrame({ t: 'error', id: frame.id, code: 'handler_error', ...d });
  };

  const work = (async () => {
    let result = handler(frame.input);
    if (!isAsyncIterable(result) && isThenable(result)) result = await result;
    if (isAsyncIterable(result) || isSyncGenerator(result)) {
      const it = isAsyncIterable(result) ? result[Symbol.asyncIterator]() : result;
      for (;;) {
        const step = await it.next();
        if (inv.done) return;
        if (step.done) {
          result = step.value;
          break;
        }
        writeLine(`{"t":"chunk","id":${idJson},"data":${toJson(step.value, 'a yielded value')}}\n`);
      }
    }
    const json = toJson(result, 'the return value');
    if (inv.done) return;
    endAgentSteps?.();
    inv.done = true;
    writeLine(`{"t":"result","id":${idJson},"output":${json}${inv.dropped ? `,"logs_dropped":${inv.dropped}` : ''}}\n`);
  })();

  try {
    await Promise.race([work, aborted]);
  } catch (err) {
    finishError(err);
  } finally {
    inv.done = true;
    if (current === inv) current = null;
    egress?.closeAll();
  }
}

function parseFrame(line: string): Record<string, unknown> | null {
  let frame: unknown;
  try {
    frame = JSON.parse(line);
  } catch {
    note(`ignored a line that is not JSON (${line.length} chars)`);
    return null;
  }
  if (!frame || typeof frame !== 'object' || Array.isArray(frame)) {
    note('ignored a frame that is not an object');
    return null;
  }
  const f = frame as Record<string, unknown>;
  if (f.t === 'invoke') {
    const env = f.env as Record<string, unknown> | undefined;
    const inputOk = f.input !== null && typeof f.input === 'object' && !Array.isArray(f.input);
    const envOk = env !== null && typeof env === 'object' && !Array.isArray(env) && Object.values(env).every((v) => typeof v === 'string');
    if (typeof f.id !== 'string' || !inputOk || !envOk) {
      note('ignored a malformed invoke frame');
      return null;
    }
    return f;
  }
  if (f.t === 'load') {
    if (typeof f.entry !== 'string' || f.entry === '') {
      note('ignored a malformed load frame');
      return null;
    }
    return f;
  }
  if (f.t === 'reply') {
    if (typeof f.cid !== 'string' || typeof f.ok !== 'boolean') {
      note('ignored a malformed reply frame');
      return null;
    }
    return f;
  }
  note(`ignored a frame of unknown type ${JSON.stringify(f.t)}`);
  return null;
}

async function main(): Promise<void> {
  let reader: ReadableStreamDefaultReader<Uint8Array>;
  try {
    reader = Bun.file(FD).stream().getReader();
  } catch (err) {
    note(`fd ${FD} is not open: ${String(err)}`);
    process.exit(2);
  }
  let handler: Handler | null = null;
  let loaded = false;
  if (!entryArg) {
    resolveMastra();
    await preload(preloadArg ?? '', warmupArg);
  }
  if (entryArg) {
    resolveMastra();
    handler = await load(entryArg);
    loaded = true;
  }

  const queue: (InvokeFrame | LoadFrame)[] = [];
  let serving = false;
  const serve = async () => {
    if (serving) return;
    serving = true;
    while (queue.length > 0) {
      const frame = queue.shift()!;
      if (frame.t === 'load') {
        if (loaded) note('ignored a second load frame');
        else {
          loaded = true;
          handler = await load(frame.entry);
        }
        continue;
      }
      try {
        if (handler) await invoke(handler, frame);
        else sendFrame({ t: 'error', id: frame.id, code: 'handler_error', message: 'the bundle failed to load (see init_error)' });
      } catch (err) {
        note(`invocation ${frame.id} broke the runner's own code: ${err instanceof Error ? err.stack : String(err)}`);
      }
    }
    serving = false;
  };

  const decoder = new TextDecoder();
  let buffered = '';
  let discarding = false;
  const onLine = (line: string) => {
    if (line.length === 0) return;
    const frame = parseFrame(line);
    if (!frame) return;
    if (frame.t === 'invoke' || frame.t === 'load') {
      queue.push(frame as unknown as InvokeFrame | LoadFrame);
      void serve();
    } else onReply(frame);
  };

  for (;;) {
    let chunk: Awaited<ReturnType<typeof reader.read>>;
    try {
      chunk = await reader.read();
    } catch {
      break;
    }
    if (chunk.done) break;
    const text = decoder.decode(chunk.value, { stream: true });
    let start = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      const line = buffered + text.slice(start, nl);
      buffered = '';
      start = nl + 1;
      if (discarding) discarding = false;
      else onLine(line);
    }
    if (!discarding) {
      buffered += start === 0 ? text : text.slice(start);
      if (buffered.length > MAX_FRAME_BYTES) {
        note(`ignored a frame over ${MAX_FRAME_BYTES} bytes`);
        buffered = '';
        discarding = true;
      }
    }
  }
  process.exit(0);
}

await main();
