// The GUI's one live feed: a single `GET /_emu/events` connection per tab (contract/emu/events.ts, read with
// contract/events-client.ts's followEvents), shared by every page through renderer/src/live-react.tsx. Pages
// never poll: they refetch what they show when a matching event arrives. No React here (Node-testable).
import type { EmuEvent, EmuEventType } from '../../contract/schemas/events';
import type { FollowOptions } from '../../contract/events-client';

/**
 * `connecting`: before the first answer; `live`: the feed is open; `reconnecting`: it dropped, trying again;
 * `refused`: the core refused it (the session ended: reload the page to sign in again).
 */
export type LiveState = 'connecting' | 'live' | 'reconnecting' | 'refused';

/** What a listener gets: an event, or `reset` (events were missed: re-read everything shown). */
export type LiveMessage = { kind: 'event'; event: EmuEvent } | { kind: 'reset' };

/** Follows the feed until `signal` aborts (followEvents over the signed-in client): reconnects by itself. */
export type Follow = (opts: Pick<FollowOptions, 'signal' | 'onReset' | 'onState'>) => AsyncIterable<EmuEvent>;

export class LiveFeed {
  private readonly listeners = new Set<(m: LiveMessage) => void>();
  private readonly stateListeners = new Set<(s: LiveState) => void>();
  private current: LiveState = 'connecting';
  private everOpen = false;
  /** An event came: a reconnect then resumes after it (followEvents sends Last-Event-ID). */
  private sawEvent = false;

  constructor(private readonly follow: Follow) {}

  get state(): LiveState {
    return this.current;
  }

  /** Listens to every event (and `reset`); returns the unsubscribe. */
  listen(listener: (m: LiveMessage) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  onState(listener: (s: LiveState) => void): () => void {
    this.stateListeners.add(listener);
    return () => void this.stateListeners.delete(listener);
  }

  /** Listeners now (a page that unmounts leaves none behind). */
  get listenerCount(): number {
    return this.listeners.size;
  }

  /**
   * Keeps one connection open until the returned stop is called. Listeners stay across connect/stop, so
   * React's effects can restart it. A reconnect after a drop resumes with `Last-Event-ID` (followEvents),
   * so nothing is missed; when the core cannot resume (it restarted) every listener gets `reset`.
   */
  connect(): () => void {
    const abort = new AbortController();
    void this.run(abort.signal);
    return () => abort.abort();
  }

  private setState(s: LiveState): void {
    if (s === this.current) return;
    this.current = s;
    for (const l of [...this.stateListeners]) l(s);
  }

  private emit(m: LiveMessage): void {
    for (const l of [...this.listeners]) {
      try {
        l(m);
      } catch (err) {
        // One page's handler failing must not stop the others (nor the feed).
        console.error('live feed listener failed', err);
      }
    }
  }

  private async run(signal: AbortSignal): Promise<void> {
    const events = this.follow({
      signal,
      onReset: () => this.emit({ kind: 'reset' }),
      onState: (s) => {
        if (signal.aborted) return;
        if (s.state === 'open') {
          // Back after a drop with no event id to resume from: what changed meanwhile (a restarted core's
          // first compiles, say) is unknown, so every page reads again.
          if (this.everOpen && !this.sawEvent) this.emit({ kind: 'reset' });
          this.everOpen = true;
          this.setState('live');
        } else this.setState(this.everOpen ? 'reconnecting' : 'connecting');
      },
    });
    try {
      for await (const event of events) {
        if (signal.aborted) return;
        this.sawEvent = true;
        this.emit({ kind: 'event', event });
      }
    } catch (err) {
      // followEvents retries everything but a refusal (401/400): the session is gone.
      if (!signal.aborted) {
        console.error('the live feed was refused', err);
        this.setState('refused');
      }
    }
  }
}

/** A type pattern: an exact type or a prefix ending in `*` (`invocation.*`), as the feed's `types=`. */
export type LivePattern = EmuEventType | `${string}.*`;

/** Whether an event's type is one of `patterns`. */
export function matches(patterns: readonly LivePattern[], type: string): boolean {
  return patterns.some((p) => (p.endsWith('*') ? type.startsWith(p.slice(0, -1)) : type === p));
}

/**
 * Runs `fn` now, or once more right after the run in flight: a burst of events costs one reload in
 * flight and at most one after it, and the page shows the state after the burst. `cancel` drops any
 * pending rerun (the page is gone, or its inputs changed).
 */
export function coalesce(fn: () => Promise<unknown>): { trigger: () => void; cancel: () => void } {
  let busy = false;
  let again = false;
  let gen = 0;
  const trigger = () => {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    const mine = gen;
    void fn()
      .catch(() => {})
      .finally(() => {
        if (mine !== gen) return;
        busy = false;
        if (again) {
          again = false;
          trigger();
        }
      });
  };
  return {
    trigger,
    cancel: () => {
      gen++;
      busy = false;
      again = false;
    },
  };
}

/** The snippet an event is about (by name), or null for events about no one snippet. */
export function snippetOf(e: EmuEvent): string | null {
  const d: object = e.data;
  return 'snippet' in d && typeof d.snippet === 'string' ? d.snippet : null;
}
