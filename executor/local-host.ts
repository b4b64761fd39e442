import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { RunnerChannel } from './runner-client';
import { bwrapArgv, writeSandboxIdentity, type Bind, type BwrapFeatures } from './sandbox/bwrap';
import type { LimitBackend, LimitGroup } from './limits/types';
import type { Sandbox, SandboxHost, SandboxHostInfo, SandboxSpec } from './sandbox-host';

export interface LocalRuntimePaths {
  /** The Bun binary and the shared node_modules snippets import from. */
  bun: { bin: string; nodeModules: string };
  /** The venv's python and the real install it links to (both bound read-only in the sandbox). */
  python: { bin: string; venv: string; basePrefix: string };
  /** executor/runtimes: the runners. */
  runtimesDir: string;
}

export interface LocalHostOptions {
  backend: LimitBackend;
  runtimes: LocalRuntimePaths;
  /** Where bundles are materialised (`<dir>/bundles/<sha>`). */
  workDir: string;
  /** bubblewrap, when the parity sandbox works here (with the options this version understands). */
  bwrap: { bin: string; features: BwrapFeatures } | null;
  /** Why bubblewrap is not used (missing, or refused by this host). */
  bwrapMissingReason?: string | null;
  /** `setpriv` (util-linux) for a parent-death signal when there is no bwrap. */
  setpriv?: string | null;
  initTimeoutMs?: number;
  transport?: string;
  /**
   * Runners per runtime started ahead, in a group with a generous memory limit and no bundle; a new
   * sandbox takes one, sets the version's memory limit, copies the bundle in and sends `load`: the
   * runtime's start-up is paid before the request (DESIGN.md, "Cold starts"). 0 disables.
   */
  spares?: number;
  pidsMax?: number;
  tmpSizeMb?: number;
  /**
   * The core's egress proxy: an absolute path on this host to its unix socket (DESIGN.md, "Egress proxy").
   * Runners get it as SVC_EGRESS_SOCKET (bound into the sandbox at EGRESS_SOCKET_IN_SANDBOX under
   * bubblewrap) and relay their HTTP(S)_PROXY traffic to it. Unset: runners get no proxy.
   */
  egressSocket?: string | null;
}

/** Where a sandbox sees the egress proxy's socket (/run is a tmpfs of the sandbox: bwrap can bind onto it). */
export const EGRESS_SOCKET_IN_SANDBOX = '/run/svc-egress.sock';

/** A spare's memory limit until it is claimed (then the version's own limit applies). */
const SPARE_MEMORY_MB = 1024;

interface Spawned {
  id: string;
  runtime: SandboxSpec['runtime'];
  appDir: string;
  limits: { memoryMb: number; pidsMax: number; tmpSizeMb: number };
  group: LimitGroup;
  child: ChildProcess;
  channel: RunnerChannel;
  exited: Promise<{ code: number | null; signal: string | null }>;
  started: number;
  stderr: { head: string };
  /** Under bubblewrap: whether the egress socket was there to bind when it started (see claimSpare). */
  egressBound: boolean;
  stopCollecting(): void;
  alive(): boolean;
  destroy(): Promise<void>;
}

const APP = '/opt/svc/app';

/** Limit groups are named after the core that made them (`c<pid>-…`), so a later core can tell a dead core's leftovers. */
const groupId = (id: string) => `c${process.pid}-${id}`;
const OWNED = /^c(\d+)-/;

/** A group left by a core (or agent) that is no longer running. Groups of other names are never touched. */
export function isStaleGroup(id: string, alive: (pid: number) => boolean = pidAlive): boolean {
  const m = OWNED.exec(id);
  return m !== null && Number(m[1]) !== process.pid && !alive(Number(m[1]));
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Sandboxes on this machine: a limit group (cgroup/scope) entered before any code runs, optionally the
 * bubblewrap parity sandbox, and the runner on fd 3.
 */
export class LocalSandboxHost implements SandboxHost {
  readonly info: SandboxHostInfo;
  private readonly bundles: string;

  constructor(private readonly opts: LocalHostOptions) {
    if (opts.egressSocket && !opts.egressSocket.startsWith('/')) {
      throw new Error(`egressSocket must be an absolute path (got ${JSON.stringify(opts.egressSocket)})`);
    }
    this.bundles = join(opts.workDir, 'bundles');
    this.spareDir = join(opts.workDir, 'spare');
    const degraded: string[] = [];
    if (opts.backend.degraded) degraded.push(opts.backend.degraded);
    if (!opts.bwrap) {
      degraded.push(`no parity sandbox (${opts.bwrapMissingReason ?? 'bubblewrap not found'}): snippets can see host files and the network`);
    }
    this.info = {
      backend: opts.backend.name,
      sandbox: opts.bwrap ? 'bwrap' : 'none',
      transport: opts.transport ?? 'local',
      degraded,
    };
  }

  /**
   * Start-up housekeeping: limit groups of cores that died, and the bundle cache (a cache of this data
   * dir's versions, which only this core uses: it holds the data dir's lock).
   */
  async sweep(): Promise<{ groups: number }> {
    await rm(this.bundles, { recursive: true, force: true });
    await rm(this.spareDir, { recursive: true, force: true });
    // Outside the sandbox, a spare's bundle resolves shared packages through <spare>/node_modules.
    await mkdir(this.spareDir, { recursive: true });
    await symlink(this.opts.runtimes.bun.nodeModules, join(this.spareDir, 'node_modules')).catch(() => {});
    const groups = (await this.opts.backend.sweep?.((id) => isStaleGroup(id))) ?? 0;
    return { groups };
  }

  async hasBundle(sha: string): Promise<boolean> {
    return stat(join(this.bundles, sha)).then(
      (s) => s.isDirectory(),
      () => false,
    );
  }

  async materialize(sha: string, _entrypoint: string, files: Record<string, string>): Promise<void> {
    if (await this.hasBundle(sha)) return;
    await mkdir(this.bundles, { recursive: true });
    // Outside the sandbox, snippets resolve shared packages through <bundles>/node_modules.
    const link = join(this.bundles, 'node_modules');
    if (!existsSync(link)) await symlink(this.opts.runtimes.bun.nodeModules, link).catch(() => {});
    const tmp = join(this.bundles, `.${sha}.${randomBytes(4).toString('hex')}`);
    for (const [path, content] of Object.entries(files)) {
      const file = join(tmp, path);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, content, { mode: 0o644 });
    }
    try {
      await rename(tmp, join(this.bundles, sha));
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      if (!(await this.hasBundle(sha))) throw err; // else: a concurrent materialise won the race
    }
  }

  private runnerArgv(runtime: SandboxSpec['runtime'], bundleDir: string, entry: string | null): string[] {
    const { runtimes } = this.opts;
    const entryArgs = entry === null ? [] : ['--entry', entry];
    if (runtime === 'bun') {
      // --no-install: Bun would otherwise fetch a missing package from the registry (production cannot).
      return [runtimes.bun.bin, '--no-install', join(runtimes.runtimesDir, 'bun', 'runner.ts'), '--bundle', bundleDir, ...entryArgs];
    }
    return [runtimes.python.bin, '-I', '-u', join(runtimes.runtimesDir, 'python', 'svc_runner.py'), '--bundle', bundleDir, ...entryArgs];
  }

  private environment(): Record<string, string> {
    const { egressSocket, bwrap } = this.opts;
    return {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: '/tmp',
      TMPDIR: '/tmp',
      LANG: 'C.UTF-8',
      PYTHONUNBUFFERED: '1',
      PYTHONDONTWRITEBYTECODE: '1',
      NO_COLOR: '1',
      BUN_RUNTIME_TRANSPILER_CACHE_PATH: '0',
      // The runner relays HTTP(S)_PROXY traffic to it (and sets those variables itself, before any tenant code).
      ...(egressSocket ? { SVC_EGRESS_SOCKET: bwrap ? EGRESS_SOCKET_IN_SANDBOX : egressSocket } : {}),
    };
  }

  private identityBinds: Promise<Bind[]> | null = null;
  /** A synthetic /etc/passwd and /etc/group naming the sandbox user, written once. */
  private identity(): Promise<Bind[]> {
    return (this.identityBinds ??= writeSandboxIdentity(join(this.opts.workDir, 'identity')));
  }

  /** A started runner in its group, not yet handed a bundle (spare) or loading one (fresh). */
  private async spawnRunner(
    runtime: SandboxSpec['runtime'],
    id: string,
    appDir: string,
    entry: string | null,
    limits: { memoryMb: number; pidsMax: number; tmpSizeMb: number },
  ): Promise<Spawned> {
    const { backend, runtimes, bwrap } = this.opts;
    const env = this.environment();
    let inner: string[];
    let cwd: string;
    let childEnv: Record<string, string>;
    let egressBound = false;
    if (bwrap) {
      const binds: Bind[] = [{ src: runtimes.runtimesDir, dest: runtimes.runtimesDir }];
      const extra: Bind[] = [...(await this.identity())];
      if (runtime === 'bun') {
        binds.push({ src: dirname(runtimes.bun.nodeModules), dest: dirname(runtimes.bun.nodeModules) });
        // Snippets resolve shared packages from /opt/svc/app upwards: /opt/svc/node_modules.
        extra.push({ src: runtimes.bun.nodeModules, dest: '/opt/svc/node_modules' });
      } else {
        binds.push({ src: runtimes.python.venv, dest: runtimes.python.venv });
        binds.push({ src: runtimes.python.basePrefix, dest: runtimes.python.basePrefix });
      }
      // The one way out of the sandbox's loopback-only network namespace. A socket that is not there (yet) is
      // not bound (bwrap would refuse to start): the runner's relay answers 502 until a new sandbox starts.
      egressBound = !!this.opts.egressSocket && existsSync(this.opts.egressSocket);
      const prefix = bwrapArgv({
        bwrap: bwrap.bin,
        features: bwrap.features,
        runtimeBinds: binds,
        extraRoBinds: extra,
        bundleDir: appDir,
        bundleDest: APP,
        tmpSizeMb: limits.tmpSizeMb,
        uid: 1000,
        gid: 1000,
        env,
        chdir: APP,
        unixSocketBinds: egressBound ? [{ src: this.opts.egressSocket!, dest: EGRESS_SOCKET_IN_SANDBOX }] : [],
      });
      inner = [...prefix, ...this.runnerArgv(runtime, APP, entry)];
      cwd = '/';
      childEnv = {};
    } else {
      const pdeath = this.opts.setpriv ? [this.opts.setpriv, '--pdeathsig', 'KILL', '--'] : [];
      inner = [...pdeath, ...this.runnerArgv(runtime, appDir, entry)];
      cwd = appDir;
      childEnv = env;
    }
    const group = await backend.create(groupId(id), { memoryMb: limits.memoryMb, pidsMax: limits.pidsMax });
    const argv = group.wrap(inner);
    const started = performance.now();
    const child = spawn(argv[0]!, argv.slice(1), {
      cwd,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      detached: true, // its own process group: signals to the core's terminal do not reach runners directly
    });
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', () => resolve({ code: null, signal: 'spawn-error' }));
    });
    if (child.pid) group.track?.(child.pid);
    const channel = new RunnerChannel(child.stdio[3] as Duplex);
    let destroyed = false;
    const stderr = { head: '' };
    const collect = (c: Buffer) => {
      if (stderr.head.length < 4000) stderr.head += c.toString('utf8');
    };
    child.stderr?.on('data', collect);
    return {
      id,
      runtime,
      appDir,
      limits,
      group,
      child,
      channel,
      exited,
      started,
      stderr,
      egressBound,
      stopCollecting: () => child.stderr?.off('data', collect),
      alive: () => !destroyed && child.exitCode === null && child.signalCode === null,
      destroy: async () => {
        if (destroyed) return;
        destroyed = true;
        await group.destroy().catch(() => {});
        if (child.exitCode === null && child.signalCode === null) {
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch {
            child.kill('SIGKILL');
          }
        }
        channel.close();
        if (appDir.startsWith(this.spareDir)) await rm(appDir, { recursive: true, force: true }).catch(() => {});
      },
    };
  }

  /** Waits for the runner's ready (or init_error); failures say whether memory, an exit or time ran out. */
  private async finish(r: Spawned, spec: SandboxSpec, since: number): Promise<Sandbox> {
    try {
      const initTimeout = this.opts.initTimeoutMs ?? 60_000;
      const ready = await r.channel.waitReady(initTimeout).catch(async (err: { code?: string }) => {
        if (err.code === 'ready_timeout') {
          throw Object.assign(new Error(`the snippet did not finish loading within ${initTimeout / 1000} s`), { code: 'init_timeout' });
        }
        // The channel closed first: wait for the exit status (and the last of stderr) to say why.
        const e = await Promise.race([r.exited, new Promise<null>((res) => setTimeout(() => res(null), 1000))]);
        const how = e ? (e.signal ? `signal ${e.signal}` : `exit code ${e.code}`) : 'no exit status';
        const tail = r.stderr.head.trim().split('\n').slice(-5).join('\n').slice(0, 1000);
        throw Object.assign(new Error(`the snippet's process exited while loading (${how})${tail ? `: ${tail}` : ''}`), { code: 'init_exit' });
      });
      r.stopCollecting();
      return {
        id: spec.id,
        channel: r.channel,
        ready,
        initMs: performance.now() - since,
        setCpuPercent: (p) => r.group.setCpuPercent(p),
        sample: () => r.group.sample(),
        ...(r.group.resetPeak ? { resetPeak: () => r.group.resetPeak!() } : {}),
        killAll: () => r.group.killAll(),
        destroy: r.destroy,
        exited: r.exited,
        stdout: r.child.stdout,
        stderr: r.child.stderr,
      };
    } catch (err) {
      // Out of memory while loading (a framework import is the snippet's memory too): say so.
      const at = await r.group.sample().catch(() => null);
      await r.destroy();
      if (at && (at.oom_kills > 0 || at.memory_bytes >= spec.memoryMb * 1024 * 1024 * 0.97)) {
        throw Object.assign(new Error(`loading the snippet exceeded max_memory_mb (${spec.memoryMb} MB) and it was killed`), {
          code: 'oom_killed',
          evidence: { during: 'init', limit_mb: spec.memoryMb, kernel_oom_kills: at.oom_kills, memory_mb: Math.round(at.memory_bytes / 104857.6) / 10 },
        });
      }
      throw err;
    }
  }

  async create(spec: SandboxSpec): Promise<Sandbox> {
    const spare = await this.claimSpare(spec);
    if (spare) return spare;
    const r = await this.spawnRunner(spec.runtime, spec.id, join(this.bundles, spec.bundleSha), spec.entrypoint, spec);
    return this.finish(r, spec, r.started);
  }

  // ---- spares: runners started ahead, each handed one bundle ------------------------------------------

  private readonly spares: Record<SandboxSpec['runtime'], Spawned[]> = { bun: [], python: [] };
  private readonly spareDir: string;
  private spareSeq = 0;
  private closed = false;

  /** Starts the spares this host keeps (called at start and after each one is claimed). */
  refillSpares(): void {
    for (const runtime of ['bun', 'python'] as const) {
      while (!this.closed && this.spares[runtime].length < (this.opts.spares ?? 0)) {
        const id = `spare-${runtime}-${process.pid}-${++this.spareSeq}`;
        const appDir = join(this.spareDir, id);
        const limits = { memoryMb: SPARE_MEMORY_MB, pidsMax: this.opts.pidsMax ?? 256, tmpSizeMb: this.opts.tmpSizeMb ?? 64 };
        const pending = mkdir(appDir, { recursive: true }).then(() => this.spawnRunner(runtime, id, appDir, null, limits));
        const slot: Spawned[] = this.spares[runtime];
        // Reserve the slot at once so a burst of claims does not start more than the budget.
        const placeholder = { pending } as unknown as Spawned;
        slot.push(placeholder);
        pending.then(
          (r) => {
            const i = slot.indexOf(placeholder);
            if (i >= 0 && !this.closed) slot[i] = r;
            else void r.destroy();
          },
          () => {
            const i = slot.indexOf(placeholder);
            if (i >= 0) slot.splice(i, 1);
          },
        );
      }
    }
  }

  private claimed = 0;

  spareStats() {
    const ready = (rt: SandboxSpec['runtime']) => this.spares[rt].filter((r) => !('pending' in r) && r.alive()).length;
    return { ready: { bun: ready('bun'), python: ready('python') }, claimed: this.claimed };
  }

  private async claimSpare(spec: SandboxSpec): Promise<Sandbox | null> {
    const slot = this.spares[spec.runtime];
    while (slot.length) {
      let r = slot.shift()!;
      if ('pending' in r) r = await (r as unknown as { pending: Promise<Spawned> }).pending.catch(() => null as never);
      // Its replacement starts at once, so the next cold start finds one ready.
      setImmediate(() => this.refillSpares());
      // A spare started before the egress proxy listened has no way out; one started now would.
      const egressLate = !!r && this.opts.bwrap !== null && !!this.opts.egressSocket && !r.egressBound && existsSync(this.opts.egressSocket);
      if (!r || !r.alive() || egressLate || r.limits.pidsMax !== spec.pidsMax || r.limits.tmpSizeMb !== spec.tmpSizeMb) {
        await r?.destroy();
        continue;
      }
      const since = performance.now();
      try {
        await r.group.setMemoryMb(spec.memoryMb);
        await cp(join(this.bundles, spec.bundleSha), r.appDir, { recursive: true });
        r.channel.send({ t: 'load', entry: spec.entrypoint });
      } catch {
        await r.destroy(); // e.g. its runtime already uses more than this version's limit: start fresh
        continue;
      }
      this.claimed++;
      return this.finish(r, spec, since);
    }
    return null;
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.spares.bun, ...this.spares.python];
    this.spares.bun = [];
    this.spares.python = [];
    await Promise.all(
      all.map(async (r) => {
        const spawned = 'pending' in r ? await (r as unknown as { pending: Promise<Spawned> }).pending.catch(() => null) : r;
        await spawned?.destroy();
      }),
    );
  }
}
