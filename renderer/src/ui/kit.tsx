// Small shared pieces of the GUI: loading data, showing problems, outcomes and JSON, empty states.
import { useCallback, useEffect, useState, type ReactNode } from 'react';
import { ProblemError } from '../api';

export type Loaded<T> = { state: 'loading' } | { state: 'error'; error: unknown } | { state: 'ok'; data: T };

/**
 * Loads `fn` on mount and whenever `deps` change; `reload()` loads again. Stale-while-revalidate: once
 * data is shown it stays shown while the next load runs (a reload or new deps never blank the page back
 * to "loading"); only the latest load's answer is kept.
 */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): [Loaded<T>, () => void] {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: 'loading' });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    fn().then(
      (data) => live && setLoaded({ state: 'ok', data }),
      (error: unknown) => live && setLoaded({ state: 'error', error }),
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  return [loaded, useCallback(() => setTick((t) => t + 1), [])];
}

/** How long a load may take before it is worth saying so: quicker answers show no loading state at all. */
export const LOADING_DELAY_MS = 200;

/**
 * A loading placeholder that keeps quiet: for the first LOADING_DELAY_MS it is an empty box holding
 * `minHeight` (so the page does not jump), then a subtle "Loading…" line. `[data-loading]` marks it.
 */
export function Loading({ label = 'Loading…', minHeight }: { label?: string; minHeight?: number }) {
  const [shown, setShown] = useState(false);
  useEffect(() => {
    const t = window.setTimeout(() => setShown(true), LOADING_DELAY_MS);
    return () => window.clearTimeout(t);
  }, []);
  return (
    <div className="loading" data-loading="" aria-busy="true" style={minHeight === undefined ? undefined : { minHeight }}>
      {shown && (
        <div className="loading-shown" role="status">
          <span className="loading-bar" aria-hidden="true" />
          {label}
        </div>
      )}
    </div>
  );
}

export function describeError(error: unknown): string {
  if (error instanceof ProblemError) return `${error.detail} (${error.status} ${error.code})`;
  return error instanceof Error ? error.message : String(error);
}

/** A problem the core answered, or any failure, said plainly; field errors listed. */
export function ProblemNotice({ error, title = 'That did not work' }: { error: unknown; title?: string }) {
  return (
    <div className="notice" role="alert">
      <strong>{title}</strong>
      <p>{describeError(error)}</p>
      {error instanceof ProblemError && error.errors.length > 0 && (
        <ul>
          {error.errors.map((e) => (
            <li key={e.location + e.message}>
              <code>{e.location}</code>: {e.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function Show<T>({ loaded, children }: { loaded: Loaded<T>; children: (data: T) => ReactNode }) {
  if (loaded.state === 'loading') return <Loading />;
  if (loaded.state === 'error') return <ProblemNotice error={loaded.error} title="Could not load this" />;
  return <>{children(loaded.data)}</>;
}

export function PageHeader({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="page-header">
      <h1 tabIndex={-1}>{title}</h1>
      {children && <div className="page-actions">{children}</div>}
    </div>
  );
}

export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty" data-testid="empty">
      <strong>{title}</strong>
      {children && <div className="muted">{children}</div>}
    </div>
  );
}

/** The outcome colour language (styles.css): success green, handler_error red, timeout amber, oom_killed purple, running / queued blue, cancelled / failed grey. */
export function OutcomeBadge({ outcome, status }: { outcome: string | null; status?: string }) {
  const label = outcome ?? status ?? 'unknown';
  return <span className={`badge outcome-${label}`}>{label.replace('_', ' ')}</span>;
}

export function Json({ value }: { value: unknown }) {
  return <pre className="json">{JSON.stringify(value, null, 2)}</pre>;
}

export const ms = (n: number | null | undefined) => (n === null || n === undefined ? '—' : `${Math.round(n).toLocaleString()} ms`);
export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');
