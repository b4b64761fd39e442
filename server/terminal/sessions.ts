import { constants } from 'node:os';
import type { z } from 'zod';
import type { TerminalExit as TerminalExitSchema, TerminalView as TerminalViewSchema } from '../../contract/schemas/terminal';
import { ConflictError, notFound, UnavailableError } from '../domain/errors';
import { newId } from '../ids';
import type { Logger } from '../logger';
import type { PtyExit, PtyProcess, PtySpawn } from './pty';
import { Scrollback } from './scrollback';
import type { LaunchSpec, TargetAvailability, TerminalTarget } from './targets';

/**
 * The GUI's terminals: shells on ptys, each with a bounded scrollback that every reader gets first,
 * then the live output. An exited terminal stays (with its exit) until it is deleted, so a page can
 * say how it ended. At most `maxLive` run at once; all are killed when the core stops.
 */
export type TerminalExit = z.output<typeof TerminalExitSchema>;

/** A terminal as `/_emu/terminals` answers it (contract/schemas/terminal.ts). */
export type TerminalView = z.output<typeof TerminalViewSchema>;

export type TerminalEvent = { event: 'output'; id: number; data: { data: string } } | { event: 'exit'; id: number; data: TerminalExit };

/** What a new reader gets: the scrollback so far (as of event `seq`), the exit if it has ended. */
export interface TerminalFollow {
  replay: string;
  seq: number;
  exit: TerminalExit | null;
  unsubscribe(): void;
}

export interface TerminalLauncher {
  availability(target: TerminalTarget): TargetAvailability;
  launch(target: TerminalTarget): LaunchSpec;
}

export interface TerminalSessionsOptions {
  spawn: PtySpawn;
  targets: TerminalLauncher;
  logger?: Logger;
  now?: () => Date;
  /** Terminals running at once (default 8). */
  maxLive?: number;
  /** Exited terminals kept for their exit and scrollback (default 16; the oldest go first). */
  maxExited?: number;
  /** Scrollback per terminal, in characters (default 256 Ki). */
  scrollback?: number;
  /** How long a SIGHUP'd shell has to exit before it and its process group are SIGKILLed (default 1000 ms). */
  killGraceMs?: number;
  /** A terminal opened, its shell exited, or it was closed (the core announces it on the live feed). */
  onChange?: (id: string, state: 'opened' | 'resized' | 'exited' | 'closed') => void;
}

export const TERMINAL_LIMITS = { maxLive: 8, maxExited: 16, scrollback: 256 * 1024, killGraceMs: 1000 } as const;

const SIGNAL_NAMES = new Map<number, string>(Object.entries(constants.signals).map(([name, n]) => [n, name]));

class Session {
  readonly id = newId('term');
  readonly createdAt: string;
  exit: TerminalExit | null = null;
  exitedAt: string | null = null;
  cols: number;
  rows: number;
  private seq = 0;
  private readonly decoder = new TextDecoder();
  private readonly scrollback: Scrollback;
  private readonly listeners = new Set<(e: TerminalEvent) => void>();
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly pty: PtyProcess,
    readonly spec: LaunchSpec,
    size: { cols: number; rows: number },
    private readonly now: () => Date,
    scrollback: number,
    private readonly onEnd: (s: Session) => void,
  ) {
    this.createdAt = now().toISOString();
    this.cols = size.cols;
    this.rows = size.rows;
    this.scrollback = new Scrollback(scrollback);
    pty.onData((bytes) => this.output(this.decoder.decode(bytes, { stream: true })));
    pty.onExit((e) => this.finish(e));
  }

  get pid(): number {
    return this.pty.pid;
  }

  view(): TerminalView {
    return {
      id: this.id,
      target: this.spec.target,
      shell: this.spec.shell,
      cwd: this.spec.cwd,
      pid: this.pty.pid,
      cols: this.cols,
      rows: this.rows,
      status: this.exit ? 'exited' : 'running',
      exit_code: this.exit?.exit_code ?? null,
      signal: this.exit?.signal ?? null,
      created_at: this.createdAt,
      exited_at: this.exitedAt,
    };
  }

  follow(listener: (e: TerminalEvent) => void): TerminalFollow {
    if (!this.exit) this.listeners.add(listener);
    // seq: the id of the last output in the replay (an exited terminal's last event is its exit).
    const seq = this.exit ? this.seq - 1 : this.seq;
    return { replay: this.scrollback.read(), seq, exit: this.exit, unsubscribe: () => this.listeners.delete(listener) };
  }

  write(data: string): void {
    this.pty.write(data);
  }

  resize(cols: number, rows: number): void {
    this.pty.resize(cols, rows);
    this.cols = cols;
    this.rows = rows;
  }

  signal(sig: NodeJS.Signals, group = false): void {
    if (this.exit) return;
    if (group) {
      try {
        process.kill(-this.pty.pid, sig); // the shell is a session and group leader on its pty
      } catch {
        /* gone already */
      }
    }
    this.pty.kill(sig);
  }

  /** Resolves true once the process has exited, false after `ms` if it has not. */
  waitExit(ms: number): Promise<boolean> {
    if (this.exit) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(done);
        resolve(false);
      }, ms);
      this.waiters.add(done);
    });
  }

  private output(text: string): void {
    if (!text) return;
    this.scrollback.push(text);
    this.emit({ event: 'output', id: ++this.seq, data: { data: text } });
  }

  private finish(e: PtyExit): void {
    if (this.exit) return;
    this.output(this.decoder.decode()); // a character cut short at the very end
    const signal = e.signal ? (SIGNAL_NAMES.get(e.signal) ?? `signal ${e.signal}`) : null;
    this.exit = { exit_code: signal ? null : e.exitCode, signal };
    this.exitedAt = this.now().toISOString();
    this.emit({ event: 'exit', id: ++this.seq, data: this.exit });
    this.listeners.clear();
    for (const w of [...this.waiters]) w();
    this.onEnd(this);
  }

  private emit(e: TerminalEvent): void {
    for (const l of [...this.listeners]) {
      try {
        l(e);
      } catch {
        this.listeners.delete(l); // a broken reader does not stop the others
      }
    }
  }
}

export class TerminalSessions {
  private readonly sessions = new Map<string, Session>();
  private readonly limits: Required<Pick<TerminalSessionsOptions, 'maxLive' | 'maxExited' | 'scrollback' | 'killGraceMs'>>;
  private readonly now: () => Date;
  private starting = 0;
  private closed = false;

  constructor(private readonly opts: TerminalSessionsOptions) {
    this.limits = {
      maxLive: opts.maxLive ?? TERMINAL_LIMITS.maxLive,
      maxExited: opts.maxExited ?? TERMINAL_LIMITS.maxExited,
      scrollback: opts.scrollback ?? TERMINAL_LIMITS.scrollback,
      killGraceMs: opts.killGraceMs ?? TERMINAL_LIMITS.killGraceMs,
    };
    this.now = opts.now ?? (() => new Date());
  }

  get maxLive(): number {
    return this.limits.maxLive;
  }

  availability(target: TerminalTarget): TargetAvailability {
    return this.opts.targets.availability(target);
  }

  /** Starts a terminal: 409 when the target is unavailable or `maxLive` are running. */
  async open(req: { target: TerminalTarget; cols: number; rows: number }): Promise<TerminalView> {
    if (this.closed) throw new UnavailableError('the emulator is stopping', 'shutting_down');
    if (this.live().length + this.starting >= this.limits.maxLive) {
      throw new ConflictError(`${this.limits.maxLive} terminals are running already: close one first`, 'too_many_terminals', {
        max_live: this.limits.maxLive,
      });
    }
    const spec = this.opts.targets.launch(req.target);
    this.starting++;
    let pty: PtyProcess;
    try {
      pty = await this.opts.spawn({ file: spec.file, args: spec.args, cwd: spec.cwd, env: spec.env, cols: req.cols, rows: req.rows });
    } catch (err) {
      this.opts.logger?.log('error', 'terminal spawn failed', { target: req.target, file: spec.file, error: String(err) });
      throw new UnavailableError(`${spec.shell} could not be started on a pty; the emulator's log has the reason`, 'terminal_spawn_failed');
    } finally {
      this.starting--;
    }
    const session = new Session(pty, spec, req, this.now, this.limits.scrollback, (s) => {
      this.trimExited();
      this.opts.onChange?.(s.id, 'exited');
    });
    this.sessions.set(session.id, session);
    this.opts.onChange?.(session.id, 'opened');
    this.opts.logger?.log('info', 'terminal opened', { id: session.id, target: spec.target, shell: spec.shell, pid: pty.pid });
    if (this.closed) await this.kill(session); // the core began stopping while it started
    return session.view();
  }

  /** Every terminal, oldest first. */
  list(): TerminalView[] {
    return [...this.sessions.values()].map((s) => s.view());
  }

  get(id: string): TerminalView {
    return this.session(id).view();
  }

  follow(id: string, listener: (e: TerminalEvent) => void): TerminalFollow {
    return this.session(id).follow(listener);
  }

  write(id: string, data: string): void {
    this.running(id).write(data);
  }

  resize(id: string, cols: number, rows: number): void {
    this.running(id).resize(cols, rows);
    // A page that reloads the list on `opened` must not keep the size from before (the GUI's status line).
    this.opts.onChange?.(id, 'resized');
  }

  /** Kills a terminal (if it runs) and forgets it. */
  async remove(id: string): Promise<void> {
    const s = this.session(id);
    await this.kill(s);
    this.sessions.delete(id);
    this.opts.logger?.log('info', 'terminal closed', { id, exit: s.exit });
    this.opts.onChange?.(id, 'closed');
  }

  /** Kills every terminal and refuses new ones (the core is stopping). */
  async closeAll(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.sessions.values()].map((s) => this.kill(s)));
    this.sessions.clear();
  }

  private live(): Session[] {
    return [...this.sessions.values()].filter((s) => !s.exit);
  }

  private session(id: string): Session {
    const s = this.sessions.get(id);
    if (!s) throw notFound('terminal', id);
    return s;
  }

  private running(id: string): Session {
    const s = this.session(id);
    if (s.exit) throw new ConflictError(`terminal '${id}' has exited; open a new one`, 'terminal_exited');
    return s;
  }

  /**
   * SIGHUP, as a closed terminal window sends it (a shell passes it on to its jobs; scripts its rc file
   * is still running get it too, so they can clean up), then SIGKILL to its process group after the grace.
   */
  private async kill(s: Session): Promise<void> {
    if (s.exit) return;
    s.signal('SIGHUP', true);
    if (await s.waitExit(this.limits.killGraceMs)) return;
    s.signal('SIGKILL', true);
    if (!(await s.waitExit(2000))) this.opts.logger?.log('warn', 'terminal did not exit after SIGKILL', { id: s.id, pid: s.pid });
  }

  private trimExited(): void {
    const exited = [...this.sessions.values()].filter((s) => s.exit);
    for (const s of exited.slice(0, Math.max(0, exited.length - this.limits.maxExited))) this.sessions.delete(s.id);
  }
}

/** What the routes see: the sessions, or why this core has no terminals (the reason names the flag). */
export type TerminalAccess = { sessions: TerminalSessions; disabled: null } | { sessions: null; disabled: string };
