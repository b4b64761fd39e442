// What the snippet pages read from the core: the shapes of /v1 snippets, versions, deployments (from the
// generated api-types.ts), of /_emu/workspace, and the small fetch helpers the pages share.
import type { Api } from '../api';
import type { Deployment, Environment, Invocation, Runtime, RuntimeLimits, Snippet, Version } from '../api-types';
import { TOKEN_STORAGE_KEY } from '../session';

export type { Deployment, Environment, Invocation, Runtime, Snippet, Version };
export type Limits = Pick<Version, 'timeout_ms' | 'max_memory_mb' | 'max_cpu_percent'>;
export type Caps = RuntimeLimits;

export interface FolderProblem {
  message: string;
  file?: string;
  line?: number;
  column?: number;
}

export interface FolderStatus {
  folder: string;
  snippet: string;
  state: 'loaded' | 'unchanged' | 'error' | 'deleted' | 'loading';
  runtime: Runtime | null;
  version: number | null;
  deployed: string[];
  error: FolderProblem | null;
  notes: string[];
  updated_at: string;
}

export interface WorkspaceView {
  workspace: string | null;
  snippets_dir?: string;
  watching: boolean;
  polling?: boolean;
  folders: FolderStatus[];
}

/** The three limits of a version, in the order the GUI shows them, with their units. */
export const LIMIT_FIELDS: { key: keyof Limits; label: string; unit: string; unitLong: string }[] = [
  { key: 'timeout_ms', label: 'Timeout', unit: 'ms', unitLong: 'ms' },
  { key: 'max_memory_mb', label: 'Memory', unit: 'MB', unitLong: 'MB' },
  { key: 'max_cpu_percent', label: 'CPU', unit: '%', unitLong: '% of one CPU' },
];

export const fmtLimit = (key: keyof Limits, value: number) =>
  key === 'max_cpu_percent' ? `${value.toLocaleString()} %` : `${value.toLocaleString()} ${key === 'timeout_ms' ? 'ms' : 'MB'}`;

const enc = encodeURIComponent;

/** Every item of a paginated `/v1` list, following `next_cursor`. */
export async function listAll<T>(api: Api, path: string): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const sep = path.includes('?') ? '&' : '?';
    const url: string = `${path}${sep}limit=100${cursor ? `&cursor=${enc(cursor)}` : ''}`;
    const res = await api.v1<{ data: T[]; next_cursor: string | null }>('GET', url);
    out.push(...res.body.data);
    cursor = res.body.next_cursor;
    if (!cursor) break;
  }
  return out;
}

export const snippetPath = (name: string) => `/v1/snippets/${enc(name)}`;

export const getSnippet = async (api: Api, name: string) => (await api.v1<Snippet>('GET', snippetPath(name))).body;
export const getVersions = (api: Api, name: string) => listAll<Version>(api, `${snippetPath(name)}/versions`);
export const getVersion = async (api: Api, name: string, version: number) => (await api.v1<Version>('GET', `${snippetPath(name)}/versions/${version}`)).body;
export const getDeployments = async (api: Api, name: string) => (await api.v1<{ data: Deployment[] }>('GET', `${snippetPath(name)}/environments`)).body.data;
export const getEnvironments = (api: Api) => listAll<Environment>(api, '/v1/environments');
export const getCaps = async (api: Api) => (await api.v1<Caps>('GET', '/v1/tenant/runtime-limits')).body;

export async function deploy(api: Api, name: string, env: string, version: number): Promise<Deployment> {
  return (await api.v1<Deployment>('PUT', `${snippetPath(name)}/environments/${enc(env)}`, { version })).body;
}

/** The watched workspace; an emulator without one (or an older core) reads as "none". */
export async function getWorkspace(api: Api): Promise<WorkspaceView> {
  try {
    const body = (await api.emu<Partial<WorkspaceView>>('GET', '/_emu/workspace')).body;
    return { workspace: body.workspace ?? null, snippets_dir: body.snippets_dir, watching: !!body.watching, polling: body.polling, folders: body.folders ?? [] };
  } catch {
    return { workspace: null, watching: false, folders: [] };
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
  return [problem.file, problem.line ? `line ${problem.line}` : null, problem.column ? `column ${problem.column}` : null].filter(Boolean).join(', ');
}

/**
 * The admin token the app signed in with (per-run limit overrides need it as `X-Emu-Admin`): the
 * session keeps it after a `?token=` sign-in; the desktop app hands it over through the bridge.
 */
export async function adminToken(): Promise<string | null> {
  const stored = window.sessionStorage.getItem(TOKEN_STORAGE_KEY);
  if (stored) return stored;
  try {
    return (await window.svcEmu?.adminToken) ?? null;
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
