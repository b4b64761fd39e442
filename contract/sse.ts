/**
 * The one parser of server-sent events (the WHATWG HTML "event stream" interpretation), for every reader of
 * the core's streams: the typed client (contract/client.ts), the renderer, the CLI, the bench and the tests.
 * It runs in Node and in the browser: bytes in (a `ReadableStream<Uint8Array>` such as `Response.body`, or
 * any `AsyncIterable<Uint8Array>`), events out, as each frame's blank line arrives.
 *
 * The rules kept: UTF-8 with one leading BOM dropped; lines end in CRLF, LF or CR (a CR at the end of one
 * chunk and an LF at the start of the next are one line end); `:` starts a comment (`: ping`); a field's value
 * loses one leading space; `data` lines join with LF; `id` persists until the next `id` (one containing NUL
 * is ignored); `retry` takes digits only; unknown fields are ignored; a frame with no `data` dispatches
 * nothing; a frame the stream ends inside (no blank line yet) is dropped, as a browser's EventSource does.
 */

export interface SseEvent {
  /** `message` when the frame names none. */
  event: string;
  /** The `data` lines joined with `\n`. */
  data: string;
  /** The last event id seen so far on this stream (`id:` persists across frames), or undefined. */
  id: string | undefined;
  /** A `retry:` in this frame, in milliseconds. */
  retry?: number;
}

export interface SseOptions {
  /** Called with each comment's text (after the `:`, one leading space dropped), e.g. `ping`. */
  onComment?: (text: string) => void;
  /** Stops reading (and cancels the source) when aborted; the iteration then ends quietly. */
  signal?: AbortSignal;
}

export type ByteSource = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/** Events as they arrive on `source`. Leaving the loop early (break, return, throw) releases the source. */
export async function* parseSse(source: ByteSource, opts: SseOptions = {}): AsyncGenerator<SseEvent, void, undefined> {
  const parser = new SseParser(opts.onComment);
  for await (const chunk of bytesOf(source, opts.signal)) {
    yield* parser.push(chunk);
  }
  yield* parser.end();
}

/** The events of a whole stream already read as text (a test's `await res.text()`). */
export function parseSseText(text: string, opts: Pick<SseOptions, 'onComment'> = {}): SseEvent[] {
  const parser = new SseParser(opts.onComment);
  return [...parser.push(text), ...parser.end()];
}

/**
 * The incremental form: `push` bytes (or text), get the events their frames completed; `end` at the end of
 * the stream. For callers that already hold chunks (a Node `data` event, a test's adversarial split).
 */
export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  private buf = '';
  private started = false;
  /** A CR ended the last chunk: an LF opening the next one belongs to it. */
  private pendingCr = false;
  private data: string[] = [];
  private event = '';
  private retry: number | undefined;
  private lastId: string | undefined;

  constructor(private readonly onComment?: (text: string) => void) {}

  push(chunk: Uint8Array | string): SseEvent[] {
    let text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    if (!this.started && text.length > 0) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (text.length === 0) return [];
    if (this.pendingCr && text.startsWith('\n')) text = text.slice(1);
    this.pendingCr = false;
    this.buf += text;
    const out: SseEvent[] = [];
    let start = 0;
    for (;;) {
      const cr = this.buf.indexOf('\r', start);
      const lf = this.buf.indexOf('\n', start);
      if (cr < 0 && lf < 0) break;
      let end: number;
      let next: number;
      if (lf >= 0 && (cr < 0 || lf < cr)) {
        end = lf;
        next = lf + 1;
      } else if (cr + 1 < this.buf.length) {
        end = cr;
        next = this.buf[cr + 1] === '\n' ? cr + 2 : cr + 1;
      } else {
        // A CR as the last character: a line end, and an LF at the start of the next chunk is part of it.
        end = cr;
        next = cr + 1;
        this.pendingCr = true;
      }
      const ev = this.line(this.buf.slice(start, end));
      if (ev) out.push(ev);
      start = next;
    }
    this.buf = this.buf.slice(start);
    return out;
  }

  /** The end of the stream: flushes the decoder; a frame without its blank line is dropped. */
  end(): SseEvent[] {
    const rest = this.decoder.decode();
    const out = rest ? this.push(rest) : [];
    this.buf = '';
    this.data = [];
    this.event = '';
    this.retry = undefined;
    return out;
  }

  private line(line: string): SseEvent | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) {
      this.onComment?.(line.slice(1).replace(/^ /, ''));
      return undefined;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    switch (field) {
      case 'event':
        this.event = value;
        break;
      case 'data':
        this.data.push(value);
        break;
      case 'id':
        if (!value.includes('\0')) this.lastId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
      default:
        break;
    }
    return undefined;
  }

  private dispatch(): SseEvent | undefined {
    const retry = this.retry;
    this.retry = undefined;
    if (this.data.length === 0) {
      this.event = '';
      return undefined;
    }
    const ev: SseEvent = { event: this.event || 'message', data: this.data.join('\n'), id: this.lastId };
    if (retry !== undefined) ev.retry = retry;
    this.data = [];
    this.event = '';
    return ev;
  }
}

/** The chunks of a web stream (through its reader, which every browser has) or of any async iterable. */
async function* bytesOf(source: ByteSource, signal?: AbortSignal): AsyncGenerator<Uint8Array, void, undefined> {
  if (signal?.aborted) return;
  if ('getReader' in source && typeof source.getReader === 'function') {
    const reader = source.getReader();
    const onAbort = () => void reader.cancel().catch(() => undefined);
    signal?.addEventListener('abort', onAbort, { once: true });
    let done = false;
    try {
      for (;;) {
        const r = await reader.read().catch((err: unknown) => {
          if (signal?.aborted) return { done: true as const, value: undefined };
          throw err;
        });
        if (r.done) {
          done = true;
          return;
        }
        if (signal?.aborted) return;
        yield r.value;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (!done) await reader.cancel().catch(() => undefined);
      reader.releaseLock();
    }
  }
  for await (const chunk of source as AsyncIterable<Uint8Array>) {
    if (signal?.aborted) return;
    yield chunk;
  }
}
