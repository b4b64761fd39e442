// Versions: what runs where (with a roll back to the previous version), deploying a version to an
// environment, the list of versions with their limits, and a line diff of any two of them.
import { useEffect, useState } from 'react';
import { useApp } from '../context';
import { href } from '../router';
import { EmptyState, ProblemNotice, Show, useLoad, when } from '../ui/kit';
import { useLiveLoad } from '../live-react';
import { snippetOf } from '../live';
import { diffBundles, type FileDiff } from './snippet-diff';
import {
  deploy,
  envOrder,
  fmtLimit,
  getDeployments,
  getEnvironments,
  getVersion,
  getVersions,
  LIMIT_FIELDS,
  type Deployment,
  type Environment,
  type Version,
} from './snippet-data';
import type { SnippetTabProps } from './snippet';
import { FolderTag } from './snippet-ui';

interface VersionsData {
  versions: Version[];
  deployments: Deployment[];
  environments: Environment[];
}

export function VersionsTab({ snippet, refresh }: SnippetTabProps) {
  const { api } = useApp();
  // New versions, deploys (from here, the API or the CLI) and new environments show as they happen.
  const [loaded, reload] = useLiveLoad(
    async (): Promise<VersionsData> => {
      const [versions, deployments, environments] = await Promise.all([
        getVersions(api, snippet.name),
        getDeployments(api, snippet.name),
        getEnvironments(api),
      ]);
      return {
        versions,
        deployments: [...deployments].sort((a, b) => envOrder(a.env, b.env)),
        environments: [...environments].sort((a, b) => envOrder(a.name, b.name)),
      };
    },
    [api, snippet.name],
    ['version.created', 'deployment.changed', 'environment.created'],
    (e) => e.type === 'environment.created' || snippetOf(e) === snippet.name,
  );
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);

  async function run(label: string, env: string, version: number, message: string) {
    setBusy(label);
    setError(null);
    setDone(null);
    try {
      await deploy(api, snippet.name, env, version);
      setDone(message);
      reload();
      refresh();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(null);
    }
  }

  return (
    <Show loaded={loaded}>
      {(data) =>
        data.versions.length === 0 ? (
          <EmptyState title="No version yet">
            Create one with <code>POST /v1/snippets/{snippet.name}/versions</code>, or save the snippet&apos;s workspace folder.
          </EmptyState>
        ) : (
          <>
            {error !== null && <ProblemNotice error={error} title="The deployment did not happen" />}
            {done && (
              <p className="sn-ok" role="status" data-testid="deploy-done">
                {done}
              </p>
            )}
            <section className="card">
              <h2>What runs where</h2>
              <Deployments
                deployments={data.deployments}
                busy={busy}
                onRollback={(d) =>
                  void run(
                    `rollback-${d.env}`,
                    d.env,
                    d.previous_version!,
                    `Rolled ${d.env} back to v${d.previous_version} (from v${d.version}).`,
                  )
                }
              />
              <DeployForm
                versions={data.versions}
                environments={data.environments}
                busy={busy === 'deploy'}
                onDeploy={(env, version) => void run('deploy', env, version, `Deployed v${version} to ${env}.`)}
              />
            </section>
            <section className="card">
              <h2>Versions</h2>
              <VersionTable snippet={snippet.name} versions={data.versions} deployments={data.deployments} />
            </section>
            <section className="card">
              <h2>Compare two versions</h2>
              <Compare snippet={snippet.name} versions={data.versions} />
            </section>
          </>
        )
      }
    </Show>
  );
}

function Deployments({
  deployments,
  busy,
  onRollback,
}: {
  deployments: Deployment[];
  busy: string | null;
  onRollback: (d: Deployment) => void;
}) {
  return (
    <div className="sn-scroll">
      <table className="sn-plain" data-testid="deployments">
        <thead>
          <tr>
            <th scope="col">Environment</th>
            <th scope="col">Runs</th>
            <th scope="col">Deployed</th>
            <th scope="col">Before that</th>
            <th scope="col">
              <span className="sn-sr">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {deployments.map((d) => (
            <tr key={d.env} data-testid="deployment" data-env={d.env}>
              <td>
                <span className={`sn-chip sn-env-${d.env}`}>{d.env}</span>
              </td>
              <td data-testid="deployment-version">
                {d.version === null ? <span className="muted">nothing</span> : <span className="sn-ver">v{d.version}</span>}
              </td>
              <td className="muted">{when(d.deployed_at)}</td>
              <td>{d.previous_version === null ? <span className="muted">—</span> : `v${d.previous_version}`}</td>
              <td className="sn-actions">
                {d.previous_version !== null && d.version !== null && (
                  <button
                    type="button"
                    className="sn-btn sn-btn-small"
                    disabled={busy !== null}
                    onClick={() => onRollback(d)}
                    data-testid={`rollback-${d.env}`}
                    aria-label={`Roll back ${d.env} to v${d.previous_version}`}
                  >
                    {busy === `rollback-${d.env}` ? 'Rolling back…' : `Roll back to v${d.previous_version}`}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function DeployForm({
  versions,
  environments,
  busy,
  onDeploy,
}: {
  versions: Version[];
  environments: Environment[];
  busy: boolean;
  onDeploy: (env: string, version: number) => void;
}) {
  const [version, setVersion] = useState<number>(versions[0]?.version ?? 1);
  const [env, setEnv] = useState<string>(environments[0]?.name ?? 'dev');
  useEffect(() => {
    if (!versions.some((v) => v.version === version)) setVersion(versions[0]?.version ?? 1);
  }, [versions, version]);
  return (
    <form
      className="sn-deploy"
      onSubmit={(e) => {
        e.preventDefault();
        onDeploy(env, version);
      }}
    >
      <label className="sn-field-inline">
        <span>Deploy version</span>
        <select value={version} onChange={(e) => setVersion(Number(e.target.value))} data-testid="deploy-version">
          {versions.map((v) => (
            <option key={v.version} value={v.version}>
              v{v.version}
            </option>
          ))}
        </select>
      </label>
      <label className="sn-field-inline">
        <span>to</span>
        <select value={env} onChange={(e) => setEnv(e.target.value)} data-testid="deploy-env">
          {environments.map((x) => (
            <option key={x.name} value={x.name}>
              {x.name}
            </option>
          ))}
        </select>
      </label>
      <button type="submit" className="sn-btn sn-btn-primary" disabled={busy} data-testid="deploy">
        {busy ? 'Deploying…' : 'Deploy'}
      </button>
    </form>
  );
}

function VersionTable({ snippet, versions, deployments }: { snippet: string; versions: Version[]; deployments: Deployment[] }) {
  return (
    <div className="sn-scroll">
      <table className="sn-plain" data-testid="versions">
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">Created</th>
            <th scope="col">Source</th>
            {LIMIT_FIELDS.map((f) => (
              <th scope="col" key={f.key} className="sn-num">
                {f.label}
              </th>
            ))}
            <th scope="col">Runs in</th>
          </tr>
        </thead>
        <tbody>
          {versions.map((v) => (
            <tr key={v.version} data-testid="version-row" data-version={v.version}>
              <td>
                <a href={href('snippet', snippet, 'code', v.version)} className="sn-ver">
                  v{v.version}
                </a>
              </td>
              <td className="muted">{when(v.created_at)}</td>
              <td>{v.source === 'workspace' ? <FolderTag>workspace</FolderTag> : 'API'}</td>
              {LIMIT_FIELDS.map((f) => (
                <td key={f.key} className="sn-num">
                  {fmtLimit(f.key, v[f.key])}
                </td>
              ))}
              <td>
                <span className="sn-chips">
                  {deployments
                    .filter((d) => d.version === v.version)
                    .map((d) => (
                      <span key={d.env} className={`sn-chip sn-env-${d.env}`}>
                        {d.env}
                      </span>
                    ))}
                </span>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Compare({ snippet, versions }: { snippet: string; versions: Version[] }) {
  const { api } = useApp();
  const newest = versions[0]?.version ?? 1;
  const [a, setA] = useState<number>(versions[1]?.version ?? newest);
  const [b, setB] = useState<number>(newest);
  const [loaded] = useLoad(async () => {
    const [va, vb] = await Promise.all([getVersion(api, snippet, a), a === b ? null : getVersion(api, snippet, b)]);
    return { va, vb: vb ?? va };
  }, [api, snippet, a, b]);

  const picker = (label: string, value: number, set: (n: number) => void, testid: string) => (
    <label className="sn-field-inline">
      <span>{label}</span>
      <select value={value} onChange={(e) => set(Number(e.target.value))} data-testid={testid}>
        {versions.map((v) => (
          <option key={v.version} value={v.version}>
            v{v.version}
          </option>
        ))}
      </select>
    </label>
  );

  return (
    <div data-testid="diff">
      <div className="sn-toolbar">
        {picker('A (before)', a, setA, 'diff-a')}
        <span aria-hidden="true">→</span>
        {picker('B (after)', b, setB, 'diff-b')}
      </div>
      <Show loaded={loaded}>{({ va, vb }) => <DiffView a={va} b={vb} />}</Show>
    </div>
  );
}

function DiffView({ a, b }: { a: Version; b: Version }) {
  if (a.version === b.version) return <p className="muted">Pick two different versions.</p>;
  const files = diffBundles(a.files ?? {}, b.files ?? {});
  const limitChanges = LIMIT_FIELDS.filter((f) => a[f.key] !== b[f.key]);
  const changed = files.filter((f) => f.status !== 'same');
  return (
    <div className="sn-diff">
      {limitChanges.length > 0 && (
        <ul className="sn-limit-changes" data-testid="diff-limits">
          {limitChanges.map((f) => (
            <li key={f.key}>
              {f.label}: <del>{fmtLimit(f.key, a[f.key])}</del> → <ins>{fmtLimit(f.key, b[f.key])}</ins>
            </li>
          ))}
          {a.entrypoint !== b.entrypoint && (
            <li>
              Entrypoint: <del>{a.entrypoint}</del> → <ins>{b.entrypoint}</ins>
            </li>
          )}
        </ul>
      )}
      {changed.length === 0 ? (
        <p className="muted" data-testid="diff-same">
          The code of v{a.version} and v{b.version} is identical{limitChanges.length > 0 ? '; only the limits differ' : ''}.
        </p>
      ) : (
        changed.map((f) => <FileDiffView key={f.path} diff={f} />)
      )}
    </div>
  );
}

function FileDiffView({ diff }: { diff: FileDiff }) {
  return (
    <figure className="sn-file sn-diff-file" data-testid="diff-file" data-path={diff.path}>
      <figcaption>
        <code>{diff.path}</code>
        {diff.status !== 'changed' && <span className="sn-tag">{diff.status}</span>}
        <span className="sn-diff-count">
          <span className="sn-add">+{diff.added}</span> <span className="sn-del">−{diff.removed}</span>
        </span>
      </figcaption>
      <pre className="sn-pre sn-diff-pre">
        <code>
          {diff.hunks.map((h, hi) => (
            <span key={hi} className="sn-hunk">
              {hi > 0 && (
                <span className="sn-dl sn-dl-gap" aria-hidden="true">
                  <span className="sn-ln" data-n="⋯" />
                  <span className="sn-ln" data-n="⋯" />
                  {'\n'}
                </span>
              )}
              {h.lines.map((l, i) => (
                <span
                  key={i}
                  className={l.kind === '+' ? 'sn-dl sn-dl-add' : l.kind === '-' ? 'sn-dl sn-dl-del' : 'sn-dl'}
                  data-testid={l.kind === '+' ? 'diff-add' : l.kind === '-' ? 'diff-del' : undefined}
                >
                  <span className="sn-ln" aria-hidden="true" data-n={l.a ?? ''} />
                  <span className="sn-ln" aria-hidden="true" data-n={l.b ?? ''} />
                  <span className="sn-sign">{l.kind}</span>
                  {l.text}
                  {'\n'}
                </span>
              ))}
            </span>
          ))}
        </code>
      </pre>
    </figure>
  );
}
