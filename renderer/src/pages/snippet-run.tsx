// Run: invoke the snippet with a JSON input, sync / async / stream, on an environment or an explicit
// version, with per-run limit overrides for QA (`X-Emu-Limits`, sent with the admin token as
// `X-Emu-Admin`), and the run's egress mode and cassette (`X-Emu-Egress-Mode`, `X-Emu-Cassette`, the same way).
// Sync shows the answer; async shows the 202, then the record once the live feed says the
// run finished; stream shows the events as they arrive. The run itself is held by the tab (renderer/src/
// runs.ts), not this page: leaving for the live inspector (or anywhere) never ends it; Cancel does.
// Overrides reset after each run unless "Pin" is checked (kept per snippet in localStorage).
// `#/snippet/NAME/run/from/ID` prefills the form from invocation ID ("Edit and run" on its page).
import { useEffect, useState } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { href } from '../router';
import { useLiveEvent, useLiveLoad } from '../live-react';
import { snippetOf } from '../live';
import { useEgressMode } from './egress-mode';
import { FINISHED, runs, useHeldRun, type Mode, type Result, type RunDraft, type RunMeta, type RunRequest } from '../runs';
import { describeError, Json, OutcomeBadge, ProblemNotice, useLoad } from '../ui/kit';
import { adminToken, envOrder, getDeployments, getVersions, LIMIT_FIELDS, type Limits } from './snippet-data';
import type { SnippetTabProps } from './snippet';
import { DebugSessionPanel } from './debug-session';
import './snippet-run.css';

type Overrides = Record<keyof Limits, string>;
type EgressChoice = NonNullable<RunRequest['egress']>;
const NO_EGRESS: EgressChoice = { mode: '', cassette: '' };
const CASSETTE_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const NO_OVERRIDES: Overrides = { timeout_ms: '', max_memory_mb: '', max_cpu_percent: '' };

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

/** The target select's value as the invoke's query: `env:E`, `v:N`, or `ve:N:E` (that version, named as run in E). */
function queryOf(target: string): { env?: string; version?: string } {
  if (target.startsWith('env:')) return { env: target.slice(4) };
  if (target.startsWith('v:')) return { version: target.slice(2) };
  const ve = /^ve:(\d+):(.+)$/.exec(target);
  return ve ? { version: ve[1]!, env: ve[2]! } : {};
}

// ---- pinned overrides, per snippet, in localStorage

const pinKey = (snippet: string) => `svc-emu.run-overrides-pin.${snippet}`;

function readPin(snippet: string): Overrides | null {
  try {
    const raw = window.localStorage.getItem(pinKey(snippet));
    if (!raw) return null;
    const v = JSON.parse(raw) as Partial<Overrides>;
    return { ...NO_OVERRIDES, ...Object.fromEntries(LIMIT_FIELDS.map((f) => [f.key, String(v[f.key] ?? '')])) };
  } catch {
    return null;
  }
}

function writePin(snippet: string, overrides: Overrides | null): void {
  try {
    if (overrides) window.localStorage.setItem(pinKey(snippet), JSON.stringify(overrides));
    else window.localStorage.removeItem(pinKey(snippet));
  } catch {
    // storage refused (private mode, full): the pin lasts as long as the page
  }
}

/** One form per snippet (its own draft, pin and held run). */
export function RunTab(props: SnippetTabProps) {
  return <RunPanel key={props.snippet.name} {...props} />;
}

function RunPanel({ snippet, folder, rest }: SnippetTabProps) {
  const { api } = useApp();
  const name = snippet.name;
  const [targets] = useLoad(async () => {
    const [deployments, versions] = await Promise.all([getDeployments(api, name), getVersions(api, name)]);
    return { deployments: [...deployments].sort((a, b) => envOrder(a.env, b.env)), versions };
  }, [api, name, snippet.latest_version]);

  const [initial] = useState(() => ({ draft: runs.draft(name), pin: readPin(name) }));
  const [input, setInput] = useState(initial.draft?.input ?? '{\n  \n}');
  const [mode, setMode] = useState<Mode>(initial.draft?.mode ?? 'sync');
  const [target, setTarget] = useState(initial.draft?.target ?? '');
  const [overrides, setOverrides] = useState<Overrides>(initial.pin ?? initial.draft?.overrides ?? NO_OVERRIDES);
  const [pinned, setPinned] = useState(initial.pin !== null);
  const [from, setFrom] = useState<string | null>(initial.draft?.from ?? null);
  const [egress, setEgress] = useState<EgressChoice>(initial.draft?.egress ?? NO_EGRESS);
  // What a run gets without a choice of its own: snippet.json's mode, else the server's (kept current).
  const [serverMode] = useEgressMode();
  const egressDefault = folder?.egress?.mode
    ? `Default: ${folder.egress.mode} (its snippet.json)`
    : serverMode.state === 'ok'
      ? `Default: ${serverMode.data.mode} (the server’s)`
      : 'Default (snippet.json, else the server’s)';
  // The snippet's cassettes, offered for the cassette field (refreshed when a record run writes one).
  const [cassettes] = useLiveLoad(
    async () => (await api.client.call(operations.emuListCassettes, { params: { id: name } })).data.map((c) => c.name),
    [api, name],
    ['cassette.changed'],
    (e) => snippetOf(e) === name,
  );
  const [prefill, setPrefill] = useState<{ id: string; note: string | null } | { id: string; error: unknown } | null>(null);
  const held = useHeldRun(name);
  const running = held?.running ?? false;
  const result = held?.result ?? null;

  // The form outlives the page (coming back finds it as it was left); a pin outlives the tab.
  useEffect(() => {
    const draft: RunDraft = { input, mode, target, overrides, from, egress };
    runs.saveDraft(name, draft);
  }, [name, input, mode, target, overrides, from, egress]);
  useEffect(() => writePin(name, pinned ? overrides : null), [name, pinned, overrides]);

  // "Edit and run": #/snippet/NAME/run/from/ID fills the form from that invocation, once.
  const fromId = rest[0] === 'from' && rest[1] ? rest[1] : null;
  useEffect(() => {
    if (!fromId || fromId === from) return;
    let live = true;
    api.client.call(operations.emuGetInvocation, { params: { id: fromId } }).then(
      (inv) => {
        if (!live) return;
        const body: Record<string, unknown> = { ...(inv.input ?? {}) };
        // An async run's callback_url was taken out of its input: it goes back in.
        if (inv.mode === 'async' && inv.callback && !('callback_url' in body)) body.callback_url = inv.callback.url;
        setInput(JSON.stringify(body, null, 2));
        setMode(inv.mode);
        setTarget(inv.env ? `ve:${inv.version}:${inv.env}` : `v:${inv.version}`);
        setOverrides({ ...NO_OVERRIDES, ...Object.fromEntries(Object.entries(inv.overrides ?? {}).map(([k, v]) => [k, String(v)])) });
        // A run that chose its own egress mode gets it again (with its cassette); otherwise the default.
        setEgress(inv.egress?.source === 'run' ? { mode: inv.egress.mode, cassette: inv.egress.cassette ?? '' } : NO_EGRESS);
        setFrom(fromId);
        setPrefill({
          id: fromId,
          note:
            inv.input === null
              ? inv.input_truncated
                ? 'Its input was over 64 KiB of JSON, so it was not kept: give one here.'
                : 'Its input was not kept (it ran before inputs were stored): give one here.'
              : JSON.stringify(inv.input).includes('[secret ')
                ? 'Secret values in its input were stored as "[secret NAME]": put the real ones back if the handler needs them.'
                : null,
        });
      },
      (error: unknown) => live && setPrefill({ id: fromId, error }),
    );
    return () => {
      live = false;
    };
  }, [api, fromId, from]);

  // An async run: its record is read again when the live feed says it finished (and on coming back).
  const asyncId = result?.mode === 'async' && !(result.record && FINISHED.has(result.record.status)) ? result.meta.invocationId : null;
  useLiveEvent(['invocation.finished'], () => void runs.readAsync(api, name), {
    filter: (e) => 'id' in e.data && e.data.id === asyncId,
    onReset: () => asyncId && void runs.readAsync(api, name),
  });
  useEffect(() => {
    if (asyncId && !running) void runs.readAsync(api, name);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  const inputError = inputProblem(input);
  const overrideErrors = LIMIT_FIELDS.map((f) => [f, overrideProblem(overrides[f.key])] as const).filter(([, p]) => p !== null);
  const limitsHeader = LIMIT_FIELDS.filter((f) => overrides[f.key].trim() !== '')
    .map((f) => `${f.key}=${Number(overrides[f.key].trim())}`)
    .join(',');
  const cassetteError =
    egress.cassette.trim() === '' || CASSETTE_RE.test(egress.cassette.trim()) ? null : 'a-z 0-9 . _ -, starting with a letter or digit';
  const canRun =
    !running && inputError === null && overrideErrors.length === 0 && cassetteError === null && snippet.latest_version !== null;

  /** Run, or Debug: the same run with the runtime's debugger listening first (X-Emu-Debug; pages/debug-session.tsx). */
  function run(debug = false) {
    if (!canRun) return;
    const body = input.trim() === '' ? {} : (JSON.parse(input) as Record<string, unknown>);
    if (!pinned) setOverrides(NO_OVERRIDES); // per-run: the next run has none unless pinned
    const request = { snippet: name, mode, query: queryOf(target), body, limits: limitsHeader, egress };
    const requestId = `gui-debug-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
    void runs.start(api, debug ? { ...request, debug: { requestId } } : request, adminToken);
  }

  const deployments = targets.state === 'ok' ? targets.data.deployments : [];
  const versions = targets.state === 'ok' ? targets.data.versions : [];
  const prod = deployments.find((d) => d.env === 'prod' && d.version !== null);
  const defaultLabel = prod
    ? `Default: what prod runs (v${prod.version})`
    : `Default: the latest version${snippet.latest_version ? ` (v${snippet.latest_version})` : ''}`;
  const asRun = /^ve:(\d+):(.+)$/.exec(target);
  const runMode = held?.request.mode ?? mode;
  const runId = result && 'meta' in result ? result.meta.invocationId : null;

  return (
    <div className="sn-run">
      {prefill && 'error' in prefill && (
        <ProblemNotice error={prefill.error} title={`Could not read invocation ${prefill.id} to prefill the form`} />
      )}
      {prefill && 'note' in prefill && (
        <p className="sn-prefill" data-testid="run-prefill">
          Prefilled from invocation{' '}
          <a href={href('invocation', prefill.id)}>
            <code>{prefill.id}</code>
          </a>
          : edit and run. {prefill.note}
        </p>
      )}
      <form
        className="card sn-run-form"
        onSubmit={(e) => {
          e.preventDefault();
          run();
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
                  run();
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
              <option value="async">async — 202, then the record when it ends</option>
              <option value="stream">stream — server-sent events</option>
            </select>
            <label htmlFor="run-target">Target (environment or version)</label>
            <select id="run-target" value={target} onChange={(e) => setTarget(e.target.value)} data-testid="run-target">
              <option value="">{defaultLabel}</option>
              {asRun && (
                <option value={target}>
                  v{asRun[1]} as run in {asRun[2]}
                </option>
              )}
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
            <fieldset className="sn-overrides sn-egress-fieldset" data-testid="run-egress">
              <legend>Outbound calls (emulator only)</legend>
              <div className="sn-egress-grid">
                <label className="sn-override">
                  <span>Egress mode</span>
                  <select
                    value={egress.mode}
                    onChange={(e) => setEgress((g) => ({ ...g, mode: e.target.value as EgressChoice['mode'] }))}
                    data-testid="run-egress-mode"
                  >
                    <option value="">{egressDefault}</option>
                    <option value="live">live — calls go out</option>
                    <option value="record">record — go out and write the cassette</option>
                    <option value="replay">replay — answer from the cassette</option>
                  </select>
                </label>
                <label className="sn-override">
                  <span>Cassette</span>
                  <input
                    list="run-cassettes"
                    value={egress.cassette}
                    placeholder="default"
                    spellCheck={false}
                    autoComplete="off"
                    onChange={(e) => setEgress((g) => ({ ...g, cassette: e.target.value }))}
                    aria-invalid={cassetteError ? true : undefined}
                    data-testid="run-cassette"
                  />
                  <datalist id="run-cassettes">
                    {(cassettes.state === 'ok' ? cassettes.data : []).map((c) => (
                      <option key={c} value={c} />
                    ))}
                  </datalist>
                </label>
              </div>
              <p className="muted">
                Sent as X-Emu-Egress-Mode and X-Emu-Cassette with the admin token; blank keeps the snippet&apos;s own (<code>egress</code>{' '}
                in snippet.json) or the server&apos;s mode (the <a href={href('egress')}>Egress</a> page).{' '}
                <a href={href('snippet', name, 'cassettes')}>Cassettes</a>
              </p>
              {cassetteError && <div className="sn-problem">Cassette: {cassetteError}</div>}
            </fieldset>
            <fieldset className="sn-overrides">
              <legend>Per-run limit overrides (emulator only)</legend>
              <p className="muted">
                Blank keeps the version&apos;s limit. Sent as X-Emu-Limits with the admin token; no new version is made. They apply to the
                next run only, unless pinned.
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
              <label className="sn-pin">
                <input type="checkbox" checked={pinned} onChange={(e) => setPinned(e.target.checked)} data-testid="override-pin" /> Pin:
                keep these overrides for every run of {name} (remembered in this browser)
              </label>
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
            {running && !held?.request.debug ? 'Running…' : 'Run'}
          </button>
          <button
            type="button"
            className="sn-btn"
            disabled={!canRun}
            onClick={() => run(true)}
            title="Run with the runtime's debugger listening (Bun inspector or debugpy, on loopback): the run waits for a debugger to attach"
            data-testid="run-debug"
          >
            {running && held?.request.debug ? 'Debugging…' : 'Debug'}
          </button>
          {running && runMode === 'sync' && (
            <button type="button" className="sn-btn" onClick={() => runs.stop(name)} data-testid="run-stop">
              Stop waiting
            </button>
          )}
          {(running || (runMode === 'async' && asyncId !== null)) && runMode !== 'sync' && (
            <button
              type="button"
              className="sn-btn sn-btn-danger"
              onClick={() => void runs.cancel(api, name)}
              disabled={held?.cancelling || (runMode === 'async' && !runId)}
              data-testid="run-cancel"
            >
              {held?.cancelling ? 'Cancelling…' : 'Cancel'}
            </button>
          )}
          <span className="muted sn-kbd-hint">Ctrl+Enter runs</span>
          {egress.mode && (
            <span className="sn-override-note" data-testid="egress-note">
              egress <code>{egress.mode}</code>
              {egress.cassette.trim() && (
                <>
                  {' '}
                  from cassette <code>{egress.cassette.trim()}</code>
                </>
              )}
            </span>
          )}
          {limitsHeader && (
            <span className="sn-override-note" data-testid="override-note">
              with X-Emu-Limits: <code>{limitsHeader}</code>
              {pinned ? ' (pinned)' : ''}
            </span>
          )}
        </div>
      </form>
      {held?.request.debug && (
        <DebugSessionPanel key={held.request.debug.requestId} requestId={held.request.debug.requestId} snippet={name} running={running} />
      )}
      {result && <RunResult result={result} limits={held?.request.limits ?? ''} />}
    </div>
  );
}

function MetaLine({
  meta,
  status,
  ms,
  stream,
  limits = '',
}: {
  meta: RunMeta;
  status: number;
  ms?: number | null;
  stream?: boolean;
  limits?: string;
}) {
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
      {limits && (
        <>
          <dt>Overrides</dt>
          <dd data-testid="run-overrides">
            <code>{limits}</code>
          </dd>
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

function RunResult({ result, limits }: { result: Result; limits: string }) {
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
        <MetaLine meta={result.meta} status={result.status} ms={result.ms} limits={limits} />
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
        <MetaLine meta={result.meta} status={result.status} limits={limits} />
        <div className="sn-two">
          <div>
            <h3>Accepted (202)</h3>
            <Json value={result.accepted} />
          </div>
          <div>
            <h3>
              {finished ? 'Finished' : 'Waiting for it to end…'}
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
                GET /v1/invocations/{result.meta.invocationId} is read again the moment the live feed says it finished.
              </p>
            )}
            {result.readError !== null && <ProblemNotice error={result.readError} title="Could not read the invocation" />}
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
          // Cut without a last event: a disconnect cancels the run (never shown as a green "ended").
          <OutcomeBadge outcome={result.done && result.cut ? 'cancelled' : null} status={result.done ? 'ended' : 'running'} />
        )}
      </h2>
      <MetaLine meta={result.meta} status={result.status} ms={result.ms} stream limits={limits} />
      {!result.done && (
        <p className="muted sn-hint" data-testid="run-held-note">
          This tab holds the run: watch it in the live inspector or anywhere else, and come back; only Cancel (or closing the tab) ends it.
        </p>
      )}
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
