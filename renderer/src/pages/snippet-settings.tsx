// Settings: the three limits of the snippet, prefilled from the latest version, with the tenant's caps
// beside them. A value that is not an integer ≥ 1, or is above its cap, is refused here before anything
// is sent. Saving creates a new version with the same code and these limits, optionally deploying it.
// Below: the snippet's own egress settings (snippet.json's `egress`, snippet-egress.tsx).
import { useState } from 'react';
import { operations, ProblemError } from '../api';
import { useApp } from '../context';
import { href } from '../router';
import { EmptyState, ProblemNotice, Show } from '../ui/kit';
import { useLiveLoad } from '../live-react';
import {
  deploy,
  envOrder,
  getCaps,
  getEnvironments,
  getVersion,
  LIMIT_FIELDS,
  type Caps,
  type Environment,
  type Limits,
  type Version,
} from './snippet-data';
import type { SnippetTabProps } from './snippet';
import { SnippetEgressCard } from './snippet-egress';

export function SettingsTab({ snippet, folder, refresh }: SnippetTabProps) {
  const { api } = useApp();
  const latest = snippet.latest_version;
  // Kept here, not in the form: a save reloads the latest version, which remounts the form.
  const [outcome, setOutcome] = useState<Outcome>({ saved: null, error: null });
  // The latest version follows the snippet page (which reloads on every save); caps changed by the
  // operator (`svc-emu tenant limits`) and new environments come from the live feed.
  const [loaded, reload] = useLiveLoad(
    async () => {
      const [version, caps, environments] = await Promise.all([
        latest === null ? Promise.resolve(null) : getVersion(api, snippet.name, latest),
        getCaps(api),
        getEnvironments(api),
      ]);
      return { version, caps, environments: [...environments].sort((a, b) => envOrder(a.name, b.name)) };
    },
    [api, snippet.name, latest],
    ['tenant.changed', 'environment.created'],
  );

  return (
    <>
      <Show loaded={loaded}>
        {({ version, caps, environments }) =>
          version === null ? (
            <EmptyState title="No version yet">Limits belong to a version: create the first one, then set its limits here.</EmptyState>
          ) : (
            <SettingsForm
              key={version.version}
              snippetName={snippet.name}
              base={version}
              caps={caps}
              environments={environments}
              fromWorkspace={folder !== null}
              outcome={outcome}
              setOutcome={setOutcome}
              onSaved={refresh}
              onCapsChanged={reload}
            />
          )
        }
      </Show>
      <SnippetEgressCard snippet={snippet.name} folder={folder} />
    </>
  );
}

type Field = keyof Limits;

interface Outcome {
  saved: { version: number; env: string | null } | null;
  error: unknown;
}

/** Why a typed value cannot be saved, or null when it can. */
export function limitProblem(raw: string, cap: number | undefined, unit: string): string | null {
  const text = raw.trim();
  if (text === '') return 'required';
  if (!/^\d+$/.test(text)) return 'must be a whole number';
  const n = Number(text);
  if (n < 1) return 'must be at least 1';
  if (cap !== undefined && n > cap) return `above the tenant cap of ${cap} ${unit}`;
  return null;
}

function SettingsForm({
  snippetName,
  base,
  caps,
  environments,
  fromWorkspace,
  outcome,
  setOutcome,
  onSaved,
  onCapsChanged,
}: {
  snippetName: string;
  base: Version;
  caps: Caps;
  environments: Environment[];
  fromWorkspace: boolean;
  outcome: Outcome;
  setOutcome: (o: Outcome) => void;
  onSaved: () => void;
  /** The core says a cap is lower than the form knew (an operator changed it): read the caps again. */
  onCapsChanged: () => void;
}) {
  const { api } = useApp();
  const [values, setValues] = useState<Record<Field, string>>({
    timeout_ms: String(base.timeout_ms),
    max_memory_mb: String(base.max_memory_mb),
    max_cpu_percent: String(base.max_cpu_percent),
  });
  const [andDeploy, setAndDeploy] = useState(false);
  const [env, setEnv] = useState(environments[0]?.name ?? 'dev');
  const [saving, setSaving] = useState(false);
  const { saved, error } = outcome;

  const problems = Object.fromEntries(LIMIT_FIELDS.map((f) => [f.key, limitProblem(values[f.key], caps[f.key], f.unit)])) as Record<
    Field,
    string | null
  >;
  const invalid = LIMIT_FIELDS.some((f) => problems[f.key] !== null);
  const unchanged = LIMIT_FIELDS.every((f) => Number(values[f.key]) === base[f.key]);

  async function save() {
    if (invalid) return;
    setSaving(true);
    setOutcome({ saved: null, error: null });
    try {
      const body = {
        files: base.files ?? {},
        entrypoint: base.entrypoint,
        timeout_ms: Number(values.timeout_ms),
        max_memory_mb: Number(values.max_memory_mb),
        max_cpu_percent: Number(values.max_cpu_percent),
      };
      const created = await api.client.call(operations.createVersion, { params: { id: snippetName }, body });
      let deployError: unknown = null;
      if (andDeploy) {
        try {
          await deploy(api, snippetName, env, created.version);
        } catch (e) {
          deployError = e;
        }
      }
      setOutcome({ saved: { version: created.version, env: andDeploy && deployError === null ? env : null }, error: deployError });
      onSaved();
    } catch (e) {
      setOutcome({ saved: null, error: e });
      if (e instanceof ProblemError && e.code === 'limit_exceeds_tenant_cap') onCapsChanged();
    } finally {
      setSaving(false);
    }
  }

  return (
    <form
      className="sn-settings"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
      aria-describedby="sn-settings-about"
    >
      <section className="card">
        <h2>Limits</h2>
        <p className="muted" id="sn-settings-about">
          Versions are immutable: saving makes a new version (v{base.version + 1}) with the code of v{base.version} and these limits. Each
          limit is capped by the tenant (production&apos;s operators set the caps; here, the <a href={href('tenants')}>Tenants and caps</a>{' '}
          page).
        </p>
        <div className="sn-limits">
          {LIMIT_FIELDS.map((f) => {
            const id = `limit-${f.key}`;
            const problem = problems[f.key];
            return (
              <div key={f.key} className={problem ? 'sn-limit sn-limit-bad' : 'sn-limit'}>
                <label htmlFor={id}>{f.label}</label>
                <div className="sn-input-unit">
                  <input
                    id={id}
                    name={f.key}
                    type="number"
                    inputMode="numeric"
                    min={1}
                    max={caps[f.key]}
                    step={1}
                    value={values[f.key]}
                    onChange={(e) => setValues((v) => ({ ...v, [f.key]: e.target.value }))}
                    aria-invalid={problem ? true : undefined}
                    aria-describedby={`${id}-cap ${id}-problem`}
                    data-testid={id}
                  />
                  <span className="sn-unit">{f.unitLong}</span>
                </div>
                <div className="sn-cap" id={`${id}-cap`} data-testid={`${id}-cap`}>
                  tenant cap {caps[f.key].toLocaleString()} {f.unit} · now {base[f.key].toLocaleString()} {f.unit}
                </div>
                <div className="sn-problem" id={`${id}-problem`} role={problem ? 'alert' : undefined} data-testid={`${id}-problem`}>
                  {problem ? `${f.label}: ${problem}` : ''}
                </div>
              </div>
            );
          })}
        </div>
      </section>
      <section className="card">
        <h2>Save</h2>
        <div className="sn-save-row">
          <label className="sn-check">
            <input type="checkbox" checked={andDeploy} onChange={(e) => setAndDeploy(e.target.checked)} data-testid="settings-deploy" />
            <span>and deploy it to</span>
          </label>
          <label className="sn-field-inline">
            <span className="sn-sr">Environment to deploy to</span>
            <select value={env} onChange={(e) => setEnv(e.target.value)} disabled={!andDeploy} data-testid="settings-env">
              {environments.map((x) => (
                <option key={x.name} value={x.name}>
                  {x.name}
                </option>
              ))}
            </select>
          </label>
          <button type="submit" className="sn-btn sn-btn-primary" disabled={invalid || unchanged || saving} data-testid="settings-save">
            {saving ? 'Saving…' : 'Save as a new version'}
          </button>
        </div>
        {invalid && (
          <p className="sn-problem">
            Fix the highlighted limit{LIMIT_FIELDS.filter((f) => problems[f.key]).length > 1 ? 's' : ''} to save.
          </p>
        )}
        {!invalid && unchanged && !saved && <p className="muted">Change a limit to save a new version.</p>}
        {fromWorkspace && (
          <p className="muted sn-note">
            This snippet comes from the workspace: the next save of its folder makes a version with the limits of its{' '}
            <code>snippet.json</code> (or the defaults) again.
          </p>
        )}
        {saved && (
          <p className="sn-ok" role="status" data-testid="saved">
            Saved as version {saved.version}
            {saved.env ? ` and deployed to ${saved.env}` : ''}.
          </p>
        )}
        {error !== null && (
          <ProblemNotice error={error} title={saved ? 'Saved, but the deployment failed' : 'The core refused the new version'} />
        )}
      </section>
    </form>
  );
}
