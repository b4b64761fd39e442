// The live stream inspector. `#/stream`: the streamed invocations, running ones first, to pick one.
// `#/stream/{id}`: one stream followed as it happens (or its recorded events, once it has ended): every
// event with its time, chunks compact, the result or error highlighted, the raw SSE frames, and a strip
// with a tick per chunk on the stream's time axis.
import { useEffect, useState, type FormEvent } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { href, navigate } from '../router';
import { EmptyState, Json, Loading, OutcomeBadge, PageHeader, ProblemNotice } from '../ui/kit';
import {
  ago,
  compact,
  dur,
  elapsed,
  fullTime,
  isRunning,
  LiveDot,
  mb,
  ModeTag,
  tLabel,
  useNow,
  useWidth,
  type Invocation,
} from './invocation-common';
import { useFollow, type LiveEvent } from './stream-follow';
import { AssembledText, chunkText } from './agent-text';
import './invocations.css';
import { useLiveEvent } from '../live-react';

export function StreamInspector({ params }: { params: string[] }) {
  return params[0] ? <Inspector id={params[0]} /> : <StreamList />;
}

// ---- the picker

function StreamList() {
  const { api } = useApp();
  const [rows, setRows] = useState<Invocation[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);

  useEffect(() => {
    let live = true;
    Promise.all([
      api.client.call(operations.listInvocations, { query: { status: 'running', limit: '200' } }),
      api.client.call(operations.listInvocations, { query: { limit: '300' } }),
    ]).then(
      ([running, recent]) => {
        if (!live) return;
        const seen = new Set<string>();
        const all = [...running.data, ...recent.data].filter((i) => i.mode === 'stream' && !seen.has(i.id) && (seen.add(i.id), true));
        all.sort((a, b) => Number(isRunning(b)) - Number(isRunning(a)) || Date.parse(b.created_at) - Date.parse(a.created_at));
        setRows(all);
        setError(null);
      },
      (e: unknown) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [api, tick]);

  // A stream starting or ending reloads the list (the live feed); nothing polls.
  const bump = () => setTick((t) => t + 1);
  useLiveEvent(['invocation.created', 'invocation.started', 'invocation.finished'], bump, {
    filter: (e) => 'mode' in e.data && e.data.mode === 'stream',
    onReset: bump,
  });
  const now = useNow(1000);
  const running = rows?.filter(isRunning) ?? [];
  const done = rows?.filter((r) => !isRunning(r)) ?? [];

  return (
    <div className="inv-page">
      <PageHeader title="Live streams">
        <FollowById />
      </PageHeader>
      <p className="muted inv-intro">
        Pick a streamed invocation to watch its events arrive, or replay the events of one that has ended. This list follows new streams as
        they start.
      </p>
      {error !== null && <ProblemNotice error={error} title="Could not load the streamed invocations" />}
      {rows === null && error === null && <Loading />}
      {rows !== null && rows.length === 0 && (
        <EmptyState title="No streamed invocations yet">
          <p>Invoke a snippet whose handler is an async generator with the header X-Invoke-Mode: stream:</p>
          <pre className="inv-howto">{`curl -N -X POST ${window.location.origin}/v1/invoke/NAME \\\n  -H "Authorization: Bearer ${api.key ?? '<API key>'}" \\\n  -H "X-Invoke-Mode: stream" -H "Content-Type: application/json" -d '{}'`}</pre>
        </EmptyState>
      )}
      {rows !== null && rows.length > 0 && (
        <>
          <h2 className="inv-section-title">
            Running now <span className="muted">({running.length})</span>
          </h2>
          {running.length ? (
            <StreamRows rows={running} now={now} testid="streams-running" />
          ) : (
            <p className="muted inv-none">Nothing is streaming right now.</p>
          )}
          <h2 className="inv-section-title">
            Recent <span className="muted">({done.length})</span>
          </h2>
          {done.length ? (
            <StreamRows rows={done} now={now} testid="streams-recent" />
          ) : (
            <p className="muted inv-none">None has finished yet.</p>
          )}
        </>
      )}
    </div>
  );
}

function StreamRows({ rows, now, testid }: { rows: Invocation[]; now: number; testid: string }) {
  return (
    <ul className="inv-list inv-list-boxed" data-testid={testid}>
      {rows.map((r) => (
        <li key={r.id}>
          <a
            className={`inv-row inv-row-stream${isRunning(r) ? ' inv-row-running' : ''}`}
            href={href('stream', r.id)}
            data-testid="stream-row"
            data-id={r.id}
          >
            <span className="inv-col-outcome">
              <OutcomeBadge outcome={r.outcome} status={r.status} />
              {isRunning(r) && <LiveDot />}
            </span>
            <span className="inv-break" aria-hidden="true" />
            <span className="inv-col-what">
              <strong>{r.snippet}</strong>
              <span className="inv-sub">
                v{r.version} · {r.env ?? <em>no env</em>}
              </span>
            </span>
            <span className="inv-col-when" title={fullTime(r.created_at)}>
              {ago(r.created_at, now)}
            </span>
            <span className="inv-col-dur inv-num">
              {isRunning(r) ? <span className="inv-going">{dur(elapsed(r, now))}</span> : dur(r.usage?.duration_ms)}
            </span>
            <span className="inv-col-go" aria-hidden="true">
              {isRunning(r) ? 'Watch live →' : 'Replay events →'}
            </span>
          </a>
        </li>
      ))}
    </ul>
  );
}

function FollowById() {
  const [value, setValue] = useState('');
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (value.trim()) navigate('stream', value.trim());
  };
  return (
    <form className="inv-inline-form" onSubmit={submit}>
      <label className="inv-sr" htmlFor="follow-id">
        Invocation id
      </label>
      <input
        id="follow-id"
        className="inv-input"
        placeholder="inv_…"
        value={value}
        onChange={(e) => setValue(e.target.value)}
        spellCheck={false}
      />
      <button type="submit" className="inv-btn">
        Follow
      </button>
    </form>
  );
}

// ---- one stream

const SHOWN = 1000;

function Inspector({ id }: { id: string }) {
  const { api } = useApp();
  const [attempt, setAttempt] = useState(0);
  const [raw, setRaw] = useState(false);
  const f = useFollow(id, attempt);
  const [inv, setInv] = useState<Invocation | null>(null);
  const [invFailed, setInvFailed] = useState(false);
  const ended = f.state === 'ended';

  // The record (mode, outcome, usage): at the start and again when the stream ends.
  useEffect(() => {
    let live = true;
    api.client.call(operations.getInvocation, { params: { id } }).then(
      (r) => live && setInv(r),
      () => live && setInvFailed(true), // e.g. another tenant's invocation: the events still show
    );
    return () => {
      live = false;
    };
  }, [api, id, ended]);

  const going = f.state === 'open' || f.state === 'connecting';
  const now = useNow(200, going);
  const start = f.events.find((e) => e.event === 'start');
  const last = f.events.find((e) => e.event === 'result' || e.event === 'error');
  const chunks = f.events.filter((e) => e.event === 'chunk');
  const lastT = f.events.at(-1)?.t_ms ?? 0;
  const clock = going && f.live !== false && f.origin !== null && !last ? Math.max(lastT, now - f.origin) : lastT;
  // The rule takes `{} | null` (from `unknown ?? null`) for this all-optional shape; the compiler needs the assertion.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
  const meta = (start?.data ?? null) as { snippet?: string; version?: number; env?: string | null } | null;
  const title = meta?.snippet ? `${meta.snippet} v${meta.version}` : inv ? `${inv.snippet} v${inv.version}` : 'Stream';
  // Chunks that spell text (strings, or {token|text|delta|content}: agent-text.tsx) are assembled beside the frames.
  const texts = chunks.some((c) => chunkText((c.data as { data?: unknown } | null)?.data) !== null);

  return (
    <div className="inv-page stream-page" data-testid="stream-inspector" data-state={f.state}>
      <nav className="inv-crumbs" aria-label="Breadcrumb">
        <a href={href('stream')}>Live streams</a> <span aria-hidden="true">/</span> <code>{id}</code>
      </nav>
      <PageHeader title={title}>
        <button type="button" className="inv-btn" aria-pressed={raw} data-testid="raw-toggle" onClick={() => setRaw((r) => !r)}>
          Raw SSE
        </button>
        {(f.state === 'error' || f.state === 'ended') && (
          <button type="button" className="inv-btn" data-testid="reconnect" onClick={() => setAttempt((a) => a + 1)}>
            {f.state === 'error' ? 'Reconnect' : 'Replay events'}
          </button>
        )}
        <a className="inv-btn" href={href('invocation', id)} data-testid="open-invocation">
          Invocation details
        </a>
      </PageHeader>

      <div className="inv-hero" aria-live="polite">
        <StatePill state={f.state} live={f.live} finished={!!last} failed={last?.event === 'error' ? errorCode(last) : null} />
        {inv && <ModeTag mode={inv.mode} />}
        {meta && (
          <span>
            {meta.env ? (
              <>
                env <strong>{meta.env}</strong>
              </>
            ) : (
              <em className="muted">no env</em>
            )}
          </span>
        )}
        <span data-testid="chunk-count">
          <strong>{chunks.length}</strong> {chunks.length === 1 ? 'chunk' : 'chunks'}
        </span>
        <span className="muted">{tLabel(clock) === '0' ? '0 ms' : tLabel(clock)}</span>
        {inv?.outcome && <OutcomeBadge outcome={inv.outcome} status={inv.status} />}
      </div>

      {f.state === 'error' && <ProblemNotice error={f.error} title="Lost the stream" />}
      {f.truncated && <p className="inv-note">More than 10,000 chunks: the rest were sent but not kept.</p>}

      {f.state === 'ended' && f.events.length === 0 ? (
        <EmptyState title="No events">
          {!inv && !invFailed
            ? 'Looking the invocation up…'
            : !inv
              ? 'This invocation has no recorded stream events.'
              : inv.mode !== 'stream'
                ? `This invocation ran in ${inv.mode} mode, so it has no stream.`
                : 'This invocation has no recorded stream events.'}{' '}
          <a href={href('invocation', id)}>See the invocation</a>
        </EmptyState>
      ) : (
        <>
          <section className="card inv-card" aria-labelledby="strip-h">
            <h2 id="strip-h">Chunk timeline</h2>
            <ChunkStrip events={f.events} end={Math.max(clock, 1)} now={f.state === 'open' && !last ? clock : null} />
          </section>

          {last && <Outcome event={last} />}

          <div className={texts ? 'agent-beside' : undefined}>
            {texts && (
              <AssembledText datas={chunks.map((c) => (c.data as { data?: unknown } | null)?.data)} going={f.state === 'open' && !last} />
            )}

            <section className="card inv-card" aria-labelledby="events-h">
              <h2 id="events-h">
                {raw ? 'Raw SSE' : 'Events'} <span className="muted">({f.events.length})</span>
              </h2>
              {f.events.length === 0 ? (
                <p className="muted">{f.state === 'connecting' ? 'Connecting…' : 'Waiting for the first event…'}</p>
              ) : raw ? (
                <pre className="inv-pre stream-raw" data-testid="raw-sse" tabIndex={0} aria-label="Raw SSE frames">
                  {f.events.map((e) => e.raw).join('\n\n')}
                </pre>
              ) : (
                <EventTable events={f.events} waiting={f.state === 'open' && !last ? clock - lastT : null} />
              )}
            </section>
          </div>
        </>
      )}
    </div>
  );
}

/** The code of a stream's closing `error` event (`cancelled`, `timeout`, …). */
function errorCode(e: LiveEvent): string {
  const code = (e.data as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'error';
}

/**
 * Where the stream is: a run that ended with an `error` event is not shown as a plain (green) end: it says
 * how it ended (`Cancelled`, `Ended · timeout`).
 */
function StatePill({ state, live, finished, failed }: { state: string; live: boolean | null; finished: boolean; failed: string | null }) {
  const recorded = live === false ? ' · recorded events' : '';
  const [cls, label] =
    state === 'connecting'
      ? ['wait', 'Connecting…']
      : state === 'error'
        ? ['bad', 'Disconnected']
        : state === 'open' && !finished
          ? ['live', live === false ? 'Replaying' : 'Live']
          : failed
            ? ['bad', `${failed === 'cancelled' ? 'Cancelled' : `Ended · ${failed}`}${recorded}`]
            : ['done', `Ended${recorded}`];
  return (
    <span className={`stream-pill stream-pill-${cls}`} data-testid="stream-state">
      {cls === 'live' && <LiveDot label="live" />}
      {label}
    </span>
  );
}

function EventTable({ events, waiting }: { events: LiveEvent[]; waiting: number | null }) {
  const hidden = Math.max(0, events.length - SHOWN);
  const shown = hidden ? events.slice(hidden) : events;
  return (
    <div className="inv-table-scroll">
      {hidden > 0 && <p className="muted">{hidden.toLocaleString('en-US')} earlier events not shown.</p>}
      <table className="inv-table stream-events" data-testid="stream-events">
        <thead>
          <tr>
            <th scope="col" className="inv-num">
              id
            </th>
            <th scope="col">Event</th>
            <th scope="col" className="inv-num">
              Time
            </th>
            <th scope="col">Data</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((e, i) => (
            <tr
              key={e.id}
              className={`stream-ev-row stream-ev-row-${e.event}${waiting !== null && i === shown.length - 1 ? ' stream-ev-new' : ''}`}
              data-testid="stream-event"
              data-event={e.event}
            >
              <td className="inv-num muted">{e.id}</td>
              <td>
                <span className={`stream-ev stream-ev-${e.event}`}>{e.event}</span>
              </td>
              <td
                className="inv-num stream-t"
                data-exact={e.exact}
                title={
                  e.exact
                    ? 'since the stream started (recorded)'
                    : 'since the stream started (estimated from when it arrived; the recorded time follows)'
                }
              >
                +{tLabel(e.t_ms) === '0' ? '0 ms' : tLabel(e.t_ms)}
              </td>
              <td className="stream-data">
                <code>{describe(e)}</code>
              </td>
            </tr>
          ))}
          {waiting !== null && (
            <tr className="stream-waiting" data-testid="stream-waiting">
              <td />
              <td colSpan={3}>
                <LiveDot label="waiting" /> waiting for the next event{waiting >= 1000 ? ` · ${dur(waiting)} since the last` : ''}
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}

function describe(e: LiveEvent): string {
  // start: {snippet, version, env}; error: {code, message} (the stream's event schemas); chunk and result carry any JSON.
  const d = e.data as
    (Record<string, unknown> & { snippet?: string; version?: number; env?: string | null; code?: string; message?: string }) | null;
  if (e.event === 'chunk') return compact(d?.data, 200);
  if (e.event === 'start') return `${String(d?.snippet ?? '')} v${String(d?.version ?? '')}${d?.env ? ` (${String(d.env)})` : ''}`;
  if (e.event === 'error') return `${String(d?.code ?? 'error')}: ${String(d?.message ?? '')}`;
  return compact(d?.output, 200);
}

function Outcome({ event }: { event: LiveEvent }) {
  const d = (event.data ?? {}) as {
    output?: unknown;
    usage?: { duration_ms: number; peak_memory_mb: number; cpu_ms: number } | null;
    code?: string;
    message?: string;
  };
  if (event.event === 'error') {
    return (
      <section className="card inv-card inv-card-error" data-testid="stream-error" aria-labelledby="serr-h">
        <h2 id="serr-h">
          Error <code className="inv-code">{d.code}</code> <span className="muted stream-at">at +{tLabel(event.t_ms)}</span>
        </h2>
        <p className="inv-error-message">{d.message}</p>
      </section>
    );
  }
  return (
    <section className="card inv-card inv-card-ok" data-testid="stream-result" aria-labelledby="sres-h">
      <h2 id="sres-h">
        Result <span className="muted stream-at">at +{tLabel(event.t_ms)}</span>
      </h2>
      <Json value={d.output} />
      {d.usage && (
        <p className="muted">
          {dur(d.usage.duration_ms)} · CPU {dur(d.usage.cpu_ms)} · peak {mb(d.usage.peak_memory_mb)}
        </p>
      )}
    </section>
  );
}

/** A horizontal strip on the stream's time axis: a tick per chunk, the start, and the end (result or error). */
function ChunkStrip({ events, end, now }: { events: LiveEvent[]; end: number; now: number | null }) {
  const [ref, width] = useWidth<HTMLDivElement>();
  const padL = 10;
  const padR = 14;
  const h = 64;
  const plotW = Math.max(10, width - padL - padR);
  const domain = end * 1.04;
  const x = (t: number) => padL + (Math.min(t, domain) / domain) * plotW;
  const chunks = events.filter((e) => e.event === 'chunk');
  const labels = [0, end / 2, end];
  return (
    <div ref={ref} className="stream-strip-wrap">
      {width > 0 && (
        <svg
          className="stream-strip"
          data-testid="chunk-strip"
          width={width}
          height={h}
          viewBox={`0 0 ${width} ${h}`}
          role="img"
          aria-label={`${chunks.length} chunks over ${tLabel(end)}`}
        >
          <rect className="tl-panel" x={padL} y={8} width={plotW} height={30} />
          {events.map((e) => (
            <line
              key={e.id}
              className={`tl-ev tl-ev-${e.event}${e.event === 'chunk' ? '' : ' stream-strip-edge'}`}
              data-testid={e.event === 'chunk' ? 'chunk-tick' : `strip-${e.event}`}
              x1={x(e.t_ms)}
              x2={x(e.t_ms)}
              y1={e.event === 'chunk' ? 12 : 6}
              y2={e.event === 'chunk' ? 34 : 40}
            >
              <title>{`${e.event} #${e.id} at +${tLabel(e.t_ms)}${e.event === 'chunk' ? `: ${compact((e.data as { data?: unknown } | null)?.data, 60)}` : ''}`}</title>
            </line>
          ))}
          {now !== null && <line className="stream-now" data-testid="strip-now" x1={x(now)} x2={x(now)} y1={4} y2={42} />}
          {labels.map((t, i) => (
            <text key={i} className="tl-xlabel" x={x(t)} y={56} textAnchor={i === 0 ? 'start' : i === 2 ? 'end' : 'middle'}>
              {t === 0 ? '0' : tLabel(t)}
            </text>
          ))}
        </svg>
      )}
    </div>
  );
}
