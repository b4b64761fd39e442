/**
 * A run's model calls, assembled from the bodies the egress path kept (server/egress/exchanges.ts): for each
 * call to an OpenAI-compatible API — chat completions or the Responses API, streamed (SSE) or not — the
 * model, the assistant's text (the deltas joined), the tool calls with their arguments (and the tool's
 * result, when a later request of the run carried it back to the model), token usage, time to first token
 * and duration. What the agent run view shows beside the framework's own steps
 * (`GET /_emu/invocations/{id}/agent`, contract/schemas/agent.ts).
 *
 * Only what the core could read is here: plain-HTTP calls through the egress proxy and `integrations.call`.
 * An HTTPS call from the snippet's own client is a CONNECT tunnel of encrypted bytes (its host, port and
 * sizes are in the egress log, nothing else).
 */
import { StringDecoder } from 'node:string_decoder';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import type { ProviderCall, ProviderToolCall } from '../../contract/schemas/agent';
import type { ProviderExchange } from '../egress/exchanges';
import type { EgressService } from './egress';
import type { InvocationService } from './invocations';

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
/** The first choice (`index` 0) of a chat completion or chunk. */
const firstChoice = (body: Json): unknown =>
  Array.isArray(body.choices) ? (body.choices as unknown[]).find((c) => isObj(c) && (c.index ?? 0) === 0) : undefined;
const int = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? Math.round(v) : 0);

/** One SSE frame and when its last byte arrived (ms since the request started). */
interface Frame {
  event: string | null;
  data: string;
  t: number;
}

/** Mutable while a call is assembled. */
interface Assembly {
  model: string | null;
  text: string;
  firstToken: number | null;
  calls: ProviderToolCall[];
  usage: ProviderCall['usage'];
  error: string | null;
}

export function apiOf(path: string): ProviderCall['api'] {
  if (/\/chat\/completions\/?$/.test(path)) return 'chat.completions';
  if (/\/responses\/?$/.test(path)) return 'responses';
  return 'other';
}

/** The response body as text, undoing a content encoding (a truncated compressed body cannot be read: null). */
function decode(ex: ProviderExchange): { text: string; ends: { end: number; t: number }[] } | null {
  const enc = (ex.contentEncoding ?? '').trim().toLowerCase();
  if (enc && enc !== 'identity') {
    try {
      const whole = Buffer.concat(ex.response.map((c) => c.data));
      const raw =
        enc === 'gzip' ? gunzipSync(whole) : enc === 'br' ? brotliDecompressSync(whole) : enc === 'deflate' ? inflateSync(whole) : null;
      if (!raw) return null;
      // Compressed: the pieces' times cannot be mapped onto the text; everything counts as arriving last.
      const text = raw.toString('utf8');
      return { text, ends: [{ end: text.length, t: ex.response.at(-1)?.t ?? 0 }] };
    } catch {
      return null;
    }
  }
  const decoder = new StringDecoder('utf8');
  let text = '';
  const ends: { end: number; t: number }[] = [];
  for (const c of ex.response) {
    text += decoder.write(c.data);
    ends.push({ end: text.length, t: c.t });
  }
  text += decoder.end();
  return { text, ends };
}

/** Splits an SSE body into frames, each timed by the piece that completed it. */
export function sseFrames(text: string, ends: { end: number; t: number }[]): Frame[] {
  const frames: Frame[] = [];
  const re = /\r?\n\r?\n|\r\r/g;
  let start = 0;
  let k = 0;
  const timeAt = (offset: number) => {
    while (k < ends.length - 1 && ends[k]!.end < offset) k++;
    return ends[k]?.t ?? 0;
  };
  const push = (block: string, endOffset: number) => {
    let event: string | null = null;
    const data: string[] = [];
    for (const line of block.split(/\r?\n|\r/)) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length) frames.push({ event, data: data.join('\n'), t: timeAt(endOffset) });
  };
  for (let m = re.exec(text); m; m = re.exec(text)) {
    push(text.slice(start, m.index), m.index + m[0].length);
    start = m.index + m[0].length;
  }
  if (text.slice(start).trim()) push(text.slice(start), text.length); // a stream cut before its last blank line
  return frames;
}

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/** Text of a message's content: a string, or the text parts of an array. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((p) => (isObj(p) ? (str(p.text) ?? (isObj(p.text) ? (str(p.text.value) ?? '') : '')) : typeof p === 'string' ? p : ''))
      .join('');
  return '';
}

function usageOf(u: unknown): ProviderCall['usage'] {
  if (!isObj(u)) return null;
  const prompt = int(u.prompt_tokens ?? u.input_tokens);
  const completion = int(u.completion_tokens ?? u.output_tokens);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: int(u.total_tokens) || prompt + completion };
}

function errorOf(body: unknown, text: string): string {
  if (isObj(body)) {
    if (isObj(body.error) && typeof body.error.message === 'string') return body.error.message;
    if (typeof body.error === 'string') return body.error;
    if (typeof body.detail === 'string') return body.detail;
    if (typeof body.message === 'string') return body.message;
  }
  return text.trim().slice(0, 500);
}

// Chat completions ------------------------------------------------------------------------------------

function chatMessage(a: Assembly, message: unknown): void {
  if (!isObj(message)) return;
  a.text += contentText(message.content);
  if (Array.isArray(message.tool_calls))
    for (const tc of message.tool_calls)
      if (isObj(tc))
        a.calls.push({
          id: str(tc.id),
          name: str(isObj(tc.function) ? tc.function.name : null) ?? '',
          arguments: str(isObj(tc.function) ? tc.function.arguments : null) ?? '',
          result: null,
        });
}

function chatStream(a: Assembly, frames: Frame[]): void {
  const byIndex = new Map<number, ProviderToolCall>();
  for (const f of frames) {
    if (f.data.trim() === '[DONE]') continue;
    const chunk = parse(f.data);
    if (!isObj(chunk)) continue;
    if (isObj(chunk.error)) a.error = errorOf(chunk, f.data);
    a.model ??= str(chunk.model);
    if (chunk.usage) a.usage = usageOf(chunk.usage) ?? a.usage;
    const choice = firstChoice(chunk);
    if (!isObj(choice) || !isObj(choice.delta)) continue;
    const delta = choice.delta;
    const piece = contentText(delta.content);
    if (piece) {
      a.text += piece;
      a.firstToken ??= f.t;
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const tc of delta.tool_calls) {
        if (!isObj(tc)) continue;
        const index = typeof tc.index === 'number' ? tc.index : byIndex.size;
        let call = byIndex.get(index);
        if (!call) {
          call = { id: null, name: '', arguments: '', result: null };
          byIndex.set(index, call);
          a.calls.push(call);
        }
        if (typeof tc.id === 'string' && tc.id) call.id = tc.id;
        const fn = isObj(tc.function) ? tc.function : {};
        if (typeof fn.name === 'string' && fn.name && !call.name) call.name = fn.name;
        if (typeof fn.arguments === 'string') call.arguments += fn.arguments;
        a.firstToken ??= f.t;
      }
    }
  }
}

// The Responses API -----------------------------------------------------------------------------------

function responsesOutput(a: Assembly, response: Json): void {
  a.model = str(response.model) ?? a.model;
  if (response.usage) a.usage = usageOf(response.usage) ?? a.usage;
  if (!Array.isArray(response.output)) return;
  for (const item of response.output) {
    if (!isObj(item)) continue;
    if (item.type === 'message' && Array.isArray(item.content))
      a.text += item.content.map((p) => (isObj(p) && p.type === 'output_text' ? (str(p.text) ?? '') : '')).join('');
    else if (item.type === 'function_call')
      a.calls.push({ id: str(item.call_id), name: str(item.name) ?? '', arguments: str(item.arguments) ?? '', result: null });
  }
}

function responsesStream(a: Assembly, frames: Frame[]): void {
  const byItem = new Map<string, ProviderToolCall>();
  const callFor = (itemId: string, item?: Json) => {
    let call = byItem.get(itemId);
    if (!call) {
      call = { id: null, name: '', arguments: '', result: null };
      byItem.set(itemId, call);
      a.calls.push(call);
    }
    if (item) {
      call.id = str(item.call_id) ?? call.id;
      call.name = str(item.name) || call.name;
      const args = str(item.arguments);
      if (args) call.arguments = args;
    }
    return call;
  };
  for (const f of frames) {
    const e = parse(f.data);
    if (!isObj(e)) continue;
    const type = str(e.type) ?? f.event ?? '';
    if (type === 'response.created' || type === 'response.in_progress') {
      if (isObj(e.response)) a.model = str(e.response.model) ?? a.model;
    } else if (type === 'response.output_text.delta') {
      const d = str(e.delta) ?? '';
      if (d) {
        a.text += d;
        a.firstToken ??= f.t;
      }
    } else if (type === 'response.output_item.added' || type === 'response.output_item.done') {
      if (isObj(e.item) && e.item.type === 'function_call') callFor(str(e.item.id) ?? str(e.item.call_id) ?? String(byItem.size), e.item);
    } else if (type === 'response.function_call_arguments.delta') {
      const call = callFor(str(e.item_id) ?? String(byItem.size));
      call.arguments += str(e.delta) ?? '';
      a.firstToken ??= f.t;
    } else if (type === 'response.function_call_arguments.done') {
      const call = callFor(str(e.item_id) ?? String(byItem.size));
      const args = str(e.arguments);
      if (args !== null) call.arguments = args;
      call.name = str(e.name) || call.name;
    } else if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
      if (isObj(e.response)) {
        a.model = str(e.response.model) ?? a.model;
        if (e.response.usage) a.usage = usageOf(e.response.usage) ?? a.usage;
        if (isObj(e.response.error) && typeof e.response.error.message === 'string') a.error = e.response.error.message;
      }
    } else if (type === 'error') {
      a.error = str(e.message) ?? errorOf(e, f.data);
    }
  }
}

// One call, and a run's calls -------------------------------------------------------------------------

/** Where a call sits on the run's time axis: set from the run's start (the usage timeline's zero). */
export interface CallContext {
  /** Epoch ms of the run's start (null: unknown, then times count from the first call). */
  runStartedAt: number | null;
}

export function assembleCall(ex: ProviderExchange, ctx: CallContext): ProviderCall | null {
  if (ex.egressId === null) return null; // still in flight: it shows once it has ended
  const api = apiOf(ex.path);
  const request = parse(Buffer.concat(ex.request).toString('utf8'));
  const req = isObj(request) ? request : {};
  const a: Assembly = { model: null, text: '', firstToken: null, calls: [], usage: null, error: null };
  const decoded = decode(ex);
  const sse = /text\/event-stream/i.test(ex.contentType ?? '');
  if (decoded) {
    if (sse) {
      const frames = sseFrames(decoded.text, decoded.ends);
      if (api === 'responses') responsesStream(a, frames);
      else chatStream(a, frames);
    } else {
      const body = parse(decoded.text);
      if (ex.status !== null && ex.status >= 400) a.error = errorOf(body, decoded.text);
      else if (isObj(body)) {
        if (api === 'responses') responsesOutput(a, body);
        else {
          a.model = str(body.model);
          const choice = firstChoice(body);
          if (isObj(choice)) chatMessage(a, choice.message);
          a.usage = usageOf(body.usage);
        }
      }
      // Not streamed: the answer arrives whole, so its first token comes with its first byte.
      if (ex.response.length && (a.text || a.calls.length)) a.firstToken = ex.response[0]!.t;
    }
  }
  const duration = ex.durationMs ?? ex.response.at(-1)?.t ?? 0;
  return {
    egress_id: ex.egressId,
    host: ex.host,
    path: ex.path,
    api,
    model: a.model ?? str(req.model),
    stream: req.stream === true,
    status: ex.status,
    started_ms: ctx.runStartedAt === null ? 0 : Math.max(0, ex.startedAt - ctx.runStartedAt),
    first_token_ms: a.firstToken === null ? null : Math.round(a.firstToken),
    duration_ms: duration,
    text: a.text,
    tool_calls: a.calls,
    usage: a.usage,
    truncated: ex.requestTruncated || ex.responseTruncated || (decoded === null && ex.response.length > 0),
    error: a.error,
  };
}

/** The tool results a request carries back: `tool` messages (chat) and `function_call_output` items (responses). */
export function toolResults(requestBody: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (!isObj(requestBody)) return out;
  const text = (v: unknown) => (typeof v === 'string' ? v : Array.isArray(v) ? contentText(v) : JSON.stringify(v ?? null));
  for (const m of Array.isArray(requestBody.messages) ? requestBody.messages : [])
    if (isObj(m) && m.role === 'tool' && typeof m.tool_call_id === 'string') out.set(m.tool_call_id, text(m.content));
  for (const it of Array.isArray(requestBody.input) ? requestBody.input : [])
    if (isObj(it) && it.type === 'function_call_output' && typeof it.call_id === 'string') out.set(it.call_id, text(it.output));
  return out;
}

/** A run's calls in order, each tool call given the result a later call of the run sent back. */
export function assembleCalls(exchanges: readonly ProviderExchange[], ctx: CallContext): ProviderCall[] {
  const origin = { runStartedAt: ctx.runStartedAt ?? exchanges[0]?.startedAt ?? null };
  const calls: ProviderCall[] = [];
  const later: Map<string, string>[] = [];
  for (const ex of exchanges) {
    later.push(toolResults(parse(Buffer.concat(ex.request).toString('utf8'))));
    const call = assembleCall(ex, origin);
    if (call) calls.push(call);
  }
  for (const call of calls) {
    const from = exchanges.findIndex((ex) => ex.egressId === call.egress_id);
    for (const tc of call.tool_calls) {
      if (!tc.id) continue;
      for (let i = from + 1; i < later.length && tc.result === null; i++) tc.result = later[i]!.get(tc.id) ?? null;
    }
  }
  return calls;
}

/**
 * `(invocationId) => ProviderCall[]`: what the agent service (`emuInvocationAgent`) asks for. `runStartedAt`
 * reads the invocation's `started_at`, so a call's `started_ms` sits on the same axis as the usage timeline.
 */
export function providerCalls(deps: {
  exchanges: { list(invocationId: string): readonly ProviderExchange[] };
  runStartedAt: (invocationId: string) => number | null;
}): (invocationId: string) => Promise<ProviderCall[]> {
  return async (invocationId) => assembleCalls(deps.exchanges.list(invocationId), { runStartedAt: deps.runStartedAt(invocationId) });
}

/** The same, from the core's services: what server/index.ts hands the agent service. */
export function providerCallsOf(services: { egress: EgressService; invocations: InvocationService }) {
  return providerCalls({
    exchanges: services.egress.exchanges,
    runStartedAt: (id) => {
      try {
        const rec = services.invocations.byId(id);
        // The steps and the usage timeline count from the handler's start (after the sandbox's start-up): once the
        // run has ended that is its end less its duration; while it runs, the record's start (start-up included).
        if (rec.finished_at && rec.usage) return Date.parse(rec.finished_at) - rec.usage.duration_ms;
        return Date.parse(rec.started_at ?? rec.created_at);
      } catch {
        return null; // pruned: its calls went with it
      }
    },
  });
}
