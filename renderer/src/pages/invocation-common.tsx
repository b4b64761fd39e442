// What the invocation pages (list, one invocation, live stream inspector) share: the shapes the core
// answers, formatting of times, durations and sizes, and a few small pieces.
import { useEffect, useRef, useState, type RefObject } from 'react';
import type {
  Callback,
  CallbackDelivery,
  EmuInvocation,
  EmuInvocationEvents,
  Invocation,
  StreamEventRecord,
  TimelineSample,
} from '../types';

export type { Invocation };
export type Mode = Invocation['mode'];
export type Status = Invocation['status'];
export type Usage = NonNullable<Invocation['usage']>;
export type Limits = Invocation['limits'];
export type CallbackView = NonNullable<Callback>;

export type Delivery = CallbackDelivery;
export type Sample = TimelineSample;
/** `GET /_emu/invocations/{id}`: the record plus the emulator's evidence. */
export type InvocationDetail = EmuInvocation;
/** One recorded stream event (`GET /_emu/invocations/{id}/events`). */
export type RecordedEvent = StreamEventRecord;
export type EventType = RecordedEvent['event'];
export type EventsPage = EmuInvocationEvents;

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

export const isRunning = (i: Pick<Invocation, 'status'>) => i.status === 'queued' || i.status === 'running';

export const enc = encodeURIComponent;

/** A duration for people: 12 ms, 1.23 s, 14.2 s, 2 min 5 s. */
export function dur(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  if (n < 1000) return `${Math.round(n)} ms`;
  if (n < 10_000) return `${(n / 1000).toFixed(2)} s`;
  if (n < 60_000) return `${(n / 1000).toFixed(1)} s`;
  const m = Math.floor(n / 60_000);
  const s = Math.round((n % 60_000) / 1000);
  return s ? `${m} min ${s} s` : `${m} min`;
}

export function mb(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '—';
  return `${n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1)} MB`;
}

/** "just now", "42 s ago", "5 min ago", "3 h ago", "2 d ago", then the date. */
export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '—';
  const s = (now - Date.parse(iso)) / 1000;
  if (!Number.isFinite(s)) return '—';
  if (s < 5) return 'just now';
  if (s < 60) return `${Math.floor(s)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  if (s < 7 * 86_400) return `${Math.floor(s / 86_400)} d ago`;
  return new Date(iso).toLocaleDateString('en-US');
}

export const fullTime = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString('en-US') : '—');

/** Milliseconds an unfinished run has been going (since it started, or was queued). */
export const elapsed = (i: Pick<Invocation, 'started_at' | 'created_at'>, now = Date.now()) =>
  Math.max(0, now - Date.parse(i.started_at ?? i.created_at));

/** Re-renders every `everyMs` while `active` (live clocks, relative times); returns the time now. */
export function useNow(everyMs: number, active = true): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs, active]);
  return now;
}

/** The element's content width, kept up to date (0 until measured). */
export function useWidth<T extends HTMLElement>(): [RefObject<T | null>, number] {
  const ref = useRef<T>(null);
  const [width, setWidth] = useState(0);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    setWidth(el.clientWidth);
    const ro = new ResizeObserver(() => setWidth(el.clientWidth));
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  return [ref, width];
}

export const isAbort = (e: unknown) => e instanceof DOMException && e.name === 'AbortError';

/** sync / async / stream, as a small tag. */
export function ModeTag({ mode }: { mode: string }) {
  return <span className={`inv-mode inv-mode-${mode}`}>{mode}</span>;
}

/** A pulsing dot: this run is going now. */
export function LiveDot({ label = 'running' }: { label?: string }) {
  return <span className="inv-live-dot" role="img" aria-label={label} />;
}

/** A one-line, length-capped JSON rendering (chunks, inputs). */
export function compact(value: unknown, max = 160): string {
  let s: string;
  try {
    s = JSON.stringify(value) ?? String(value);
  } catch {
    s = String(value);
  }
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** Nice axis steps (1, 2, 5 × 10ⁿ) for about `count` ticks over [0, max]. */
export function niceTicks(max: number, count: number): number[] {
  if (!(max > 0)) return [0];
  const raw = max / Math.max(1, count);
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? 10 * pow;
  const ticks: number[] = [];
  for (let v = 0; v <= max + step * 1e-9; v += step) ticks.push(Math.round(v * 1000) / 1000);
  return ticks;
}

/** An axis label for a time in ms (0, 250 ms, 1.5 s, 2 min). */
export function tLabel(t: number): string {
  if (t === 0) return '0';
  if (t < 10) return `${Number(t.toFixed(1))} ms`;
  if (t < 1000) return `${Math.round(t)} ms`;
  if (t < 60_000) return `${Number((t / 1000).toFixed(2))} s`;
  return `${Number((t / 60_000).toFixed(1))} min`;
}
