// Snippets: every snippet of the local tenant with its runtime, latest version, where it runs and
// whether it comes from the watched workspace; workspace folders whose latest save failed validation
// are shown first, with the file and line of the error.
import { useApp } from '../context';
import { useLiveLoad } from '../live-react';
import { href } from '../router';
import { EmptyState, PageHeader, Show, when } from '../ui/kit';
import {
  folderPath,
  getWorkspace,
  getSnippets,
  where,
  type FolderStatus,
  type SkippedEntry,
  type Snippet,
  type WorkspaceView,
} from './snippet-data';
import { EnvChips, FolderTag, RuntimeTag } from './snippet-ui';
import './snippets.css';

interface ListData {
  snippets: Snippet[];
  workspace: WorkspaceView;
}

export function Snippets(_props: { params: string[] }) {
  const { api } = useApp();
  // Workspace saves, API changes and deploys land while the page is open: the live feed says when.
  const [loaded, reload] = useLiveLoad(
    async (): Promise<ListData> => {
      const [snippets, workspace] = await Promise.all([getSnippets(api), getWorkspace(api)]);
      return { snippets, workspace };
    },
    [api],
    ['snippet.*', 'version.created', 'deployment.changed', 'workspace.folder'],
  );

  return (
    <div className="sn">
      <PageHeader title="Snippets">
        <button type="button" className="sn-btn" onClick={reload}>
          Refresh
        </button>
      </PageHeader>
      <Show loaded={loaded}>{(data) => <SnippetList data={data} />}</Show>
    </div>
  );
}

function SnippetList({ data }: { data: ListData }) {
  const { snippets, workspace } = data;
  const folders = new Map(workspace.folders.map((f) => [f.snippet, f]));
  const failing = workspace.folders.filter((f) => f.state === 'error' && f.error);
  const known = new Set(snippets.map((s) => s.name));

  return (
    <>
      <WorkspaceLine workspace={workspace} />
      {failing.length > 0 && (
        <section className="sn-errors" role="alert" aria-label="Workspace load errors" data-testid="workspace-errors">
          <h2>{failing.length === 1 ? 'A workspace folder failed to load' : `${failing.length} workspace folders failed to load`}</h2>
          <p className="muted">The previous version (if any) keeps serving until the folder is saved without errors.</p>
          <ul>
            {failing.map((f) => (
              <li key={f.folder} data-testid="workspace-error" data-folder={f.snippet}>
                <div className="sn-error-head">
                  {known.has(f.snippet) ? <a href={href('snippet', f.snippet)}>{f.folder}</a> : <code>{f.folder}</code>}
                  {f.error && where(f.error) && (
                    <span className="sn-error-where" data-testid="workspace-error-where">
                      {where(f.error)}
                    </span>
                  )}
                </div>
                <pre className="sn-error-message">{f.error?.message}</pre>
                {f.error?.file && <div className="muted sn-path">{folderPath(workspace, f, f.error.file)}</div>}
              </li>
            ))}
          </ul>
        </section>
      )}
      <SkippedEntries workspace={workspace} />
      {snippets.length === 0 ? (
        <EmptyState title="No snippets yet">
          <p>
            Save a folder under{' '}
            <code>{workspace.workspace ? `${snippetsDir(workspace)}/` : '<workspace>/snippets/'}&lt;name&gt;/index.ts</code> (Bun) or{' '}
            <code>&lt;name&gt;/main.py</code> (Python) and it appears here, or create one through the API (with the key shown on the{' '}
            <a href={href()}>Overview</a>):
          </p>
          <pre className="sn-hint">
            POST /v1/snippets {'{'}"name": "hello", "runtime": "bun"{'}'}
            {'\n'}POST /v1/snippets/hello/versions {'{'}"code": "export default async function handler(input) {'{ … }'}"{'}'}
          </pre>
        </EmptyState>
      ) : (
        <table className="sn-table" data-testid="snippets">
          <thead>
            <tr>
              <th scope="col">Snippet</th>
              <th scope="col">Runtime</th>
              <th scope="col">Latest</th>
              <th scope="col">Deployed</th>
              <th scope="col">Source</th>
              <th scope="col">Updated</th>
            </tr>
          </thead>
          <tbody>
            {snippets.map((s) => (
              <SnippetRow key={s.id} snippet={s} folder={folders.get(s.name)} />
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

/** A skipped entry's path on disk: workspace-level ones are relative to the workspace, the others to their folder. */
function skippedPath(ws: WorkspaceView, s: SkippedEntry, folder?: FolderStatus): string {
  const root = (ws.workspace ?? '.').replace(/[\\/]+$/, '');
  return folder ? folderPath(ws, folder, s.path) : `${root}/${s.path}`;
}

/** Every workspace entry the loader did not read (a FIFO, a socket, a symlink out of the workspace, a file over the limit…), with why. */
function SkippedEntries({ workspace }: { workspace: WorkspaceView }) {
  const rows: { key: string; entry: SkippedEntry; shown: string; folder?: FolderStatus }[] = [
    ...workspace.skipped.map((entry) => ({ key: `ws:${entry.path}`, entry, shown: entry.path })),
    ...workspace.folders.flatMap((f) =>
      f.skipped.map((entry) => ({ key: `${f.snippet}:${entry.path}`, entry, shown: `${f.folder}/${entry.path}`, folder: f })),
    ),
  ];
  if (rows.length === 0) return null;
  return (
    <section className="sn-skipped" aria-label="Workspace entries not read" data-testid="workspace-skipped">
      <h2>{rows.length === 1 ? 'One workspace entry was not read' : `${rows.length} workspace entries were not read`}</h2>
      <p className="muted">
        The loader reads only regular files inside the workspace, within the bundle limits, so nothing in it can stall the emulator. Change
        or remove these entries and save again.
      </p>
      <ul>
        {rows.map(({ key, entry, shown, folder }) => (
          <li key={key} data-testid="workspace-skipped-entry" data-path={shown} data-code={entry.code}>
            <div className="sn-error-head">
              <code>{shown}</code>
              <span className="sn-skip-code">{entry.code}</span>
            </div>
            <div className="sn-skip-reason">{entry.reason}</div>
            <div className="muted sn-path">{skippedPath(workspace, entry, folder)}</div>
          </li>
        ))}
      </ul>
    </section>
  );
}

const snippetsDir = (ws: WorkspaceView) => ws.snippets_dir ?? `${ws.workspace ?? '.'}/snippets`;

function WorkspaceLine({ workspace }: { workspace: WorkspaceView }) {
  if (!workspace.workspace) {
    return <p className="muted sn-ws-line">No workspace is watched: snippets come from the API only.</p>;
  }
  return (
    <p className="muted sn-ws-line" data-testid="workspace">
      {workspace.watching ? 'Watching' : 'Workspace'} <code>{snippetsDir(workspace)}</code>
      {workspace.polling ? ' (polling)' : ''}: each folder there is a snippet, and every save makes a new version.
    </p>
  );
}

function SnippetRow({ snippet: s, folder }: { snippet: Snippet; folder: FolderStatus | undefined }) {
  const failed = folder?.state === 'error' && folder.error;
  return (
    <tr data-testid="snippet-row" data-name={s.name} className={failed ? 'sn-row-failed' : undefined}>
      <td className="sn-name-cell">
        <a className="sn-name" href={href('snippet', s.name)}>
          {s.name}
        </a>
        {s.description ? <div className="sn-desc">{s.description}</div> : null}
      </td>
      <td data-label="Runtime">
        <RuntimeTag runtime={s.runtime} />
      </td>
      <td data-label="Latest">
        {s.latest_version === null ? <span className="muted">no version</span> : <span className="sn-ver">v{s.latest_version}</span>}
      </td>
      <td data-label="Deployed" data-testid="deployed">
        <EnvChips deployments={s.deployments} empty="nowhere" />
      </td>
      <td data-label="Source" data-testid="source">
        {folder ? (
          <span className="sn-source">
            <FolderTag>{folder.folder}</FolderTag>
            {failed && folder.error && (
              <span className="sn-load-error" data-testid="row-load-error">
                load error{where(folder.error) ? ` · ${where(folder.error)}` : ''}
              </span>
            )}
          </span>
        ) : (
          <span className="muted">API</span>
        )}
      </td>
      <td data-label="Updated" className="muted sn-when">
        {when(s.updated_at)}
      </td>
    </tr>
  );
}
