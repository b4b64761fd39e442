// Tenants and caps: the operator's powers production keeps out of band — create a tenant, change its
// caps, issue it an API key (shown once).
import { useState, type FormEvent } from 'react';
import { operations } from '../api';
import type { CreatedKey, RuntimeLimits, TenantInfo } from '../types';
import { useApp } from '../context';
import { EmptyState, PageHeader, ProblemNotice, Show, when } from '../ui/kit';
import { useLiveLoad } from '../live-react';
import { Field, OnceBox } from '../ui/controls';
import './operator.css';

// ---- the page ---------------------------------------------------------------------------------

type Caps = RuntimeLimits;
type CapField = keyof Caps;

const CAP_FIELDS: { field: CapField; label: string; unit: string; hint: string }[] = [
  { field: 'timeout_ms', label: 'Timeout cap', unit: 'ms', hint: 'Bounds a version’s timeout_ms' },
  { field: 'max_memory_mb', label: 'Memory cap', unit: 'MB', hint: 'Bounds a version’s max_memory_mb' },
  { field: 'max_cpu_percent', label: 'CPU cap', unit: '% of a core', hint: 'Bounds a version’s max_cpu_percent' },
  { field: 'max_concurrency', label: 'Max concurrency', unit: 'runs at once', hint: 'One more run is answered 429' },
];

const TENANT_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** 900000 → "15 min", 90000 → "1.5 min", 4000 → "4 s". */

function humanMs(n: number): string | null {
  if (!Number.isFinite(n) || n < 1000) return null;
  if (n < 60_000) return `${+(n / 1000).toFixed(1)} s`;
  if (n < 3_600_000) return `${+(n / 60_000).toFixed(1)} min`;
  return `${+(n / 3_600_000).toFixed(2)} h`;
}

export function Tenants(_props: { params: string[] }) {
  const { api } = useApp();
  // Tenants and caps changed anywhere (`svc-emu tenant`, another tab) show as they change.
  const [loaded, reload] = useLiveLoad(async () => (await api.client.call(operations.emuListTenants)).data, [api], ['tenant.changed']);
  return (
    <>
      <PageHeader title="Tenants and caps" />
      <p className="op-intro">
        The operator's powers: production's operators create tenants, set their caps and issue API keys out of band; in the emulator you
        play operator (the same as <code>svc-emu tenant</code> and <code>svc-emu key create</code>). A version asking for more than a cap is
        refused with <code>limit_exceeds_tenant_cap</code>.
      </p>
      <CreateTenant onCreated={reload} />
      <Show loaded={loaded}>
        {(tenants) =>
          tenants.length === 0 ? (
            <EmptyState title="No tenants">Create one above.</EmptyState>
          ) : (
            <div data-testid="tenant-list">
              {tenants.map((t) => (
                <TenantCard key={t.name} tenant={t} onChanged={reload} />
              ))}
            </div>
          )
        }
      </Show>
    </>
  );
}

function CreateTenant({ onCreated }: { onCreated: () => void }) {
  const { api } = useApp();
  const [name, setName] = useState('');
  const [touched, setTouched] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [created, setCreated] = useState<string | null>(null);
  const problem = !name
    ? 'Enter a name.'
    : TENANT_NAME.test(name)
      ? null
      : 'Lower-case letters, digits and -, starting with a letter or digit (at most 63).';

  async function submit(e: FormEvent) {
    e.preventDefault();
    setTouched(true);
    if (problem) return;
    setBusy(true);
    setError(null);
    try {
      await api.client.call(operations.emuCreateTenant, { body: { name } });
      setCreated(name);
      setName('');
      setTouched(false);
      onCreated();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <section className="card" aria-labelledby="create-tenant-title">
      <div className="op-card-head">
        <h2 id="create-tenant-title">Create a tenant</h2>
        <span className="op-hint">Lower-case letters, digits and -. It starts with the default caps and no API key.</span>
      </div>
      <form className="op-form op-inline" onSubmit={(e) => void submit(e)} data-testid="tenant-create-form" noValidate>
        <Field label="Tenant name" className="op-medium" error={touched ? problem : null}>
          {(p) => (
            <input
              {...p}
              value={name}
              onChange={(e) => {
                setName(e.target.value.toLowerCase());
                setCreated(null);
              }}
              autoComplete="off"
              spellCheck={false}
              data-testid="tenant-name"
            />
          )}
        </Field>
        <div className="op-submit">
          <button type="submit" className="op-btn op-primary" disabled={busy} data-testid="tenant-create">
            {busy ? 'Creating…' : 'Create tenant'}
          </button>
        </div>
      </form>
      {created && (
        <p className="op-flash" role="status" data-testid="tenant-created">
          Created tenant <strong>{created}</strong>. Issue it an API key below to call <code>/v1</code> as it.
        </p>
      )}
      {error !== null && <ProblemNotice error={error} title="Could not create the tenant" />}
    </section>
  );
}

function TenantCard({ tenant, onChanged }: { tenant: TenantInfo; onChanged: () => void }) {
  const { api } = useApp();
  const [issued, setIssued] = useState<CreatedKey | null>(null);
  const [issuing, setIssuing] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);

  async function issueKey() {
    setIssuing(true);
    setError(null);
    try {
      setIssued(await api.client.call(operations.emuCreateTenantKey, { params: { name: tenant.name } }));
      onChanged();
    } catch (err) {
      setError(err);
    } finally {
      setIssuing(false);
    }
  }

  return (
    <section className="card" data-testid="tenant-card" data-tenant={tenant.name} aria-labelledby={`tenant-${tenant.name}`}>
      <div className="op-card-head">
        <h2 id={`tenant-${tenant.name}`}>{tenant.name}</h2>
        {tenant.name === 'local' && <span className="op-pill op-info">the GUI and workspace act as this tenant</span>}
      </div>
      <div className="op-tenant-meta">
        <span>
          id <code>{tenant.id}</code>
        </span>
        <span>created {when(tenant.created_at)}</span>
      </div>

      <CapsForm
        key={JSON.stringify(tenant.caps)}
        tenant={tenant}
        onSaved={() => {
          setSaved(true);
          onChanged();
        }}
        onEdit={() => setSaved(false)}
      />
      {saved && (
        <p className="op-flash" role="status" data-testid="caps-saved">
          Caps saved: versions of {tenant.name} created from now on are checked against them; max concurrency applies at once.
        </p>
      )}

      <hr className="op-divider" />
      <div className="op-card-head">
        <h3 style={{ margin: 0, fontSize: '0.95rem' }}>API keys</h3>
        <button type="button" className="op-btn" onClick={() => void issueKey()} disabled={issuing} data-testid="issue-key">
          {issuing ? 'Issuing…' : 'Issue an API key'}
        </button>
      </div>
      {tenant.keys.length === 0 ? (
        <p className="muted" style={{ margin: 0 }}>
          No keys yet: nobody can call <code>/v1</code> as {tenant.name} until you issue one.
        </p>
      ) : (
        <ul className="op-keys" aria-label={`API keys of ${tenant.name}`} data-testid="tenant-keys">
          {tenant.keys.map((k) => (
            <li key={k.id} title={`issued ${when(k.created_at)}`}>
              <code>{k.prefix}…</code>
            </li>
          ))}
        </ul>
      )}
      {issued && (
        <OnceBox title={`New API key for ${issued.tenant}`} value={issued.key} onDismiss={() => setIssued(null)} testid="issued-key" />
      )}
      {error !== null && <ProblemNotice error={error} title="Could not issue a key" />}
    </section>
  );
}

function CapsForm({ tenant, onSaved, onEdit }: { tenant: TenantInfo; onSaved: () => void; onEdit: () => void }) {
  const { api } = useApp();
  const initial = Object.fromEntries(CAP_FIELDS.map(({ field }) => [field, String(tenant.caps[field])])) as Record<CapField, string>;
  const [values, setValues] = useState(initial);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const problems = Object.fromEntries(
    CAP_FIELDS.map(({ field }) => {
      const v = values[field].trim();
      return [field, /^\d{1,10}$/.test(v) && Number(v) >= 1 && Number(v) <= 2147483647 ? null : 'A whole number, 1 or more.'];
    }),
  ) as Record<CapField, string | null>;
  const changed = CAP_FIELDS.filter(({ field }) => values[field].trim() !== initial[field]);
  const invalid = CAP_FIELDS.some(({ field }) => problems[field]);

  async function submit(e: FormEvent) {
    e.preventDefault();
    if (invalid || changed.length === 0) return;
    setBusy(true);
    setError(null);
    try {
      const patch = Object.fromEntries(changed.map(({ field }) => [field, Number(values[field].trim())]));
      await api.client.call(operations.emuSetTenantLimits, { params: { name: tenant.name }, body: patch });
      onSaved();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }

  return (
    <form onSubmit={(e) => void submit(e)} data-testid="caps-form" noValidate aria-label={`Caps of ${tenant.name}`}>
      <div className="op-form">
        {CAP_FIELDS.map(({ field, label, unit, hint }) => {
          const human = field === 'timeout_ms' ? humanMs(Number(values[field])) : null;
          return (
            <Field key={field} label={label} hint={human ? `${hint} (${human})` : hint} error={problems[field]}>
              {(p) => (
                <div className="op-unit-input">
                  <input
                    {...p}
                    inputMode="numeric"
                    value={values[field]}
                    onChange={(e) => {
                      setValues({ ...values, [field]: e.target.value });
                      onEdit();
                    }}
                    data-testid={`cap-${field}`}
                  />
                  <span className="op-unit" aria-hidden="true">
                    {unit}
                  </span>
                </div>
              )}
            </Field>
          );
        })}
      </div>
      <div className="op-actions" style={{ marginTop: 12 }}>
        <button type="submit" className="op-btn op-primary" disabled={busy || invalid || changed.length === 0} data-testid="caps-save">
          {busy ? 'Saving…' : 'Save caps'}
        </button>
        {changed.length > 0 && (
          <button type="button" className="op-btn" onClick={() => setValues(initial)} disabled={busy}>
            Undo changes
          </button>
        )}
        {changed.length > 0 && <span className="op-hint">Changed: {changed.map((c) => c.label.toLowerCase()).join(', ')}</span>}
      </div>
      {error !== null && <ProblemNotice error={error} title="Could not change the caps" />}
    </form>
  );
}
