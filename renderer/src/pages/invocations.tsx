// Invocations: the local tenant's history, newest first (GET /v1/invocations), filtered by snippet and
// status, a page of 50 at a time. Each row opens the invocation. New runs and their outcomes show as they
// happen (the live feed's `invocation.*` events). Filters live in the hash's query (`#/invocations?snippet=hello&status=failed`), so other pages
// can link to a filtered history. "Select for a report": tick runs, then "Report" saves one HTML file for
// the selection (GET /_emu/report?ids=…).
import { useCallback, useEffect, useRef, useState } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { href, parseRoute } from '../router';
import { EmptyState, Loading, OutcomeBadge, PageHeader, ProblemNotice } from '../ui/kit';
import { ago, dur, elapsed, fullTime, isRunning, LiveDot, mb, ModeTag, useNow, type Invocation } from './invocation-common';
import { useLiveRefresh } from '../live-react';
import { snippetOf } from '../live';
import { REPORT_MAX, ReportButton } from './report-download';
import './invocations.css';

const PAGE = 50;
const STATUSES = ['queued', 'running', 'succeeded', 'failed'] as const;

interface Filters {
  snippet: string;
  status: (typeof STATUSES)[number] | '';
}

const isStatus = (s: string): s is (typeof STATUSES)[number] => (STATUSES as readonly string[]).includes(s);

function filtersFromHash(): Filters {
  const q = new URLSearchParams(window.location.hash.split('?')[1] ?? '');
  const status = q.get('status') ?? '';
  return { snippet: q.get('snippet') ?? '', status: isStatus(status) ? status : '' };
}

function filtersToHash(f: Filters): void {
  const q = new URLSearchParams();
  if (f.snippet) q.set('snippet', f.snippet);
  if (f.status) q.set('status', f.status);
  const query = q.toString();
  window.history.replaceState(window.history.state, '', `${href('invocations')}${query ? `?${query}` : ''}`);
}

export function Invocations(_props: { params: string[] }) {
  const { api } = useApp();
  const [filters, setFilters] = useState<Filters>(filtersFromHash);
  const [rows, setRows] = useState<Invocation[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState<'refresh' | 'more' | null>(null);
  const [snippets, setSnippets] = useState<string[]>([]);
  const [selecting, setSelecting] = useState(false);
  const [selected, setSelected] = useState<string[]>([]);
  const toggle = (id: string) => setSelected((s) => (s.includes(id) ? s.filter((x) => x !== id) : [...s, id]));
  const seq = useRef(0);
  const count = useRef(0);
  count.current = rows?.length ?? 0;

  const query = useCallback(
    (limit: number, after: string | null) => {
      return api.client.call(operations.listInvocations, {
        query: {
          limit: String(limit),
          ...(filters.snippet ? { snippet: filters.snippet } : {}),
          ...(filters.status ? { status: filters.status } : {}),
          ...(after ? { cursor: after } : {}),
        },
      });
    },
    [api, filters],
  );

  /**
   * The first page again, as long as what is shown (so a refresh keeps what "Load more" added). `quiet`:
   * a live update, which does not turn the Refresh button into "Refreshing…".
   */
  const refresh = useCallback(
    async (keep: boolean, quiet = false) => {
      const mine = ++seq.current;
      if (!quiet) setBusy('refresh');
      try {
        const page = await query(Math.min(1000, Math.max(PAGE, keep ? count.current : 0)), null);
        if (mine !== seq.current) return;
        setRows(page.data);
        setCursor(page.next_cursor);
        setError(null);
      } catch (e) {
        if (mine === seq.current) setError(e);
      } finally {
        if (mine === seq.current) setBusy(null);
      }
    },
    [query],
  );

  const more = async () => {
    if (!cursor) return;
    const mine = ++seq.current;
    setBusy('more');
    try {
      const page = await query(PAGE, cursor);
      if (mine !== seq.current) return;
      setRows((old) => {
        const seen = new Set((old ?? []).map((r) => r.id));
        return [...(old ?? []), ...page.data.filter((r) => !seen.has(r.id))];
      });
      setCursor(page.next_cursor);
      setError(null);
    } catch (e) {
      if (mine === seq.current) setError(e);
    } finally {
      if (mine === seq.current) setBusy(null);
    }
  };

  useEffect(() => {
    setRows(null);
    filtersToHash(filters);
    void refresh(false);
  }, [filters, refresh]);

  // A link to another filter (or the sidebar's plain #/invocations) changes the hash without a remount.
  useEffect(() => {
    const on = () => {
      if (parseRoute(window.location.hash).page !== 'invocations') return; // leaving: the page unmounts
      const next = filtersFromHash();
      setFilters((f) => (f.snippet === next.snippet && f.status === next.status ? f : next));
    };
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);

  // The snippet filter's choices, again when a snippet is created or deleted.
  const loadSnippets = useCallback(
    () =>
      api.client.call(operations.listSnippets, { query: { limit: '1000' } }).then(
        (r) => setSnippets(r.data.map((s) => s.name).sort()),
        () => {}, // the filter still works by typing the URL; the list shows its own error
      ),
    [api],
  );
  useEffect(() => {
    void loadSnippets();
  }, [loadSnippets]);
  useLiveRefresh(loadSnippets, ['snippet.*']);

  const running = rows?.filter(isRunning).length ?? 0;
  useLiveRefresh(
    () => refresh(true, true),
    ['invocation.created', 'invocation.started', 'invocation.finished'],
    (e) => !filters.snippet || snippetOf(e) === filters.snippet,
  );
  const now = useNow(running > 0 ? 500 : 15_000);
  const filtered = !!(filters.snippet || filters.status);
  const snippetOptions = filters.snippet && !snippets.includes(filters.snippet) ? [filters.snippet, ...snippets] : snippets;

  return (
    <div className="inv-page">
      <PageHeader title="Invocations">
        <button
          type="button"
          className="inv-btn"
          data-testid="select-toggle"
          aria-pressed={selecting}
          onClick={() => {
            setSelecting((on) => !on);
            setSelected([]);
          }}
        >
          {selecting ? 'Done selecting' : 'Select for a report'}
        </button>
        <button type="button" className="inv-btn" data-testid="refresh" onClick={() => void refresh(true)} disabled={busy !== null}>
          {busy === 'refresh' ? 'Refreshing…' : 'Refresh'}
        </button>
      </PageHeader>

      <div className="inv-toolbar" role="search" aria-label="Filter invocations">
        <label className="inv-field">
          <span>Snippet</span>
          <select
            data-testid="filter-snippet"
            value={filters.snippet}
            onChange={(e) => setFilters((f) => ({ ...f, snippet: e.target.value }))}
          >
            <option value="">All snippets</option>
            {snippetOptions.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label className="inv-field">
          <span>Status</span>
          <select
            data-testid="filter-status"
            value={filters.status}
            onChange={(e) => setFilters((f) => ({ ...f, status: isStatus(e.target.value) ? e.target.value : '' }))}
          >
            <option value="">Any status</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        {filtered && (
          <button type="button" className="inv-btn inv-btn-quiet" onClick={() => setFilters({ snippet: '', status: '' })}>
            Clear filters
          </button>
        )}
        <span className="inv-toolbar-note muted" aria-live="polite">
          {rows && (running > 0 ? `${running} running · live` : `${rows.length}${cursor ? '+' : ''} shown`)}
        </span>
      </div>

      {selecting && (
        <div className="inv-selectbar" data-testid="selectbar">
          <span aria-live="polite" data-testid="selected-count">
            {selected.length} selected{selected.length > REPORT_MAX ? ` (a report holds at most ${REPORT_MAX})` : ''}
          </span>
          <ReportButton ids={selected} label="Report" testid="report-selection" />
          {rows && rows.length > 0 && (
            <button
              type="button"
              className="inv-btn inv-btn-quiet"
              onClick={() =>
                setSelected(
                  rows
                    .filter((r) => !isRunning(r))
                    .slice(0, REPORT_MAX)
                    .map((r) => r.id),
                )
              }
            >
              Select the first {Math.min(REPORT_MAX, rows.filter((r) => !isRunning(r)).length)} ended
            </button>
          )}
          {selected.length > 0 && (
            <button type="button" className="inv-btn inv-btn-quiet" onClick={() => setSelected([])}>
              Clear
            </button>
          )}
        </div>
      )}
      {error !== null && <ProblemNotice error={error} title="Could not load invocations" />}
      {rows === null && error === null && <Loading />}
      {rows !== null &&
        rows.length === 0 &&
        (filtered ? <NoMatch onClear={() => setFilters({ snippet: '', status: '' })} /> : <NoInvocations />)}
      {rows !== null && rows.length > 0 && (
        <div className="inv-list-wrap">
          <div className={`inv-row inv-head${selecting ? ' inv-head-selecting' : ''}`} aria-hidden="true">
            <span>Outcome</span>
            <span>Snippet</span>
            <span>Mode</span>
            <span>Created</span>
            <span className="inv-num">Duration</span>
            <span className="inv-num" title="Peak memory">
              Memory
            </span>
          </div>
          <ul className="inv-list" data-testid="invocations-list" aria-label="Invocations, newest first">
            {rows.map((r) => (
              <li key={r.id} className={selecting ? 'inv-selectable' : undefined}>
                {selecting && (
                  <label className="inv-select">
                    <input
                      type="checkbox"
                      checked={selected.includes(r.id)}
                      onChange={() => toggle(r.id)}
                      aria-label={`Select ${r.snippet} v${r.version} (${r.id}) for the report`}
                      data-testid="select-invocation"
                      data-id={r.id}
                    />
                  </label>
                )}
                <Row inv={r} now={now} />
              </li>
            ))}
          </ul>
        </div>
      )}
      {cursor && rows !== null && (
        <div className="inv-more">
          <button type="button" className="inv-btn" data-testid="load-more" onClick={() => void more()} disabled={busy !== null}>
            {busy === 'more' ? 'Loading…' : 'Load more'}
          </button>
        </div>
      )}
    </div>
  );
}

function Row({ inv, now }: { inv: Invocation; now: number }) {
  const going = isRunning(inv);
  const what = `${inv.snippet} v${inv.version}${inv.env ? ` (${inv.env})` : ''}`;
  return (
    <a
      className={`inv-row${going ? ' inv-row-running' : ''}`}
      href={href('invocation', inv.id)}
      data-testid="invocation-row"
      data-id={inv.id}
      data-outcome={inv.outcome ?? inv.status}
      aria-label={`${what}, ${inv.outcome?.replace('_', ' ') ?? inv.status}, ${inv.mode}, ${ago(inv.created_at, now)}`}
    >
      <span className="inv-col-outcome">
        <OutcomeBadge outcome={inv.outcome} status={inv.status} />
        {going && <LiveDot />}
      </span>
      <span className="inv-break" aria-hidden="true" />
      <span className="inv-col-what">
        <strong>{inv.snippet}</strong>
        <span className="inv-sub">
          v{inv.version} · {inv.env ?? <em>no env</em>}
        </span>
      </span>
      <span className="inv-col-mode">
        <ModeTag mode={inv.mode} />
      </span>
      <span className="inv-col-when" title={fullTime(inv.created_at)}>
        {ago(inv.created_at, now)}
      </span>
      <span className="inv-col-dur inv-num">
        {going ? (
          <span className="inv-going">{inv.status === 'queued' ? 'queued' : dur(elapsed(inv, now))}</span>
        ) : (
          dur(inv.usage?.duration_ms)
        )}
      </span>
      <span className="inv-col-mem inv-num">{inv.usage ? mb(inv.usage.peak_memory_mb) : '—'}</span>
    </a>
  );
}

function NoInvocations() {
  const { api } = useApp();
  const origin = window.location.origin;
  return (
    <EmptyState title="No invocations yet">
      <p>
        Run a snippet from its page (<a href={href('snippets')}>Snippets</a>), or call the API — every call shows up here:
      </p>
      <pre className="inv-howto" data-testid="howto">
        {`curl -X POST ${origin}/v1/invoke/hello \\\n  -H "Authorization: Bearer ${api.key ?? '<API key>'}" \\\n  -H "Content-Type: application/json" -d '{}'`}
      </pre>
    </EmptyState>
  );
}

function NoMatch({ onClear }: { onClear: () => void }) {
  return (
    <EmptyState title="No invocations match these filters">
      <button type="button" className="inv-btn" onClick={onClear}>
        Clear filters
      </button>
    </EmptyState>
  );
}
