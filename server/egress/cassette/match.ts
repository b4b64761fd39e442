import type { CassetteMatch, HarEntry } from '../../../contract/schemas/cassette';
import { JSON_MAX_DEPTH, jsonDepth } from '../../json-text';

/**
 * How a request finds its recorded answer (docs/cassettes.md, "Matching"): a key made of the method, the
 * URL's path and query (less `ignore_query`; host and port only with `match.host`) and the body (JSON:
 * parsed, keys sorted, `ignore_body_fields` left out; anything else: the text). Both sides are compared
 * redacted: a recorded body holds `[secret NAME]` where the live request holds the value. Pure.
 */

/** What is compared: a request with its body as HAR keeps it (text, or `base64:` + the bytes in base64). */
export interface MatchInput {
  method: string;
  url: string;
  body: string;
}

export type NormalBody = { kind: 'none' } | { kind: 'json'; value: unknown } | { kind: 'text'; text: string };

export interface NormalisedRequest {
  method: string;
  /** `host:port`, only when `match.host`. */
  host: string | null;
  path: string;
  /** Sorted by name then value; `ignore_query` names left out. */
  query: [string, string][];
  body: NormalBody;
  /** The key without the body: equal `head`s are worth comparing bodies for. */
  head: string;
  /** Equal keys match. */
  key: string;
}

export type NormalisedHead = Omit<NormalisedRequest, 'body' | 'key'>;

/** Put in place of an ignored array item (an ignored object field is left out). */
const IGNORED = '<ignored>';

export const matchInputOfEntry = (e: HarEntry): MatchInput => ({
  method: e.request.method,
  url: e.request.url,
  body: bodyText(e.request.postData?.text, e.request.postData?.encoding),
});

export const bodyText = (text: string | undefined, encoding: string | undefined): string =>
  !text ? '' : encoding === 'base64' ? `base64:${text}` : text;

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = sortKeys((v as Record<string, unknown>)[k]);
    return out;
  }
  return v;
}

/** Leaves out one dotted path (`messages.*.id`; `*` is any array index or object key; digits index arrays). */
function drop(v: unknown, segs: readonly string[]): unknown {
  if (segs.length === 0 || v === null || typeof v !== 'object') return v;
  const [seg, ...rest] = segs;
  if (Array.isArray(v)) {
    return (v as unknown[]).map((item, i) => {
      if (seg !== '*' && seg !== String(i)) return item;
      return rest.length === 0 ? IGNORED : drop(item, rest);
    });
  }
  const out: Record<string, unknown> = {};
  for (const [k, item] of Object.entries(v)) {
    if (seg !== '*' && seg !== k) out[k] = item;
    else if (rest.length > 0) out[k] = drop(item, rest);
  }
  return out;
}

function normalBody(text: string, ignore: readonly string[]): NormalBody {
  if (text === '') return { kind: 'none' };
  const t = text.trimStart();
  if ((t.startsWith('{') || t.startsWith('[')) && jsonDepth(text) <= JSON_MAX_DEPTH) {
    try {
      let value = JSON.parse(text) as unknown;
      for (const path of ignore) value = drop(value, path.split('.'));
      return { kind: 'json', value: sortKeys(value) };
    } catch {
      /* not JSON after all: compared as text */
    }
  }
  return { kind: 'text', text };
}

/** Method, host (with `match.host`), path and query: cheap, no body parsing. */
export function normaliseHead(req: Omit<MatchInput, 'body'>, match: CassetteMatch): NormalisedHead {
  let host: string | null = null;
  let path = req.url;
  let query: [string, string][] = [];
  try {
    const u = new URL(req.url);
    host = match.host ? u.host : null;
    path = u.pathname;
    const ignore = new Set(match.ignore_query);
    query = [...u.searchParams].filter(([n]) => !ignore.has(n));
    query.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  } catch {
    /* not an absolute URL: compared as written */
  }
  const method = req.method.toUpperCase();
  return { method, host, path, query, head: JSON.stringify([method, host, path, query]) };
}

export function normalise(req: MatchInput, match: CassetteMatch): NormalisedRequest {
  const head = normaliseHead(req, match);
  const body = normalBody(req.body, match.ignore_body_fields);
  const bodyKey = body.kind === 'none' ? '' : body.kind === 'json' ? `json:${JSON.stringify(body.value)}` : `text:${body.text}`;
  return { ...head, body, key: `${head.head}\n${bodyKey}` };
}

// ---- differences, in plain words ----

const MAX_SHOWN = 60;
function show(v: unknown): string {
  if (v === undefined) return 'none';
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > MAX_SHOWN ? `${s.slice(0, MAX_SHOWN - 1)}…` : s;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const fieldPath = (base: string, key: string | number): string =>
  typeof key === 'number' ? `${base}[${key}]` : IDENT.test(key) ? (base ? `${base}.${key}` : key) : `${base}[${JSON.stringify(key)}]`;

/** A difference found in a JSON body: where, and the dotted path a matcher would name (`messages.*.content`). */
interface BodyDiff {
  path: string;
  matcher: string;
  recorded: unknown;
  got: unknown;
}

function diffJson(a: unknown, b: unknown, path: string, matcher: string[], out: BodyDiff[], limit: number): void {
  if (out.length >= limit) return;
  const bothArrays = Array.isArray(a) && Array.isArray(b);
  const bothObjects = !!a && !!b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b);
  if (bothArrays) {
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) diffJson(a[i], b[i], fieldPath(path, i), [...matcher, '*'], out, limit);
    return;
  }
  if (bothObjects) {
    const ao = a as Record<string, unknown>;
    const bo = b as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(ao), ...Object.keys(bo)])].sort();
    for (const k of keys) diffJson(ao[k], bo[k], fieldPath(path, k), [...matcher, k], out, limit);
    return;
  }
  if (JSON.stringify(a) !== JSON.stringify(b)) out.push({ path, matcher: matcher.join('.'), recorded: a, got: b });
}

function textExcerpt(a: string, b: string): string {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  const from = Math.max(0, i - 20);
  const cut = (s: string) => `${from > 0 ? '…' : ''}${s.slice(from, i + 30)}${s.length > i + 30 ? '…' : ''}`;
  return `body (text, from character ${i}): recorded ${JSON.stringify(cut(a))}, got ${JSON.stringify(cut(b))}`;
}

const bodySize = (b: NormalBody): string =>
  b.kind === 'none' ? 'none' : b.kind === 'json' ? 'a JSON body' : `a text body (${b.text.length} characters)`;

export interface Differences {
  /** Plain words, one per difference (at most `limit` body fields). */
  words: string[];
  /** How far apart (for picking the closest recorded call): method and path weigh most. */
  distance: number;
  /** Matchers that would make these differences not count, if that is what the user wants. */
  bodyFields: string[];
  queryNames: string[];
}

/** How `got` (the live request) differs from `recorded`. */
export function differences(recorded: NormalisedRequest, got: NormalisedRequest, limit = 20): Differences {
  const words: string[] = [];
  let distance = 0;
  const bodyFields: string[] = [];
  const queryNames: string[] = [];
  if (recorded.method !== got.method) {
    words.push(`method: recorded ${recorded.method}, got ${got.method}`);
    distance += 10000;
  }
  if (recorded.path !== got.path) {
    words.push(`path: recorded ${JSON.stringify(recorded.path)}, got ${JSON.stringify(got.path)}`);
    distance += 5000;
  }
  if (recorded.host !== got.host) {
    words.push(`host: recorded ${JSON.stringify(recorded.host)}, got ${JSON.stringify(got.host)}`);
    distance += 1000;
  }
  const names = [...new Set([...recorded.query.map(([n]) => n), ...got.query.map(([n]) => n)])].sort();
  for (const name of names) {
    const r = recorded.query.filter(([n]) => n === name).map(([, v]) => v);
    const g = got.query.filter(([n]) => n === name).map(([, v]) => v);
    if (JSON.stringify(r) === JSON.stringify(g)) continue;
    const say = (vs: string[]) => (vs.length === 0 ? 'none' : vs.map((v) => JSON.stringify(v)).join(', '));
    words.push(`query ${name}: recorded ${say(r)}, got ${say(g)}`);
    queryNames.push(name);
    distance += 10;
  }
  const rb = recorded.body;
  const gb = got.body;
  if (rb.kind === 'json' && gb.kind === 'json') {
    const found: BodyDiff[] = [];
    diffJson(rb.value, gb.value, '', [], found, 1000);
    for (const d of found.slice(0, limit)) {
      words.push(`body field ${d.path || '(the whole body)'}: recorded ${show(d.recorded)}, got ${show(d.got)}`);
    }
    if (found.length > limit) words.push(`and ${found.length - limit} more body field(s)`);
    bodyFields.push(...new Set(found.map((d) => d.matcher).filter((m) => m !== '')));
    distance += found.length;
  } else if (rb.kind === 'text' && gb.kind === 'text') {
    if (rb.text !== gb.text) {
      words.push(textExcerpt(rb.text, gb.text));
      distance += 100;
    }
  } else if (rb.kind !== gb.kind) {
    words.push(`body: recorded ${bodySize(rb)}, got ${bodySize(gb)}`);
    distance += 100;
  }
  return { words, distance, bodyFields, queryNames };
}
