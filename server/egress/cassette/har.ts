import { isUtf8 } from 'node:buffer';
import { CASSETTE_FORMAT, Cassette, type HarEntry } from '../../../contract/schemas/cassette';
import { describeJsonError } from '../../json-text';
import { CassetteError } from './types';

/**
 * The cassette file (docs/cassettes.md): HAR 1.2 with `_svcEmu` extensions. Reading (JSON, format
 * migrations, a plain browser HAR turned into a cassette, zod validation with messages naming the entry)
 * and writing (pretty-printed, keys in a fixed order, so the same cassette is always the same bytes).
 * Pure: no I/O (server/egress/cassette/store.ts does the files).
 */

/** The `invocation_id` given to the entries of a HAR that did not come from the emulator (a browser's export). */
export const IMPORTED_EPISODE = 'har-import';

// ---- bodies ----

/** A body as HAR keeps it: UTF-8 text as is, anything else base64 with `encoding: "base64"`. */
export function bodyToHar(buf: Buffer): { text: string; encoding?: 'base64' } {
  return isUtf8(buf) ? { text: buf.toString('utf8') } : { text: buf.toString('base64'), encoding: 'base64' };
}

export function harBodyBytes(text: string | undefined, encoding: string | undefined): Buffer {
  if (!text) return Buffer.alloc(0);
  return encoding === 'base64' ? Buffer.from(text, 'base64') : Buffer.from(text, 'utf8');
}

// ---- format versions ----

type Log = Record<string, unknown>;
/**
 * Steps from one cassette format to the next (`log._svcEmu.format`), applied in order on read, like
 * server/storage/migrations.ts. Format 1 is the first: nothing to migrate yet. Add a step with every
 * incompatible change to the extension, and bump CASSETTE_FORMAT (contract/schemas/cassette.ts).
 */
export const FORMAT_STEPS: Record<number, (log: Log) => Log> = {};

export function migrateLog(
  log: Log,
  steps: Record<number, (log: Log) => Log> = FORMAT_STEPS,
  current = CASSETTE_FORMAT,
): { log: Log } | { error: string } {
  const ext = log._svcEmu as Record<string, unknown>;
  const raw = ext.format;
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 1) {
    return { error: `log._svcEmu.format must be a whole number from 1, found ${JSON.stringify(raw)}` };
  }
  if (raw > current) {
    return {
      error: `cassette format ${raw} was written by a newer emulator (this one reads formats up to ${current}): update the emulator, or record the cassette again`,
    };
  }
  let out = log;
  for (let v = raw; v < current; v++) {
    const step = steps[v];
    if (!step) return { error: `no migration from cassette format ${v}` };
    out = step(out);
    out = { ...out, _svcEmu: { ...(out._svcEmu as object), format: v + 1 } };
  }
  return { log: out };
}

// ---- reading ----

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown, d: number): number => (typeof v === 'number' && Number.isFinite(v) ? v : d);
const str = (v: unknown, d: string): string => (typeof v === 'string' ? v : d);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Headers a browser's HAR keeps but that no longer describe `content.text` (already decoded, whole). */
const STALE_HEADERS = new Set(['content-encoding', 'content-length', 'transfer-encoding']);

/**
 * A HAR with no `_svcEmu` (exported from Chrome or Firefox DevTools, or another tool): each entry gets a
 * synthesized extension (one chunk with the whole body at the entry's `time`, all in one episode
 * `har-import`), missing optional HAR fields get their defaults, and response headers about the transfer
 * encoding are dropped (a browser stores the body decoded).
 */
export function fromBrowserHar(log: Log, where: { tenant: string; snippet: string }): Log {
  return {
    ...log,
    version: '1.2',
    creator: isObj(log.creator) ? log.creator : { name: 'unknown', version: '' },
    entries: arr(log.entries).map(fromBrowserEntry),
    _svcEmu: { format: CASSETTE_FORMAT, tenant: where.tenant, snippet: where.snippet },
  };
}

/** One entry of a browser's HAR as a cassette entry (`seq` = its place in the file). */
function fromBrowserEntry(e: unknown, i: number): unknown {
  if (!isObj(e)) return e; // left for validation to name
  const req = isObj(e.request) ? e.request : {};
  const res = isObj(e.response) ? e.response : {};
  const content = isObj(res.content) ? res.content : {};
  const url = str(req.url, '');
  let queryString = req.queryString;
  if (!Array.isArray(queryString)) {
    try {
      queryString = [...new URL(url).searchParams].map(([name, value]) => ({ name, value }));
    } catch {
      queryString = [];
    }
  }
  const time = Math.max(0, num(e.time, 0));
  const size = harBodyBytes(typeof content.text === 'string' ? content.text : undefined, str(content.encoding, '')).length;
  const status = num(res.status, 0);
  const failure = typeof res._error === 'string' && res._error ? res._error : 'no response was recorded (status 0)';
  const timings = isObj(e.timings) ? e.timings : {};
  return {
    ...e,
    startedDateTime: str(e.startedDateTime, new Date(0).toISOString()),
    time,
    request: { method: 'GET', httpVersion: 'HTTP/1.1', cookies: [], headers: [], headersSize: -1, bodySize: -1, ...req, queryString },
    response: {
      statusText: '',
      httpVersion: 'HTTP/1.1',
      cookies: [],
      redirectURL: '',
      headersSize: -1,
      bodySize: -1,
      ...res,
      status,
      headers: arr(res.headers).filter((h) => !(isObj(h) && typeof h.name === 'string' && STALE_HEADERS.has(h.name.toLowerCase()))),
      content: { mimeType: 'x-unknown', ...content, size },
    },
    cache: isObj(e.cache) ? e.cache : {},
    timings: {
      ...timings,
      send: Math.max(0, num(timings.send, 0)),
      wait: Math.max(0, num(timings.wait, time)),
      receive: Math.max(0, num(timings.receive, 0)),
    },
    _svcEmu: {
      seq: i,
      invocation_id: IMPORTED_EPISODE,
      source: 'snippet',
      integration: null,
      chunks: size > 0 ? [{ t_ms: time, bytes: size }] : [],
      redacted: [],
      error: status === 0 ? failure : null,
    },
  };
}

/** "entry 3 (response.status): expected number, received string" from a zod issue path. */
function describeIssue(path: readonly PropertyKey[], message: string): string {
  const p = path.map(String);
  if (p[0] === 'log' && p[1] === 'entries' && p.length > 2) {
    const rest = p.slice(3);
    return `entry ${p[2]}${rest.length ? ` (${rest.join('.')})` : ''}: ${message}`;
  }
  return `${p.join('.') || 'the file'}: ${message}`;
}

/**
 * A cassette from a file's text. `where` names the snippet it belongs to (for a browser HAR, which does
 * not say). Throws CassetteError naming `path` and what is wrong (at which entry).
 */
export function parseCassette(text: string, path: string, where: { tenant: string; snippet: string }): Cassette {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new CassetteError(path, `not JSON: ${describeJsonError(text, err)}`);
  }
  return checkCassette(doc, path, where);
}

/** The same checks on an already parsed document (a cassette sent over the API). */
export function checkCassette(doc: unknown, path: string, where: { tenant: string; snippet: string }): Cassette {
  if (!isObj(doc) || !isObj(doc.log) || !Array.isArray(doc.log.entries)) {
    throw new CassetteError(path, 'not a HAR file: it has no log.entries list (a cassette is HAR 1.2, docs/cassettes.md)');
  }
  let log: Log = doc.log;
  if (log._svcEmu === undefined) log = fromBrowserHar(log, where);
  else if (!isObj(log._svcEmu)) throw new CassetteError(path, 'log._svcEmu must be an object');
  else if (arr(log.entries).some((e) => isObj(e) && e._svcEmu === undefined)) {
    // A browser's entry pasted into a cassette: it gets its extension like a whole browser HAR's.
    log = { ...log, entries: arr(log.entries).map((e, i) => (isObj(e) && e._svcEmu === undefined ? fromBrowserEntry(e, i) : e)) };
  }
  const migrated = migrateLog(log);
  if ('error' in migrated) throw new CassetteError(path, migrated.error);
  const parsed = Cassette.safeParse({ ...doc, log: migrated.log });
  if (!parsed.success) {
    const issues = parsed.error.issues;
    const shown = issues.slice(0, 3).map((i) => describeIssue(i.path, i.message));
    const more = issues.length > 3 ? `; and ${issues.length - 3} more` : '';
    throw new CassetteError(path, `not a valid cassette: ${shown.join('; ')}${more}`);
  }
  return parsed.data;
}

// ---- writing ----

/** Known keys first, in the HAR specification's order; any other key after them, as found. */
function ordered(v: unknown, keys: readonly string[], inner: Record<string, (x: unknown) => unknown> = {}): unknown {
  if (!isObj(v)) return v;
  const out: Record<string, unknown> = {};
  for (const k of keys) if (k in v && v[k] !== undefined) out[k] = inner[k] ? inner[k](v[k]) : v[k];
  for (const k of Object.keys(v)) if (!(k in out) && v[k] !== undefined) out[k] = v[k];
  return out;
}
const each = (f: (x: unknown) => unknown) => (v: unknown) => (Array.isArray(v) ? v.map(f) : v);
const nameValue = (v: unknown) => ordered(v, ['name', 'value']);

const orderEntry = (e: unknown) =>
  ordered(
    e,
    ['startedDateTime', 'time', 'request', 'response', 'cache', 'timings', 'serverIPAddress', 'connection', 'comment', '_svcEmu'],
    {
      request: (r) =>
        ordered(
          r,
          ['method', 'url', 'httpVersion', 'cookies', 'headers', 'queryString', 'postData', 'headersSize', 'bodySize', 'comment'],
          {
            headers: each(nameValue),
            queryString: each(nameValue),
            postData: (p) => ordered(p, ['mimeType', 'params', 'text', 'encoding', 'comment']),
          },
        ),
      response: (r) =>
        ordered(
          r,
          ['status', 'statusText', 'httpVersion', 'cookies', 'headers', 'content', 'redirectURL', 'headersSize', 'bodySize', 'comment'],
          {
            headers: each(nameValue),
            content: (c) => ordered(c, ['size', 'compression', 'mimeType', 'text', 'encoding', 'comment']),
          },
        ),
      timings: (t) => ordered(t, ['blocked', 'dns', 'connect', 'send', 'wait', 'receive', 'ssl', 'comment']),
      _svcEmu: (x) =>
        ordered(x, ['seq', 'invocation_id', 'source', 'integration', 'chunks', 'redacted', 'error'], {
          chunks: each((c) => ordered(c, ['t_ms', 'bytes'])),
        }),
    },
  );

/** The file's text: 2-space JSON with keys in a fixed order and a final newline (reviewable diffs). */
export function cassetteText(cassette: Cassette): string {
  const doc = ordered(cassette, ['log'], {
    log: (l) =>
      ordered(l, ['version', 'creator', 'pages', 'entries', 'comment', '_svcEmu'], {
        creator: (c) => ordered(c, ['name', 'version', 'comment']),
        entries: each(orderEntry),
        _svcEmu: (x) =>
          ordered(x, ['format', 'tenant', 'snippet', 'match'], {
            match: (m) => ordered(m, ['ignore_body_fields', 'ignore_query', 'host', 'order']),
          }),
      }),
  });
  return `${compactPairs(JSON.stringify(doc, null, 2))}\n`;
}

const JSON_STRING = String.raw`"(?:[^"\\]|\\.)*"`;
const PAIR = new RegExp(String.raw`\{\n\s*("name": ${JSON_STRING}),\n\s*("value": ${JSON_STRING})\n\s*\}`, 'g');
const CHUNK = /\{\n\s*("t_ms": -?[\d.eE+-]+),\n\s*("bytes": \d+)\n\s*\}/g;

/**
 * Headers, query parameters and chunks one per line (`{ "name": "accept", "value": "*\/*" }`), so a long
 * stream is as many lines as chunks and a re-recording's diff shows each changed one. Safe on JSON text:
 * a newline inside a string is always escaped, so these patterns only meet the indentation.
 */
function compactPairs(json: string): string {
  return json.replace(PAIR, '{ $1, $2 }').replace(CHUNK, '{ $1, $2 }');
}

/** An empty cassette for a snippet. */
export function emptyCassette(where: { tenant: string; snippet: string }, creatorVersion: string): Cassette {
  return {
    log: {
      version: '1.2',
      creator: { name: 'snippet-emulator', version: creatorVersion },
      entries: [],
      _svcEmu: { format: CASSETTE_FORMAT, tenant: where.tenant, snippet: where.snippet },
    },
  };
}

/** The episodes (invocations) a cassette holds, in the order they first appear. */
export function episodesOf(entries: readonly HarEntry[]): string[] {
  return [...new Set(entries.map((e) => e._svcEmu.invocation_id))];
}
