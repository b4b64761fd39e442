import type { CoreDeps } from '../core-deps';
import type { InvocationRecord } from '../storage/schema';

/** One event of a stream: what an SSE frame carries (`id:`, `event:`, `data:`), and when it happened. */
export interface StreamEvent {
  id: number;
  event: 'start' | 'chunk' | 'result' | 'error';
  data: unknown;
  /** When it was emitted (RFC 3339) and ms since the stream's start. */
  at: string;
  t_ms: number;
}

/** Events kept per streamed invocation (the client gets them all; the record keeps the first ones). */
export const STREAM_EVENTS_KEPT = 10_000;
/** …and at most this much of their JSON (each chunk may be up to a body's 6 MiB: services/host-calls.ts). */
export const STREAM_KEPT_MAX_CHARS = 32 * 1024 * 1024;

interface Live {
  events: StreamEvent[];
  nextId: number;
  truncated: boolean;
  keptChars: number;
  started: number;
  listeners: Set<(e: StreamEvent | null) => void>;
}

export interface StoredStream {
  events: StreamEvent[];
  truncated: boolean;
}

/**
 * The events of streamed invocations (emulator only): numbered and timestamped as they are emitted,
 * handed to every listener (the caller's response, and any viewer following live), and kept with the
 * invocation (a blob named by `events_blob`) when the stream ends, so the inspector can read them back.
 */
export class StreamLog {
  private readonly live = new Map<string, Live>();

  constructor(
    private readonly deps: CoreDeps,
    /** Silence after which an SSE response gets a `: ping` comment (docs/contract.md: at least every 15 s). */
    readonly pingMs = 15_000,
    /** A stream's events could not be kept with its record (the caller had them all; only the copy is lost). */
    private readonly onError: (message: string, err: unknown) => void = () => {},
  ) {}

  /** A stream starts; `listener` (the caller's response) gets every event, then `null` at the end. */
  open(invocationId: string, listener: (e: StreamEvent | null) => void): void {
    this.live.set(invocationId, {
      events: [],
      nextId: 1,
      truncated: false,
      keptChars: 0,
      started: performance.now(),
      listeners: new Set([listener]),
    });
  }

  emit(invocationId: string, event: StreamEvent['event'], data: unknown): StreamEvent {
    const live = this.live.get(invocationId);
    if (!live) throw new Error(`no open stream for ${invocationId}`);
    const e: StreamEvent = {
      id: live.nextId++,
      event,
      data,
      at: this.deps.clock().toISOString(),
      t_ms: Math.round((performance.now() - live.started) * 10) / 10,
    };
    const chars = event === 'chunk' && !live.truncated ? (JSON.stringify(data) ?? '').length : 0;
    if (
      event !== 'chunk' ||
      (!live.truncated && live.events.length < STREAM_EVENTS_KEPT && live.keptChars + chars <= STREAM_KEPT_MAX_CHARS)
    ) {
      live.events.push(e);
      live.keptChars += chars;
    } else live.truncated = true;
    for (const listener of live.listeners) listener(e);
    return e;
  }

  /**
   * The stream ended: its events go into a blob named on the record, then listeners are told. Until
   * then a viewer can still join live; from then on it reads the record's copy.
   */
  async close(invocationId: string): Promise<void> {
    const live = this.live.get(invocationId);
    if (!live) return;
    // Never rejects, and the stream goes from `live` whatever happens: nobody awaits this (an unhandled
    // rejection would stop the core), and a stream left here would keep its events and listeners for good.
    try {
      const stored: StoredStream = { events: live.events, truncated: live.truncated };
      const blob = await this.deps.blobs.put(JSON.stringify(stored));
      this.deps.repo.mutateLazy((db) => {
        const rec = db.invocations.find((i) => i.id === invocationId);
        if (rec) rec.events_blob = blob;
      });
    } catch (err) {
      this.onError(`the events of stream ${invocationId} could not be kept`, err);
    } finally {
      this.live.delete(invocationId);
      for (const listener of live.listeners) listener(null);
    }
  }

  /**
   * Past events and, while the stream runs, every next one (`null` when it ends). `unsubscribe` stops
   * the live part. Not live: the record's copy (nothing for an invocation that did not stream).
   */
  async follow(
    rec: InvocationRecord,
    listener: (e: StreamEvent | null) => void,
  ): Promise<{ past: StreamEvent[]; live: boolean; truncated: boolean; unsubscribe: () => void }> {
    const live = this.live.get(rec.id);
    if (live) {
      live.listeners.add(listener);
      return { past: [...live.events], live: true, truncated: live.truncated, unsubscribe: () => live.listeners.delete(listener) };
    }
    const stored = await this.read(rec);
    return { past: stored.events, live: false, truncated: stored.truncated, unsubscribe: () => {} };
  }

  async read(rec: InvocationRecord): Promise<StoredStream> {
    const live = this.live.get(rec.id);
    if (live) return { events: [...live.events], truncated: live.truncated };
    const blob = this.deps.repo.read((db) => db.invocations.find((i) => i.id === rec.id)?.events_blob);
    if (!blob) return { events: [], truncated: false };
    return JSON.parse(await this.deps.blobs.getText(blob)) as StoredStream;
  }
}
