import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { z } from 'zod';
import { limaTemplate, VM_NAME } from './template';
import { spawnRunner, type ProcessRunner, type RunResult } from './process';

/**
 * The executor VM of macOS (Lima), managed from the app: what `limactl list --json` says about it, and
 * `create` / `start` / `stop` run one at a time in the background, their output kept line by line so
 * the GUI and the CLI can follow an operation that takes minutes. Everything goes through `limactl`;
 * nothing here reads Lima's own files.
 *
 * Lima is needed on macOS only. Where `limactl` is unknown (Linux, or a Mac without Lima) every action
 * is refused with the reason; an explicit `limactl` path makes the VM manageable on any host (tests
 * drive a fake one on Linux).
 */

// ---- what limactl prints ------------------------------------------------------------------------------

/**
 * One line of `limactl list --json` (Lima's `Instance`, pkg/limatype): `memory` and `disk` in bytes.
 * Older releases print fewer fields; unknown ones are ignored.
 */
export const LimaInstance = z.object({
  name: z.string().min(1),
  /** `Running`, `Stopped`, `Broken`, `Installing`, `Uninitialized`, or "" (unknown). */
  status: z.string(),
  dir: z.string().optional(),
  vmType: z.string().optional(),
  arch: z.string().optional(),
  cpus: z.number().int().optional(),
  memory: z.union([z.number(), z.string()]).optional(),
  disk: z.union([z.number(), z.string()]).optional(),
  message: z.string().optional(),
  /** Strings since Lima 1.0; earlier releases printed `{}` per error. */
  errors: z.array(z.unknown()).nullish(),
});
export type LimaInstance = z.infer<typeof LimaInstance>;

// ---- what the manager reports -------------------------------------------------------------------------

export const VmInfo = z.object({
  name: z.string(),
  /** `missing` (not created), `unknown` (limactl unusable), or Lima's own status (`Running`, `Stopped`, `Broken`…). */
  status: z.string(),
  dir: z.string().optional(),
  vm_type: z.string().optional(),
  arch: z.string().optional(),
  cpus: z.number().int().optional(),
  /** Bytes. */
  memory: z.number().optional(),
  /** Bytes. */
  disk: z.number().optional(),
  message: z.string().optional(),
  errors: z.array(z.string()).optional(),
});
export type VmInfo = z.infer<typeof VmInfo>;

export const VmOperationKind = z.enum(['create', 'start', 'stop']);
export type VmOperationKind = z.infer<typeof VmOperationKind>;

export const VmOperation = z.object({
  kind: VmOperationKind,
  state: z.enum(['running', 'succeeded', 'failed']),
  started_at: z.string(),
  finished_at: z.string().optional(),
  /** limactl's exit code (null: it could not start, or a signal ended it). */
  exit_code: z.number().int().nullable().optional(),
  /** Why it failed, in a sentence. */
  error: z.string().optional(),
  /** The command run (the first log line shows it too). */
  command: z.array(z.string()),
  /** The last lines of limactl's output, stdout and stderr by line as they came. */
  log: z.array(z.string()),
  /** Lines seen since the start (more than `log` holds once old lines were dropped): a follower's cursor. */
  log_total: z.number().int(),
});
export type VmOperation = z.infer<typeof VmOperation>;

export const VmStatus = z.object({
  /** Whether the VM can be managed from here (limactl known). */
  available: z.boolean(),
  /** Why not, when it cannot. */
  reason: z.string().optional(),
  limactl: z.string().nullable(),
  limactl_version: z.string().optional(),
  /** limactl failed or printed something unreadable: the VM's state is unknown. */
  error: z.string().optional(),
  vm: VmInfo,
  /** The running operation, or the last one since this process started. */
  operation: VmOperation.nullable(),
});
export type VmStatus = z.infer<typeof VmStatus>;

/** An action refused, with a stable code (the HTTP layer maps it to a 409 or 502). */
export type LimaRefusalCode =
  'vm_unavailable' | 'vm_operation_running' | 'vm_exists' | 'vm_missing' | 'vm_running' | 'vm_not_running' | 'limactl_failed';

export class LimaRefused extends Error {
  constructor(
    readonly code: LimaRefusalCode,
    message: string,
  ) {
    super(message);
    this.name = 'LimaRefused';
  }
}

// ---- the manager -------------------------------------------------------------------------------------

export interface LimaManagerOptions {
  /** The limactl executable; null when there is none (every action refused with the reason). */
  limactl: string | null;
  /** The checkout the VM mounts (its template needs it); null when unknown (create refused). */
  projectRoot: string | null;
  /** Default: process.platform. Says why Lima is not used when limactl is null. */
  platform?: NodeJS.Platform;
  /** The limit backend of this host (`cgroup-v1`, `none`…), named in the reason Lima is not needed. */
  hostBackend?: string | null;
  run?: ProcessRunner;
  clock?: () => Date;
  /** Where the template is written for `limactl create` (default: the OS temp dir). */
  tmpDir?: string;
  vmName?: string;
  template?: (projectRoot: string) => string;
  /** Output lines kept per operation (default 500). */
  logLines?: number;
  /** Called after an operation succeeded (the core connects to the VM's agent after a start). */
  onSucceeded?: (kind: VmOperation['kind']) => void | Promise<void>;
  /** The operation began (`line` null), printed a line, or ended (`line` null, state final): the core's live feed. */
  onChange?: (op: Pick<VmOperation, 'kind' | 'state' | 'started_at' | 'log_total'>, line: string | null) => void;
}

/** A line of output longer than this is cut (a log of 500 lines stays small enough to read whole). */
const MAX_LINE = 2_000;

interface Running {
  op: VmOperation;
  done: Promise<VmOperation>;
  abort: AbortController;
}

type Listed = { ok: true; instances: LimaInstance[] } | { ok: false; error: string };

export class LimaManager {
  readonly vmName: string;
  readonly limactl: string | null;
  private readonly run: ProcessRunner;
  private readonly clock: () => Date;
  private readonly logLines: number;
  private current: Running | null = null;
  /** An action between its checks and its start: a second one is refused meanwhile. */
  private preparing = false;
  private cachedVersion: string | null = null;
  private readonly listeners = new Set<(line: string) => void>();

  constructor(private readonly opts: LimaManagerOptions) {
    this.vmName = opts.vmName ?? VM_NAME;
    this.limactl = opts.limactl;
    this.run = opts.run ?? spawnRunner;
    this.clock = opts.clock ?? (() => new Date());
    this.logLines = opts.logLines ?? 500;
  }

  /** Why the VM cannot be managed here, or null when it can. */
  get unavailableReason(): string | null {
    if (this.limactl) return null;
    const platform = this.opts.platform ?? process.platform;
    if (platform === 'darwin') return 'limactl is not on PATH: install Lima (brew install lima)';
    const name = platform === 'linux' ? 'Linux' : platform === 'win32' ? 'Windows' : platform;
    const backend = this.opts.hostBackend;
    const how =
      backend && backend !== 'none'
        ? `limits are enforced on this host by ${backend}`
        : backend === 'none'
          ? 'snippets run on this host, where only the timeout is enforced (no limit backend works here; see the limits above)'
          : 'snippets run on this host with its own limit backend';
    return `Lima is only used on macOS: on ${name} ${how}`;
  }

  /** The VM as limactl sees it, and the current or last operation. Never throws. */
  async status(): Promise<VmStatus> {
    const operation = this.snapshot();
    const reason = this.unavailableReason;
    if (reason || !this.limactl)
      return { available: false, reason: reason ?? undefined, limactl: null, vm: { name: this.vmName, status: 'unknown' }, operation };
    const [version, listed] = await Promise.all([this.version(), this.list()]);
    const base = { available: true, limactl: this.limactl, ...(version ? { limactl_version: version } : {}), operation };
    if (!listed.ok) return { ...base, error: listed.error, vm: { name: this.vmName, status: 'unknown' } };
    return { ...base, vm: this.vmFrom(listed.instances) };
  }

  /** Writes the VM's template to a temp file and runs `limactl create` on it. */
  create(): Promise<VmOperation> {
    return this.begin('create', async (vm, limactl) => {
      if (vm.status !== 'missing') {
        throw new LimaRefused(
          'vm_exists',
          `the VM '${this.vmName}' already exists (${vm.status || 'status unknown'}): start it, or remove it with \`limactl delete ${this.vmName}\` to create it afresh`,
        );
      }
      const root = this.opts.projectRoot;
      if (!root)
        throw new LimaRefused('vm_unavailable', 'the project checkout is unknown, so the VM template (which mounts it) cannot be written');
      const text = (this.opts.template ?? ((projectRoot) => limaTemplate({ projectRoot })))(root);
      // Named after this process: the core's housekeeping removes it if a SIGKILL comes before the cleanup.
      const dir = await mkdtemp(join(this.opts.tmpDir ?? tmpdir(), `svc-emu-lima-${process.pid}-`));
      const file = join(dir, `${this.vmName}.yaml`);
      await writeFile(file, text, { mode: 0o600 });
      return {
        argv: [limactl, 'create', '--tty=false', '--name', this.vmName, file],
        cleanup: () => rm(dir, { recursive: true, force: true }),
      };
    });
  }

  /** `limactl start`: boots the VM (the first start also downloads the image and provisions the runtimes). */
  start(): Promise<VmOperation> {
    return this.begin('start', async (vm, limactl) => {
      if (vm.status === 'missing') throw new LimaRefused('vm_missing', `there is no VM '${this.vmName}' yet: create it first`);
      if (vm.status === 'Running') throw new LimaRefused('vm_running', `the VM '${this.vmName}' is already running`);
      return { argv: [limactl, 'start', '--tty=false', this.vmName] };
    });
  }

  stop(): Promise<VmOperation> {
    return this.begin('stop', async (vm, limactl) => {
      if (vm.status === 'missing') throw new LimaRefused('vm_missing', `there is no VM '${this.vmName}' to stop`);
      if (vm.status === 'Stopped') throw new LimaRefused('vm_not_running', `the VM '${this.vmName}' is already stopped`);
      return { argv: [limactl, 'stop', this.vmName] };
    });
  }

  /** The running (or last) operation's end; null when none was started. */
  wait(): Promise<VmOperation> | null {
    return this.current?.done ?? null;
  }

  /** Each line of every operation's output, as it comes. Returns the unsubscribe. */
  onLine(fn: (line: string) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Stops a running operation (its limactl is killed) and waits for it. */
  async close(): Promise<void> {
    const running = this.current;
    if (!running || running.op.state !== 'running') return;
    running.abort.abort();
    await running.done;
  }

  // ---- internals ---------------------------------------------------------------------------------------

  private snapshot(): VmOperation | null {
    return this.current ? { ...this.current.op, command: [...this.current.op.command], log: [...this.current.op.log] } : null;
  }

  private async begin(
    kind: VmOperationKind,
    prepare: (vm: VmInfo, limactl: string) => Promise<{ argv: string[]; cleanup?: () => Promise<void> }>,
  ): Promise<VmOperation> {
    const reason = this.unavailableReason;
    if (reason || !this.limactl) throw new LimaRefused('vm_unavailable', reason ?? 'limactl is unknown');
    const limactl = this.limactl;
    if (this.preparing || this.current?.op.state === 'running') {
      const what =
        this.current?.op.state === 'running'
          ? `'${this.current.op.kind}' is still running (since ${this.current.op.started_at})`
          : 'another operation is starting';
      throw new LimaRefused('vm_operation_running', `one VM operation at a time: ${what}`);
    }
    this.preparing = true;
    try {
      const listed = await this.list();
      if (!listed.ok) throw new LimaRefused('limactl_failed', listed.error);
      const plan = await prepare(this.vmFrom(listed.instances), limactl);
      const op: VmOperation = { kind, state: 'running', started_at: this.clock().toISOString(), command: plan.argv, log: [], log_total: 0 };
      const abort = new AbortController();
      const done = this.execute(op, plan.argv, abort.signal, plan.cleanup);
      this.current = { op, done, abort };
      this.changed(op, null);
      return this.snapshot()!;
    } finally {
      this.preparing = false;
    }
  }

  private async execute(op: VmOperation, argv: string[], signal: AbortSignal, cleanup?: () => Promise<void>): Promise<VmOperation> {
    this.append(op, `$ ${argv.join(' ')}`);
    let res: RunResult;
    try {
      res = await this.run(argv, { onLine: (line) => this.append(op, line), signal });
    } catch (err) {
      res = { code: null, signal: null, stdout: '', stderr: '', error: err instanceof Error ? err.message : String(err) };
    }
    await cleanup?.().catch(() => {});
    op.exit_code = res.code;
    op.finished_at = this.clock().toISOString();
    if (res.error) op.error = `could not run ${argv[0]}: ${res.error}`;
    else if (signal.aborted) op.error = `stopped: the emulator shut down while limactl ${op.kind} ran`;
    else if (res.code !== 0)
      op.error =
        res.code === null ? `limactl ${op.kind} was killed (${res.signal ?? 'signal'})` : `limactl ${op.kind} exited with code ${res.code}`;
    if (op.error) {
      op.state = 'failed';
      this.append(op, op.error);
    } else {
      // Still `running` while the hook works (a start: the core connecting to the VM's agent), so a
      // client that waits for the end finds the core ready.
      await Promise.resolve(this.opts.onSucceeded?.(op.kind)).catch((err: unknown) =>
        this.append(op, `after ${op.kind}: ${err instanceof Error ? err.message : String(err)}`),
      );
      op.state = 'succeeded';
    }
    this.changed(op, null);
    return this.snapshot()!;
  }

  private changed(op: VmOperation, line: string | null): void {
    try {
      this.opts.onChange?.({ kind: op.kind, state: op.state, started_at: op.started_at, log_total: op.log_total }, line);
    } catch {
      /* a listener's failure is not the operation's */
    }
  }

  private append(op: VmOperation, raw: string) {
    const line = raw.length > MAX_LINE ? `${raw.slice(0, MAX_LINE)}… (${raw.length - MAX_LINE} more characters)` : raw;
    op.log.push(line);
    op.log_total++;
    if (op.log.length > this.logLines) op.log.splice(0, op.log.length - this.logLines);
    this.changed(op, line);
    for (const fn of this.listeners) {
      try {
        fn(line);
      } catch {
        /* a listener's failure is not the operation's */
      }
    }
  }

  private async version(): Promise<string | null> {
    if (this.cachedVersion || !this.limactl) return this.cachedVersion;
    const res = await this.run([this.limactl, '--version']).catch(() => null);
    if (!res || res.code !== 0) return null;
    const text = res.stdout.trim();
    this.cachedVersion = /version\s+(\S+)/.exec(text)?.[1] ?? (text.split('\n')[0] || null);
    return this.cachedVersion;
  }

  private async list(): Promise<Listed> {
    if (!this.limactl) return { ok: false, error: 'limactl is unknown' };
    let res: RunResult;
    try {
      res = await this.run([this.limactl, 'list', '--json']);
    } catch (err) {
      return { ok: false, error: `could not run ${this.limactl}: ${err instanceof Error ? err.message : String(err)}` };
    }
    if (res.error) return { ok: false, error: `could not run ${this.limactl}: ${res.error}` };
    if (res.code !== 0) {
      const said = lastLines(res.stderr || res.stdout);
      return { ok: false, error: `\`limactl list --json\` failed (exit ${res.code ?? res.signal})${said ? `: ${said}` : ''}` };
    }
    return parseInstanceList(res.stdout);
  }

  private vmFrom(instances: LimaInstance[]): VmInfo {
    const inst = instances.find((i) => i.name === this.vmName);
    if (!inst) return { name: this.vmName, status: 'missing' };
    const memory = bytes(inst.memory);
    const disk = bytes(inst.disk);
    const errors = (inst.errors ?? []).map((e) => (typeof e === 'string' ? e : JSON.stringify(e))).filter((e) => e && e !== '{}');
    return {
      name: inst.name,
      status: inst.status || 'unknown',
      ...(inst.dir ? { dir: inst.dir } : {}),
      ...(inst.vmType ? { vm_type: inst.vmType } : {}),
      ...(inst.arch ? { arch: inst.arch } : {}),
      ...(inst.cpus !== undefined ? { cpus: inst.cpus } : {}),
      ...(memory !== undefined ? { memory } : {}),
      ...(disk !== undefined ? { disk } : {}),
      ...(inst.message ? { message: inst.message } : {}),
      ...(errors.length ? { errors } : {}),
    };
  }
}

/** `limactl list --json`: one JSON object per line (none at all when there is no instance). */
export function parseInstanceList(stdout: string): Listed {
  const instances: LimaInstance[] = [];
  const lines = stdout.split('\n');
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (!line) continue;
    const where = `line ${i + 1}: ${line.length > 120 ? `${line.slice(0, 120)}…` : line}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return { ok: false, error: `\`limactl list --json\` printed something that is not JSON (${where})` };
    }
    for (const item of Array.isArray(value) ? value : [value]) {
      const parsed = LimaInstance.safeParse(item);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        const detail = issue ? `${issue.path.join('.') || 'the line'}: ${issue.message}` : 'unexpected shape';
        return { ok: false, error: `\`limactl list --json\` printed something that is not a Lima instance (${where}; ${detail})` };
      }
      instances.push(parsed.data);
    }
  }
  return { ok: true, instances };
}

const UNITS: Record<string, number> = {
  b: 1,
  k: 1e3,
  kb: 1e3,
  kib: 1024,
  m: 1e6,
  mb: 1e6,
  mib: 1024 ** 2,
  g: 1e9,
  gb: 1e9,
  gib: 1024 ** 3,
  t: 1e12,
  tb: 1e12,
  tib: 1024 ** 4,
};

/** Bytes from Lima's number, or from a size string (`4GiB`) as older releases and templates write it. */
export function bytes(v: number | string | undefined): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) && v >= 0 ? v : undefined;
  if (typeof v !== 'string') return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(v);
  const unit = m ? UNITS[(m[2] || 'b').toLowerCase()] : undefined;
  return m && unit ? Math.round(Number(m[1]) * unit) : undefined;
}

const lastLines = (text: string) => text.trim().split('\n').slice(-3).join(' / ').slice(0, 500);

/** limactl on macOS, found on PATH; null elsewhere (Lima is not used there) or when it is not installed. */
export function detectLimactl(opts: { platform?: NodeJS.Platform; path?: string } = {}): string | null {
  if ((opts.platform ?? process.platform) !== 'darwin') return null;
  for (const dir of (opts.path ?? process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'limactl'))) return join(dir, 'limactl');
  }
  return null;
}
