// The egress inspector: every outbound call snippets and integrations made through the egress proxy
// (refused ones highlighted), the profile and allow list in force, and fault rules (slow, fail, drop or
// hang calls to a host or an integration) to rehearse a bad provider. Calls show as they are made (the
// live feed's `egress.call`), without polling.
import { useState, type FormEvent } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { href } from '../router';
import { EmptyState, PageHeader, ProblemNotice, Show, when } from '../ui/kit';
import { useLiveLoad } from '../live-react';
import { ConfirmButton, Field } from '../ui/controls';
import type { EgressEntry, NewFaultRule } from '../types';
import { EgressModeSwitch } from './egress-mode';
import './operator.css';

type FaultAction = NewFaultRule['action'];

function describeAction(a: Record<string, unknown>): string {
  switch (a.type) {
    case 'latency':
      return `delay ${Number(a.ms).toLocaleString()} ms`;
    case 'status':
      return `answer ${String(a.status)}${typeof a.body === 'string' && a.body ? ` with “${a.body.length > 40 ? `${a.body.slice(0, 40)}…` : a.body}”` : ''}`;
    case 'drop':
      return 'drop the connection';
    case 'timeout':
      return 'hang (never answer)';
    default:
      return JSON.stringify(a);
  }
}

const size = (n: number) =>
  n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;
const clock = (iso: string) => {
  const d = new Date(iso);
  return `${d.toLocaleTimeString('en-GB', { hour12: false })}.${String(d.getMilliseconds()).padStart(3, '0')}`;
};
const statusClass = (s: number) => (s < 300 ? 'op-ok' : s < 400 ? 'op-info' : s < 500 ? 'op-warn' : 'op-bad');

export function Egress(_props: { params: string[] }) {
  const { api } = useApp();
  const [log, reloadLog] = useLiveLoad(
    async () => await api.client.call(operations.emuListEgress),
    [api],
    ['egress.call', 'egress.cleared'],
  );
  // Rules added or removed anywhere (the API, the CLI, another tab); a rule's hit count rises with the call it hit.
  const [faults, reloadFaults] = useLiveLoad(
    async () => (await api.client.call(operations.emuListFaults)).data,
    [api],
    ['fault.changed', 'egress.call'],
  );
  const [error, setError] = useState<unknown>(null);

  async function act(fn: () => Promise<unknown>, then: () => void) {
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    }
    then();
  }

  return (
    <>
      <PageHeader title="Egress">
        <div className="op-actions">
          <button type="button" className="op-btn" onClick={reloadLog}>
            Refresh
          </button>
          {log.state === 'ok' && log.data.data.length > 0 && (
            <ConfirmButton
              label="Clear log"
              question="Clear the egress log?"
              confirmLabel="Clear"
              small={false}
              onConfirm={() => act(() => api.client.call(operations.emuClearEgress), reloadLog)}
              testid="egress-clear"
            />
          )}
        </div>
      </PageHeader>
      <p className="op-intro">
        Every outbound call made by snippets (their own HTTP) and integrations passes the egress proxy: it is logged here, checked against
        the profile, and slowed or failed by the fault rules.
      </p>
      {error !== null && <ProblemNotice error={error} />}

      <EgressModeSwitch />

      <Show loaded={log}>{(l) => <Profile profile={l.profile} allow={l.allow} />}</Show>

      <section className="card" aria-labelledby="faults-title">
        <div className="op-card-head">
          <h2 id="faults-title">Fault rules</h2>
          <span className="op-hint">Latencies add up; the first failing rule decides. A rule with a count retires once spent.</span>
        </div>
        <FaultForm onAdded={reloadFaults} />
        <hr className="op-divider" />
        <Show loaded={faults}>
          {(rules) =>
            rules.length === 0 ? (
              <EmptyState title="No fault rules">Calls go through untouched. Add a rule above to slow down or fail a provider.</EmptyState>
            ) : (
              <div className="op-scroll">
                <table className="op-table" data-testid="faults-list">
                  <thead>
                    <tr>
                      <th>Target</th>
                      <th>Action</th>
                      <th>Applies to</th>
                      <th className="op-num">Hits</th>
                      <th className="op-hide-narrow">Added</th>
                      <th>
                        <span className="op-sr">Actions</span>
                      </th>
                    </tr>
                  </thead>
                  <tbody>
                    {rules.map((r) => (
                      <tr key={r.id} data-testid="fault-row" data-id={r.id}>
                        <td>
                          {r.host !== undefined ? (
                            <>
                              <span className="muted">host</span> <code>{r.host}</code>
                            </>
                          ) : (
                            <>
                              <span className="muted">integration</span> <code>{r.integration}</code>
                            </>
                          )}
                        </td>
                        <td>{describeAction(r.action)}</td>
                        <td className="op-nowrap">
                          {r.times === null ? 'every call' : `${Math.max(r.times - r.hits, 0)} more of ${r.times}`}
                        </td>
                        <td className="op-num">{r.hits}</td>
                        <td className="op-nowrap op-hide-narrow">{when(r.created_at)}</td>
                        <td className="op-row-actions">
                          <ConfirmButton
                            label="Delete"
                            question="Delete this rule?"
                            onConfirm={() => act(() => api.client.call(operations.emuRemoveFault, { params: { id: r.id } }), reloadFaults)}
                            testid="fault-delete"
                          />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )
          }
        </Show>
      </section>

      <section className="card" aria-labelledby="egress-log-title">
        <div className="op-card-head">
          <h2 id="egress-log-title">Log {log.state === 'ok' && <span className="muted">({log.data.data.length})</span>}</h2>
          <span className="op-hint">Newest first, the last 1000 · live</span>
        </div>
        <Show loaded={log}>
          {(l) =>
            l.data.length === 0 ? (
              <EmptyState title="No outbound calls yet">
                Invoke a snippet that calls out (<code>fetch</code>, <code>requests</code>, an integration): each call appears here with its
                status, size and time.
              </EmptyState>
            ) : (
              <div className="op-scroll">
                <table className="op-table" style={{ fontSize: 13 }} data-testid="egress-log">
                  <thead>
                    <tr>
                      <th>Time</th>
                      <th>Source</th>
                      <th>Invocation</th>
                      <th>Request</th>
                      <th>Status</th>
                      <th className="op-num">Sent / received</th>
                      <th className="op-num">Duration</th>
                      <th>Fault or refusal</th>
                    </tr>
                  </thead>
                  <tbody>
                    {l.data.map((e) => (
                      <LogRow key={e.id} e={e} />
                    ))}
                  </tbody>
                </table>
              </div>
            )
          }
        </Show>
      </section>
    </>
  );
}

const COLUMNS = 8;

/** One call: a row, plus a full-width line under it saying why it was refused or failed. */
function LogRow({ e }: { e: EgressEntry }) {
  const detail = e.refused ?? e.error;
  const cls = [e.refused ? 'op-refused' : '', detail ? 'op-has-detail' : ''].filter(Boolean).join(' ') || undefined;
  return (
    <>
      <tr className={cls} data-testid="egress-row" data-refused={e.refused ? 'true' : undefined}>
        <td className="op-nowrap" title={when(e.at)}>
          {clock(e.at)}
        </td>
        <td className="op-nowrap">
          {e.source}
          {e.integration && (
            <>
              {' '}
              <code>{e.integration}</code>
            </>
          )}
          <div className="op-hint">tenant {e.tenant ?? '—'}</div>
        </td>
        <td className="op-nowrap">
          {e.invocation_id ? (
            <a href={href('invocation', e.invocation_id)} title={e.invocation_id}>
              <code>{e.invocation_id.length > 14 ? `${e.invocation_id.slice(0, 12)}…` : e.invocation_id}</code>
            </a>
          ) : (
            <span className="muted">—</span>
          )}
        </td>
        <td>
          <code className="op-nowrap">
            <strong>{e.method}</strong> {e.host}:{e.port}
          </code>
          <div>
            {e.path ? (
              <code className="op-ellipsis op-hint" title={e.path}>
                {e.path}
              </code>
            ) : (
              <span className="op-hint" title="a tunnelled (HTTPS) call: the proxy sees the host, not the path">
                tunnelled, no path
              </span>
            )}
          </div>
        </td>
        <td>
          {e.status !== null ? (
            <span className={`op-pill ${statusClass(e.status)}`}>{e.status}</span>
          ) : (
            <span className="op-pill op-bad" title={e.error ?? undefined}>
              {e.refused ? 'refused' : 'no answer'}
            </span>
          )}
        </td>
        <td className="op-num">
          {size(e.bytes_out)} / {size(e.bytes_in)}
        </td>
        <td className="op-num">{Math.round(e.duration_ms).toLocaleString()} ms</td>
        <td>
          {e.fault && <span className="op-pill op-warn">{e.fault}</span>} {e.refused && <span className="op-pill op-bad">refused</span>}
          {!e.fault && !e.refused && <span className="muted">—</span>}
        </td>
      </tr>
      {detail && (
        <tr className={`op-detail ${e.refused ? 'op-refused' : ''}`} data-testid="egress-detail">
          <td colSpan={COLUMNS}>
            <span className={e.refused ? 'op-refused-text' : 'op-hint'}>
              {e.refused ? 'Refused: ' : 'Failed: '}
              {detail}
            </span>
          </td>
        </tr>
      )}
    </>
  );
}

function Profile({ profile, allow }: { profile: 'local' | 'production'; allow: string[] }) {
  return (
    <section className="card" aria-labelledby="egress-profile-title" data-testid="egress-profile">
      <div className="op-card-head">
        <h2 id="egress-profile-title">
          Profile <span className={`op-pill ${profile === 'production' ? 'op-info' : 'op-warn'}`}>{profile}</span>
        </h2>
        <span className="op-hint">
          Set at start: <code>svc-emu serve --egress-profile local|production --egress-allow HOST:PORT</code>
        </span>
      </div>
      <p style={{ margin: '0 0 10px' }}>
        {profile === 'production'
          ? 'As production: calls to private, loopback and link-local addresses are refused (and highlighted below), unless allowed.'
          : 'Local development: every destination is allowed, private and loopback ones included; a call production would refuse still goes through, and its invocation gets a parity warning.'}
      </p>
      <div className="op-actions">
        <span className="muted">Allowed despite the profile:</span>
        {allow.length === 0 ? (
          <span className="muted">nothing</span>
        ) : (
          <span className="op-chips" data-testid="egress-allow">
            {allow.map((a) => (
              <code key={a}>{a}</code>
            ))}
          </span>
        )}
      </div>
    </section>
  );
}

function FaultForm({ onAdded }: { onAdded: () => void }) {
  const { api } = useApp();
  const [kind, setKind] = useState<'host' | 'integration'>('host');
  const [target, setTarget] = useState('');
  const [action, setAction] = useState<FaultAction['type']>('latency');
  const [ms, setMs] = useState('2000');
  const [status, setStatus] = useState('503');
  const [body, setBody] = useState('');
  const [times, setTimes] = useState('');
  const [touched, setTouched] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const int = (s: string, min: number, max: number) => /^\d+$/.test(s.trim()) && Number(s) >= min && Number(s) <= max;
  const targetProblem = !target.trim()
    ? `Enter ${kind === 'host' ? 'a host' : 'an integration name'}.`
    : kind === 'host' && /[\s/:]/.test(target.trim())
      ? 'A host name only (no scheme, port or path), e.g. api.openai.com or *.example.com.'
      : null;
  const msProblem = action === 'latency' && !int(ms, 1, 600000) ? '1 to 600000 ms.' : null;
  const statusProblem = action === 'status' && !int(status, 400, 599) ? '400 to 599.' : null;
  const timesProblem = times.trim() === '' || int(times, 1, 2147483647) ? null : 'Empty, or 1 or more.';

  async function submit(e: FormEvent) {
    e.preventDefault();
    setTouched(true);
    if (targetProblem || msProblem || statusProblem || timesProblem) return;
    const act: FaultAction =
      action === 'latency'
        ? { type: 'latency', ms: Number(ms) }
        : action === 'status'
          ? { type: 'status', status: Number(status), ...(body ? { body } : {}) }
          : { type: action };
    setBusy(true);
    setError(null);
    try {
      await api.client.call(operations.emuAddFault, {
        body: {
          [kind]: target.trim(),
          action: act,
          ...(times.trim() ? { times: Number(times) } : {}),
        },
      });
      setTarget('');
      setTouched(false);
      onAdded();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form onSubmit={(e) => void submit(e)} noValidate data-testid="fault-form" aria-label="Add a fault rule">
      <div className="op-form">
        <fieldset className="op-radio-group" style={{ flex: '1 1 100%' }}>
          <legend>Applies to calls to</legend>
          <label>
            <input
              type="radio"
              name="fault-kind"
              checked={kind === 'host'}
              onChange={() => setKind('host')}
              data-testid="fault-kind-host"
            />{' '}
            a host
          </label>
          <label>
            <input
              type="radio"
              name="fault-kind"
              checked={kind === 'integration'}
              onChange={() => setKind('integration')}
              data-testid="fault-kind-integration"
            />{' '}
            an integration
          </label>
        </fieldset>
        <Field label={kind === 'host' ? 'Host' : 'Integration'} error={touched ? targetProblem : null}>
          {(p) => (
            <input
              {...p}
              value={target}
              onChange={(e) => setTarget(e.target.value)}
              placeholder={kind === 'host' ? 'api.openai.com or *.example.com' : 'weather'}
              spellCheck={false}
              autoComplete="off"
              data-testid="fault-target"
            />
          )}
        </Field>
        <Field label="Action" className="op-action">
          {(p) => (
            <select {...p} value={action} onChange={(e) => setAction(e.target.value as FaultAction['type'])} data-testid="fault-action">
              <option value="latency">Delay (latency)</option>
              <option value="status">Fail with a status</option>
              <option value="drop">Drop the connection</option>
              <option value="timeout">Hang (never answer)</option>
            </select>
          )}
        </Field>
        {action === 'latency' && (
          <Field label="Delay" className="op-narrow" error={msProblem}>
            {(p) => (
              <div className="op-unit-input">
                <input {...p} inputMode="numeric" value={ms} onChange={(e) => setMs(e.target.value)} data-testid="fault-ms" />
                <span className="op-unit">ms</span>
              </div>
            )}
          </Field>
        )}
        {action === 'status' && (
          <>
            <Field label="Status" className="op-narrow" error={statusProblem}>
              {(p) => (
                <input {...p} inputMode="numeric" value={status} onChange={(e) => setStatus(e.target.value)} data-testid="fault-status" />
              )}
            </Field>
            <Field label="Body (optional)">
              {(p) => (
                <input
                  {...p}
                  value={body}
                  onChange={(e) => setBody(e.target.value)}
                  placeholder='{"error": "overloaded"}'
                  spellCheck={false}
                  data-testid="fault-body"
                />
              )}
            </Field>
          </>
        )}
        <Field label="Times" className="op-narrow" error={timesProblem} hint="Empty: every call.">
          {(p) => <input {...p} inputMode="numeric" value={times} onChange={(e) => setTimes(e.target.value)} data-testid="fault-times" />}
        </Field>
        <div className="op-submit">
          <button type="submit" className="op-btn op-primary" disabled={busy} data-testid="fault-add">
            {busy ? 'Adding…' : 'Add rule'}
          </button>
        </div>
      </div>
      {error !== null && <ProblemNotice error={error} title="Could not add the rule" />}
    </form>
  );
}
