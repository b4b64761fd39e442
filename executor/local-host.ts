import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { RunnerChannel } from './runner-client';
import { bwrapArgv, writeSandboxIdentity, type Bind, type BwrapFeatures } from './sandbox/bwrap';
import type { LimitBackend } from './limits/types';
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
    this.bundles = join(opts.workDir, 'bundles');
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

  private runnerArgv(spec: SandboxSpec, bundleDir: string): string[] {
    const { runtimes } = this.opts;
    if (spec.runtime === 'bun') {
      // --no-install: Bun would otherwise fetch a missing package from the registry (production cannot).
      return [runtimes.bun.bin, '--no-install', join(runtimes.runtimesDir, 'bun', 'runner.ts'), '--bundle', bundleDir, '--entry', spec.entrypoint];
    }
    return [runtimes.python.bin, '-I', '-u', join(runtimes.runtimesDir, 'python', 'svc_runner.py'), '--bundle', bundleDir, '--entry', spec.entrypoint];
  }

  private environment(): Record<string, string> {
    return {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: '/tmp',
      TMPDIR: '/tmp',
      LANG: 'C.UTF-8',
      PYTHONUNBUFFERED: '1',
      PYTHONDONTWRITEBYTECODE: '1',
      NO_COLOR: '1',
      BUN_RUNTIME_TRANSPILER_CACHE_PATH: '0',
    };
  }

  private identityBinds: Promise<Bind[]> | null = null;
  /** A synthetic /etc/passwd and /etc/group naming the sandbox user, written once. */
  private identity(): Promise<Bind[]> {
    return (this.identityBinds ??= writeSandboxIdentity(join(this.opts.workDir, 'identity')));
  }

  async create(spec: SandboxSpec): Promise<Sandbox> {
    const { backend, runtimes, bwrap } = this.opts;
    const hostBundle = join(this.bundles, spec.bundleSha);
    const env = this.environment();
    let inner: string[];
    let cwd: string;
    let childEnv: Record<string, string>;
    if (bwrap) {
      const binds: Bind[] = [{ src: runtimes.runtimesDir, dest: runtimes.runtimesDir }];
      const extra: Bind[] = [...(await this.identity())];
      if (spec.runtime === 'bun') {
        binds.push({ src: dirname(runtimes.bun.nodeModules), dest: dirname(runtimes.bun.nodeModules) });
        // Snippets resolve shared packages from /opt/svc/app upwards: /opt/svc/node_modules.
        extra.push({ src: runtimes.bun.nodeModules, dest: '/opt/svc/node_modules' });
      }
      if (spec.runtime === 'python') {
        binds.push({ src: runtimes.python.venv, dest: runtimes.python.venv });
        binds.push({ src: runtimes.python.basePrefix, dest: runtimes.python.basePrefix });
      }
      const prefix = bwrapArgv({
        bwrap: bwrap.bin,
        features: bwrap.features,
        runtimeBinds: binds,
        extraRoBinds: extra,
        bundleDir: hostBundle,
        bundleDest: APP,
        tmpSizeMb: spec.tmpSizeMb,
        uid: 1000,
        gid: 1000,
        env,
        chdir: APP,
      });
      inner = [...prefix, ...this.runnerArgv(spec, APP)];
      cwd = '/';
      childEnv = {};
    } else {
      const pdeath = this.opts.setpriv ? [this.opts.setpriv, '--pdeathsig', 'KILL', '--'] : [];
      inner = [...pdeath, ...this.runnerArgv(spec, hostBundle)];
      cwd = hostBundle;
      childEnv = env;
    }
    const group = await backend.create(groupId(spec.id), { memoryMb: spec.memoryMb, pidsMax: spec.pidsMax });
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
    const destroy = async () => {
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
    };
    let stderrHead = '';
    const collect = (c: Buffer) => {
      if (stderrHead.length < 4000) stderrHead += c.toString('utf8');
    };
    child.stderr?.on('data', collect);
    try {
      const initTimeout = this.opts.initTimeoutMs ?? 60_000;
      const ready = await channel.waitReady(initTimeout).catch(async (err: { code?: string }) => {
        if (err.code === 'ready_timeout') {
          throw Object.assign(new Error(`the snippet did not finish loading within ${initTimeout / 1000} s`), { code: 'init_timeout' });
        }
        // The channel closed first: wait for the exit status (and the last of stderr) to say why.
        const e = await Promise.race([exited, new Promise<null>((r) => setTimeout(() => r(null), 1000))]);
        const how = e ? (e.signal ? `signal ${e.signal}` : `exit code ${e.code}`) : 'no exit status';
        const tail = stderrHead.trim().split('\n').slice(-5).join('\n').slice(0, 1000);
        throw Object.assign(new Error(`the snippet's process exited while loading (${how})${tail ? `: ${tail}` : ''}`), { code: 'init_exit' });
      });
      child.stderr?.off('data', collect);
      return {
        id: spec.id,
        channel,
        ready,
        initMs: performance.now() - started,
        setCpuPercent: (p) => group.setCpuPercent(p),
        sample: () => group.sample(),
        killAll: () => group.killAll(),
        destroy,
        exited,
        stdout: child.stdout,
        stderr: child.stderr,
      };
    } catch (err) {
      // Out of memory while loading (a framework import is the snippet's memory too): say so.
      const at = await group.sample().catch(() => null);
      await destroy();
      if (at && (at.oom_kills > 0 || at.memory_bytes >= spec.memoryMb * 1024 * 1024 * 0.97)) {
        throw Object.assign(new Error(`loading the snippet exceeded max_memory_mb (${spec.memoryMb} MB) and it was killed`), {
          code: 'oom_killed',
          evidence: { during: 'init', limit_mb: spec.memoryMb, kernel_oom_kills: at.oom_kills, memory_mb: Math.round(at.memory_bytes / 104857.6) / 10 },
        });
      }
      throw err;
    }
  }

  async close(): Promise<void> {}
}
