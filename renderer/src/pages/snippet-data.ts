// What the snippet pages read from the core: the shapes of /v1 snippets, versions, deployments (from the
// the contract's schemas, renderer/src/types.ts), of /_emu/workspace, and the small fetch helpers the pages share.
import { createApi, operations, type Api } from '../api';
import type {
  Deployment,
  Environment,
  Invocation,
  Runtime,
  RuntimeLimits,
  Snippet,
  Version,
  WorkspaceFolderStatus,
  WorkspaceSkippedEntry,
  WorkspaceView as WorkspaceAnswer,
} from '../types';

export type { Deployment, Environment, Invocation, Runtime, Snippet, Version };
export type Limits = Pick<Version, 'timeout_ms' | 'max_memory_mb' | 'max_cpu_percent'>;
export type Caps = RuntimeLimits;

export type FolderStatus = WorkspaceFolderStatus;
export type FolderProblem = NonNullable<FolderStatus['error']>;
export type SkippedEntry = WorkspaceSkippedEntry;
export type WorkspaceView = WorkspaceAnswer;

/** The three limits of a version, in the order the GUI shows them, with their units. */
export const LIMIT_FIELDS: { key: keyof Limits; label: string; unit: string; unitLong: string }[] = [
  { key: 'timeout_ms', label: 'Timeout', unit: 'ms', unitLong: 'ms' },
  { key: 'max_memory_mb', label: 'Memory', unit: 'MB', unitLong: 'MB' },
  { key: 'max_cpu_percent', label: 'CPU', unit: '%', unitLong: '% of one CPU' },
];

export const fmtLimit = (key: keyof Limits, value: number) =>
  key === 'max_cpu_percent' ? `${value.toLocaleString()} %` : `${value.toLocaleString()} ${key === 'timeout_ms' ? 'ms' : 'MB'}`;

/** The query of one page of a `/v1` list: 100 items, from `cursor` when there is one. */
type PageQuery = { limit: string; cursor?: string };

/** Every item of a paginated `/v1` list (one page per `page(query)` call), following `next_cursor`. */
export async function listAll<T>(page: (query: PageQuery) => Promise<{ data: T[]; next_cursor: string | null }>): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | null = null;
  for (let n = 0; n < 100; n++) {
    const res: { data: T[]; next_cursor: string | null } = await page({ limit: '100', ...(cursor ? { cursor } : {}) });
    out.push(...res.data);
    cursor = res.next_cursor;
    if (!cursor) break;
  }
  return out;
}

export const getSnippets = (api: Api): Promise<Snippet[]> => listAll((query) => api.client.call(operations.listSnippets, { query }));
export const getSnippet = (api: Api, name: string): Promise<Snippet> => api.client.call(operations.getSnippet, { params: { id: name } });
export const getVersions = (api: Api, name: string): Promise<Version[]> =>
  listAll((query) => api.client.call(operations.listVersions, { params: { id: name }, query }));
export const getVersion = (api: Api, name: string, version: number): Promise<Version> =>
  api.client.call(operations.getVersion, { params: { id: name, version: String(version) } });
export const getDeployments = async (api: Api, name: string): Promise<Deployment[]> =>
  (await api.client.call(operations.listDeployments, { params: { id: name } })).data;
export const getEnvironments = (api: Api): Promise<Environment[]> =>
  listAll((query) => api.client.call(operations.listEnvironments, { query }));
export const getCaps = (api: Api): Promise<Caps> => api.client.call(operations.getRuntimeLimits);

export async function deploy(api: Api, name: string, env: string, version: number): Promise<Deployment> {
  return api.client.call(operations.deploy, { params: { id: name, env }, body: { version } });
}

/** The watched workspace; an emulator without one (or an older core) reads as "none". */
export async function getWorkspace(api: Api): Promise<WorkspaceView> {
  try {
    const body: Partial<WorkspaceView> = await api.client.call(operations.emuWorkspace);
    const folders = (body.folders ?? []).map((f) => ({ ...f, skipped: f.skipped ?? [] }));
    return {
      workspace: body.workspace ?? null,
      snippets_dir: body.snippets_dir,
      watching: !!body.watching,
      polling: body.polling,
      folders,
      skipped: body.skipped ?? [],
    };
  } catch {
    return { workspace: null, watching: false, folders: [], skipped: [] };
  }
}

/** Where a workspace folder (`snippets/<name>`) is on disk. */
export function folderPath(ws: WorkspaceView, folder: FolderStatus, file?: string): string {
  const root = ws.workspace ?? '';
  const sep = root.includes('\\') && !root.includes('/') ? '\\' : '/';
  const base = `${root.replace(/[\\/]+$/, '')}${sep}${folder.folder.split('/').join(sep)}`;
  return file ? `${base}${sep}${file.split('/').join(sep)}` : base;
}

/** "index.ts, line 2, column 20" for a load error that names its place. */
export function where(problem: FolderProblem): string | null {
  if (!problem.file) return null;
  return [problem.file, problem.line ? `line ${problem.line}` : null, problem.column ? `column ${problem.column}` : null]
    .filter(Boolean)
    .join(', ');
}

/**
 * This run's admin token, for `X-Emu-Admin` beside per-run limit overrides on `/v1` (where the GUI's session
 * cookie is never accepted): asked of `/_emu/gui-session` with the cookie, each time (it changes at a restart).
 */
export async function adminToken(): Promise<string | null> {
  try {
    return (await createApi({ key: null }).client.call(operations.emuGuiSession)).admin_token;
  } catch {
    return null;
  }
}

/** Sorts environments the way people think of them: dev, staging, prod, then the rest by name. */
export function envOrder(a: string, b: string): number {
  const rank = (n: string) => {
    const i = ['dev', 'staging', 'prod'].indexOf(n);
    return i < 0 ? 3 : i;
  };
  return rank(a) - rank(b) || a.localeCompare(b);
}
