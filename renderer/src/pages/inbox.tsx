// The callback inbox: a built-in webhook receiver. `#/inbox` lists the inboxes; `#/inbox/{name}` shows
// one inbox's deliveries (newest first) with their signature check, the URL to use as callback_url, and
// what the inbox answers (to rehearse retries). Both show a delivery as it lands (the live feed's
// `inbox.delivery`), without polling.
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { href, navigate } from '../router';
import { EmptyState, Json, PageHeader, ProblemNotice, Show, when } from '../ui/kit';
import { useLiveLoad } from '../live-react';
import { ConfirmButton, CopyButton, Field } from '../ui/controls';
import type { InboxDelivery, InboxResponse } from '../types';
import './operator.css';

const INBOX_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const inboxUrl = (name: string) => `${window.location.origin}/_emu/inbox/${name}`;

/** "Answers 200", "Answers 500 to the next 2 deliveries, then 200; Retry-After: 30 s". */
function describeResponse(r: InboxResponse): string {
  let s = `Answers ${r.status}`;
  if (r.times != null) s += ` to the next ${r.times === 1 ? 'delivery' : `${r.times} deliveries`}, then 200`;
  if (r.retry_after_seconds != null && r.status >= 300) s += `; Retry-After: ${r.retry_after_seconds} s`;
  return s;
}

const statusClass = (status: number) => (status < 300 ? 'op-ok' : status < 500 ? 'op-warn' : 'op-bad');

export function Inbox({ params }: { params: string[] }) {
  const name = params[0];
  return name === undefined ? <InboxList /> : <InboxView name={name} />;
}

function InboxList() {
  const { api } = useApp();
  const [loaded] = useLiveLoad(async () => (await api.client.call(operations.emuListInboxes)).data, [api], ['inbox.delivery']);
  const [name, setName] = useState('');
  const [touched, setTouched] = useState(false);
  const problem = !name
    ? 'Enter a name.'
    : INBOX_NAME.test(name)
      ? null
      : 'Lower-case letters, digits and -, starting with a letter or digit.';

  function open(e: FormEvent) {
    e.preventDefault();
    setTouched(true);
    if (!problem) navigate('inbox', name);
  }

  return (
    <>
      <PageHeader title="Callback inbox" />
      <p className="op-intro">
        A built-in receiver for async callbacks. Point <code>callback_url</code> at <code>{inboxUrl('<name>')}</code> and every delivery is
        recorded here with its headers, body and whether its Standard Webhooks signature verifies; choose what the inbox answers to rehearse
        retries.
      </p>
      <section className="card" aria-labelledby="inbox-open-title">
        <div className="op-card-head">
          <h2 id="inbox-open-title">Open an inbox</h2>
          <span className="op-hint">Any name works: an inbox exists once something is delivered to it.</span>
        </div>
        <form className="op-form op-inline" onSubmit={open} noValidate data-testid="inbox-open-form">
          <Field label="Inbox name" className="op-medium" error={touched ? problem : null}>
            {(p) => (
              <input
                {...p}
                value={name}
                onChange={(e) => setName(e.target.value.toLowerCase())}
                placeholder="my-webhook"
                autoComplete="off"
                spellCheck={false}
                data-testid="inbox-name"
              />
            )}
          </Field>
          <div className="op-submit">
            <button type="submit" className="op-btn op-primary" data-testid="inbox-open">
              Open inbox
            </button>
          </div>
        </form>
      </section>
      <section className="card" aria-labelledby="inbox-list-title">
        <div className="op-card-head">
          <h2 id="inbox-list-title">Inboxes</h2>
          <span className="op-hint">Live</span>
        </div>
        <Show loaded={loaded}>
          {(inboxes) =>
            inboxes.length === 0 ? (
              <EmptyState title="No deliveries yet">
                Invoke a snippet with <code>X-Invoke-Mode: async</code> and <code>{`"callback_url": "${inboxUrl('my-webhook')}"`}</code> in
                the body, then open <em>my-webhook</em> here.
              </EmptyState>
            ) : (
              <div className="op-scroll">
                <table className="op-table" data-testid="inbox-list">
                  <thead>
                    <tr>
                      <th>Inbox</th>
                      <th className="op-num">Deliveries</th>
                      <th>Last delivery</th>
                      <th>Answers</th>
                    </tr>
                  </thead>
                  <tbody>
                    {inboxes.map((i) => (
                      <tr key={i.name} data-testid="inbox-row" data-name={i.name}>
                        <td>
                          <a href={href('inbox', i.name)}>{i.name}</a>
                        </td>
                        <td className="op-num">{i.deliveries}</td>
                        <td className="op-nowrap">{when(i.last_received_at)}</td>
                        <td>
                          <span className={`op-pill ${statusClass(i.response.status)}`}>{i.response.status}</span>{' '}
                          {i.response.times != null && <span className="op-hint">next {i.response.times}, then 200</span>}
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
    </>
  );
}

function InboxView({ name }: { name: string }) {
  const { api } = useApp();
  const valid = INBOX_NAME.test(name);
  const [loaded, reload] = useLiveLoad(
    async () => {
      if (!valid) return null;
      return await api.client.call(operations.emuGetInbox, { params: { name } });
    },
    [api, name],
    ['inbox.delivery'],
    (e) => e.type === 'inbox.delivery' && e.data.inbox === name,
  );
  const [expanded, setExpanded] = useState<Set<string>>(new Set());
  const opened = useRef(false);
  const [error, setError] = useState<unknown>(null);

  // The newest delivery starts open, the first time there is one.
  useEffect(() => {
    if (opened.current || loaded.state !== 'ok' || !loaded.data || loaded.data.data.length === 0) return;
    opened.current = true;
    setExpanded(new Set([loaded.data.data[0]!.id]));
  }, [loaded]);

  const toggle = (id: string) =>
    setExpanded((s) => {
      const n = new Set(s);
      if (n.has(id)) n.delete(id);
      else n.add(id);
      return n;
    });

  async function clear() {
    setError(null);
    try {
      await api.client.call(operations.emuClearInbox, { params: { name } });
    } catch (err) {
      setError(err);
    }
    reload();
  }

  return (
    <>
      <a className="op-back" href={href('inbox')}>
        ← Callback inbox
      </a>
      <PageHeader title={`Inbox ${name}`} />
      {!valid ? (
        <ProblemNotice
          error={new Error('An inbox name is lower-case letters, digits and -, starting with a letter or digit.')}
          title="Not an inbox name"
        />
      ) : (
        <>
          <section className="card" aria-labelledby="inbox-url-title">
            <div className="op-card-head">
              <h2 id="inbox-url-title">Callback URL</h2>
              <span className="op-hint">Use it as callback_url in an async invoke, or POST to it yourself.</span>
            </div>
            <div className="op-copyline">
              <code data-testid="inbox-url">{inboxUrl(name)}</code>
              <CopyButton text={inboxUrl(name)} testid="inbox-url-copy" />
            </div>
          </section>
          {error !== null && <ProblemNotice error={error} />}
          <Show loaded={loaded}>
            {(inbox) =>
              inbox && (
                <>
                  <ResponseForm key={JSON.stringify(inbox.response)} name={name} current={inbox.response} onSaved={reload} />
                  <section className="card" aria-labelledby="inbox-deliveries-title">
                    <div className="op-card-head">
                      <h2 id="inbox-deliveries-title">
                        Deliveries <span className="muted">({inbox.data.length})</span>
                      </h2>
                      <span className="op-actions">
                        <span className="op-hint">Newest first · live</span>
                        {inbox.data.length > 0 && (
                          <ConfirmButton
                            label="Clear"
                            question={`Clear every delivery of ${name}?`}
                            onConfirm={clear}
                            testid="inbox-clear"
                          />
                        )}
                      </span>
                    </div>
                    {inbox.data.length === 0 ? (
                      <EmptyState title="Nothing delivered yet">
                        Invoke a snippet asynchronously with this callback_url, or try it:{' '}
                        <code>{`curl -X POST -d '{"hello":1}' ${inboxUrl(name)}`}</code>
                      </EmptyState>
                    ) : (
                      <ul className="op-deliveries" data-testid="deliveries">
                        {inbox.data.map((d) => (
                          <Delivery key={d.id} delivery={d} open={expanded.has(d.id)} onToggle={() => toggle(d.id)} />
                        ))}
                      </ul>
                    )}
                  </section>
                </>
              )
            }
          </Show>
        </>
      )}
    </>
  );
}

const STATUSES: [number, string][] = [
  [200, '200 OK — accept'],
  [204, '204 No Content — accept'],
  [400, '400 Bad Request — retried'],
  [410, '410 Gone — stops the retries'],
  [429, '429 Too Many Requests — retried'],
  [500, '500 Internal Server Error — retried'],
  [502, '502 Bad Gateway — retried'],
  [503, '503 Service Unavailable — retried'],
];

function ResponseForm({ name, current, onSaved }: { name: string; current: InboxResponse; onSaved: () => void }) {
  const { api } = useApp();
  const known = STATUSES.some(([s]) => s === current.status);
  const [choice, setChoice] = useState(known ? String(current.status) : 'other');
  const [other, setOther] = useState(known ? '' : String(current.status));
  const [times, setTimes] = useState(current.times == null ? '' : String(current.times));
  const [retryAfter, setRetryAfter] = useState(current.retry_after_seconds == null ? '' : String(current.retry_after_seconds));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const statusText = choice === 'other' ? other.trim() : choice;
  const status = Number(statusText);
  const statusProblem = /^\d{3}$/.test(statusText) && status >= 200 && status <= 599 ? null : 'A status from 200 to 599.';
  const timesProblem = times.trim() === '' || (/^\d+$/.test(times.trim()) && Number(times) >= 1) ? null : 'Empty, or 1 or more.';
  const retryProblem =
    retryAfter.trim() === '' || (/^\d+$/.test(retryAfter.trim()) && Number(retryAfter) <= 86400) ? null : '0 to 86400 seconds.';
  const isDefault = current.status === 200 && current.times == null && current.retry_after_seconds == null;

  async function put(body: InboxResponse) {
    setBusy(true);
    setError(null);
    try {
      await api.client.call(operations.emuSetInboxResponse, { params: { name }, body });
      onSaved();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  function submit(e: FormEvent) {
    e.preventDefault();
    if (statusProblem || timesProblem || retryProblem) return;
    void put({
      status,
      times: times.trim() ? Number(times) : null,
      retry_after_seconds: retryAfter.trim() && status >= 300 ? Number(retryAfter) : null,
    });
  }

  return (
    <section className="card" aria-labelledby="inbox-answer-title">
      <div className="op-card-head">
        <h2 id="inbox-answer-title">What the inbox answers</h2>
        <span className={`op-pill ${statusClass(current.status)}`} data-testid="inbox-answer">
          {describeResponse(current)}
        </span>
      </div>
      <form className="op-form" onSubmit={submit} noValidate data-testid="inbox-response-form">
        <Field label="Status" hint="Non-2xx answers make the service retry (with backoff, for at least 24 h).">
          {(p) => (
            <select {...p} value={choice} onChange={(e) => setChoice(e.target.value)} data-testid="inbox-status">
              {STATUSES.map(([s, label]) => (
                <option key={s} value={String(s)}>
                  {label}
                </option>
              ))}
              <option value="other">Other…</option>
            </select>
          )}
        </Field>
        {choice === 'other' && (
          <Field label="Other status" className="op-narrow" error={statusProblem}>
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                value={other}
                onChange={(e) => setOther(e.target.value)}
                placeholder="418"
                data-testid="inbox-status-other"
              />
            )}
          </Field>
        )}
        <Field label="Times" className="op-narrow" error={timesProblem} hint="Deliveries; empty: until changed.">
          {(p) => <input {...p} inputMode="numeric" value={times} onChange={(e) => setTimes(e.target.value)} data-testid="inbox-times" />}
        </Field>
        <Field
          label="Retry-After"
          className="op-narrow"
          error={retryProblem}
          hint={status >= 300 ? 'Optional header.' : 'With a non-2xx status.'}
        >
          {(p) => (
            <div className="op-unit-input">
              <input
                {...p}
                inputMode="numeric"
                value={retryAfter}
                onChange={(e) => setRetryAfter(e.target.value)}
                disabled={status < 300}
                data-testid="inbox-retry-after"
              />
              <span className="op-unit">s</span>
            </div>
          )}
        </Field>
        <div className="op-submit op-actions">
          <button type="submit" className="op-btn op-primary" disabled={busy} data-testid="inbox-response-save">
            Set answer
          </button>
          {!isDefault && (
            <button
              type="button"
              className="op-btn"
              disabled={busy}
              onClick={() => void put({ status: 200, times: null, retry_after_seconds: null })}
            >
              Back to 200
            </button>
          )}
        </div>
      </form>
      {error !== null && <ProblemNotice error={error} title="Could not set the answer" />}
    </section>
  );
}

/** The invocation a delivery is about, when its body is an invocation record. */
function invocationOf(d: InboxDelivery): { id: string; outcome: string | null } | null {
  const j = d.json;
  if (typeof j !== 'object' || j === null) return null;
  const rec = j as Record<string, unknown>;
  if (typeof rec.id !== 'string' || !rec.id.startsWith('inv_')) return null;
  return { id: rec.id, outcome: typeof rec.outcome === 'string' ? rec.outcome : null };
}

function SignaturePill({ sig }: { sig: InboxDelivery['signature'] }) {
  if (sig.verified)
    return (
      <span className="op-pill op-ok" data-testid="signature">
        signature verified · tenant {sig.tenant ?? '?'}
      </span>
    );
  return (
    <span className="op-pill op-warn" data-testid="signature" title={sig.reason ?? undefined}>
      not verified: {sig.reason ?? 'unknown reason'}
    </span>
  );
}

function Delivery({ delivery: d, open, onToggle }: { delivery: InboxDelivery; open: boolean; onToggle: () => void }) {
  const inv = invocationOf(d);
  const bodyId = `delivery-${d.id}`;
  return (
    <li className="op-delivery" data-testid="delivery" data-id={d.id}>
      <button type="button" className="op-delivery-head" aria-expanded={open} aria-controls={bodyId} onClick={onToggle}>
        <span className="op-chevron" aria-hidden="true">
          {open ? '▾' : '▸'}
        </span>
        <span className="op-nowrap" title={d.received_at}>
          {when(d.received_at)}
        </span>
        <code>
          {d.method}
          {d.query ? `?${d.query.replace(/^\?/, '')}` : ''}
        </code>
        <span className={`op-pill ${statusClass(d.answered)}`} data-testid="answered">
          answered {d.answered}
        </span>
        <SignaturePill sig={d.signature} />
        {inv && (
          <span className="op-hint">
            <code>{inv.id}</code>
            {inv.outcome ? ` · ${inv.outcome}` : ''}
          </span>
        )}
      </button>
      {open && (
        <div className="op-delivery-body" id={bodyId}>
          {inv && (
            <p style={{ margin: '12px 0 0' }}>
              About invocation <a href={href('invocation', inv.id)}>{inv.id}</a>
              {d.headers['webhook-id'] && (
                <span className="op-hint">
                  {' '}
                  · webhook-id <code>{d.headers['webhook-id']}</code> (the same on every retry)
                </span>
              )}
            </p>
          )}
          {!d.signature.verified && d.signature.reason && (
            <p className="op-hint" style={{ margin: '12px 0 0' }}>
              Signature not verified: {d.signature.reason}. A delivery from the service carries <code>webhook-id</code>,{' '}
              <code>webhook-timestamp</code> and <code>webhook-signature</code> signed with the tenant's secret (
              <code>GET /v1/tenant/webhook-secret</code>).
            </p>
          )}
          <h3>Body{d.body_truncated ? ' (first 256 KiB)' : ''}</h3>
          {d.json !== null && d.json !== undefined ? (
            <Json value={d.json} />
          ) : d.body ? (
            <pre className="json">{d.body}</pre>
          ) : (
            <p className="muted" style={{ margin: 0 }}>
              (empty)
            </p>
          )}
          <h3>Headers</h3>
          <div className="op-scroll">
            <table className="op-headers">
              <tbody>
                {Object.entries(d.headers).map(([k, v]) => (
                  <tr key={k}>
                    <td>{k}</td>
                    <td>{v}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </div>
      )}
    </li>
  );
}
