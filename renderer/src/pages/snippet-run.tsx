// Run: invoke the snippet with a JSON input, sync / async / stream, on an environment or an explicit
// version, with per-run limit overrides for QA (`X-Emu-Limits`, sent with the admin token as
// `X-Emu-Admin`). Sync shows the answer; async polls the invocation until it ends; stream shows the
// events as they arrive.
import { useEffect, useRef, useState } from 'react';
import { operations, ProblemError, type EventStream } from '../api';
import { useApp } from '../context';
import { href } from '../router';
import { describeError, Json, OutcomeBadge, ProblemNotice, useLoad } from '../ui/kit';
import { adminToken, envOrder, getDeployments, getVersions, LIMIT_FIELDS, type Invocation, type Limits } from './snippet-data';
import type { SnippetTabProps } from './snippet';

type Mode = 'sync' | 'async' | 'stream';

interface RunMeta {
  invocationId: string | null;
  version: string | null;
  env: string | null;
}

/** The run's invocation, version and environment, from the answer's headers (any status). */
const metaOf = (headers: Headers): RunMeta => ({
  invocationId: headers.get('X-Invocation-Id'),
  version: headers.get('X-Snippet-Version'),
  env: headers.get('X-Snippet-Env'),
});

/** An answer's body as shown: its JSON, its text when it is not JSON, null when empty. */
function parsedBody(text: string): unknown {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return text; // not JSON: shown as text
  }
}

interface StreamEvent {
  id: number;
  event: string;
  at: number;
  data: unknown;
}

type Result =
  | { mode: 'sync'; status: number; ok: boolean; body: unknown; meta: RunMeta; ms: number }
  | { mode: 'async'; status: number; accepted: unknown; meta: RunMeta; record: Invocation | null; polls: number; pollError: unknown }
  | { mode: 'stream'; status: number; meta: RunMeta; events: StreamEvent[]; done: boolean; ms: number | null; cut: string | null }
  | { mode: 'refused'; status: number; body: unknown; meta: RunMeta }
  | { mode: 'error'; error: unknown };

const POLL_MS = 250;
const FINISHED = new Set(['succeeded', 'failed']);

/** Why the input cannot be sent, or null. */
export function inputProblem(text: string): string | null {
  if (text.trim() === '') return null; // an empty input is {}
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'must be a JSON object, like {"name": "Ada"}';
    return null;
  } catch (e) {
    return `not JSON: ${e instanceof Error ? e.message : String(e)}`;
  }
}

function overrideProblem(raw: string): string | null {
  const t = raw.trim();
  if (t === '') return null;
  if (!/^\d{1,9}$/.test(t) || Number(t) < 1) return 'a whole number ≥ 1';
  return null;
}

export function RunTab({ snippet }: SnippetTabProps) {
  const { api } = useApp();
  const [targets] = useLoad(async () => {
    const [deployments, versions] = await Promise.all([getDeployments(api, snippet.name), getVersions(api, snippet.name)]);
    return { deployments: [...deployments].sort((a, b) => envOrder(a.env, b.env)), versions };
  }, [api, snippet.name, snippet.latest_version]);

  const [input, setInput] = useState('{\n  \n}');
  const [mode, setMode] = useState<Mode>('sync');
  const [target, setTarget] = useState('');
  const [overrides, setOverrides] = useState<Record<keyof Limits, string>>({ timeout_ms: '', max_memory_mb: '', max_cpu_percent: '' });
  const [result, setResult] = useState<Result | null>(null);
  const [running, setRunning] = useState(false);
  const abort = useRef<AbortController | null>(null);
  const live = useRef(true);

  useEffect(() => {
    live.current = true;
    return () => {
      live.current = false;
      abort.current?.abort();
    };
  }, []);

  const inputError = inputProblem(input);
  const overrideErrors = LIMIT_FIELDS.map((f) => [f, overrideProblem(overrides[f.key])] as const).filter(([, p]) => p !== null);
  const limitsHeader = LIMIT_FIELDS.filter((f) => overrides[f.key].trim() !== '')
    .map((f) => `${f.key}=${Number(overrides[f.key].trim())}`)
    .join(',');
  const canRun = !running && inputError === null && overrideErrors.length === 0 && snippet.latest_version !== null;

  async function run() {
    if (!canRun) return;
    const body = input.trim() === '' ? {} : (JSON.parse(input) as Record<string, unknown>);
    const query = target.startsWith('env:') ? { env: target.slice(4) } : target.startsWith('v:') ? { version: target.slice(2) } : {};
    const headers: Record<string, string> = {};
    if (mode !== 'sync') headers['X-Invoke-Mode'] = mode;
    if (limitsHeader) {
      const token = await adminToken();
      if (!token) {
        setResult({
          mode: 'error',
          error: new Error(
            'Per-run limit overrides need the admin token, and this session has none: open the URL printed by npm start again.',
          ),
        });
        return;
      }
      headers['X-Emu-Limits'] = limitsHeader;
      headers['X-Emu-Admin'] = token;
    }
    const controller = new AbortController();
    abort.current = controller;
    setRunning(true);
    setResult(null);
    const t0 = performance.now();
    try {
      const input = { params: { snippet: snippet.name }, query, body, headers, signal: controller.signal };
      if (mode === 'stream') {
        // A refusal (an error answer) is shown with its status and body, as the other modes show theirs.
        const events = await api.client.stream(operations.invoke, input).catch((e: unknown) => {
          if (e instanceof ProblemError) return e;
          throw e;
        });
        if (events instanceof ProblemError) {
          if (live.current)
            setResult({ mode: 'refused', status: events.status, body: parsedBody(events.text), meta: metaOf(events.headers) });
        } else await readStream(events, metaOf(events.headers), t0, controller.signal);
      } else {
        const res = await api.client.send(operations.invoke, { ...input, headers: { accept: 'application/json', ...headers } });
        const ok = res.status >= 200 && res.status <= 299;
        const meta = metaOf(res.headers);
        const parsed = parsedBody(res.text);
        if (!live.current) return;
        if (mode === 'sync') {
          setResult({ mode: 'sync', status: res.status, ok, body: parsed, meta, ms: performance.now() - t0 });
        } else if (mode === 'async' && res.status === 202) {
          const accepted = parsed as { invocation_id?: string };
          const id = accepted.invocation_id ?? meta.invocationId;
          const first: Result = {
            mode: 'async',
            status: res.status,
            accepted: parsed,
            meta: { ...meta, invocationId: id ?? null },
            record: null,
            polls: 0,
            pollError: null,
          };
          setResult(first);
          if (id) await poll(id, controller.signal);
        } else {
          setResult({ mode: 'refused', status: res.status, body: parsed, meta });
        }
      }
    } catch (e) {
      if (!live.current) return;
      if ((e as Error).name === 'AbortError') {
        setResult((r) =>
          r && r.mode === 'stream' ? { ...r, done: true, cut: 'stopped: the client disconnected, which cancels the run' } : r,
        );
      } else setResult({ mode: 'error', error: e });
    } finally {
      if (live.current) setRunning(false);
      abort.current = null;
    }
  }

  async function readStream(stream: EventStream<typeof operations.invoke>, meta: RunMeta, t0: number, signal: AbortSignal) {
    const events: StreamEvent[] = [];
    setResult({ mode: 'stream', status: stream.status, meta, events: [], done: false, ms: null, cut: null });
    for await (const e of stream) {
      if (!live.current) return;
      events.push({ id: Number(e.id), event: e.event, at: performance.now() - t0, data: e.data });
      const startId = e.event === 'start' ? e.data.invocation_id : undefined;
      setResult((r) =>
        r && r.mode === 'stream'
          ? { ...r, events: [...events], meta: startId && !r.meta.invocationId ? { ...r.meta, invocationId: startId } : r.meta }
          : r,
      );
    }
    if (!live.current) return;
    // The typed stream ends quietly when aborted (contract/sse.ts): the same note as an aborted fetch's.
    if (signal.aborted) throw new DOMException('stopped', 'AbortError');
    const last = events[events.length - 1];
    const complete = last?.event === 'result' || last?.event === 'error';
    setResult((r) =>
      r && r.mode === 'stream'
        ? { ...r, done: true, ms: performance.now() - t0, cut: complete ? null : 'ended without a result or error event' }
        : r,
    );
  }

  async function poll(id: string, signal: AbortSignal) {
    for (let polls = 1; !signal.aborted && live.current; polls++) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      if (signal.aborted || !live.current) return;
      try {
        const record = await api.client.call(operations.getInvocation, { params: { id } });
        if (!live.current) return;
        setResult((r) => (r && r.mode === 'async' ? { ...r, record, polls } : r));
        if (FINISHED.has(record.status)) return;
      } catch (e) {
        if (live.current) setResult((r) => (r && r.mode === 'async' ? { ...r, pollError: e, polls } : r));
        return;
      }
    }
  }

  const deployments = targets.state === 'ok' ? targets.data.deployments : [];
  const versions = targets.state === 'ok' ? targets.data.versions : [];
  const prod = deployments.find((d) => d.env === 'prod' && d.version !== null);
  const defaultLabel = prod
    ? `Default: what prod runs (v${prod.version})`
    : `Default: the latest version${snippet.latest_version ? ` (v${snippet.latest_version})` : ''}`;

  return (
    <div className="sn-run">
      <form
        className="card sn-run-form"
        onSubmit={(e) => {
          e.preventDefault();
          void run();
        }}
      >
        <div className="sn-run-grid">
          <div className="sn-run-input">
            <label htmlFor="run-input">Input (a JSON object)</label>
            <textarea
              id="run-input"
              value={input}
              onChange={(e) => setInput(e.target.value)}
              spellCheck={false}
              rows={8}
              aria-invalid={inputError ? true : undefined}
              aria-describedby="run-input-problem"
              data-testid="run-input"
              onKeyDown={(e) => {
                if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
                  e.preventDefault();
                  void run();
                }
              }}
            />
            <div className="sn-problem" id="run-input-problem" data-testid="run-input-problem">
              {inputError ? `Input ${inputError}` : ''}
            </div>
          </div>
          <div className="sn-run-options">
            <label htmlFor="run-mode">Mode</label>
            <select id="run-mode" value={mode} onChange={(e) => setMode(e.target.value as Mode)} data-testid="run-mode">
              <option value="sync">sync — wait for the answer</option>
              <option value="async">async — 202, then poll the invocation</option>
              <option value="stream">stream — server-sent events</option>
            </select>
            <label htmlFor="run-target">Target (environment or version)</label>
            <select id="run-target" value={target} onChange={(e) => setTarget(e.target.value)} data-testid="run-target">
              <option value="">{defaultLabel}</option>
              <optgroup label="Environment">
                {deployments.map((d) => (
                  <option key={d.env} value={`env:${d.env}`} disabled={d.version === null}>
                    {d.env} {d.version === null ? '(nothing deployed)' : `(v${d.version})`}
                  </option>
                ))}
              </optgroup>
              <optgroup label="Version">
                {versions.map((v) => (
                  <option key={v.version} value={`v:${v.version}`}>
                    v{v.version}
                  </option>
                ))}
              </optgroup>
            </select>
            <fieldset className="sn-overrides">
              <legend>Per-run limit overrides (emulator only)</legend>
              <p className="muted">
                Blank keeps the version&apos;s limit. Sent as X-Emu-Limits with the admin token; no new version is made.
              </p>
              <div className="sn-overrides-grid">
                {LIMIT_FIELDS.map((f) => (
                  <label key={f.key} className="sn-override">
                    <span>{f.label}</span>
                    <span className="sn-input-unit">
                      <input
                        type="number"
                        min={1}
                        step={1}
                        inputMode="numeric"
                        value={overrides[f.key]}
                        placeholder="—"
                        onChange={(e) => setOverrides((o) => ({ ...o, [f.key]: e.target.value }))}
                        aria-invalid={overrideProblem(overrides[f.key]) ? true : undefined}
                        data-testid={`override-${f.key}`}
                      />
                      <span className="sn-unit">{f.unit}</span>
                    </span>
                  </label>
                ))}
              </div>
              {overrideErrors.length > 0 && (
                <div className="sn-problem">
                  {overrideErrors.map(([f, p]) => (
                    <div key={f.key}>
                      {f.label} override: {p}
                    </div>
                  ))}
                </div>
              )}
            </fieldset>
          </div>
        </div>
        <div className="sn-run-actions">
          <button type="submit" className="sn-btn sn-btn-primary" disabled={!canRun} data-testid="run">
            {running ? 'Running…' : 'Run'}
          </button>
          {running && (
            <button type="button" className="sn-btn" onClick={() => abort.current?.abort()} data-testid="run-stop">
              {mode === 'stream' ? 'Disconnect' : 'Stop waiting'}
            </button>
          )}
          <span className="muted sn-kbd-hint">Ctrl+Enter runs</span>
          {limitsHeader && (
            <span className="sn-override-note" data-testid="override-note">
              with X-Emu-Limits: <code>{limitsHeader}</code>
            </span>
          )}
        </div>
      </form>
      {result && <RunResult result={result} running={running} />}
    </div>
  );
}

function MetaLine({ meta, status, ms, stream }: { meta: RunMeta; status: number; ms?: number | null; stream?: boolean }) {
  return (
    <dl className="sn-meta" data-testid="run-meta">
      <dt>HTTP</dt>
      <dd data-testid="run-status">{status}</dd>
      {meta.invocationId && (
        <>
          <dt>Invocation</dt>
          <dd>
            <a href={href('invocation', meta.invocationId)} data-testid="run-invocation">
              <code>{meta.invocationId}</code>
            </a>
            {stream && (
              <>
                {' · '}
                <a href={href('stream', meta.invocationId)} data-testid="run-inspector">
                  live inspector
                </a>
              </>
            )}
          </dd>
        </>
      )}
      {meta.version && (
        <>
          <dt>Version</dt>
          <dd>v{meta.version}</dd>
        </>
      )}
      {meta.env && (
        <>
          <dt>Environment</dt>
          <dd>{meta.env === 'none' ? <span className="muted">none</span> : meta.env}</dd>
        </>
      )}
      {ms !== undefined && ms !== null && (
        <>
          <dt>Round trip</dt>
          <dd>{Math.round(ms).toLocaleString()} ms</dd>
        </>
      )}
    </dl>
  );
}

interface ProblemBody {
  code?: string;
  title?: string;
  detail?: string;
  stack?: string;
  invocation_id?: string;
}

function ProblemView({ body, badge = true }: { body: unknown; badge?: boolean }) {
  const p = (typeof body === 'object' && body !== null ? body : {}) as ProblemBody;
  return (
    <div className="sn-failure" data-testid="run-problem">
      <div className="sn-failure-head">
        {badge && <OutcomeBadge outcome={p.code ?? 'failed'} />}
        <strong>{p.title ?? 'Failed'}</strong>
      </div>
      {p.detail && <p>{p.detail}</p>}
      {p.stack && <pre className="sn-stack">{p.stack}</pre>}
      <details>
        <summary>Problem body</summary>
        <Json value={body} />
      </details>
    </div>
  );
}

function RunResult({ result, running }: { result: Result; running: boolean }) {
  if (result.mode === 'error') return <ProblemNotice error={result.error} title="The run could not start" />;
  if (result.mode === 'refused') {
    return (
      <section className="card sn-result" data-testid="run-result">
        <h2>Refused</h2>
        <MetaLine meta={result.meta} status={result.status} />
        <ProblemView body={result.body} />
      </section>
    );
  }
  if (result.mode === 'sync') {
    return (
      <section className="card sn-result" data-testid="run-result" data-mode="sync">
        <h2>
          Result <OutcomeBadge outcome={result.ok ? 'success' : ((result.body as ProblemBody | null)?.code ?? 'failed')} />
        </h2>
        <MetaLine meta={result.meta} status={result.status} ms={result.ms} />
        {result.ok ? (
          <div data-testid="run-output">
            <h3>Output</h3>
            <Json value={result.body} />
          </div>
        ) : (
          <ProblemView body={result.body} badge={false} />
        )}
      </section>
    );
  }
  if (result.mode === 'async') {
    const rec = result.record;
    const finished = rec !== null && FINISHED.has(rec.status);
    return (
      <section className="card sn-result" data-testid="run-result" data-mode="async">
        <h2>
          Invocation <OutcomeBadge outcome={rec?.outcome ?? null} status={rec?.status ?? 'queued'} />
        </h2>
        <MetaLine meta={result.meta} status={result.status} />
        <div className="sn-two">
          <div>
            <h3>Accepted (202)</h3>
            <Json value={result.accepted} />
          </div>
          <div>
            <h3>
              {finished ? 'Finished' : running ? `Polling… (${result.polls})` : 'Last read'}
              {rec?.usage && <span className="muted sn-usage"> · {Math.round(rec.usage.duration_ms).toLocaleString()} ms</span>}
            </h3>
            {finished && rec?.outcome === 'success' && (
              <div data-testid="run-output">
                <Json value={rec.output} />
              </div>
            )}
            {finished && rec?.error && (
              <div className="sn-failure">
                <div className="sn-failure-head">
                  <OutcomeBadge outcome={rec.outcome ?? rec.error.code} />
                  <strong>{rec.error.message}</strong>
                </div>
                {rec.error.stack && <pre className="sn-stack">{rec.error.stack}</pre>}
              </div>
            )}
            {!finished && (
              <p className="muted">
                Reading GET /v1/invocations/{result.meta.invocationId} every {POLL_MS} ms until it ends…
              </p>
            )}
            {result.pollError !== null && <ProblemNotice error={result.pollError} title="Could not read the invocation" />}
          </div>
        </div>
        {rec && (
          <details data-testid="run-record">
            <summary>The invocation record</summary>
            <Json value={rec} />
          </details>
        )}
      </section>
    );
  }
  // stream
  const last = result.events[result.events.length - 1];
  const final = last && (last.event === 'result' || last.event === 'error') ? last : null;
  const finalData = (final?.data ?? {}) as { output?: unknown; usage?: { duration_ms?: number }; code?: string; message?: string };
  return (
    <section className="card sn-result" data-testid="run-result" data-mode="stream">
      <h2>
        Stream{' '}
        {final ? (
          <OutcomeBadge outcome={final.event === 'result' ? 'success' : (finalData.code ?? 'failed')} />
        ) : (
          <OutcomeBadge outcome={null} status={result.done ? 'ended' : 'running'} />
        )}
      </h2>
      <MetaLine meta={result.meta} status={result.status} ms={result.ms} stream />
      <div className="sn-scroll">
        <table className="sn-plain sn-events" data-testid="stream-events">
          <thead>
            <tr>
              <th scope="col" className="sn-num">
                id
              </th>
              <th scope="col">event</th>
              <th scope="col" className="sn-num">
                +ms
              </th>
              <th scope="col">data</th>
            </tr>
          </thead>
          <tbody>
            {result.events.map((e) => (
              <tr key={e.id} data-testid="stream-event" data-event={e.event}>
                <td className="sn-num">{e.id}</td>
                <td>
                  <span className={`sn-event sn-event-${e.event}`}>{e.event}</span>
                </td>
                <td className="sn-num">{Math.round(e.at).toLocaleString()}</td>
                <td>
                  <code className="sn-event-data">{JSON.stringify(e.data)}</code>
                </td>
              </tr>
            ))}
            {!result.done && (
              <tr>
                <td colSpan={4} className="muted">
                  waiting for the next event…
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      {result.cut && <p className="sn-problem">The stream {result.cut}.</p>}
      {final?.event === 'result' && (
        <div data-testid="run-output">
          <h3>
            Output
            {finalData.usage?.duration_ms !== undefined && (
              <span className="muted sn-usage"> · ran {Math.round(finalData.usage.duration_ms).toLocaleString()} ms</span>
            )}
          </h3>
          <Json value={finalData.output} />
        </div>
      )}
      {final?.event === 'error' && (
        <div className="sn-failure" data-testid="run-problem">
          <div className="sn-failure-head">
            <OutcomeBadge outcome={finalData.code ?? 'failed'} />
            <strong>{finalData.message ?? describeError(finalData)}</strong>
          </div>
        </div>
      )}
    </section>
  );
}
