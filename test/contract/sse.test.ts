import { describe, expect, it } from 'vitest';
import { parseSse, parseSseText, SseParser, type SseEvent } from '../../contract/sse';

const enc = new TextEncoder();

async function* chunksOf(parts: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield p;
}

function streamOf(parts: Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < parts.length) controller.enqueue(parts[i++]!);
      else controller.close();
    },
  });
}

async function collect(source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>, comments?: string[]): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const e of parseSse(source, comments ? { onComment: (c) => comments.push(c) } : {})) out.push(e);
  return out;
}

/** The bytes cut at the given offsets. */
function cut(bytes: Uint8Array, at: number[]): Uint8Array[] {
  const points = [0, ...at, bytes.length];
  return points.slice(1).map((end, i) => bytes.slice(points[i], end));
}

/** A seeded generator, so a failing split can be reproduced. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

// One stream exercising every rule at once: the three line ends, a comment, multi-line data, an id that
// persists, a frame with no data, an unknown field, a field without a colon, multi-byte UTF-8, a BOM.
const STREAM =
  '\uFEFF: ping\r\n' +
  'id: 1\nevent: start\ndata: {"a":1}\n\n' +
  'event: chunk\r\ndata: line one\r\ndata:line two\r\ndata:  two spaces\r\n\r\n' +
  'id: 2\revent: chunk\rdata: héllo ✓ 𝄞\r\r' +
  'event: lonely\nid: 3\n\n' +
  'data\nfoo: bar\nretry: 1500\n\n' +
  'retry: 12x\nid: a\0b\ndata: last\n\n' +
  'event: result\ndata: {"partial":';

const EXPECTED: SseEvent[] = [
  { event: 'start', data: '{"a":1}', id: '1' },
  { event: 'chunk', data: 'line one\nline two\n two spaces', id: '1' },
  { event: 'chunk', data: 'héllo ✓ 𝄞', id: '2' },
  { event: 'message', data: '', id: '3', retry: 1500 },
  { event: 'message', data: 'last', id: '3' },
];

describe('parseSse', () => {
  const bytes = enc.encode(STREAM);

  it('parses a whole stream by the event-stream rules, dropping the frame the stream ended inside', async () => {
    const comments: string[] = [];
    expect(await collect(chunksOf([bytes]), comments)).toEqual(EXPECTED);
    expect(comments).toEqual(['ping']);
  });

  it('gives the same events for every two-way split of the bytes (inside CRLF, inside a UTF-8 sequence, between frames)', async () => {
    for (let i = 1; i < bytes.length; i++) {
      expect(await collect(chunksOf(cut(bytes, [i]))), `split at byte ${i}`).toEqual(EXPECTED);
    }
  });

  it('gives the same events one byte at a time, and from a ReadableStream', async () => {
    const single = Array.from(bytes, (b) => Uint8Array.of(b));
    expect(await collect(chunksOf(single))).toEqual(EXPECTED);
    expect(await collect(streamOf(single))).toEqual(EXPECTED);
    expect(await collect(streamOf([bytes]))).toEqual(EXPECTED);
  });

  it('gives the same events for 300 random splits, empty chunks included', async () => {
    const next = rng(15);
    for (let round = 0; round < 300; round++) {
      const at = Array.from({ length: 1 + Math.floor(next() * 12) }, () => Math.floor(next() * (bytes.length + 1))).sort((a, b) => a - b);
      expect(await collect(chunksOf(cut(bytes, at))), `cuts ${at.join(',')}`).toEqual(EXPECTED);
    }
  });

  it('treats a CR ending one chunk and an LF opening the next as one line end, not two', async () => {
    const parts = ['data: x\r', '\ndata: y\r', '\n\r', '\n'].map((s) => enc.encode(s));
    expect(await collect(chunksOf(parts))).toEqual([{ event: 'message', data: 'x\ny', id: undefined }]);
  });

  it('yields each event as soon as its blank line arrives, before the stream ends', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    async function* slow(): AsyncGenerator<Uint8Array> {
      yield enc.encode('event: chunk\ndata: 1\n\n');
      await gate;
      yield enc.encode('event: chunk\ndata: 2\n\n');
    }
    const it = parseSse(slow());
    const first = await it.next();
    expect(first.value).toEqual({ event: 'chunk', data: '1', id: undefined });
    release();
    expect((await it.next()).value).toEqual({ event: 'chunk', data: '2', id: undefined });
    expect((await it.next()).done).toBe(true);
  });

  it('cancels a ReadableStream source when the loop is left early', async () => {
    let cancelled = false;
    const source = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(enc.encode('data: tick\n\n'));
      },
      cancel() {
        cancelled = true;
      },
    });
    let n = 0;
    for await (const e of parseSse(source)) {
      expect(e.data).toBe('tick');
      if (++n === 3) break;
    }
    expect(cancelled).toBe(true);
  });

  it('ends quietly when its signal aborts, cancelling the source', async () => {
    let cancelled = false;
    const ac = new AbortController();
    const source = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(enc.encode('data: one\n\n'));
      },
      cancel() {
        cancelled = true;
      },
    });
    const seen: string[] = [];
    for await (const e of parseSse(source, { signal: ac.signal })) {
      seen.push(e.data);
      ac.abort();
    }
    expect(seen).toEqual(['one']);
    expect(cancelled).toBe(true);
  });

  it('parseSseText parses a stream already read whole', () => {
    const comments: string[] = [];
    expect(parseSseText(STREAM, { onComment: (c) => comments.push(c) })).toEqual(EXPECTED);
    expect(comments).toEqual(['ping']);
  });

  it('SseParser takes text as well as bytes, and end() drops an unterminated frame', () => {
    const p = new SseParser();
    expect(p.push('data: a\n')).toEqual([]);
    expect(p.push('\ndata: b')).toEqual([{ event: 'message', data: 'a', id: undefined }]);
    expect(p.end()).toEqual([]);
  });
});
