import { watch, type FSWatcher } from 'chokidar';
import { join, relative, resolve, sep } from 'node:path';
import type { Stats } from 'node:fs';
import { mkdir, opendir, realpath, stat } from 'node:fs/promises';
import { DomainError, ValidationError, type FieldError } from '../domain/errors';
import type { Logger } from '../logger';
import type { TenantService } from '../services/tenants';
import { SupersededError, type PlannedVersion, type SnippetService } from '../services/snippets';
import type { PrewarmJob, PrewarmResult } from '../../executor';
import type { TenantRecord } from '../storage/schema';
import { exceedsEntries, FOLDER_LIMITS, readSnippetFolder, type FolderLimits, type FolderProblem } from './folder';
import { isInside, kindOf, type SkippedEntry } from './safe-read';
import type { FolderStatus, WorkspaceView } from './status';
import { WatchBudget } from './watch-budget';

export type { FolderStatus, WorkspaceView } from './status';

/**
 * The workspace loader: `<workspace>/snippets/<name>/` folders become versions of snippet `<name>` of the
 * tenant `local`, through the same code path as `POST …/versions` (so the same validation), deployed to
 * `dev` unless snippet.json says otherwise, in the version's own write. A folder loads after a short quiet
 * time (a few ms) since its last change; a change arriving while it loads drops the version being made
 * (unless already written) and loads again, so an editor's atomic save or a `git checkout` settles into one
 * version of the last content; unchanged content makes none. A save refused while another change follows
 * within `errorGraceMs` shows no error (a half-written file the next event completes). Once a live change
 * made a version, its sandbox starts in the background (`prewarm`), so the first invocation finds it warm.
 */
export interface WorkspaceLoaderOptions {
  dir: string;
  tenants: TenantService;
  snippets: SnippetService;
  logger: Logger;
  /** Quiet time after the last change of a folder that serves a version before it is loaded again (default 5 ms). */
  debounceMs?: number;
  /**
   * The quiet time for a folder that serves no version yet (new, or refused so far): a folder copied in or
   * checked out arrives as many files, and its first version should hold them all (default 50 ms).
   */
  newFolderDebounceMs?: number;
  /**
   * How long a refused save's error waits before it is shown, when the folder had a status already (an
   * edit): a change within that time replaces it unseen (default 100 ms). The serving version never changes.
   */
  errorGraceMs?: number;
  /**
   * Starts the sandbox of a version a live change makes (the executor's prewarm), once its code passed the
   * checks, beside the version's durable write.
   */
  prewarm?: (job: PrewarmJob) => Promise<PrewarmResult>;
  /** Ends a prewarm whose version was not written after all (dropped, refused, or given another number). */
  dropPrewarm?: (job: PrewarmJob) => void;
  /** Tells the outside world (the GUI's live view) that a folder's status changed. */
  onStatus?: (status: FolderStatus) => void;
  /** How much of a folder is read (./folder.ts), and how many folders under snippets/ are watched. */
  limits?: Partial<FolderLimits> & { maxFolders?: number };
  /** How often a folder left unwatched for holding too many entries is counted again. */
  recheckMs?: number;
}

export class WorkspaceLoader {
  private watcher: FSWatcher | null = null;
  private polling = false;
  private readonly statuses = new Map<string, FolderStatus>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly dirty = new Set<string>();
  /** Changes seen per folder: a load whose folder changed since it began makes no version (a newer load follows). */
  private readonly generation = new Map<string, number>();
  /** Errors of refused saves waiting out errorGraceMs (cancelled by the folder's next change). */
  private readonly pendingErrors = new Map<string, NodeJS.Timeout>();
  /** Folders changed after the watcher's initial scan: their new versions are prewarmed (the scan's are not). */
  private readonly live = new Set<string>();
  /** Prewarms under way (settled() waits for them). */
  private readonly warming = new Set<Promise<void>>();
  private readonly snippetsDir: string;
  /** Entries directly under snippets/ that are no folder the loader may read (a FIFO, a file, a symlink…). */
  private readonly topSkipped = new Map<string, SkippedEntry>();
  private readonly limits: FolderLimits & { maxFolders: number };
  private readonly budget: WatchBudget;
  /**
   * Folders holding more than limits.maxEntries entries: the watcher leaves them alone (listing and
   * watching a million files would take the core's start and memory with it); a timer counts them again.
   */
  private readonly oversized = new Set<string>();
  private recheckTimer: NodeJS.Timeout | null = null;
  /** snippets/ itself when it is no folder (a file, a FIFO…): nothing is watched until it becomes one. */
  private unusable: SkippedEntry | null = null;
  private rechecking = false;
  /** The workspace's real path: symlinks are followed only when they resolve inside it. */
  private root = '';
  /** snippets/'s real path: what the watcher watches and names events by (it follows no symlink, not even this one). */
  private watchDir = '';
  private stopped = false;

  constructor(private readonly opts: WorkspaceLoaderOptions) {
    this.snippetsDir = join(opts.dir, 'snippets');
    this.limits = { ...FOLDER_LIMITS, maxFolders: 1000, ...opts.limits };
    this.budget = new WatchBudget({ maxFolders: this.limits.maxFolders, maxEntries: this.limits.maxEntries });
  }

  private get tenant(): TenantRecord {
    return this.opts.tenants.get('local');
  }

  async start(): Promise<void> {
    // snippets/ may already be something else than a folder: watchSnippets() reports it; it is never fatal.
    await mkdir(this.snippetsDir, { recursive: true }).catch(() => {});
    this.root = await realpath(this.opts.dir).catch(() => resolve(this.opts.dir));
    this.recheckTimer = setInterval(() => void this.recheck(), this.opts.recheckMs ?? 3000);
    this.recheckTimer.unref();
    await this.watchSnippets();
  }

  /** Starts watching once snippets/ is a folder (or a symlink to one); until then, says what it is instead. */
  private async watchSnippets(): Promise<void> {
    const st = await stat(this.snippetsDir).catch((err: NodeJS.ErrnoException) => err);
    if (st instanceof Error || !st.isDirectory()) {
      const what = st instanceof Error ? `could not be examined (${st.code ?? String(st)})` : st.isFile() ? 'a file' : kindOf(st);
      const code = st instanceof Error ? 'unreadable' : st.isFile() ? 'not_a_folder' : 'special_file';
      const reason = `${what}, not a folder: snippets/ holds one folder per snippet; make it a folder (looked at again every few seconds)`;
      if (this.unusable?.reason !== reason) {
        this.opts.logger.log('warn', 'workspace snippets/ is not a folder', { path: this.snippetsDir, reason });
      }
      this.unusable = { path: 'snippets', code, reason };
      return;
    }
    const real = await realpath(this.snippetsDir).catch(() => this.snippetsDir);
    if (!isInside(this.root, real)) {
      const reason =
        `a symlink to ${real}, outside the workspace: make snippets/ a folder of the workspace, ` +
        'or start the emulator with --workspace on the folder that holds snippets/ (looked at again every few seconds)';
      if (this.unusable?.reason !== reason) this.opts.logger.log('warn', 'workspace snippets/ is outside the workspace', { path: real });
      this.unusable = { path: 'snippets', code: 'symlink_outside', reason };
      return;
    }
    this.watchDir = real;
    this.unusable = null;
    await this.findOversized();
    await this.startWatcher(false);
    // The watcher sees nothing in an oversized folder: load each once, so its error is shown.
    for (const folder of this.oversized) this.schedule(folder);
  }

  /** Counts every folder under snippets/ (bounded: it stops one entry past the cap). */
  private async findOversized(): Promise<void> {
    let seen = 0;
    try {
      for await (const e of await opendir(this.snippetsDir)) {
        if (e.name.startsWith('.') || !e.isDirectory()) continue;
        if (++seen > this.limits.maxFolders) break;
        if (await exceedsEntries(join(this.snippetsDir, e.name), this.limits)) this.oversized.add(e.name);
      }
    } catch (err) {
      // snippets/ changed under us: the watcher and the next recount see what it is now.
      this.opts.logger.log('warn', 'workspace: could not count the folders under snippets/', { error: String(err) });
    }
  }

  private async recheck(): Promise<void> {
    if (this.rechecking || this.stopped || (this.oversized.size === 0 && !this.unusable)) return;
    this.rechecking = true;
    try {
      if (this.unusable) return await this.watchSnippets();
      for (const folder of [...this.oversized]) {
        if (await exceedsEntries(join(this.snippetsDir, folder), this.limits)) continue;
        this.oversized.delete(folder);
        if (this.stopped) return;
        this.watcher?.add(join(this.watchDir, folder));
        this.schedule(folder);
      }
    } finally {
      this.rechecking = false;
    }
  }

  private async startWatcher(usePolling: boolean): Promise<void> {
    this.polling = usePolling;
    this.budget.clear();
    const watcher = watch(this.watchDir, {
      ignoreInitial: false,
      usePolling,
      interval: 200,
      // Never through a symlink (a link to / or a loop would be walked): the loader reads links itself (./safe-read.ts).
      followSymlinks: false,
      // snippets/ is level 0, a snippet folder level 1; the loader reads limits.maxDepth levels below that.
      depth: this.limits.maxDepth + 1,
      // node_modules and __pycache__ never reach a bundle; dotfiles neither (editor swap files included).
      // Past the watch budget a path is not watched either: a million files must not become a million watches.
      ignored: (path: string, stats?: Stats) => {
        const rel = relative(this.watchDir, path);
        if (LEFT_OUT.test(rel)) return true;
        if (this.oversized.has(rel.split(sep)[0]!)) return true;
        const kind = stats ? (stats.isDirectory() ? 'dir' : 'other') : undefined;
        return !rel.startsWith('..') && !this.budget.admit(rel.split(sep).join('/'), kind);
      },
    });
    watcher.on('all', (event: string, path: string) => {
      if (event === 'unlink' || event === 'unlinkDir') this.budget.release(relative(this.watchDir, path).split(sep).join('/'));
      const folder = this.folderOf(path);
      if (!folder) return;
      if (this.watcher === watcher) this.live.add(folder);
      this.schedule(folder);
    });
    // chokidar emits a path's `change` at most once per 50 ms and drops the rest (no trailing event): the end
    // of a save made within 50 ms of an earlier one (an editor's truncate-then-write, a burst) would go unseen
    // by a quiet window shorter than that. Its raw events (each fs.watch or poll event) are not throttled.
    watcher.on('raw', (_event: string, evPath: string | null, details: unknown) => {
      if (this.watcher !== watcher) return; // the initial scan's add events load every folder
      const d = details as { watchedPath?: string; curr?: Stats; prev?: Stats } | undefined;
      // Polling reports any stat change: one of the access time alone (the loader's own read) changes nothing.
      if (d?.curr && d.prev && d.curr.mtimeMs === d.prev.mtimeMs && d.curr.size === d.prev.size && d.curr.ino === d.prev.ino) return;
      const at = d?.watchedPath;
      const path = at ? (evPath ? join(at, evPath) : at) : evPath;
      if (!path || LEFT_OUT.test(relative(this.watchDir, path))) return;
      const folder = this.folderOf(path);
      if (!folder || this.oversized.has(folder)) return;
      this.live.add(folder);
      this.schedule(folder);
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
    if (this.stopped) return void (await watcher.close());
    this.watcher = watcher;
  }

  /**
   * Stops watching an oversized folder. chokidar's unwatch() leaves the watches below a folder open, so a
   * new watcher (which ignores the folder) replaces the old one; its initial scan reloads every folder,
   * which makes no version where nothing changed and misses no save made meanwhile.
   */
  private async dropFromWatcher(): Promise<void> {
    const old = this.watcher;
    if (!old || this.stopped) return;
    await old.close();
    if (this.stopped) return;
    await this.startWatcher(this.polling);
  }

  private folderOf(path: string): string | null {
    const rel = relative(this.watchDir, path);
    if (!rel || rel.startsWith('..')) return null;
    return rel.split(sep)[0] ?? null;
  }

  private schedule(folder: string): void {
    if (this.stopped) return;
    this.generation.set(folder, (this.generation.get(folder) ?? 0) + 1);
    clearTimeout(this.pendingErrors.get(folder));
    this.pendingErrors.delete(folder);
    clearTimeout(this.timers.get(folder));
    this.timers.set(
      folder,
      setTimeout(
        () => {
          this.timers.delete(folder);
          void this.load(folder);
        },
        this.statuses.get(folder)?.version ? (this.opts.debounceMs ?? 5) : (this.opts.newFolderDebounceMs ?? 50),
      ),
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
      .catch((err) => {
        // Never dropped silently: whatever went wrong is the folder's error until the next save.
        this.opts.logger.log('error', 'workspace load failed', { folder, error: String(err) });
        this.setError(folder, { state: 'error', error: { message: `the folder could not be read: ${String(err)}` } });
      })
      .finally(() => {
        this.running.delete(folder);
        if (this.dirty.delete(folder)) void this.load(folder);
      });
    this.running.set(folder, work);
    return work;
  }

  private setStatus(folder: string, patch: Partial<FolderStatus>): void {
    clearTimeout(this.pendingErrors.get(folder)); // a newer status replaces an error still waiting to be shown
    this.pendingErrors.delete(folder);
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
      skipped: [],
      ...prev,
      ...patch,
      updated_at: new Date().toISOString(),
    };
    this.statuses.set(folder, next);
    this.opts.onStatus?.(next);
  }

  /**
   * A refused save's status: at once for a folder without one yet, else after errorGraceMs unless the
   * folder changes again meanwhile (then that change's load decides what is shown).
   */
  private setError(folder: string, patch: Partial<FolderStatus>): void {
    const grace = this.opts.errorGraceMs ?? 100;
    clearTimeout(this.pendingErrors.get(folder));
    this.pendingErrors.delete(folder);
    if (grace <= 0 || !this.statuses.has(folder)) return this.setStatus(folder, patch);
    const timer = setTimeout(() => {
      this.pendingErrors.delete(folder);
      this.setStatus(folder, patch);
    }, grace);
    this.pendingErrors.set(folder, timer);
  }

  /** Starts a version's sandbox once its code passed the checks, beside its write (a write that fails wastes one start). */
  private startPrewarm(tenant: TenantRecord, planned: PlannedVersion): { job: PrewarmJob; work: Promise<PrewarmResult> } | null {
    const prewarm = this.opts.prewarm;
    if (!prewarm || this.stopped) return null;
    const { snippet, version, sha256, entrypoint, files, limits } = planned;
    const job: PrewarmJob = {
      tenantId: tenant.id,
      snippetId: snippet.id,
      version,
      runtime: snippet.runtime,
      bundle: { sha256, entrypoint, load: async () => files },
      limits,
    };
    const work = prewarm(job).catch((err: unknown): PrewarmResult => ({ outcome: 'failed', message: String(err) }));
    const tracked = work.then(() => {});
    this.warming.add(tracked);
    void tracked.finally(() => this.warming.delete(tracked));
    return { job, work };
  }

  /** A version that failed to start is the folder's error (it stays deployed: its runs fail the same way). */
  private reportPrewarm(folder: string, version: number, work: Promise<PrewarmResult>): void {
    void work.then((r) => {
      if (!('message' in r) || this.stopped) return;
      const current = this.statuses.get(folder);
      if (current?.version !== version || current.state !== 'loaded') return; // a newer save has its own status
      const what = r.outcome === 'oom_killed' ? 'ran out of memory while loading' : 'failed to start';
      this.opts.logger.log('warn', 'workspace version failed to start', { folder, version, outcome: r.outcome, error: r.message });
      this.setStatus(folder, { state: 'error', error: { message: `version ${version} is deployed but ${what}: ${r.message}` } });
    });
  }

  private async loadOnce(folder: string): Promise<void> {
    const generation = this.generation.get(folder) ?? 0;
    const began = performance.now(); // the terminal's `compiled … in N ms` (server/terminal-lines.ts)
    const read = await readSnippetFolder(join(this.snippetsDir, folder), folder, this.root, this.limits);
    if (read.kind === 'not_folder') this.topSkipped.set(folder, read.entry);
    else this.topSkipped.delete(folder);
    if (read.kind === 'missing' || read.kind === 'not_folder') {
      if (this.statuses.has(folder) && this.statuses.get(folder)!.state !== 'deleted') {
        const note = 'the folder was removed: the snippet and its versions stay until deleted through the API';
        this.setStatus(folder, { state: 'deleted', error: null, skipped: [], notes: [note] });
        this.opts.logger.log('info', 'workspace folder removed', { folder });
      }
      return;
    }
    if (read.kind === 'problem') {
      // Refused content the folder has changed since (half a save): its next load, already due, decides.
      if (this.generation.get(folder) !== generation) return;
      this.setError(folder, { state: 'error', error: read.problem, notes: read.notes, skipped: read.skipped });
      if (read.oversized && !this.oversized.has(folder)) {
        // It grew past the cap while watched: stop watching it until a recount finds it small again.
        this.oversized.add(folder);
        const max = this.limits.maxEntries;
        this.opts.logger.log('warn', 'workspace folder over the entry limit: no longer watched', { folder, max_entries: max });
        void this.dropFromWatcher();
      }
      return;
    }
    const { runtime, files, settings, notes, skipped } = read;
    const tenant = this.tenant;
    const targets = settings.deploy ?? ['dev'];
    let prewarm = null as { job: PrewarmJob; work: Promise<PrewarmResult> } | null; // set by onChecked
    /** The prewarm's sandbox goes when its version was not written as planned. */
    const dropPrewarm = () => {
      if (prewarm) this.opts.dropPrewarm?.(prewarm.job);
      prewarm = null;
    };
    try {
      const existing = this.opts.snippets.findByName(tenant, folder);
      if (existing && existing.runtime !== runtime) {
        throw new ValidationError(
          [],
          `snippet '${folder}' is a ${existing.runtime} snippet; its folder now holds a ${runtime} one (delete the snippet to change its runtime)`,
        );
      }
      if (!existing)
        await this.opts.snippets.create(tenant, {
          name: folder,
          runtime,
          ...(settings.description ? { description: settings.description } : {}),
        });
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
        {
          ...(settings.egress ? { egress: settings.egress } : {}),
          reuseUnchanged: true,
          deploy: targets,
          superseded: () => this.generation.get(folder) !== generation,
          onChecked: (planned) => {
            if (this.live.has(folder)) prewarm = this.startPrewarm(tenant, planned);
          },
        },
      );
      // Written (or unchanged): the prewarm is this version's, unless another writer took the number it planned.
      const started = prewarm?.job.version === version.version ? prewarm : null;
      if (!started) dropPrewarm();
      prewarm = null;
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
        load_ms: Math.round((performance.now() - began) * 10) / 10,
        notes,
        egress: settings.egress ?? null,
        skipped,
      });
      if (!version.unchanged) {
        this.opts.logger.log('info', 'workspace version created', { folder, version: version.version });
        if (started) this.reportPrewarm(folder, version.version, started.work);
      }
    } catch (err) {
      dropPrewarm(); // its version was not written (after the write, prewarm is null)
      if (err instanceof SupersededError) return; // the folder changed meanwhile: its next load (already due) decides
      if (!(err instanceof DomainError)) throw err;
      if (this.generation.get(folder) !== generation) return; // as above: the next load decides
      this.setError(folder, { state: 'error', runtime, error: problemOf(err), notes, skipped });
    }
  }

  status(): WorkspaceView {
    return {
      workspace: this.opts.dir,
      snippets_dir: this.snippetsDir,
      watching: this.watcher !== null,
      polling: this.polling,
      folders: [...this.statuses.values()].sort((a, b) => a.snippet.localeCompare(b.snippet)),
      skipped: [
        ...(this.unusable ? [this.unusable] : []),
        ...[...this.topSkipped.values()].sort((a, b) => a.path.localeCompare(b.path)),
        ...(this.budget.overflowed
          ? [
              {
                path: 'snippets/',
                code: 'too_many_entries' as const,
                reason:
                  `more than ${this.limits.maxFolders.toLocaleString('en')} entries under snippets/: ` +
                  'the rest are not watched. Keep only snippet folders there',
              },
            ]
          : []),
      ],
    };
  }

  /**
   * Resolves once no load is pending or running, no refused save's error waits to be shown, and the new
   * versions' sandboxes have started (tests, and `npm start`'s first banner: the startup scan prewarms none).
   */
  async settled(): Promise<void> {
    for (;;) {
      if (this.timers.size === 0 && this.running.size === 0 && this.pendingErrors.size === 0 && this.warming.size === 0) return;
      await Promise.all([...this.running.values(), ...this.warming]);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.recheckTimer) clearInterval(this.recheckTimer);
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    for (const t of this.pendingErrors.values()) clearTimeout(t);
    this.pendingErrors.clear();
    await this.watcher?.close();
    await Promise.all([...this.running.values()]);
  }
}

/**
 * What never reaches a bundle, so its changes load nothing: node_modules, __pycache__, dotfiles (editor swap
 * files included), and a snippet folder's cassettes/ (a record run writing one makes no version: ./folder.ts).
 */
const LEFT_OUT = /(^|[/\\])(node_modules|__pycache__|\.[^/\\]+)([/\\]|$)|^[^/\\]+[/\\]cassettes([/\\]|$)/;

/** The first problem of a refused version, with its file and line when the code check gave them. */
function problemOf(err: DomainError): FolderProblem {
  const first = (err.data.errors as FieldError[] | undefined)?.[0];
  if (!first) return { message: err.message };
  return {
    message: first.message,
    ...(first.file ? { file: first.file } : {}),
    ...(first.line ? { line: first.line } : {}),
    ...(first.column ? { column: first.column } : {}),
  };
}
