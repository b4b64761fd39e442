// Following one streamed invocation: `GET /_emu/invocations/{id}/events?follow=1` (SSE) gives the events
// so far and then each next one as it is sent, ending with the stream. SSE frames carry no times, so
// each event's t_ms comes from the recorded events (`GET …/events`, JSON), read at the start, at most once
// a second while new events arrive, and at the end; until then it is estimated from the arrival time.
// The follow is aborted when the component using it unmounts.
import { useEffect, useState } from 'react';
import { operations, rawFrame } from '../api';
import { useApp } from '../context';
import { isAbort, type EventType } from './invocation-common';

export interface LiveEvent {
  id: number;
  event: EventType;
  data: unknown;
  /** The SSE frame as the core wrote it (rebuilt from the parsed event by api.ts's rawFrame). */
  raw: string;
  /** ms since the stream started: recorded (`exact`) or estimated from when it arrived. */
  t_ms: number;
  exact: boolean;
}

export type FollowState = 'connecting' | 'open' | 'ended' | 'error';

export interface Follow {
  events: LiveEvent[];
  state: FollowState;
  error: unknown;
  /** false: the stream had already ended (its recorded events were replayed); null: not known yet. */
  live: boolean | null;
  truncated: boolean;
  /** Local epoch ms of the stream's t = 0, once known (for a running clock). */
  origin: number | null;
}

export function useFollow(id: string, attempt: number): Follow {
  const { api } = useApp();
  const [follow, setFollow] = useState<Follow>({
    events: [],
    state: 'connecting',
    error: null,
    live: null,
    truncated: false,
    origin: null,
  });

  useEffect(() => {
    const ac = new AbortController();
    const exact = new Map<number, number>();
    let origin: number | null = null;
    let live: boolean | null = null;
    let truncated = false;
    let list: LiveEvent[] = [];
    let state: FollowState = 'connecting';
    let error: unknown = null;
    let lastT = 0;
    let flushTimer: ReturnType<typeof setTimeout> | null = null;
    let timesTimer: ReturnType<typeof setTimeout> | null = null;
    setFollow({ events: [], state, error, live, truncated, origin });

    const flush = () => {
      if (flushTimer) clearTimeout(flushTimer);
      flushTimer = null;
      if (!ac.signal.aborted) setFollow({ events: list, state, error, live, truncated, origin });
    };
    const soon = () => {
      flushTimer ??= setTimeout(flush, 16);
    };

    const fetchTimes = async () => {
      try {
        const r = await api.client.call(operations.emuInvocationEvents, { params: { id } });
        if (ac.signal.aborted) return;
        for (const e of r.data) {
          exact.set(e.id, e.t_ms);
          if (e.event === 'start') origin = Date.parse(e.at) - e.t_ms;
        }
        live ??= r.live;
        truncated = r.truncated;
        list = list.map((e) => (!e.exact && exact.has(e.id) ? { ...e, t_ms: exact.get(e.id)!, exact: true } : e));
        soon();
      } catch {
        // Times stay estimated; the events themselves still arrive.
      }
    };
    const timesLater = () => {
      timesTimer ??= setTimeout(() => {
        timesTimer = null;
        void fetchTimes();
      }, 1000);
    };

    void (async () => {
      void fetchTimes();
      try {
        // An error answer throws ProblemError, shown as the follow's error.
        const events = await api.client.stream(operations.emuInvocationEvents, {
          params: { id },
          query: { follow: '1' },
          signal: ac.signal,
        });
        state = 'open';
        soon();
        for await (const e of events) {
          if (ac.signal.aborted) return;
          origin ??= Date.now();
          const eventId = Number(e.id);
          const known = exact.get(eventId);
          const t = known ?? Math.max(lastT, Date.now() - origin);
          lastT = Math.max(lastT, t);
          list = [...list, { id: eventId, event: e.event, data: e.data, raw: rawFrame(e), t_ms: t, exact: known !== undefined }];
          if (known === undefined) timesLater();
          soon();
        }
        if (ac.signal.aborted) return;
        state = 'ended';
        flush();
        if (list.some((e) => !e.exact)) await fetchTimes();
      } catch (err) {
        if (ac.signal.aborted || isAbort(err)) return;
        state = 'error';
        error = err;
        flush();
      }
    })();

    return () => {
      ac.abort();
      if (flushTimer) clearTimeout(flushTimer);
      if (timesTimer) clearTimeout(timesTimer);
    };
  }, [api, id, attempt]);

  return follow;
}
