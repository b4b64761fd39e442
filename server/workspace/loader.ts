import { watch, type FSWatcher } from 'chokidar';
import { join, relative, sep } from 'node:path';
import { mkdir } from 'node:fs/promises';
import { ApiError, type FieldError } from '../errors';
import type { Logger } from '../logger';
import type { TenantService } from '../services/tenants';
import type { SnippetService } from '../services/snippets';
import type { TenantRecord } from '../storage/schema';
import { readSnippetFolder, type FolderProblem } from './folder';

/**
 * The workspace loader: `<workspace>/snippets/<name>/` folders become versions of snippet `<name>` of the
 * tenant `local`, through the same code path as `POST …/versions` (so the same validation), deployed to
 * `dev` unless snippet.json says otherwise. Saves are debounced per folder, so an editor's atomic save
 * or a `git checkout` settles into one version; unchanged content makes none.
 */
export interface FolderStatus {
  folder: string;
  snippet: string;
  state: 'loaded' | 'unchanged' | 'error' | 'deleted' | 'loading';
  runtime: 'bun' | 'python' | null;
  /** The version serving now (after an error: the last good one). */
  version: number | null;
  deployed: string[];
  /** A save that failed: the previous version keeps serving. */
  error: FolderProblem | null;
  notes: string[];
  updated_at: string;
}

export interface WorkspaceView {
  workspace: string;
  snippets_dir: string;
  watching: boolean;
  polling: boolean;
  folders: FolderStatus[];
}

export interface WorkspaceLoaderOptions {
  dir: string;
  tenants: TenantService;
  snippets: SnippetService;
  logger: Logger;
  /** Quiet time after the last change of a folder before it is loaded. */
  debounceMs?: number;
  /** Tells the outside world (the GUI's live view) that a folder's status changed. */
  onStatus?: (status: FolderStatus) => void;
}

export class WorkspaceLoader {
  private watcher: FSWatcher | null = null;
  private polling = false;
  private readonly statuses = new Map<string, FolderStatus>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly dirty = new Set<string>();
  private readonly snippetsDir: string;
  private stopped = false;

  constructor(private readonly opts: WorkspaceLoaderOptions) {
    this.snippetsDir = join(opts.dir, 'snippets');
  }

  private get tenant(): TenantRecord {
    return this.opts.tenants.get('local');
  }

  async start(): Promise<void> {
    await mkdir(this.snippetsDir, { recursive: true });
    await this.startWatcher(false);
  }

  private async startWatcher(usePolling: boolean): Promise<void> {
    this.polling = usePolling;
    const watcher = watch(this.snippetsDir, {
      ignoreInitial: false,
      usePolling,
      interval: 200,
      // node_modules and __pycache__ never reach a bundle; dotfiles neither (editor swap files included).
      ignored: (path: string) => /(^|[/\\])(node_modules|__pycache__|\.[^/\\]+)([/\\]|$)/.test(relative(this.snippetsDir, path)),
    });
    watcher.on('all', (_event: string, path: string) => {
      const folder = this.folderOf(path);
      if (folder) this.schedule(folder);
    });
    watcher.on('error', (err: unknown) => {
      const code = (err as NodeJS.ErrnoException).code;
      this.opts.logger.log('warn', 'workspace watcher error', { error: String(err) });
      if (!usePolling && (code === 'ENOSPC' || code === 'EMFILE')) {
        // Out of inotify watches or file handles: poll instead (slower, but it never misses a save).
        void watcher.close().then(() => this.startWatcher(true));
      }
    });
    await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
    this.watcher = watcher;
  }

  private folderOf(path: string): string | null {
    const rel = relative(this.snippetsDir, path);
    if (!rel || rel.startsWith('..')) return null;
    return rel.split(sep)[0] ?? null;
  }

  private schedule(folder: string): void {
    if (this.stopped) return;
    clearTimeout(this.timers.get(folder));
    this.timers.set(
      folder,
      setTimeout(() => {
        this.timers.delete(folder);
        void this.load(folder);
      }, this.opts.debounceMs ?? 50),
    );
  }

  /** Loads a folder; a change arriving while it loads makes it load once more afterwards. */
  private async load(folder: string): Promise<void> {
    const running = this.running.get(folder);
    if (running) {
      this.dirty.add(folder);
      return running;
    }
    const work = this.loadOnce(folder)
      .catch((err) => this.opts.logger.log('error', 'workspace load failed', { folder, error: String(err) }))
      .finally(() => {
        this.running.delete(folder);
        if (this.dirty.delete(folder)) void this.load(folder);
      });
    this.running.set(folder, work);
    return work;
  }

  private setStatus(folder: string, patch: Partial<FolderStatus>): void {
    const prev = this.statuses.get(folder);
    const next: FolderStatus = {
      folder: `snippets/${folder}`,
      snippet: folder,
      state: 'loading',
      runtime: null,
      version: null,
      deployed: [],
      error: null,
      notes: [],
      ...prev,
      ...patch,
      updated_at: new Date().toISOString(),
    };
    this.statuses.set(folder, next);
    this.opts.onStatus?.(next);
  }

  private async loadOnce(folder: string): Promise<void> {
    const read = await readSnippetFolder(join(this.snippetsDir, folder), folder);
    if (read.kind === 'missing') {
      if (this.statuses.has(folder)) {
        this.setStatus(folder, { state: 'deleted', error: null, notes: ['the folder was removed: the snippet and its versions stay until deleted through the API'] });
        this.opts.logger.log('info', 'workspace folder removed', { folder });
      }
      return;
    }
    if (read.kind === 'problem') {
      this.setStatus(folder, { state: 'error', error: read.problem, notes: read.notes });
      return;
    }
    const { runtime, files, settings, notes } = read;
    const tenant = this.tenant;
    try {
      const existing = this.opts.snippets.findByName(tenant, folder);
      if (existing && existing.runtime !== runtime) {
        throw new ApiError(422, 'validation_failed', 'Validation failed', `snippet '${folder}' is a ${existing.runtime} snippet; its folder now holds a ${runtime} one (delete the snippet to change its runtime)`);
      }
      if (!existing) await this.opts.snippets.create(tenant, { name: folder, runtime, ...(settings.description ? { description: settings.description } : {}) });
      const version = await this.opts.snippets.createVersion(
        tenant,
        folder,
        {
          files,
          ...(settings.timeout_ms ? { timeout_ms: settings.timeout_ms } : {}),
          ...(settings.max_memory_mb ? { max_memory_mb: settings.max_memory_mb } : {}),
          ...(settings.max_cpu_percent ? { max_cpu_percent: settings.max_cpu_percent } : {}),
        },
        'workspace',
        true,
      );
      const targets = settings.deploy ?? ['dev'];
      const current = new Map(this.opts.snippets.listDeployments(tenant, folder).map((d) => [d.env, d.version]));
      for (const env of targets) {
        if (current.get(env) !== version.version) await this.opts.snippets.deploy(tenant, folder, env, version.version);
      }
      this.setStatus(folder, {
        state: version.unchanged ? 'unchanged' : 'loaded',
        runtime,
        version: version.version,
        deployed: targets,
        error: null,
        notes,
      });
      if (!version.unchanged) this.opts.logger.log('info', 'workspace version created', { folder, version: version.version });
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      this.setStatus(folder, { state: 'error', runtime, error: problemOf(err), notes });
    }
  }

  status(): WorkspaceView {
    return {
      workspace: this.opts.dir,
      snippets_dir: this.snippetsDir,
      watching: this.watcher !== null,
      polling: this.polling,
      folders: [...this.statuses.values()].sort((a, b) => a.snippet.localeCompare(b.snippet)),
    };
  }

  /** Resolves once no load is pending or running (tests, and `npm start`'s first banner). */
  async settled(): Promise<void> {
    for (;;) {
      if (this.timers.size === 0 && this.running.size === 0) return;
      await Promise.all([...this.running.values()]);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await this.watcher?.close();
    await Promise.all([...this.running.values()]);
  }
}

/** The first problem of a refused version, with its file and line when the code check gave them. */
function problemOf(err: ApiError): FolderProblem {
  const first = (err.extra.errors as FieldError[] | undefined)?.[0];
  if (!first) return { message: err.message };
  return {
    message: first.message,
    ...(first.file ? { file: first.file } : {}),
    ...(first.line ? { line: first.line } : {}),
    ...(first.column ? { column: first.column } : {}),
  };
}
