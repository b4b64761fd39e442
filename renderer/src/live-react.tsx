// The live feed (renderer/src/live.ts) in React: one connection per tab, opened by <LiveProvider> once
// signed in, and the hooks every page uses instead of a timer — `useLiveLoad` (load, then load again on a
// matching event, bursts coalesced; everything on `reset`) and `useLiveEvent` (react to events).
import { createContext, useCallback, useContext, useEffect, useRef, useState, type ReactNode } from 'react';
import type { EmuEvent } from '../../contract/schemas/events';
import { followEvents } from '../../contract/events-client';
import type { Api } from './api';
import { Ctx, type AppContext } from './context';
import { coalesce, LiveFeed, matches, type LivePattern, type LiveState } from './live';
import type { Loaded } from './ui/kit';
import './live.css';

const LiveCtx = createContext<LiveFeed | null>(null);

/** The feed over the signed-in client: `GET /_emu/events`, resumed with `Last-Event-ID` after a drop. */
export function createFeed(api: Api): LiveFeed {
  return new LiveFeed((opts) => followEvents(api.client, opts));
}

/** Opens the tab's one feed for everything inside (the signed-in shell). */
export function LiveProvider({ api, children }: { api: Api; children: ReactNode }) {
  const [feed] = useState(() => createFeed(api));
  useEffect(() => feed.connect(), [feed]);
  return <LiveCtx.Provider value={feed}>{children}</LiveCtx.Provider>;
}

/** What the signed-in shell provides: the app context (context.ts) and the one live feed. */
export function AppProviders({ value, children }: { value: AppContext; children: ReactNode }) {
  return (
    <Ctx.Provider value={value}>
      <LiveProvider api={value.api}>{children}</LiveProvider>
    </Ctx.Provider>
  );
}

function useFeed(): LiveFeed {
  const feed = useContext(LiveCtx);
  if (!feed) throw new Error('live hooks outside <LiveProvider>');
  return feed;
}

export function useLiveState(): LiveState {
  const feed = useFeed();
  const [state, setState] = useState(feed.state);
  useEffect(() => {
    setState(feed.state);
    return feed.onState(setState);
  }, [feed]);
  return state;
}

/**
 * Calls `onEvent` for each event whose type is one of `types` and that `filter` keeps, and `onReset`
 * (default: nothing) when events were missed. The latest callbacks are used; subscribing happens once.
 */
export function useLiveEvent(
  types: readonly LivePattern[],
  onEvent: (e: EmuEvent) => void,
  opts: { filter?: (e: EmuEvent) => boolean; onReset?: () => void } = {},
): void {
  const feed = useFeed();
  const latest = useRef({ types, onEvent, opts });
  latest.current = { types, onEvent, opts };
  useEffect(
    () =>
      feed.listen((m) => {
        const { types: t, onEvent: on, opts: o } = latest.current;
        if (m.kind === 'reset') o.onReset?.();
        else if (matches(t, m.event.type) && (!o.filter || o.filter(m.event))) on(m.event);
      }),
    [feed],
  );
}

/**
 * `useLoad` (ui/kit.tsx) that stays current: loads on mount and when `deps` change, and again when an
 * event of `types` (kept by `filter`) arrives or the feed resets. A burst of events costs one load in
 * flight and one after it. Stale-while-revalidate: shown data stays while the next load runs.
 */
export function useLiveLoad<T>(
  fn: () => Promise<T>,
  deps: unknown[],
  types: readonly LivePattern[],
  filter?: (e: EmuEvent) => boolean,
): [Loaded<T>, () => void] {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: 'loading' });
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const runner = useRef<ReturnType<typeof coalesce> | null>(null);

  useEffect(() => {
    let live = true;
    const r = coalesce(() =>
      fnRef.current().then(
        (data) => live && setLoaded({ state: 'ok', data }),
        (error: unknown) => live && setLoaded({ state: 'error', error }),
      ),
    );
    runner.current = r;
    r.trigger();
    return () => {
      live = false;
      r.cancel();
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);

  const reload = useCallback(() => runner.current?.trigger(), []);
  useLiveEvent(types, reload, { ...(filter ? { filter } : {}), onReset: reload });
  return [loaded, reload];
}

/** Re-runs `fn` (coalesced as useLiveLoad does) on matching events and resets; for pages with their own state. */
export function useLiveRefresh(fn: () => Promise<unknown>, types: readonly LivePattern[], filter?: (e: EmuEvent) => boolean): () => void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const [r] = useState(() => coalesce(() => fnRef.current()));
  useEffect(() => () => r.cancel(), [r]);
  useLiveEvent(types, r.trigger, { ...(filter ? { filter } : {}), onReset: r.trigger });
  return r.trigger;
}

const LABEL: Record<LiveState, string> = {
  connecting: 'Connecting…',
  live: 'Live',
  reconnecting: 'Reconnecting…',
  refused: 'Not live: reload',
};

/** The shell's small "live / reconnecting" sign: whether the pages are being kept current. */
export function LiveIndicator() {
  const state = useLiveState();
  return (
    <span
      className={`live-indicator live-${state}`}
      data-testid="live-indicator"
      data-state={state}
      role="status"
      title={
        state === 'live'
          ? 'Pages update as things change (GET /_emu/events)'
          : 'The live feed is not connected: pages may be out of date until it is back'
      }
    >
      <span className="live-dot" aria-hidden="true" />
      {LABEL[state]}
    </span>
  );
}
