/**
 * The terminal of `npm start` / `svc-emu serve`: one human line per event that matters (a snippet compiled
 * or refused, a deployment, a failed run, a failed callback delivery), read from the core's event bus
 * (server/events/bus.ts), with colour on a TTY. The formatting functions are pure (test/server/terminal-lines.test.ts);
 * `followTerminalLines` subscribes them to a bus and `prettyLogger` prints the core's own log messages in the
 * same style. `--log-format json` keeps one JSON object a line for everything instead (server/logger.ts).
 */
import { readFileSync, statSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import type { EmuEvent, EmuEventData } from '../contract/schemas/events';
import type { EventBus } from './events/bus';
import { jsonLogger, redact, type LogFields, type Logger, type LogLevel } from './logger';

export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export const LOG_FORMATS = ['pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
export const shows = (min: LogLevel, level: LogLevel) => ORDER[level] >= ORDER[min];

/**
 * Colour or not, as the usual conventions say: `NO_COLOR` (any non-empty value) turns it off, `FORCE_COLOR`
 * (non-empty, not `0`/`false`) turns it on, else colour only when the output is a terminal.
 */
export function useColour(env: Record<string, string | undefined>, isTTY: boolean | undefined): boolean {
  if (env.NO_COLOR) return false;
  const force = env.FORCE_COLOR;
  if (force !== undefined && force !== '') return force !== '0' && force !== 'false';
  return isTTY === true;
}

type Paint = (text: string) => string;
export interface Palette {
  red: Paint;
  green: Paint;
  yellow: Paint;
  cyan: Paint;
  dim: Paint;
  bold: Paint;
}
const sgr =
  (open: number, close: number): Paint =>
  (t) =>
    `\x1b[${open}m${t}\x1b[${close}m`;
const plain: Paint = (t) => t;
export const palette = (colour: boolean): Palette =>
  colour
    ? { red: sgr(31, 39), green: sgr(32, 39), yellow: sgr(33, 39), cyan: sgr(36, 39), dim: sgr(2, 22), bold: sgr(1, 22) }
    : { red: plain, green: plain, yellow: plain, cyan: plain, dim: plain, bold: plain };

/** One line (a code frame adds lines below it) and what a JSON log line of it holds. */
export interface TerminalLine {
  level: LogLevel;
  /** The short name of what happened: `compiled`, `deployed`, `compile_error`, `run_failed`, … (the JSON `msg`). */
  msg: string;
  fields: LogFields;
  /** The human text, without the time prefix; may span lines (a code frame). */
  text: string;
}

export interface LineContext {
  colour: boolean;
  /** A workspace file's text for the code frame of a compile error (null when it cannot be read). */
  readSource?: (folder: string, file: string) => string | null;
}

/** `HH:MM:SS`, local time: a terminal is read by the person sitting at it. */
export const clock = (at: Date) => at.toTimeString().slice(0, 8);

/**
 * A Babel-style code frame: the offending line between its neighbours, numbered, with a caret under the
 * column (the first non-blank character when no column is known). Tabs stay tabs, so the caret lines up.
 */
export function codeFrame(source: string, line: number, column: number | undefined, p: Palette = palette(false), around = 1): string {
  const lines = source.replace(/\r\n?/g, '\n').split('\n');
  if (line < 1 || line > lines.length) return '';
  const first = Math.max(1, line - around);
  const last = Math.min(lines.length, line + around);
  const width = String(last).length;
  const out: string[] = [];
  for (let n = first; n <= last; n++) {
    const text = lines[n - 1]!;
    const gutter = ` ${String(n).padStart(width)} | `;
    if (n !== line) {
      out.push(p.dim(`  ${gutter}${text}`));
      continue;
    }
    out.push(`${p.red('>')} ${p.bold(gutter)}${text}`);
    const col = column && column >= 1 ? Math.min(column, text.length + 1) : (/\S/.exec(text)?.index ?? 0) + 1;
    // Keep tabs under tabs so the caret sits under the character on any tab width.
    const pad = text.slice(0, col - 1).replace(/[^\t]/g, ' ');
    out.push(`  ${' '.repeat(gutter.length - 2)}| ${pad}${p.red('^')}`);
  }
  return out.join('\n');
}

const envOf = (env: string | null) => (env ? ` (${env})` : '');
const ms = (n: number | null | undefined) => (n === null || n === undefined ? '' : `${Math.round(n)} ms`);

type Folder = EmuEventData<'workspace.folder'>;

/** A message that starts with its own `file:line:col: ` (Python's compile errors do), without it: the line says where. */
export function withoutLocation(message: string, file: string | undefined): string {
  if (!file || !message.startsWith(`${file}:`)) return message;
  return message.slice(file.length).replace(/^(:\d+){0,2}:\s*/, '') || message;
}

/** `snippets/hello/main.py:2:17`, or the folder alone when the problem names no file. */
export function location(status: Pick<Folder, 'folder' | 'error'>): string {
  const e = status.error;
  if (!e?.file) return status.folder;
  return `${status.folder}/${e.file}${e.line ? `:${e.line}${e.column ? `:${e.column}` : ''}` : ''}`;
}

function folderLine(s: Folder, ctx: LineContext, p: Palette): TerminalLine | null {
  const base = { snippet: s.snippet, folder: s.folder };
  switch (s.state) {
    case 'loaded': {
      const took = s.load_ms ?? null;
      const bits = [s.runtime, took === null ? null : ms(took)].filter(Boolean).join(', ');
      return {
        level: 'info',
        msg: 'compiled',
        fields: { ...base, version: s.version, runtime: s.runtime, ms: took, deployed: s.deployed },
        // Where the save went: a workspace version's own deployments are said here, not each on a line.
        text: `${p.green('✓ compiled')}  ${p.bold(s.snippet)} v${s.version}${bits ? ` ${p.dim(`(${bits})`)}` : ''}${s.deployed.length ? `  ${p.cyan('→')} ${s.deployed.join(', ')}` : ''}`,
      };
    }
    case 'error': {
      const e = s.error;
      const where = location(s);
      const serving = s.version === null ? 'nothing serving yet' : `v${s.version} keeps serving`;
      const fields = {
        ...base,
        file: e?.file ?? null,
        line: e?.line ?? null,
        column: e?.column ?? null,
        error: e?.message ?? null,
        serving: s.version,
      };
      let text = `${p.red('✗ compile error')}  ${p.bold(where)}  ${e ? withoutLocation(e.message, e.file) : 'refused'}  ${p.dim(`(${serving})`)}`;
      if (e?.file && e.line && ctx.readSource) {
        const source = ctx.readSource(s.folder, e.file);
        const frame = source === null ? '' : codeFrame(source, e.line, e.column, p);
        if (frame) text += `\n${frame}`;
      }
      return { level: 'error', msg: 'compile_error', fields, text };
    }
    case 'deleted':
      return {
        level: 'info',
        msg: 'folder_removed',
        fields: base,
        text: `${p.yellow('- removed')}  ${p.bold(s.folder)} ${p.dim('(the snippet and its versions stay)')}`,
      };
    default:
      return null; // unchanged, loading: nothing new to say
  }
}

/** The human line for one event, or null for events the terminal does not print. */
export function terminalLine(event: EmuEvent, ctx: LineContext): TerminalLine | null {
  const p = palette(ctx.colour);
  switch (event.type) {
    case 'workspace.folder':
      return folderLine(event.data, ctx, p);
    case 'version.created': {
      const d = event.data;
      if (d.source !== 'api') return null; // a workspace version is announced by its folder's `compiled`
      return {
        level: 'info',
        msg: 'version_created',
        fields: { snippet: d.snippet, version: d.version, source: d.source },
        text: `${p.green('✓ new version')}  ${p.bold(d.snippet)} v${d.version} ${p.dim('(via the API)')}`,
      };
    }
    case 'deployment.changed': {
      const d = event.data;
      return {
        level: 'info',
        msg: 'deployed',
        fields: { snippet: d.snippet, env: d.env, version: d.version },
        // A removed deployment (no version) says so rather than `vnull`.
        text: `${p.cyan('→ deployed')}  ${p.bold(d.snippet)}  ${d.env} → ${d.version === null ? 'nothing (removed)' : `v${d.version}`}`,
      };
    }
    case 'invocation.finished': {
      const d = event.data;
      const fields = {
        invocation_id: d.id,
        snippet: d.snippet,
        version: d.version,
        env: d.env,
        mode: d.mode,
        outcome: d.outcome,
        ms: d.duration_ms,
        error: d.error?.message ?? null,
      };
      if (d.outcome === 'success') {
        return {
          level: 'debug',
          msg: 'run',
          fields,
          text: `${p.green('✓ run')}  ${p.bold(d.snippet)} v${d.version}${envOf(d.env)} ${d.mode} ${ms(d.duration_ms)}  ${p.dim(d.id)}`,
        };
      }
      const outcome = d.outcome ?? d.error?.code ?? 'failed';
      const message = d.error?.message ? `: ${firstLine(d.error.message)}` : '';
      return {
        level: 'warn',
        msg: 'run_failed',
        fields,
        text: `${p.red('✗ run failed')}  ${p.bold(d.snippet)} v${d.version}${envOf(d.env)}  ${p.yellow(outcome)}${message}${d.duration_ms === null ? '' : ` ${p.dim(`after ${ms(d.duration_ms)}`)}`}  ${p.dim(d.id)}`,
      };
    }
    case 'callback.attempt': {
      const d = event.data;
      if (d.state === 'delivered') return null;
      const answer = d.status_code !== null ? `answered ${d.status_code}` : (d.error ?? 'no answer');
      const next = d.state === 'failed' ? 'gave up' : 'will retry';
      return {
        level: d.state === 'failed' ? 'error' : 'warn',
        msg: 'callback_failed',
        fields: { invocation_id: d.invocation_id, url: d.url, status: d.status_code, attempt: d.attempt, error: d.error, state: d.state },
        text: `${p.yellow('! callback failed')}  ${d.url}  ${answer} ${p.dim(`(attempt ${d.attempt}, ${next})`)}  ${p.dim(d.invocation_id)}`,
      };
    }
    default:
      return null;
  }
}

const firstLine = (text: string) => {
  const line = text.split('\n', 1)[0]!;
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
};

/** Reads `<workspace>/<folder>/<file>` for a code frame: only inside the workspace, only a small file. */
export function workspaceSourceReader(workspace: string): (folder: string, file: string) => string | null {
  const root = resolve(workspace);
  return (folder, file) => {
    const path = resolve(join(root, folder, file));
    if (!path.startsWith(root + sep)) return null;
    try {
      if (statSync(path).size > 1024 * 1024) return null;
      return readFileSync(path, 'utf8');
    } catch {
      return null;
    }
  };
}

export interface TerminalOutput {
  format: LogFormat;
  level: LogLevel;
  colour: boolean;
  write: (text: string) => void;
  now?: () => Date;
}

/** The human form of the core's own log messages: `HH:MM:SS warn  message  key=value …`. */
export function prettyLogger(out: Omit<TerminalOutput, 'format'>): Logger {
  const p = palette(out.colour);
  const now = out.now ?? (() => new Date());
  const make = (base: LogFields): Logger => ({
    log(level, msg, fields) {
      // At info, the human lines (events) say what matters; the core's own info messages are detail.
      const shown = level === 'info' ? 'debug' : level;
      if (!shows(out.level, shown)) return;
      const all = { ...base, ...fields };
      if (msg === 'request') {
        const { method, route, status, ms: took } = all as { method?: string; route?: string; status?: number; ms?: number };
        const colourOf = (status ?? 0) >= 500 ? p.red : (status ?? 0) >= 400 ? p.yellow : p.dim;
        out.write(`${p.dim(clock(now()))} ${p.dim(String(method))} ${route} ${colourOf(String(status))} ${p.dim(`${took} ms`)}\n`);
        return;
      }
      const tag = level === 'error' ? p.red('error') : level === 'warn' ? p.yellow('warn ') : p.dim(level.padEnd(5));
      const rest = Object.entries(all)
        .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
        .join(' ');
      out.write(redact(`${p.dim(clock(now()))} ${tag} ${msg}${rest ? `  ${p.dim(rest)}` : ''}`) + '\n');
    },
    child: (fields) => make({ ...base, ...fields }),
  });
  return make({});
}

/**
 * Prints the terminal lines of every event from now on; returns the unsubscribe. In `json` format each line
 * goes through `jsonLog` (one JSON object, as the core's own logs), else as human text with a time prefix.
 */
export function followTerminalLines(
  bus: Pick<EventBus, 'subscribe'>,
  out: TerminalOutput & {
    workspace?: string | null;
    jsonLog?: Logger;
    /** A `Last-Event-ID` to print the events after first (`<boot>-0`: every event the bus still holds). */
    replayFrom?: string;
  },
): () => void {
  const readSource = out.workspace ? workspaceSourceReader(out.workspace) : undefined;
  const p = palette(out.colour);
  // A workspace save publishes its version and deployments before the folder's `compiled`, which names the
  // environments: those deployments are not printed again. Keys: `<tenant_id>:<snippet>@<version>`, dropped at the
  // folder's next status (a folder is the local tenant's; its status names no tenant).
  const fromWorkspace = new Set<string>();
  const print = (event: EmuEvent) => {
    if (event.type === 'version.created' && event.data.source === 'workspace') {
      if (fromWorkspace.size >= 1000) fromWorkspace.clear();
      fromWorkspace.add(`${event.data.tenant_id}:${event.data.snippet}@${event.data.version}`);
    }
    if (event.type === 'deployment.changed' && fromWorkspace.has(`${event.data.tenant_id}:${event.data.snippet}@${event.data.version}`))
      return;
    if (event.type === 'workspace.folder' && event.data.state !== 'loading') {
      const suffix = `:${event.data.snippet}@${event.data.version}`;
      for (const key of fromWorkspace) if (key.endsWith(suffix)) fromWorkspace.delete(key);
    }
    const line = terminalLine(event, { colour: out.colour && out.format === 'pretty', ...(readSource ? { readSource } : {}) });
    if (!line || !shows(out.level, line.level)) return;
    if (out.format === 'json') {
      out.jsonLog?.log(line.level, line.msg, { event_id: event.id, ...line.fields });
      return;
    }
    const [first, ...frame] = line.text.split('\n');
    out.write(redact([`${p.dim(clock(new Date(event.at)))} ${first}`, ...frame.map((l) => `         ${l}`)].join('\n')) + '\n');
  };
  const sub = bus.subscribe(print, out.replayFrom);
  for (const event of sub.replay) print(event);
  return () => sub.close();
}

/**
 * The logger and terminal lines of one shell (`svc-emu serve`, the desktop app's main process), from its
 * `--log-level` / `--log-format` and the environment: `follow(events, workspace)` after the core started
 * prints its lines, the start's own events first; it returns the unsubscribe. Throws on a bad value.
 */
export function terminalLogging(opts: {
  level?: string;
  format?: string;
  env: Record<string, string | undefined>;
  isTTY: boolean | undefined;
  write: (text: string) => void;
}): {
  logger: Logger;
  level: LogLevel;
  format: LogFormat;
  colour: boolean;
  follow: (bus: EventBus, workspace: string | null) => () => void;
} {
  const level = (opts.level ?? 'info') as LogLevel;
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Error(`--log-level: ${LOG_LEVELS.join(', ')}, not '${opts.level}'`);
  const format = (opts.format ?? 'pretty') as LogFormat;
  if (!(LOG_FORMATS as readonly string[]).includes(format)) throw new Error(`--log-format: pretty or json, not '${opts.format}'`);
  const colour = format === 'pretty' && useColour(opts.env, opts.isTTY);
  const logger = format === 'json' ? jsonLogger(opts.write, { level }) : prettyLogger({ level, colour, write: opts.write });
  const follow = (bus: EventBus, workspace: string | null) =>
    followTerminalLines(bus, { format, level, colour, write: opts.write, workspace, jsonLog: logger, replayFrom: `${bus.boot}-0` });
  return { logger, level, format, colour, follow };
}
