import type { HarEntry } from '../../../contract/schemas/cassette';
import { bodyToHar, harBodyBytes } from './har';
import { mapOffset, unique, urlMarkers, type ByteRedactor, type Span } from './redact';
import type { CallRequest, CallResponseHead, Redactor, Tape, TapeCall } from './types';

/** Bodies are kept up to this many bytes each (request and response); the rest is cut and the cut said. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** How a cut body is said: `content.comment` (response) / `postData.comment` (request) starts with this. */
export const TRUNCATED_NOTE = 'truncated:';
const CLOSED_EARLY = 'the run ended before the call finished';

export interface TapeOptions {
  redactor: Redactor;
  invocationId: string;
  /** Wall clock (epoch ms) for `startedDateTime`. */
  now?: () => number;
  /** Monotonic clock (ms) for durations and chunk times. */
  perf?: () => number;
  maxBodyBytes?: number;
}

const header = (h: readonly [string, string][], name: string): string | undefined => h.find(([n]) => n.toLowerCase() === name)?.[1];
const ms = (x: number): number => Math.max(0, Math.round(x));
const truncatedNote = (kept: number, total: number): string => `${TRUNCATED_NOTE} kept the first ${kept} of ${total} bytes`;

/** Redacts a body; `spans` places the replacements (empty when the redactor cannot say). */
function redactBody(redactor: Redactor, body: Buffer): { bytes: Buffer; spans: Span[]; replaced: string[] } {
  const r = redactor as Partial<ByteRedactor>;
  if (typeof r.bytes === 'function') return r.bytes(body);
  // Another Redactor: text only; a body that is not text is kept as is.
  const text = body.toString('utf8');
  if (!Buffer.from(text, 'utf8').equals(body)) return { bytes: body, spans: [], replaced: [] };
  const out = redactor.text(text);
  return { bytes: Buffer.from(out.text, 'utf8'), spans: [], replaced: out.replaced };
}

/** Chunk sizes after redaction: each boundary moves with the replacements; sizes add up to the body. */
function chunkSizes(rawSizes: readonly number[], spans: readonly Span[], total: number): number[] {
  const out: number[] = [];
  let rawAt = 0;
  let prev = 0;
  rawSizes.forEach((size, i) => {
    rawAt += size;
    const at = i === rawSizes.length - 1 ? total : Math.min(total, mapOffset(rawAt, spans));
    out.push(Math.max(0, at - prev));
    prev = Math.max(prev, at);
  });
  return out;
}

/**
 * One run's calls as HAR entries (docs/cassettes.md). A call's bytes are held only while it is open: when
 * it ends its entry is built (redacted, cut at `maxBodyBytes`) and the raw bytes are dropped.
 */
export function createTape(opts: TapeOptions): Tape {
  const { redactor, invocationId } = opts;
  const now = opts.now ?? Date.now;
  const perf = opts.perf ?? (() => performance.now());
  const cap = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const done = new Map<number, HarEntry>();
  const open = new Map<number, () => HarEntry>();
  let nextSeq = 0;

  return {
    begin(req: Omit<CallRequest, 'body'>): TapeCall {
      const seq = nextSeq++;
      const started = now();
      const t0 = perf();
      const reqParts: Buffer[] = [];
      let reqKept = 0;
      let reqTotal = 0;
      const resParts: Buffer[] = [];
      const chunks: { t: number; bytes: number }[] = [];
      let resKept = 0;
      let resTotal = 0;
      let head: CallResponseHead | null = null;
      let headAt: number | null = null;
      let ended = false;

      const build = (error: string | null, endAt: number): HarEntry => {
        const replaced: string[] = [];
        const url = redactor.text(req.url);
        url.text = urlMarkers(url.text);
        replaced.push(...url.replaced);
        const reqHeaders = redactor.headers(req.headers, req.hostAdded);
        replaced.push(...reqHeaders.replaced);
        let queryString: { name: string; value: string }[] = [];
        try {
          queryString = [...new URL(req.url).searchParams].map(([name, value]) => {
            const n = redactor.text(name);
            const v = redactor.text(value);
            replaced.push(...n.replaced, ...v.replaced);
            return { name: n.text, value: v.text };
          });
        } catch {
          /* not an absolute URL: no query to list */
        }

        let postData: HarEntry['request']['postData'];
        if (reqTotal > 0) {
          const body = redactBody(redactor, Buffer.concat(reqParts));
          replaced.push(...body.replaced);
          const har = bodyToHar(body.bytes);
          postData = { mimeType: header(req.headers, 'content-type') ?? '', ...har };
          if (reqTotal > reqKept) postData.comment = truncatedNote(reqKept, reqTotal);
        }

        let response: HarEntry['response'];
        let chunkList: { t_ms: number; bytes: number }[] = [];
        if (head) {
          const resHeaders = redactor.headers(head.headers, []);
          replaced.push(...resHeaders.replaced);
          const body = redactBody(redactor, Buffer.concat(resParts));
          replaced.push(...body.replaced);
          const sizes = chunkSizes(
            chunks.map((c) => c.bytes),
            body.spans,
            body.bytes.length,
          );
          chunkList = chunks.map((c, i) => ({ t_ms: c.t, bytes: sizes[i] ?? 0 }));
          const har = bodyToHar(body.bytes);
          const content: HarEntry['response']['content'] = {
            size: body.bytes.length,
            mimeType: header(head.headers, 'content-type') ?? 'x-unknown',
            ...(body.bytes.length > 0 ? har : {}),
          };
          if (resTotal > resKept) content.comment = truncatedNote(resKept, resTotal);
          response = {
            status: head.status,
            statusText: head.statusText,
            httpVersion: 'HTTP/1.1',
            cookies: [],
            headers: resHeaders.headers.map(([name, value]) => ({ name, value })),
            content,
            redirectURL: header(head.headers, 'location') ?? '',
            headersSize: -1,
            bodySize: resTotal,
          };
        } else {
          response = {
            status: 0,
            statusText: '',
            httpVersion: 'HTTP/1.1',
            cookies: [],
            headers: [],
            content: { size: 0, mimeType: 'x-unknown' },
            redirectURL: '',
            headersSize: -1,
            bodySize: -1,
          };
        }
        const wait = ms((headAt ?? endAt) - t0);
        const receive = headAt === null ? 0 : ms(endAt - headAt);
        return {
          startedDateTime: new Date(started).toISOString(),
          time: wait + receive,
          request: {
            method: req.method.toUpperCase(),
            url: url.text,
            httpVersion: 'HTTP/1.1',
            cookies: [],
            headers: reqHeaders.headers.map(([name, value]) => ({ name, value })),
            queryString,
            ...(postData ? { postData } : {}),
            headersSize: -1,
            bodySize: reqTotal,
          },
          response,
          cache: {},
          timings: { send: 0, wait, receive },
          _svcEmu: {
            seq,
            invocation_id: invocationId,
            source: req.source,
            integration: req.integration,
            chunks: chunkList,
            redacted: unique(replaced),
            error: error ?? (head ? null : 'the call ended without an answer'),
          },
        };
      };

      open.set(seq, () => build(CLOSED_EARLY, perf()));

      return {
        requestBody(chunk) {
          if (ended || chunk.length === 0) return;
          reqTotal += chunk.length;
          const room = cap - reqKept;
          if (room <= 0) return;
          const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
          reqParts.push(Buffer.from(part));
          reqKept += part.length;
        },
        head(h) {
          if (ended || head) return;
          head = { status: h.status, statusText: h.statusText, headers: h.headers.map(([n, v]) => [n, v]) };
          headAt = perf();
        },
        chunk(data) {
          if (ended || data.length === 0) return;
          resTotal += data.length;
          const room = cap - resKept;
          if (room <= 0) return;
          const part = data.length > room ? data.subarray(0, room) : data;
          resParts.push(Buffer.from(part));
          resKept += part.length;
          chunks.push({ t: ms(perf() - t0), bytes: part.length });
        },
        end(error) {
          if (ended) return;
          ended = true;
          done.set(seq, build(error, perf()));
          open.delete(seq);
          reqParts.length = 0;
          resParts.length = 0;
        },
      };
    },
    entries() {
      const all = [...done.values()];
      for (const build of open.values()) all.push(build());
      return all.sort((a, b) => a._svcEmu.seq - b._svcEmu.seq);
    },
  };
}

/**
 * Redacts an entry that did not come from a tape of this core (a cassette sent over the API, imported with
 * a state archive, or a browser's HAR): the same rules as a tape's, applied again; chunk boundaries move
 * with the replacements. An entry with nothing to redact comes back unchanged.
 */
export function redactEntry(entry: HarEntry, redactor: Redactor): HarEntry {
  const replaced: string[] = [...entry._svcEmu.redacted];
  const t = (s: string): string => {
    const r = redactor.text(s);
    replaced.push(...r.replaced);
    return r.text;
  };
  const hdrs = (list: HarEntry['request']['headers']) => {
    const r = redactor.headers(
      list.map((h) => [h.name, h.value]),
      [],
    );
    replaced.push(...r.replaced);
    return list.map((h, i) => ({ ...h, value: r.headers[i]?.[1] ?? h.value }));
  };
  const body = (text: string | undefined, encoding: string | undefined) => {
    const raw = harBodyBytes(text, encoding);
    const out = redactBody(redactor, raw);
    replaced.push(...out.replaced);
    return { raw, out };
  };
  const request = { ...entry.request, url: urlMarkers(t(entry.request.url)), headers: hdrs(entry.request.headers) };
  request.queryString = entry.request.queryString.map((q) => ({ ...q, name: t(q.name), value: t(q.value) }));
  if (entry.request.postData?.text) {
    const { out } = body(entry.request.postData.text, entry.request.postData.encoding);
    const har = bodyToHar(out.bytes);
    const { encoding: _drop, ...rest } = entry.request.postData;
    void _drop;
    request.postData = { ...rest, ...har };
  }
  const content = entry.response.content;
  let chunks = entry._svcEmu.chunks;
  let newContent = content;
  if (content.text) {
    const { out } = body(content.text, content.encoding);
    if (out.spans.length > 0 || out.replaced.length > 0) {
      const { encoding: _drop, text: _text, ...rest } = content;
      void _drop;
      void _text;
      newContent = { ...rest, ...bodyToHar(out.bytes), size: out.bytes.length };
      const sizes = chunkSizes(
        chunks.map((c) => c.bytes),
        out.spans,
        out.bytes.length,
      );
      chunks = chunks.map((c, i) => ({ ...c, bytes: sizes[i] ?? 0 }));
    }
  }
  return {
    ...entry,
    request,
    response: { ...entry.response, headers: hdrs(entry.response.headers), content: newContent },
    _svcEmu: { ...entry._svcEmu, chunks, redacted: unique(replaced) },
  };
}

/** Every entry of a cassette redacted again (a cassette sent over the API or imported). */
export function redactCassette<C extends { log: { entries: HarEntry[] } }>(cassette: C, redactor: Redactor): C {
  return { ...cassette, log: { ...cassette.log, entries: cassette.log.entries.map((e) => redactEntry(e, redactor)) } };
}
