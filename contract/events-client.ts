/**
 * The one reader of the live event feed (`GET /_emu/events`, contract/emu/events.ts) for every client: the GUI,
 * the CLI's `logs --follow`, the bench and the tests. An async iterator of typed, validated events that survives
 * dropped connections: it reconnects with backoff and `Last-Event-ID`, so nothing published meanwhile is lost
 * (the core keeps the last 1,000); when the core cannot honour the id (it restarted, or the reader was away too
 * long) `onReset` is called first, and the reader re-reads the state it shows. Runs in Node and the browser.
 */
import { createClient, ProblemError, type Client, type ClientOptions, type Problem } from './client';
import { parseSse } from './sse';
import { EMU_EVENT_SCHEMAS, EmuEventsReset, type EmuEvent, type EmuEventType } from './schemas/events';
import type { z } from 'zod';

export type EmuEventsResetData = z.infer<typeof EmuEventsReset>;

export type FollowState =
  | { state: 'open' }
  /** The connection failed or ended: the next attempt starts in `delayMs`. */
  | { state: 'retrying'; attempt: number; delayMs: number; error: string };

export interface FollowOptions {
  /** Only these types: exact names or prefixes ending in `*` (`invocation.*`); all when absent. */
  types?: string | readonly (EmuEventType | `${string}*`)[];
  /** Resume after this event (an id a previous reader got): the events after it come first. */
  lastEventId?: string;
  /** Ends the iteration (quietly) and the connection. */
  signal?: AbortSignal;
  /** The feed could not resume (another start of the core, or too long away): re-read the state. Awaited. */
  onReset?: (reset: EmuEventsResetData) => void | Promise<void>;
  /** Connection state, for a "reconnecting…" hint. */
  onState?: (state: FollowState) => void;
  /** A frame that does not match the contract (a newer core's type, a bad payload): skipped, reported here. */
  onInvalid?: (frame: { event: string; data: string }, problem: string) => void;
  /** The first reconnect delay, doubled up to `maxRetryMs` (defaults 250 ms and 5 s); a connection that opened resets it. */
  minRetryMs?: number;
  maxRetryMs?: number;
  /**
   * Silence (no event, no `: ping`) after which the connection is taken for dead and reopened: the core pings
   * every 15 s of silence, so the default is 45 s.
   */
  idleMs?: number;
}

const isClient = (x: Client | ClientOptions): x is Client => typeof (x as Client).fetchPath === 'function';

/** The path with its query: `/_emu/events?types=…`. */
export function eventsPath(types?: FollowOptions['types']): string {
  const list = typeof types === 'string' ? types : types?.join(',');
  return list ? `/_emu/events?types=${encodeURIComponent(list)}` : '/_emu/events';
}

/** One frame of the feed checked against the contract: the event, a reset, or why it is neither. */
export function parseEmuFrame(
  event: string,
  data: string,
): { kind: 'event'; event: EmuEvent } | { kind: 'reset'; reset: EmuEventsResetData } | { kind: 'invalid'; problem: string } {
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return { kind: 'invalid', problem: 'data is not JSON' };
  }
  if (event === 'reset') {
    const r = EmuEventsReset.safeParse(json);
    return r.success ? { kind: 'reset', reset: r.data } : { kind: 'invalid', problem: r.error.message };
  }
  const schema = (EMU_EVENT_SCHEMAS as Record<string, z.ZodType | undefined>)[event];
  if (!schema) return { kind: 'invalid', problem: `unknown event type '${event}'` };
  const r = schema.safeParse(json);
  return r.success ? { kind: 'event', event: r.data as EmuEvent } : { kind: 'invalid', problem: r.error.message };
}

/**
 * Every event from now (or after `lastEventId`) until `signal` aborts or the loop is left. A refusal that
 * retrying cannot fix (401, 400: a bad token or `types=`) throws a ProblemError; anything else (the core
 * restarting, a network drop, a 5xx) is retried.
 */
export async function* followEvents(source: Client | ClientOptions, opts: FollowOptions = {}): AsyncGenerator<EmuEvent, void, undefined> {
  const client = isClient(source) ? source : createClient(source);
  const min = opts.minRetryMs ?? 250;
  const max = opts.maxRetryMs ?? 5_000;
  const idleMs = opts.idleMs ?? 45_000;
  const outer = opts.signal;
  let lastId = opts.lastEventId;
  let attempt = 0;
  while (!outer?.aborted) {
    // One connection: its own abort, linked to the caller's and to the idle watchdog.
    const conn = new AbortController();
    const onOuterAbort = () => conn.abort();
    outer?.addEventListener('abort', onOuterAbort, { once: true });
    let idle: ReturnType<typeof setTimeout> | undefined;
    const alive = () => {
      if (idle !== undefined) clearTimeout(idle);
      idle = setTimeout(() => conn.abort(), idleMs);
    };
    let failure = 'the feed ended';
    try {
      alive();
      const res = await client.fetchPath('GET', eventsPath(opts.types), {
        auth: 'admin',
        headers: { accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
        signal: conn.signal,
      });
      if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
        const text = await res.text();
        let problem: Problem = {};
        try {
          problem = JSON.parse(text) as Problem;
        } catch {
          // not problem+json: the text is the detail
        }
        throw new ProblemError('emuEvents', res.status, res.headers, problem, text);
      }
      if (!res.ok || !res.body) {
        failure = `the core answered ${res.status}`;
        await res.body?.cancel().catch(() => undefined);
      } else {
        attempt = 0;
        opts.onState?.({ state: 'open' });
        for await (const frame of parseSse(res.body, { signal: conn.signal, onComment: alive })) {
          alive();
          const parsed = parseEmuFrame(frame.event, frame.data);
          if (parsed.kind === 'reset') {
            await opts.onReset?.(parsed.reset);
          } else if (parsed.kind === 'event') {
            yield parsed.event;
          } else {
            opts.onInvalid?.({ event: frame.event, data: frame.data }, parsed.problem);
          }
          // After the frame is handled: a reader that stops inside the loop resumes at this frame next time.
          if (frame.id !== undefined) lastId = frame.id;
        }
        if (conn.signal.aborted && !outer?.aborted) failure = `no event or ping for ${idleMs} ms`;
      }
    } catch (err) {
      if (err instanceof ProblemError) throw err;
      if (outer?.aborted) return;
      failure = conn.signal.aborted ? `no event or ping for ${idleMs} ms` : err instanceof Error ? err.message : String(err);
    } finally {
      if (idle !== undefined) clearTimeout(idle);
      outer?.removeEventListener('abort', onOuterAbort);
      conn.abort();
    }
    if (outer?.aborted) return;
    attempt += 1;
    const delayMs = Math.min(max, min * 2 ** (attempt - 1));
    opts.onState?.({ state: 'retrying', attempt, delayMs, error: failure });
    await sleep(delayMs, outer);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
