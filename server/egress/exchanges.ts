/**
 * The bodies of a run's calls to OpenAI-compatible providers, kept so the agent run view can assemble them
 * (server/services/provider-calls.ts). Only calls that look like a model call are kept: a POST whose path
 * ends in `/chat/completions` or `/responses`, made through the egress proxy over plain HTTP or by the core
 * for `integrations.call`. HTTPS tunnels (CONNECT) carry bytes this process cannot read, so they are never
 * here. Never a header (credentials live there): the request's body, the response's body with the time
 * each piece arrived, its status and the two headers needed to read it (content type and encoding).
 *
 * Memory, per core: each body up to `maxBodyBytes` (the rest is counted, not kept: `truncated`), the calls of
 * the newest `maxInvocations` runs, `maxTotalBytes` in all; the oldest run's calls go first. A run whose
 * record is gone (pruned from the history) loses its calls at the next run that keeps one: `alive`.
 * In memory only, like the egress log it sits beside: a restart forgets them.
 */

export interface ExchangeChunk {
  /** Milliseconds since the request started (when the proxy or the core took it). */
  t: number;
  data: Buffer;
}

export interface ProviderExchange {
  source: 'snippet' | 'integration';
  method: string;
  host: string;
  path: string;
  /** When the request started, epoch ms. */
  startedAt: number;
  /** The request body's pieces, as they came. */
  request: Buffer[];
  requestTruncated: boolean;
  status: number | null;
  contentType: string | null;
  contentEncoding: string | null;
  response: ExchangeChunk[];
  responseTruncated: boolean;
  /** Set when the call has ended: its egress log entry's id and duration. */
  egressId: number | null;
  durationMs: number | null;
}

export interface ExchangeRecorder {
  request(chunk: Buffer): void;
  head(status: number | null, contentType: string | undefined, contentEncoding: string | undefined): void;
  response(chunk: Buffer): void;
  /** The call ended (answered, failed or cut): the entry the egress log made for it. */
  finish(entry: { id: number; duration_ms: number; status: number | null }): void;
}

export interface ExchangeLimits {
  maxBodyBytes: number;
  maxInvocations: number;
  maxTotalBytes: number;
}

export const EXCHANGE_LIMITS: ExchangeLimits = {
  maxBodyBytes: 1024 * 1024,
  maxInvocations: 200,
  maxTotalBytes: 64 * 1024 * 1024,
};

/** A model call, by its request line: chat completions or the Responses API, under any base path. */
export function isProviderCall(method: string | undefined, path: string): boolean {
  return (method ?? '').toUpperCase() === 'POST' && /\/(chat\/completions|responses)\/?$/.test(path);
}

export class ProviderExchanges {
  /** Insertion order is age: the first key is the oldest run's. */
  private readonly runs = new Map<string, { calls: ProviderExchange[]; bytes: number }>();
  private total = 0;

  constructor(
    /** False once an invocation's record is gone: its calls are dropped. */
    private readonly alive: (invocationId: string) => boolean = () => true,
    private readonly limits: ExchangeLimits = EXCHANGE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  open(invocationId: string, call: { source: 'snippet' | 'integration'; method: string; host: string; path: string }): ExchangeRecorder {
    let run = this.runs.get(invocationId);
    if (!run) {
      this.dropGone();
      run = { calls: [], bytes: 0 };
      this.runs.set(invocationId, run);
      this.evict(invocationId);
    }
    const ex: ProviderExchange = {
      ...call,
      startedAt: this.now(),
      request: [],
      requestTruncated: false,
      status: null,
      contentType: null,
      contentEncoding: null,
      response: [],
      responseTruncated: false,
      egressId: null,
      durationMs: null,
    };
    run.calls.push(ex);
    const started = performance.now();
    let reqBytes = 0;
    let resBytes = 0;
    const keep = (bytes: number) => {
      const r = this.runs.get(invocationId);
      if (r) r.bytes += bytes;
      this.total += bytes;
      this.evict(invocationId);
    };
    return {
      request: (chunk) => {
        const room = this.limits.maxBodyBytes - reqBytes;
        if (room <= 0) {
          ex.requestTruncated ||= chunk.length > 0;
          return;
        }
        const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
        if (part.length < chunk.length) ex.requestTruncated = true;
        ex.request.push(Buffer.from(part));
        reqBytes += part.length;
        keep(part.length);
      },
      head: (status, contentType, contentEncoding) => {
        ex.status = status;
        ex.contentType = contentType ?? null;
        ex.contentEncoding = contentEncoding ?? null;
      },
      response: (chunk) => {
        const room = this.limits.maxBodyBytes - resBytes;
        if (room <= 0) {
          ex.responseTruncated ||= chunk.length > 0;
          return;
        }
        const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
        if (part.length < chunk.length) ex.responseTruncated = true;
        ex.response.push({ t: Math.round((performance.now() - started) * 10) / 10, data: Buffer.from(part) });
        resBytes += part.length;
        keep(part.length);
      },
      finish: (entry) => {
        ex.egressId = entry.id;
        ex.durationMs = entry.duration_ms;
        ex.status ??= entry.status;
      },
    };
  }

  /** The run's calls, oldest first (ended and still running). */
  list(invocationId: string): readonly ProviderExchange[] {
    return this.runs.get(invocationId)?.calls ?? [];
  }

  forget(invocationId: string): void {
    const run = this.runs.get(invocationId);
    if (!run) return;
    this.total -= run.bytes;
    this.runs.delete(invocationId);
  }

  /** Bytes kept now, and runs (tests and the soak bench read them). */
  get size(): { bytes: number; invocations: number } {
    return { bytes: this.total, invocations: this.runs.size };
  }

  private dropGone(): void {
    for (const id of [...this.runs.keys()]) if (!this.alive(id)) this.forget(id);
  }

  /** Oldest runs go until the budget holds; the run being written is the last to go. */
  private evict(current: string): void {
    for (const id of this.runs.keys()) {
      if (this.runs.size <= this.limits.maxInvocations && this.total <= this.limits.maxTotalBytes) return;
      if (id !== current) this.forget(id);
    }
  }
}
