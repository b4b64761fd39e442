// One invocation (`#/invocation/{id}`): what ran and how it ended, usage against the limits, the
// memory/CPU timeline with the stream's events on it, output or error, logs, parity warnings, the callback
// and its deliveries, its outbound calls (live / recorded / replayed); Cancel while it runs, Redeliver for a
// callback, Run again / Edit and run, Download report (one HTML file, once it has ended). Admin view
// (GET /_emu/invocations/{id}) plus the tenant's logs (GET /v1/invocations/{id}/logs); read again when the
// live feed says it started, finished, made a step or a callback attempt (no polling).
import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { href } from '../router';
import { EmptyState, Json, Loading, OutcomeBadge, PageHeader, ProblemNotice } from '../ui/kit';
import {
  ago,
  dur,
  elapsed,
  fullTime,
  isRunning,
  LiveDot,
  mb,
  ModeTag,
  useNow,
  type Delivery,
  type InvocationDetail,
  type RecordedEvent,
} from './invocation-common';
import { TimelineChart } from './invocation-timeline';
import { AgentSection } from './agent-view';
import { RunAgain } from './invocation-replay';
import { EgressCard } from './invocation-egress';
import { ReportButton } from './report-download';
import './invocations.css';
import { useLiveEvent } from '../live-react';

type Action = 'cancel' | 'redeliver';

interface Loaded {
  inv: InvocationDetail;
  logs: { text: string; truncated: boolean } | { error: unknown };
  events: RecordedEvent[];
}

export function InvocationPage({ params }: { params: string[] }) {
  const { api } = useApp();
  const id = params[0] ?? '';
  const [data, setData] = useState<Loaded | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [action, setAction] = useState<{ busy: Action | null; kind: Action | null; error: unknown; note: string | null }>({
    busy: null,
    kind: null,
    error: null,
    note: null,
  });
  const [cancelAsked, setCancelAsked] = useState(false);
  const loading = useRef(false);
  /** A load was asked for while one ran: it runs again after, so the last change is never missed. */
  const again = useRef(false);

  const load = useCallback(async (): Promise<void> => {
    if (loading.current) {
      again.current = true;
      return;
    }
    loading.current = true;
    try {
      const [inv, logs] = await Promise.all([
        api.client.call(operations.emuGetInvocation, { params: { id } }),
        api.client.call(operations.getInvocationLogs, { params: { id } }).then(
          (r) => ({ text: r.logs, truncated: r.truncated }),
          (e: unknown) => ({ error: e }),
        ),
      ]);
      const events =
        inv.mode === 'stream'
          ? await api.client.call(operations.emuInvocationEvents, { params: { id } }).then(
              (r) => r.data,
              () => [],
            )
          : [];
      setData({ inv, logs, events });
      setError(null);
    } catch (e) {
      setError(e);
    } finally {
      loading.current = false;
      if (again.current) {
        again.current = false;
        void load();
      }
    }
  }, [api, id]);

  useEffect(() => {
    void load();
  }, [load]);

  const running = !!data && isRunning(data.inv);
  useLiveEvent(['invocation.*', 'callback.attempt'], () => void load(), {
    filter: (e) => ('invocation_id' in e.data ? e.data.invocation_id : 'id' in e.data ? e.data.id : null) === id,
    onReset: () => void load(),
  });
  const now = useNow(running ? 250 : 30_000);

  const act = async (kind: Action) => {
    setAction({ busy: kind, kind, error: null, note: null });
    try {
      if (kind === 'cancel') {
        await api.client.call(operations.cancelInvocation, { params: { id } });
        setAction({ busy: null, kind, error: null, note: null });
        setCancelAsked(true);
      } else {
        await api.client.call(operations.redeliverCallback, { params: { id } });
        setAction({ busy: null, kind, error: null, note: 'Callback sent again: see the newest delivery below.' });
      }
    } catch (e) {
      setAction({ busy: null, kind, error: e, note: null });
    }
    await load();
  };

  if (!data) {
    return (
      <div className="inv-page">
        <PageHeader title="Invocation" />
        {error !== null ? (
          <>
            <ProblemNotice error={error} title="Could not load this invocation" />
            <p>
              <a href={href('invocations')}>Back to the invocations</a>
            </p>
          </>
        ) : (
          <Loading />
        )}
      </div>
    );
  }

  const { inv, logs, events } = data;
  return (
    <div className="inv-page inv-detail" data-testid="invocation" data-status={inv.status} data-outcome={inv.outcome ?? ''}>
      <nav className="inv-crumbs" aria-label="Breadcrumb">
        <a href={href('invocations')}>Invocations</a> <span aria-hidden="true">/</span> <code>{inv.id}</code>
      </nav>
      <PageHeader title={`${inv.snippet} v${inv.version}`}>
        <button type="button" className="inv-btn" onClick={() => void load()}>
          Refresh
        </button>
        {inv.mode === 'stream' && (
          <a className="inv-btn" href={href('stream', inv.id)} data-testid="open-inspector">
            {running ? 'Watch live' : 'Open in stream inspector'}
          </a>
        )}
        {!running && <ReportButton ids={[inv.id]} />}
        {running && (
          <button
            type="button"
            className="inv-btn inv-btn-danger"
            data-testid="cancel"
            onClick={() => void act('cancel')}
            disabled={action.busy !== null || cancelAsked}
          >
            {action.busy === 'cancel' || cancelAsked ? 'Cancelling…' : 'Cancel'}
          </button>
        )}
      </PageHeader>

      <div className="inv-hero">
        <span className="inv-hero-badge" data-testid="outcome">
          <OutcomeBadge outcome={inv.outcome} status={inv.status} />
          {running && <LiveDot />}
        </span>
        <ModeTag mode={inv.mode} />
        {inv.debug && (
          <span
            className="inv-chip inv-debug"
            data-testid="debug-badge"
            title={`Started with X-Emu-Debug (${inv.debug.protocol}): ${inv.debug.attached ? `a debugger held it ${Math.round(inv.debug.held_ms).toLocaleString()} ms, timeout paused meanwhile, no CPU cap` : 'no debugger attached'}; memory enforced`}
          >
            debug run
          </span>
        )}
        <span>
          {inv.env ? (
            <>
              env <strong>{inv.env}</strong>
            </>
          ) : (
            <em className="muted">no env</em>
          )}
        </span>
        <span className="muted" title={fullTime(inv.created_at)}>
          created {ago(inv.created_at, now)}
        </span>
        <span className="muted">
          {running
            ? `${inv.status === 'queued' ? 'queued for' : 'running for'} ${dur(elapsed(inv, now))}`
            : `took ${dur(inv.usage?.duration_ms)}`}
        </span>
      </div>

      {action.error !== null && (
        <ProblemNotice error={action.error} title={action.kind === 'cancel' ? 'Could not cancel' : 'Could not redeliver the callback'} />
      )}
      {action.note && (
        <p className="inv-note" role="status">
          {action.note}
        </p>
      )}
      {error !== null && <ProblemNotice error={error} title="Could not refresh" />}

      <Warnings inv={inv} />

      {inv.error ? (
        <section
          className={`card inv-card inv-card-error inv-tone-${inv.outcome ?? 'failed'}`}
          aria-labelledby="err-h"
          data-testid="inv-error"
        >
          <h2 id="err-h">
            Error <code className="inv-code">{inv.error.code}</code>
          </h2>
          <p className="inv-error-message">{inv.error.message}</p>
          {inv.error.stack && <pre className="inv-pre inv-stack">{inv.error.stack}</pre>}
          {inv.error_evidence && (
            <details>
              <summary>Evidence</summary>
              <Json value={inv.error_evidence} />
            </details>
          )}
        </section>
      ) : (
        <section className="card inv-card" aria-labelledby="out-h" data-testid="inv-output">
          <h2 id="out-h">Output</h2>
          {inv.output !== undefined ? <Json value={inv.output} /> : <p className="muted">{running ? 'Not finished yet.' : 'No output.'}</p>}
        </section>
      )}

      <AgentSection inv={inv} />

      <div className="inv-grid">
        <section className="card inv-card" aria-labelledby="run-h">
          <h2 id="run-h">Run</h2>
          <dl className="inv-dl">
            <dt>Invocation</dt>
            <dd>
              <code data-testid="invocation-id">{inv.id}</code>
            </dd>
            <dt>Snippet</dt>
            <dd>
              <a href={href('snippet', inv.snippet)}>{inv.snippet}</a> · version {inv.version}
            </dd>
            <dt>Status</dt>
            <dd data-testid="status">{inv.status}</dd>
            <dt>Attempts</dt>
            <dd>
              {inv.attempts}
              {inv.attempts > 1 && <span className="muted"> (re-run after a restart: it may have run twice)</span>}
            </dd>
            <dt>Sandbox</dt>
            <dd>{inv.warm === null ? '—' : inv.warm ? 'warm (reused)' : 'cold (new)'}</dd>
            <dt>Created</dt>
            <dd>{fullTime(inv.created_at)}</dd>
            <dt>Started</dt>
            <dd>
              {fullTime(inv.started_at)}
              {inv.queue_wait_ms !== null && <span className="muted"> · queued {dur(inv.queue_wait_ms)}</span>}
            </dd>
            <dt>Finished</dt>
            <dd>{fullTime(inv.finished_at)}</dd>
          </dl>
        </section>

        <section className="card inv-card" aria-labelledby="usage-h">
          <h2 id="usage-h">
            Usage and limits{' '}
            {inv.overridden && (
              <span className="inv-chip" title="Set for this run with X-Emu-Limits">
                overridden
              </span>
            )}
          </h2>
          <Meter
            label="Duration"
            value={inv.usage?.duration_ms ?? (running ? elapsed(inv, now) : null)}
            limit={inv.limits.timeout_ms}
            fmt={dur}
            limitLabel="timeout"
            testid="meter-duration"
          />
          <Meter
            label="Peak memory"
            value={inv.usage?.peak_memory_mb ?? null}
            limit={inv.limits.max_memory_mb}
            fmt={mb}
            limitLabel="max memory"
            testid="meter-memory"
          />
          <dl className="inv-dl inv-dl-tight">
            <dt>CPU limit</dt>
            <dd>{inv.limits.max_cpu_percent} % of one core</dd>
            <dt>CPU time</dt>
            <dd>{dur(inv.usage?.cpu_ms)}</dd>
            <dt>Throttled</dt>
            <dd className={inv.usage && inv.usage.cpu_throttled_ms > 0 ? 'inv-warn-text' : undefined}>
              {dur(inv.usage?.cpu_throttled_ms)}
            </dd>
            <dt>Init</dt>
            <dd>{dur(inv.usage?.init_ms)}</dd>
          </dl>
        </section>
      </div>

      <section className="card inv-card" aria-labelledby="tl-h">
        <h2 id="tl-h">Memory and CPU over time</h2>
        {inv.timeline.length > 0 ? (
          <TimelineChart
            samples={inv.timeline}
            limits={inv.limits}
            events={events}
            durationMs={inv.usage?.duration_ms ?? null}
            peakMb={inv.usage?.peak_memory_mb ?? null}
          />
        ) : (
          <p className="muted" data-testid="timeline-empty">
            {running
              ? 'The timeline is recorded when the run ends.'
              : 'No samples for this run (it did not start a sandbox, or this host’s limit backend cannot sample it).'}
          </p>
        )}
      </section>

      <section className="card inv-card" aria-labelledby="logs-h">
        <h2 id="logs-h">Logs</h2>
        {'error' in logs ? (
          <ProblemNotice error={logs.error} title="Could not load the logs" />
        ) : logs.text ? (
          <>
            <pre className="inv-pre inv-logs" data-testid="inv-logs" tabIndex={0} aria-label="Logs">
              {logs.text}
            </pre>
            {logs.truncated && <p className="muted">Truncated at 1 MiB.</p>}
          </>
        ) : (
          <p className="muted" data-testid="inv-logs-empty">
            {running ? 'Nothing written yet (logs are kept when the run ends).' : 'The snippet wrote nothing to stdout or stderr.'}
          </p>
        )}
      </section>

      <EgressCard inv={inv} />

      {inv.callback && <Callback inv={inv} busy={action.busy === 'redeliver'} onRedeliver={() => void act('redeliver')} />}

      {inv.mode === 'stream' && events.length > 0 && (
        <p className="muted">
          {events.filter((e) => e.event === 'chunk').length} chunks streamed —{' '}
          <a href={href('stream', inv.id)}>see every event in the stream inspector</a>.
        </p>
      )}

      <RunAgain inv={inv} />
    </div>
  );
}

function Meter({
  label,
  value,
  limit,
  fmt,
  limitLabel,
  testid,
}: {
  label: string;
  value: number | null;
  limit: number;
  fmt: (n: number) => string;
  limitLabel: string;
  testid: string;
}) {
  const ratio = value === null ? 0 : value / limit;
  const tone = ratio >= 1 ? 'over' : ratio >= 0.8 ? 'near' : 'ok';
  return (
    <div className="inv-meter" data-testid={testid}>
      <div className="inv-meter-top">
        <span>{label}</span>
        <span>
          <strong>{value === null ? '—' : fmt(value)}</strong>{' '}
          <span className="muted">
            of {fmt(limit)} {limitLabel}
          </span>
        </span>
      </div>
      <div
        className={`inv-meter-bar inv-meter-${tone}`}
        role="meter"
        aria-label={`${label} against the ${limitLabel}`}
        aria-valuemin={0}
        aria-valuemax={limit}
        aria-valuenow={value ?? 0}
        aria-valuetext={value === null ? 'unknown' : `${fmt(value)} of ${fmt(limit)}`}
      >
        <span style={{ width: `${Math.min(100, ratio * 100).toFixed(1)}%` }} />
      </div>
    </div>
  );
}

function Warnings({ inv }: { inv: InvocationDetail }) {
  const items: ReactNode[] = [];
  if (inv.parity.status === 'degraded') items.push(...inv.parity.reasons.map((r) => <li key={`p${r}`}>Parity degraded: {r}</li>));
  items.push(...inv.parity_warnings.map((w) => <li key={`w${w}`}>{w}</li>));
  if (!items.length) return null;
  return (
    <section className="inv-warnings" role="note" aria-labelledby="warn-h" data-testid="parity-warnings">
      <h2 id="warn-h">Production would behave differently</h2>
      <ul>{items}</ul>
    </section>
  );
}

function Callback({ inv, busy, onRedeliver }: { inv: InvocationDetail; busy: boolean; onRedeliver: () => void }) {
  const cb = inv.callback!;
  const deliveries: Delivery[] = [...inv.callback_deliveries].reverse();
  // The built-in receiver (`{base}/_emu/inbox/{name}`): its page shows what arrived, signatures checked.
  const inbox = /\/_emu\/inbox\/([^/?#]+)$/.exec(cb.url)?.[1];
  return (
    <section className="card inv-card" aria-labelledby="cb-h" data-testid="callback">
      <div className="inv-card-head">
        <h2 id="cb-h">
          Callback <span className={`inv-chip inv-cb-${cb.status}`}>{cb.status}</span>
        </h2>
        <button
          type="button"
          className="inv-btn"
          data-testid="redeliver"
          onClick={onRedeliver}
          disabled={busy || isRunning(inv)}
          title={isRunning(inv) ? 'Available when the run has ended' : undefined}
        >
          {busy ? 'Sending…' : 'Redeliver'}
        </button>
      </div>
      <dl className="inv-dl">
        <dt>URL</dt>
        <dd>
          <code>{cb.url}</code>
          {inbox && (
            <>
              {' '}
              · <a href={href('inbox', inbox)}>open in the callback inbox</a>
            </>
          )}
        </dd>
        <dt>Attempts</dt>
        <dd>{cb.attempts}</dd>
        <dt>webhook-id</dt>
        <dd>
          <code>{cb.webhook_id}</code>
        </dd>
        {cb.next_attempt_at && (
          <>
            <dt>Next attempt</dt>
            <dd>{fullTime(cb.next_attempt_at)}</dd>
          </>
        )}
      </dl>
      {deliveries.length > 0 ? (
        <div className="inv-table-scroll">
          <table className="inv-table" data-testid="deliveries">
            <caption className="inv-sr">Deliveries, newest first</caption>
            <thead>
              <tr>
                <th scope="col">At</th>
                <th scope="col">Status</th>
                <th scope="col">Error</th>
                <th scope="col" className="inv-num">
                  Duration
                </th>
                <th scope="col">Kind</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.map((d, i) => (
                <tr key={`${d.at}-${i}`}>
                  <td title={fullTime(d.at)}>{new Date(d.at).toLocaleTimeString('en-US')}</td>
                  <td>
                    {d.status_code === null ? (
                      <span className="muted">no answer</span>
                    ) : (
                      <span className={`inv-code-pill ${d.status_code >= 200 && d.status_code < 300 ? 'inv-ok' : 'inv-bad'}`}>
                        {d.status_code}
                      </span>
                    )}
                  </td>
                  <td>{d.error ?? ''}</td>
                  <td className="inv-num">{dur(d.duration_ms)}</td>
                  <td>{d.scheduled ? 'scheduled' : 'redelivery'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <EmptyState title="No deliveries yet">
          {isRunning(inv) ? 'The callback is sent when the run ends.' : 'The first attempt is on its way.'}
        </EmptyState>
      )}
    </section>
  );
}
