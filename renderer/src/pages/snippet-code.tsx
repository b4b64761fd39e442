// Code: the files of one version, read-only with line numbers, with a version picker and (for a
// multi-file bundle) a file picker. Workspace snippets say where the file is, to edit it there.
import { lazy, Suspense, useEffect, useState } from 'react';
import { useApp } from '../context';
import { EmptyState, Loading, Show, useLoad, when } from '../ui/kit';
import { CopyButton } from '../ui/controls';
import { folderPath, getVersion, getVersions, type Version } from './snippet-data';
import { useLiveEvent } from '../live-react';
import { snippetOf } from '../live';
import type { SnippetTabProps } from './snippet';

// CodeMirror is a large part of the GUI's code: it loads with the first Code tab.
const ReadOnlyCode = lazy(() => import('../ui/code-editor').then((m) => ({ default: m.ReadOnlyCode })));

export function CodeTab({ snippet, workspace, folder, rest }: SnippetTabProps) {
  const { api } = useApp();
  const latest = snippet.latest_version;
  const asked = Number(rest[0]);
  // A version in the route (`…/code/3`) opens that one; the picker changes it in place. Otherwise the tab
  // follows the latest version: a save in the workspace shows here at once, the version named by the live
  // feed's `version.created` read straight away (the snippet page reloads its header meanwhile).
  const [picked, setVersion] = useState<number | null>(Number.isInteger(asked) && asked >= 1 ? asked : null);
  const [announced, setAnnounced] = useState<number | null>(null);
  useLiveEvent(['version.created'], (e) => e.type === 'version.created' && setAnnounced((n) => Math.max(n ?? 0, e.data.version)), {
    filter: (e) => snippetOf(e) === snippet.name,
  });
  const newest = latest === null && announced === null ? null : Math.max(latest ?? 0, announced ?? 0);
  const version = picked ?? newest;
  const [versions] = useLoad(
    () => (newest === null ? Promise.resolve([] as Version[]) : getVersions(api, snippet.name)),
    [api, snippet.name, newest],
  );
  const [loaded] = useLoad(
    () => (version === null ? Promise.resolve(null) : getVersion(api, snippet.name, version)),
    [api, snippet.name, version],
  );

  if (newest === null || version === null) {
    return (
      <EmptyState title="No version yet">
        {folder ? (
          <>
            Save <code>{folderPath(workspace, folder)}</code> without errors to create the first version.
          </>
        ) : (
          <>
            Create one with <code>POST /v1/snippets/{snippet.name}/versions</code> <code>{'{"code": "…"}'}</code>.
          </>
        )}
      </EmptyState>
    );
  }

  return (
    <Show loaded={loaded}>
      {(v) =>
        v && (
          <VersionFiles
            version={v}
            versions={versions.state === 'ok' ? versions.data : []}
            editorPath={folder && v.source === 'workspace' ? (file: string) => folderPath(workspace, folder, file) : null}
            onVersion={setVersion}
          />
        )
      }
    </Show>
  );
}

function VersionFiles({
  version: v,
  versions,
  editorPath,
  onVersion,
}: {
  version: Version;
  versions: Version[];
  editorPath: ((file: string) => string) | null;
  onVersion: (n: number) => void;
}) {
  const files = v.files ?? {};
  const paths = Object.keys(files).sort((a, b) => (a === v.entrypoint ? -1 : b === v.entrypoint ? 1 : a.localeCompare(b)));
  // The file picked in this version; another version opens on its entrypoint (the view itself stays mounted
  // across versions, so a save's new code replaces the old in place: renderer/src/ui/code-editor.tsx).
  const [picked, setPicked] = useState<{ version: number; file: string } | null>(null);
  const file = picked && picked.version === v.version && paths.includes(picked.file) ? picked.file : (paths[0] ?? '');
  const setFile = (f: string) => setPicked({ version: v.version, file: f });
  const content = files[file] ?? '';
  const choices = versions.length > 0 ? versions.map((x) => x.version) : [v.version];

  return (
    <div className="sn-code">
      <div className="sn-toolbar">
        <label className="sn-field-inline">
          <span>Version</span>
          <select value={v.version} onChange={(e) => onVersion(Number(e.target.value))} data-testid="code-version">
            {choices.map((n) => (
              <option key={n} value={n}>
                v{n}
              </option>
            ))}
          </select>
        </label>
        <span className="muted">
          {v.source === 'workspace' ? 'from the workspace' : 'through the API'} · {when(v.created_at)} · {paths.length} file
          {paths.length === 1 ? '' : 's'} · {v.size_bytes.toLocaleString()} bytes
        </span>
      </div>
      {editorPath && <EditorHint path={editorPath(file)} />}
      <div className={paths.length > 1 ? 'sn-code-body sn-code-multi' : 'sn-code-body'}>
        {paths.length > 1 && (
          <ul className="sn-files" aria-label="Files" data-testid="file-picker">
            {paths.map((p) => (
              <li key={p}>
                <button type="button" aria-pressed={p === file} onClick={() => setFile(p)}>
                  <span className="sn-file-name">{p}</span>
                  {p === v.entrypoint && <span className="sn-tag">entry</span>}
                </button>
              </li>
            ))}
          </ul>
        )}
        <CodeView path={file} content={content} entry={file === v.entrypoint} />
      </div>
    </div>
  );
}

/** One file, read-only (CodeMirror: line numbers, syntax highlighting). */
export function CodeView({ path, content, entry }: { path: string; content: string; entry?: boolean }) {
  const lines = content.split(/\r?\n/);
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  return (
    <figure className="sn-file">
      <figcaption>
        <code data-testid="code-file">{path}</code>
        {entry && <span className="sn-tag">entrypoint</span>}
        <span className="muted">
          {lines.length} line{lines.length === 1 ? '' : 's'}
        </span>
      </figcaption>
      <Suspense fallback={<Loading minHeight={120} />}>
        <ReadOnlyCode path={path} content={content} label={`${path}, read-only`} testid="code-view" />
      </Suspense>
    </figure>
  );
}

/**
 * Workspace files are edited where they live: the desktop app opens them with the user's editor (or
 * shows them in the file manager); a browser gets a VS Code link and the path to copy.
 */
function EditorHint({ path }: { path: string }) {
  const bridge = typeof window !== 'undefined' ? window.svcEmu : undefined;
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => setProblem(null), [path]);
  return (
    <div className="sn-editor-hint" data-testid="editor-hint">
      <span>
        Read-only here; edit the file in your editor: <code>{path}</code>
      </span>
      {bridge ? (
        <>
          <button
            type="button"
            className="sn-btn sn-btn-small"
            data-testid="open-in-editor"
            onClick={() => void bridge.openInEditor(path).then((why) => setProblem(why || null))}
          >
            Open in editor
          </button>
          <button type="button" className="sn-btn sn-btn-small" onClick={() => void bridge.reveal(path)}>
            Show in folder
          </button>
        </>
      ) : (
        <>
          <a
            className="sn-btn sn-btn-small"
            href={`vscode://file${encodeURI(path.startsWith('/') ? path : `/${path}`)}`}
            data-testid="open-in-vscode"
          >
            Open in VS Code
          </a>
          <CopyButton text={path} label="Copy path" />
        </>
      )}
      {problem && (
        <p className="sn-editor-problem" role="alert">
          Could not open it: {problem}
        </p>
      )}
    </div>
  );
}
