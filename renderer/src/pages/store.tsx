// The local tenant's store (what @svc/store / svc.store read and write): keys by prefix, a value, set
// a JSON value with an optional TTL, delete.
import { useEffect, useRef, useState, type FormEvent, type RefObject } from 'react';
import { operations, ProblemError } from '../api';
import { useApp } from '../context';
import { EmptyState, Json, PageHeader, ProblemNotice, Show, when } from '../ui/kit';
import { useLiveEvent, useLiveLoad } from '../live-react';
import { ConfirmButton, Field } from '../ui/controls';
import type { StoreEntry, StoreKeyInfo } from '../types';
import './operator.css';

const PAGE = 100;
const KEY_RULE = /^[\x21-\x7e]{1,512}$/;

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(2)} MiB`;
}

/** "in 4 min", "in 2 h", "in 3 d" (or "now" once past). */
function fromNow(iso: string): string {
  const s = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  if (s <= 0) return 'now';
  if (s < 90) return `in ${s} s`;
  if (s < 90 * 60) return `in ${Math.round(s / 60)} min`;
  if (s < 36 * 3600) return `in ${Math.round(s / 3600)} h`;
  return `in ${Math.round(s / 86400)} d`;
}

export function Store(_props: { params: string[] }) {
  const { api } = useApp();
  const [prefixInput, setPrefixInput] = useState('');
  const [prefix, setPrefix] = useState('');
  const [more, setMore] = useState<{ keys: StoreKeyInfo[]; cursor: string | null } | null>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  const [selected, setSelected] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [flash, setFlash] = useState<string | null>(null);
  const editorRef = useRef<HTMLTextAreaElement>(null);
  const [draft, setDraft] = useState<{ key: string; value: string; ttl: string; stamp: number }>({ key: '', value: '', ttl: '', stamp: 0 });

  // The prefix filter applies as you type, after a short pause.
  useEffect(() => {
    const t = window.setTimeout(() => setPrefix(prefixInput), 250);
    return () => window.clearTimeout(t);
  }, [prefixInput]);

  // Keys written by snippets (`store.set`) or the API show as they change: the feed names the key.
  const [first, reloadList] = useLiveLoad(
    async () => {
      setMore(null);
      return await api.client.call(operations.listStoreKeys, { query: { limit: String(PAGE), prefix } });
    },
    [api, prefix],
    ['store.changed'],
    (e) => e.type === 'store.changed' && e.data.key.startsWith(prefix),
  );

  const [detail, reloadDetail] = useLiveLoad(
    async () => {
      if (selected === null) return null;
      try {
        return await api.client.call(operations.getStoreValue, { params: { key: selected } });
      } catch (err) {
        if (err instanceof ProblemError && err.status === 404) return 'missing' as const;
        throw err;
      }
    },
    [api, selected],
    ['store.changed'],
    (e) => e.type === 'store.changed' && e.data.key === selected && !e.data.deleted,
  );
  // The key shown was deleted (here, by a snippet, by its TTL): nothing to show or read again.
  useLiveEvent(['store.changed'], (e) => e.type === 'store.changed' && e.data.deleted && e.data.key === selected && setSelected(null));

  async function loadMore(cursor: string) {
    setLoadingMore(true);
    try {
      const page = await api.client.call(operations.listStoreKeys, { query: { limit: String(PAGE), prefix, cursor } });
      setMore((m) => ({ keys: [...(m?.keys ?? []), ...page.data], cursor: page.next_cursor }));
    } catch (err) {
      setError(err);
    } finally {
      setLoadingMore(false);
    }
  }

  async function remove(key: string) {
    setError(null);
    try {
      await api.client.call(operations.deleteStoreValue, { params: { key } });
      setFlash(`Deleted ${key}.`);
      if (selected === key) setSelected(null);
    } catch (err) {
      setError(err);
    }
    reloadList();
  }

  function edit(entry: StoreEntry) {
    setDraft({ key: entry.key, value: JSON.stringify(entry.value, null, 2), ttl: '', stamp: Date.now() });
    setFlash(null);
    window.setTimeout(() => {
      editorRef.current?.focus();
      editorRef.current?.scrollIntoView({ block: 'center' });
    }, 0);
  }

  const keys = first.state === 'ok' ? [...first.data.data, ...(more?.keys ?? [])] : [];
  const cursor = first.state === 'ok' ? (more ? more.cursor : first.data.next_cursor) : null;

  return (
    <>
      <PageHeader title="Store" />
      <p className="op-intro">
        The local tenant's key–value store: what snippets read and write with <code>@svc/store</code> (Bun) and <code>svc.store</code>{' '}
        (Python). Values are any JSON; a TTL makes a key expire.
      </p>
      {error !== null && <ProblemNotice error={error} />}
      <div className="op-split">
        <section className="card" aria-labelledby="store-keys-title">
          <div className="op-card-head">
            <h2 id="store-keys-title">Keys</h2>
            <button type="button" className="op-btn op-small" onClick={reloadList}>
              Refresh
            </button>
          </div>
          <div className="op-form" style={{ marginBottom: 12 }}>
            <Field label="Prefix" className="op-wide">
              {(p) => (
                <input
                  {...p}
                  type="search"
                  value={prefixInput}
                  onChange={(e) => setPrefixInput(e.target.value)}
                  placeholder="e.g. user: (empty: every key)"
                  spellCheck={false}
                  data-testid="store-prefix"
                />
              )}
            </Field>
          </div>
          <Show loaded={first}>
            {() =>
              keys.length === 0 ? (
                prefix ? (
                  <EmptyState title={`No key starts with “${prefix}”`}>Clear the prefix to see every key.</EmptyState>
                ) : (
                  <EmptyState title="The store is empty">
                    Set a value with the form, or from a snippet: <code>await store.set("visits", 1)</code>.
                  </EmptyState>
                )
              ) : (
                <>
                  <div className="op-scroll">
                    <table className="op-table" data-testid="store-keys">
                      <thead>
                        <tr>
                          <th>Key</th>
                          <th className="op-num">Size</th>
                          <th>Expires</th>
                        </tr>
                      </thead>
                      <tbody>
                        {keys.map((k) => (
                          <tr
                            key={k.key}
                            className={selected === k.key ? 'op-selected' : undefined}
                            data-testid="store-row"
                            data-key={k.key}
                          >
                            <td>
                              <button
                                type="button"
                                className="op-linkbtn"
                                onClick={() => (selected === k.key ? reloadDetail() : setSelected(k.key))}
                                aria-pressed={selected === k.key}
                                title={`Last set ${when(k.updated_at)}`}
                              >
                                <code>{k.key}</code>
                              </button>
                            </td>
                            <td className="op-num">{bytes(k.size)}</td>
                            <td className="op-nowrap">
                              {k.expires_at ? (
                                <span title={when(k.expires_at)}>{fromNow(k.expires_at)}</span>
                              ) : (
                                <span className="muted">never</span>
                              )}
                            </td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                  </div>
                  {cursor && (
                    <div className="op-actions" style={{ marginTop: 12 }}>
                      <button type="button" className="op-btn" onClick={() => void loadMore(cursor)} disabled={loadingMore}>
                        {loadingMore ? 'Loading…' : 'Load more'}
                      </button>
                    </div>
                  )}
                </>
              )
            }
          </Show>
        </section>

        <div>
          {selected !== null && (
            <section className="card" aria-labelledby="store-value-title" data-testid="store-detail">
              <div className="op-card-head">
                <h2 id="store-value-title" style={{ overflowWrap: 'anywhere' }}>
                  <code>{selected}</code>
                </h2>
                <button type="button" className="op-btn op-small" onClick={() => setSelected(null)} aria-label="Close the value">
                  Close
                </button>
              </div>
              <Show loaded={detail}>
                {(entry) =>
                  entry === null ? null : entry === 'missing' ? (
                    <EmptyState title="This key no longer exists">It expired or was deleted.</EmptyState>
                  ) : (
                    <>
                      <dl style={{ marginBottom: 12 }}>
                        <dt>Last set</dt>
                        <dd>{when(entry.updated_at)}</dd>
                        <dt>Expires</dt>
                        <dd>{entry.expires_at ? `${when(entry.expires_at)} (${fromNow(entry.expires_at)})` : 'never'}</dd>
                      </dl>
                      <div data-testid="store-value">
                        <Json value={entry.value} />
                      </div>
                      <div className="op-actions">
                        <button type="button" className="op-btn" onClick={() => edit(entry)} data-testid="store-edit">
                          Edit
                        </button>
                        <ConfirmButton
                          label="Delete"
                          question={`Delete ${entry.key}?`}
                          onConfirm={() => remove(entry.key)}
                          testid="store-delete"
                          small={false}
                        />
                      </div>
                    </>
                  )
                }
              </Show>
            </section>
          )}
          <StoreEditor
            key={draft.stamp}
            draft={draft}
            editorRef={editorRef}
            onSaved={(key, created) => {
              setFlash(`${created ? 'Created' : 'Updated'} ${key}.`);
              if (selected === key) reloadDetail();
              else setSelected(key);
              reloadList();
            }}
            onEdit={() => setFlash(null)}
            flash={flash}
          />
        </div>
      </div>
    </>
  );
}

function StoreEditor({
  draft,
  editorRef,
  onSaved,
  onEdit,
  flash,
}: {
  draft: { key: string; value: string; ttl: string };
  flash: string | null;
  editorRef: RefObject<HTMLTextAreaElement | null>;
  onSaved: (key: string, created: boolean) => void;
  onEdit: () => void;
}) {
  const { api } = useApp();
  const [key, setKey] = useState(draft.key);
  const [value, setValue] = useState(draft.value);
  const [ttl, setTtl] = useState(draft.ttl);
  const [touched, setTouched] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const keyProblem = !key ? 'Enter a key.' : KEY_RULE.test(key) ? null : 'Printable ASCII without spaces, at most 512 characters.';
  let parsed: { ok: true; value: unknown } | { ok: false; message: string };
  try {
    parsed = value.trim()
      ? { ok: true, value: JSON.parse(value) }
      : { ok: false, message: 'Enter a JSON value, e.g. {"count": 1}, "text" or 42.' };
  } catch (err) {
    parsed = { ok: false, message: `Not JSON: ${(err as Error).message}` };
  }
  const ttlProblem =
    ttl.trim() === '' || (/^\d+$/.test(ttl.trim()) && Number(ttl) >= 1 && Number(ttl) <= 315360000) ? null : 'Whole seconds, 1 or more.';

  async function submit(e: FormEvent) {
    e.preventDefault();
    setTouched(true);
    if (keyProblem || !parsed.ok || ttlProblem) return;
    setBusy(true);
    setError(null);
    try {
      const body = { value: parsed.value, ...(ttl.trim() ? { ttl_seconds: Number(ttl) } : {}) };
      const res = await api.client.request(operations.putStoreValue, { params: { key }, body });
      setTouched(false);
      onSaved(key, res.status === 201);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  const change = (set: (v: string) => void) => (e: { target: { value: string } }) => {
    set(e.target.value);
    onEdit();
  };

  return (
    <section className="card" aria-labelledby="store-set-title">
      <div className="op-card-head">
        <h2 id="store-set-title">Set a value</h2>
        <span className="op-hint">Setting a key that exists replaces its value.</span>
      </div>
      <form onSubmit={(e) => void submit(e)} data-testid="store-form" noValidate>
        <div className="op-form">
          <Field label="Key" error={touched ? keyProblem : null}>
            {(p) => (
              <input
                {...p}
                value={key}
                onChange={change(setKey)}
                placeholder="counter:visits"
                spellCheck={false}
                autoComplete="off"
                data-testid="store-key"
              />
            )}
          </Field>
          <Field label="TTL" className="op-narrow" error={ttlProblem} hint="Empty: never expires.">
            {(p) => (
              <div className="op-unit-input">
                <input {...p} inputMode="numeric" value={ttl} onChange={change(setTtl)} data-testid="store-ttl" />
                <span className="op-unit">seconds</span>
              </div>
            )}
          </Field>
          <Field label="Value (JSON)" className="op-wide" error={touched || value.trim() ? (parsed.ok ? null : parsed.message) : null}>
            {(p) => (
              <textarea
                {...p}
                ref={editorRef}
                value={value}
                onChange={change(setValue)}
                placeholder={'{\n  "count": 1\n}'}
                spellCheck={false}
                rows={6}
                data-testid="store-json"
              />
            )}
          </Field>
        </div>
        <div className="op-actions" style={{ marginTop: 12 }}>
          <button type="submit" className="op-btn op-primary" disabled={busy} data-testid="store-save">
            {busy ? 'Saving…' : 'Save value'}
          </button>
        </div>
        {flash && (
          <p className="op-flash" role="status" data-testid="store-flash">
            {flash}
          </p>
        )}
        {error !== null && <ProblemNotice error={error} title="Could not save the value" />}
      </form>
    </section>
  );
}
