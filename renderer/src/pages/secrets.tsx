// Secrets of the local tenant: names and times, never values. A value goes from the password input
// straight into the PUT body: it is never kept in React state, never rendered, and the input is
// uncontrolled (so React never mirrors it into a `value` attribute) and emptied after saving.
import { useRef, useState, type FormEvent } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { EmptyState, PageHeader, ProblemNotice, Show, when } from '../ui/kit';
import { useLiveLoad } from '../live-react';
import { ConfirmButton, Field } from '../ui/controls';
import type { SecretInfo, SecretPage } from '../types';
import './operator.css';

/** Why `name` is not a valid secret name, or null. The same rule as the core: `[A-Z_][A-Z0-9_]*`, not `SVC_…`. */
export function secretNameProblem(name: string): string | null {
  if (!name) return 'Enter a name.';
  if (name.length > 128) return 'At most 128 characters.';
  if (!/^[A-Z_][A-Z0-9_]*$/.test(name)) return 'Capital letters, digits and _ only, not starting with a digit (like OPENAI_API_KEY).';
  if (name.startsWith('SVC_')) return 'Names starting with SVC_ are reserved for the service.';
  return null;
}

export function Secrets(_props: { params: string[] }) {
  const { api } = useApp();
  // Secrets set or deleted elsewhere (the API, another tab) show as they change (the event carries names only).
  const [loaded, reload] = useLiveLoad(
    async () => {
      const all: SecretInfo[] = [];
      let cursor: string | null = null;
      do {
        const page: SecretPage = await api.client.call(operations.listSecrets, { query: { limit: '1000', ...(cursor ? { cursor } : {}) } });
        all.push(...page.data);
        cursor = page.next_cursor;
      } while (cursor && all.length < 10_000);
      return all;
    },
    [api],
    ['secret.changed'],
  );
  const [name, setName] = useState('');
  const [touched, setTouched] = useState(false);
  const [valueProblem, setValueProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [flash, setFlash] = useState<string | null>(null);
  const valueRef = useRef<HTMLInputElement>(null);

  const names = loaded.state === 'ok' ? new Set(loaded.data.map((s) => s.name)) : new Set<string>();
  const exists = names.has(name);
  const nameProblem = secretNameProblem(name);

  async function save(e: FormEvent) {
    e.preventDefault();
    setTouched(true);
    setFlash(null);
    const input = valueRef.current;
    const empty = !input || input.value.length === 0;
    setValueProblem(empty ? 'Enter a value.' : null);
    if (nameProblem || empty || !input) return;
    setBusy(true);
    setError(null);
    try {
      const res = await api.client.request(operations.putSecret, { params: { name }, body: { value: input.value } });
      input.value = '';
      setFlash(
        `${res.status === 201 ? 'Saved' : 'Replaced'} ${name}. Snippets get it as an environment variable from their next invocation.`,
      );
      setName('');
      setTouched(false);
      reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  async function remove(secret: string) {
    setError(null);
    setFlash(null);
    try {
      await api.client.call(operations.deleteSecret, { params: { name: secret } });
      setFlash(`Deleted ${secret}.`);
    } catch (err) {
      setError(err);
    }
    reload();
  }

  function startReplace(secret: string) {
    setName(secret);
    setTouched(false);
    setFlash(null);
    valueRef.current?.focus();
    valueRef.current?.scrollIntoView({ block: 'center' });
  }

  return (
    <>
      <PageHeader title="Secrets" />
      <p className="op-intro">
        The local tenant's secrets, injected as environment variables at invoke time (<code>process.env.NAME</code> in Bun,{' '}
        <code>os.environ["NAME"]</code> in Python) and named by integrations as their credential. Values are write-only: nobody reads them
        back, not here and not over <code>/v1</code>.
      </p>

      <section className="card" aria-labelledby="secret-form-title">
        <div className="op-card-head">
          <h2 id="secret-form-title">{exists ? `Replace ${name}` : 'Set a secret'}</h2>
          <span className="op-hint">Saving a name that exists replaces its value.</span>
        </div>
        <form className="op-form op-inline" onSubmit={(e) => void save(e)} data-testid="secret-form" noValidate autoComplete="off">
          <Field label="Name" error={touched || name ? nameProblem : null}>
            {(p) => (
              <input
                {...p}
                value={name}
                onChange={(e) => {
                  setName(e.target.value.toUpperCase());
                  setFlash(null);
                }}
                placeholder="OPENAI_API_KEY"
                autoComplete="off"
                spellCheck={false}
                maxLength={128}
                data-testid="secret-name"
              />
            )}
          </Field>
          <Field label="Value" error={valueProblem}>
            {(p) => (
              <input
                {...p}
                ref={valueRef}
                type="password"
                autoComplete="new-password"
                spellCheck={false}
                onChange={() => valueProblem && setValueProblem(null)}
                data-testid="secret-value"
              />
            )}
          </Field>
          <div className="op-submit">
            <button type="submit" className="op-btn op-primary" disabled={busy} data-testid="secret-save">
              {busy ? 'Saving…' : exists ? 'Replace secret' : 'Save secret'}
            </button>
          </div>
        </form>
        {flash && (
          <p className="op-flash" role="status" data-testid="secret-flash">
            {flash}
          </p>
        )}
        {error !== null && <ProblemNotice error={error} />}
      </section>

      <section className="card" aria-labelledby="secret-list-title">
        <div className="op-card-head">
          <h2 id="secret-list-title">Secrets of tenant local</h2>
          {loaded.state === 'ok' && (
            <span className="op-hint">{loaded.data.length === 1 ? '1 secret' : `${loaded.data.length} secrets`}</span>
          )}
        </div>
        <Show loaded={loaded}>
          {(secrets) =>
            secrets.length === 0 ? (
              <EmptyState title="No secrets yet">Set one above: give it a name like OPENAI_API_KEY and paste the value.</EmptyState>
            ) : (
              <div className="op-scroll">
                <table className="op-table" data-testid="secrets-list">
                  <thead>
                    <tr>
                      <th>Name</th>
                      <th className="op-hide-narrow">Created</th>
                      <th>Last set</th>
                      <th>
                        <span className="op-sr">Actions</span>
                      </th>
                    </tr>
                  </thead>
                  <tbody>
                    {secrets.map((s) => (
                      <tr key={s.name} data-testid="secret-row" data-name={s.name}>
                        <td>
                          <code>{s.name}</code>
                        </td>
                        <td className="op-nowrap op-hide-narrow">{when(s.created_at)}</td>
                        <td className="op-nowrap">{when(s.updated_at)}</td>
                        <td className="op-row-actions">
                          <span className="op-actions" style={{ justifyContent: 'flex-end' }}>
                            <button
                              type="button"
                              className="op-btn op-small"
                              onClick={() => startReplace(s.name)}
                              data-testid="secret-replace"
                            >
                              Replace
                            </button>
                            <ConfirmButton
                              label="Delete"
                              question={`Delete ${s.name}?`}
                              onConfirm={() => remove(s.name)}
                              testid="secret-delete"
                            />
                          </span>
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
