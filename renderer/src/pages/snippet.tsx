// A snippet: its header (runtime, latest version, where it runs, where it comes from) and five tabs as
// links — Code, Versions, Settings, Run, Cassettes — on `#/snippet/{name}[/code|versions|settings|run|cassettes]`.
import { ProblemError } from '../api';
import { useApp } from '../context';
import { href } from '../router';
import { EmptyState, Loading, ProblemNotice } from '../ui/kit';
import { useLiveLoad } from '../live-react';
import { snippetOf } from '../live';
import { CodeTab } from './snippet-code';
import { SettingsTab } from './snippet-settings';
import { RunTab } from './snippet-run';
import { VersionsTab } from './snippet-versions';
import { CassettesTab } from './cassettes';
import { getSnippet, getWorkspace, where, type FolderStatus, type Snippet, type WorkspaceView } from './snippet-data';
import { EnvChips, FolderTag, RuntimeTag } from './snippet-ui';
import './snippets.css';

const TABS = [
  { id: 'code', label: 'Code' },
  { id: 'versions', label: 'Versions' },
  { id: 'settings', label: 'Settings' },
  { id: 'run', label: 'Run' },
  { id: 'cassettes', label: 'Cassettes' },
] as const;
type TabId = (typeof TABS)[number]['id'];

/** What every tab gets: the snippet, the workspace it may come from, and a way to reload both. */
export interface SnippetTabProps {
  snippet: Snippet;
  workspace: WorkspaceView;
  folder: FolderStatus | null;
  /** Reloads the snippet (after a save or a deploy), keeping the tab's own state. */
  refresh: () => void;
  /** Route segments after the tab (e.g. a version number). */
  rest: string[];
}

export function SnippetPage({ params }: { params: string[] }) {
  const { api } = useApp();
  const name = params[0] ?? '';
  const tab: TabId = TABS.some((t) => t.id === params[1]) ? (params[1] as TabId) : 'code';
  // A save in the workspace (new version or compile error), a deploy or a delete shows at once: the
  // live feed names the snippet that changed.
  const [loaded, reload] = useLiveLoad(
    async () => {
      const [snippet, workspace] = await Promise.all([getSnippet(api, name), getWorkspace(api)]);
      return { snippet, workspace, folder: workspace.folders.find((f) => f.snippet === snippet.name) ?? null };
    },
    [api, name],
    ['snippet.*', 'version.created', 'deployment.changed', 'workspace.folder'],
    (e) => snippetOf(e) === name,
  );

  if (!name) {
    return (
      <EmptyState title="No snippet named">
        <a href={href('snippets')}>All snippets</a>
      </EmptyState>
    );
  }
  if (loaded.state === 'loading') return <Loading />;
  if (loaded.state === 'error') {
    return (
      <div className="sn">
        <Crumbs name={name} />
        {loaded.error instanceof ProblemError && loaded.error.status === 404 ? (
          <EmptyState title={`No snippet named “${name}”`}>
            <a href={href('snippets')}>All snippets</a>
          </EmptyState>
        ) : (
          <ProblemNotice error={loaded.error} title="Could not load this snippet" />
        )}
      </div>
    );
  }
  const { snippet, workspace, folder } = loaded.data;
  const props: SnippetTabProps = { snippet, workspace, folder, refresh: reload, rest: params.slice(2) };
  return (
    <div className="sn">
      <Crumbs name={snippet.name} />
      <SnippetHeader snippet={snippet} folder={folder} />
      <nav className="sn-tabs" aria-label="Snippet sections">
        {TABS.map((t) => (
          <a
            key={t.id}
            href={href('snippet', snippet.name, t.id)}
            aria-current={t.id === tab ? 'page' : undefined}
            data-testid={`tab-${t.id}`}
          >
            {t.label}
          </a>
        ))}
      </nav>
      <div className="sn-panel" data-testid={`panel-${tab}`}>
        {tab === 'code' && <CodeTab {...props} />}
        {tab === 'versions' && <VersionsTab {...props} />}
        {tab === 'settings' && <SettingsTab {...props} />}
        {tab === 'run' && <RunTab {...props} />}
        {tab === 'cassettes' && <CassettesTab {...props} />}
      </div>
    </div>
  );
}

function Crumbs({ name }: { name: string }) {
  return (
    <nav className="sn-crumbs" aria-label="Breadcrumb">
      <a href={href('snippets')}>Snippets</a> <span aria-hidden="true">/</span> <span aria-current="page">{name}</span>
    </nav>
  );
}

function SnippetHeader({ snippet: s, folder }: { snippet: Snippet; folder: FolderStatus | null }) {
  return (
    <header className="sn-head">
      <div className="sn-head-title">
        <h1 data-testid="snippet-name">{s.name}</h1>
        <RuntimeTag runtime={s.runtime} />
        {s.latest_version !== null && (
          <span className="sn-ver" data-testid="latest-version">
            latest v{s.latest_version}
          </span>
        )}
      </div>
      {s.description && <p className="sn-head-desc">{s.description}</p>}
      <div className="sn-head-facts">
        <span>
          <span className="muted">Runs in </span>
          <EnvChips deployments={s.deployments} empty="no environment" />
        </span>
        <span>
          <span className="muted">Source </span>
          {folder ? <FolderTag>{folder.folder}</FolderTag> : <span>API</span>}
        </span>
      </div>
      {folder?.state === 'error' && folder.error && (
        <div className="sn-errors sn-errors-inline" role="alert" data-testid="snippet-load-error">
          <strong>The latest save of {folder.folder} failed to load</strong>
          {where(folder.error) && <span className="sn-error-where">{where(folder.error)}</span>}
          <pre className="sn-error-message">{folder.error.message}</pre>
          <span className="muted">
            {s.latest_version === null
              ? 'No version serves until the folder loads.'
              : `v${s.latest_version} keeps serving until the folder is saved without errors.`}
          </span>
        </div>
      )}
      {folder && folder.skipped.length > 0 && (
        <div className="sn-skipped sn-errors-inline" data-testid="snippet-skipped">
          <strong>
            {folder.skipped.length === 1
              ? `One entry of ${folder.folder} was not read`
              : `${folder.skipped.length} entries of ${folder.folder} were not read`}
          </strong>
          <ul>
            {folder.skipped.map((e) => (
              <li key={e.path}>
                <code>{e.path}</code> <span className="sn-skip-code">{e.code}</span>
                <div className="sn-skip-reason">{e.reason}</div>
              </li>
            ))}
          </ul>
        </div>
      )}
    </header>
  );
}
