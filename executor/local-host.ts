import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, cpSync, existsSync, mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { chmod, chown, cp, mkdir, mkdtemp, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { RunnerChannel } from './runner-client';
import { ExitEvent } from './exit-event';
import { pidAlive, sweepLeftovers } from './leftovers';
import { bwrapArgv, writeSandboxIdentity, type Bind } from './sandbox/bwrap';
import { coreIsRoot, nprocCap, openSeccomp, type SandboxProfile } from './sandbox/profile';
import type { CpuWeight, LimitBackend, LimitGroup } from './limits/types';
import type { Sandbox, SandboxHost, SandboxHostInfo, SandboxSpec, SpareInfo, SpareStats } from './sandbox-host';
import { FRAMEWORKS, importProfile, topLevelModules, type ImportProfile } from './import-profile';
import type { PreloadedFrame } from './protocol';
import { treeRssBytes } from './proc-tree';
import { DEBUG_DIR_IN_SANDBOX, DEBUG_ENV, DEBUG_SOCKET_NAME, type DebugSpec } from './debug/types';
import { startRelay, type Relay } from './debug/relay';
import { waitDebugReady } from './debug/wait';

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
  /**
   * bubblewrap, when the parity sandbox works here (with the options this version understands), and who the
   * snippet is inside it (executor/sandbox/profile.ts: dropped from root, seccomp).
   */
  bwrap: (Pick<SandboxProfile, 'bin' | 'features'> & Partial<Pick<SandboxProfile, 'dropTo' | 'seccomp' | 'prlimit'>>) | null;
  /** Whether the core runs as root (default: asked of the process). Root without bubblewrap runs no snippet. */
  root?: boolean;
  /** Why bubblewrap is not used (missing, or refused by this host). */
  bwrapMissingReason?: string | null;
  /** `setpriv` (util-linux) for a parent-death signal when there is no bwrap. */
  setpriv?: string | null;
  initTimeoutMs?: number;
  transport?: string;
  /**
   * Runners per runtime started ahead, in a group with a generous memory limit and no bundle; a new
   * sandbox takes one, sets the version's memory and CPU limits, copies the bundle in and sends `load`: the
   * runtime's start-up is paid before the request (docs/architecture.md, "Cold starts"). `plain`: runners that
   * imported nothing; `framework`: runners that imported their runtime's framework (executor/import-profile.ts),
   * for bundles that import it. A number is plain runners only. 0 (or absent) disables.
   */
  spares?: number | SparePlan;
  pidsMax?: number;
  tmpSizeMb?: number;
  /**
   * The core's egress proxy: an absolute path on this host to its unix socket (docs/egress-relay.md).
   * Runners get it as SVC_EGRESS_SOCKET (bound into the sandbox at EGRESS_SOCKET_IN_SANDBOX under
   * bubblewrap) and relay their HTTP(S)_PROXY traffic to it. Unset: runners get no proxy.
   */
  egressSocket?: string | null;
  /**
   * A PEM file of the TLS roots runners trust (the host's roots and the core's egress CA, for record and replay
   * of HTTPS: docs/cassettes.md "HTTPS", and docs/security.md). Bound read-only at CA_BUNDLE_IN_SANDBOX under bubblewrap and
   * named by SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and NODE_EXTRA_CA_CERTS. Unset: the defaults.
   */
  caBundle?: string | null;
  /** housekeep(): a temp bundle dir untouched this long is a leftover whoever made it (default 10 min). */
  leftoverAgeMs?: number;
  /** How long a spare keeps its low CPU weight, from its start (default SPARE_LOW_WEIGHT_MS; tests pin it). */
  spareLowWeightMs?: number;
  /** Told when a spare starts and when one dies unclaimed (why, and whether another replaces it): a log line, a test's event. */
  onSpare?: (e: SpareEvent) => void;
}

/** Spares kept per runtime: plain ones, and ones that have imported their runtime's framework. */
export interface SparePlan {
  plain: number;
  framework: number;
}

/** The plans `svc-emu serve --spares` names: `all` is the default of serve and the desktop app, `plain` of tests. */
export const SPARE_PLANS = {
  all: { plain: 1, framework: 1 },
  plain: { plain: 1, framework: 0 },
  none: { plain: 0, framework: 0 },
} as const satisfies Record<string, SparePlan>;
export type SpareMode = keyof typeof SPARE_PLANS;

type SpareKind = keyof SparePlan;

/** A spare's life as the host reports it (LocalHostOptions.onSpare). */
export type SpareEvent =
  /** Its runner is up and claimable (a framework spare: also imported; `preloaded` follows with how long it took). */
  | { type: 'started'; runtime: SandboxSpec['runtime']; id: string; profile: ImportProfile }
  /** A framework spare finished its imports (ms, and what failed: left to the snippet). */
  | {
      type: 'preloaded';
      runtime: SandboxSpec['runtime'];
      id: string;
      profile: ImportProfile;
      ms: number;
      failed: string[];
      /** Its warm-up run (executor/import-profile.ts `warmup`): how long it took, and why it failed (the spare serves anyway). */
      warmupMs?: number;
      warmupFailed?: string;
    }
  | {
      type: 'died';
      runtime: SandboxSpec['runtime'];
      id: string;
      profile: ImportProfile;
      /** The exit status, or why it never started (`error`). */
      code: number | null;
      signal: string | null;
      error?: string;
      /** The first of what it wrote to stderr. */
      stderr: string;
      /** Whether a new spare takes its place (not after SPARE_RETRIES quick deaths in a row, nor once the host is closed). */
      replaced: boolean;
    };

/** A debug sandbox's socket dir in the host's temp dir (createDebug), named after the core that made it. */
const DEBUG_DIR_LEFTOVER = /^svc-emu-debug-(?<pid>\d+)-[A-Za-z0-9]{6}$/;

/** Where a sandbox sees the egress proxy's socket (/run is a tmpfs of the sandbox: bwrap can bind onto it). */
export const EGRESS_SOCKET_IN_SANDBOX = '/run/svc-egress.sock';
/** Where a sandbox sees the TLS roots it trusts (LocalHostOptions.caBundle). */
export const CA_BUNDLE_IN_SANDBOX = '/etc/svc-emu-ca-bundle.pem';
/** The variables naming the TLS roots: OpenSSL (Python's ssl, urllib, httpx), requests, curl, Bun and Node. */
export const CA_BUNDLE_VARS = ['SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'NODE_EXTRA_CA_CERTS'] as const;

/** A spare's memory limit until it is claimed (then the version's own limit applies). */
const SPARE_MEMORY_MB = 1024;
/**
 * A spare's CPU weight by kind until it is claimed (then the kernel's default, before its bundle loads). A framework
 * spare's import and warm-up (~1.5 s of CPU for Mastra or LangGraph) run ahead in the background, and at the default
 * weight they took the cores from live runs, from a timeout's kill (the killed processes need CPU to exit) and from the
 * answer (docs/parity.md, "Spare runners (cold starts)"). A weight, not a cap: on idle cores a spare warms at full speed.
 * A plain spare's start is short (~0.1 s of CPU) and the next cold start often waits for it (a timeout's sandbox is
 * replaced by the next run's claim): low, on busy cores it waited ~0.2 s more for its start (measured here, load ~12).
 */
const SPARE_CPU_WEIGHT: Record<SpareKind, CpuWeight> = { plain: 'default', framework: 'low' };
/**
 * How long a spare keeps its low weight (from its start): one still warming then takes the default, so live runs that
 * keep the cores busy for long (a load test, a test suite's parallel files) slow its warm-up but never starve it. Past
 * the moments that matter (a cold start's first run and its kill, right after the claim that started this spare).
 */
const SPARE_LOW_WEIGHT_MS = 3000;
/**
 * Spares of a runtime that may die unclaimed in a row, each within SPARE_QUICK_DEATH_MS of its start, before
 * none replaces the last (a runtime that cannot start would otherwise be restarted for ever); a claim starts again.
 */
const SPARE_RETRIES = 3;
const SPARE_QUICK_DEATH_MS = 10_000;
/**
 * A claimed framework spare's replacement starts this long after the claim has loaded its bundle: its import
 * (~0.4 s of CPU for Mastra, ~1 s for LangGraph) would otherwise share the cores with that version's first run.
 */
const FRAMEWORK_REFILL_DELAY_MS = 250;
/**
 * A claimed plain spare's replacement starts this long after the claim has loaded its bundle, past the version's
 * first run: starting a runner blocks the core's event loop for the fork and exec (~1–3 ms here), which landed in
 * the middle of that cold start (between the runner's `ready` and the core reading it). Its place in the pool is
 * taken at once (listed as starting): a cold start meanwhile starts it at once and waits for it, as before.
 */
const PLAIN_REFILL_DELAY_MS = 25;

/** A bundle this small is copied into a claimed spare with sync calls (~0.1 ms; the async copy took ~1.5 ms). */
const SYNC_COPY_MAX = { files: 64, bytes: 1024 * 1024 };
/** Bundles whose import profile is remembered (from materialize; one is read again from disk when forgotten). */
const PROFILES_KEPT = 512;
const MB = 1024 * 1024;

/** The file operations materialize() makes, the async way or (a small bundle) the sync way: one code path for both. */
interface BundleFs {
  mkdir(dir: string): Promise<unknown>;
  writeFile(file: string, content: string): Promise<void>;
  chmod(path: string, mode: number): Promise<void>;
  rename(from: string, to: string): Promise<void>;
}
const ASYNC_FS: BundleFs = {
  mkdir: (dir) => mkdir(dir, { recursive: true }),
  writeFile: (file, content) => writeFile(file, content, { mode: 0o644 }),
  chmod,
  rename,
};
/** Each call done before it returns (an async wrapper only turns a throw into a rejection). */
const SYNC_FS: BundleFs = {
  mkdir: async (dir) => mkdirSync(dir, { recursive: true }),
  writeFile: async (file, content) => writeFileSync(file, content, { mode: 0o644 }),
  chmod: async (path, mode) => chmodSync(path, mode),
  rename: async (from, to) => renameSync(from, to),
};

interface Spawned {
  id: string;
  runtime: SandboxSpec['runtime'];
  profile: ImportProfile;
  /** A spare: resolves with its `preloaded` frame, once it is up (null if it ended first). Null for a fresh start. */
  preloaded: Promise<PreloadedFrame | null> | null;
  /** The `preloaded` frame, once it came. */
  preload: PreloadedFrame | null;
  appDir: string;
  limits: { memoryMb: number; pidsMax: number; tmpSizeMb: number; cpuWeight?: CpuWeight };
  group: LimitGroup;
  child: ChildProcess;
  channel: RunnerChannel;
  exited: Promise<{ code: number | null; signal: string | null }>;
  started: number;
  stderr: { head: string };
  /** Under bubblewrap: whether the egress socket was there to bind when it started (see claimSpare). */
  egressBound: boolean;
  stopCollecting(): void;
  /** A spare's lift to the default CPU weight at SPARE_LOW_WEIGHT_MS (cleared when it is claimed or ends). */
  liftWeight?: NodeJS.Timeout;
  alive(): boolean;
  /** A closure over the runner (handed on as it is). */
  destroy: () => Promise<void>;
}

const APP = '/opt/svc/app';
/** The fd on which bwrap reads the seccomp program (after the runner's fd 3). */
const SECCOMP_FD = 4;

/** A code checker's sandbox: an argv prefix (ending in `--`) and the fd on which bwrap reads the seccomp program. */
export interface CheckerSandbox {
  prefix: string[];
  seccompFd: { fd: number; open: () => number } | null;
}

/** Limit groups are named after the core that made them (`c<pid>-…`), so a later core can tell a dead core's leftovers. */
const groupId = (id: string) => `c${process.pid}-${id}`;
const OWNED = /^c(\d+)-/;

/** A group left by a core (or agent) that is no longer running. Groups of other names are never touched. */
export function isStaleGroup(id: string, alive: (pid: number) => boolean = pidAlive): boolean {
  const m = OWNED.exec(id);
  return m !== null && Number(m[1]) !== process.pid && !alive(Number(m[1]));
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
    this.plan = typeof opts.spares === 'number' ? { plain: opts.spares, framework: 0 } : (opts.spares ?? { plain: 0, framework: 0 });
    const degraded: string[] = [];
    if (opts.backend.degraded) degraded.push(opts.backend.degraded);
    if (!opts.bwrap) {
      degraded.push(
        `no parity sandbox (${opts.bwrapMissingReason ?? 'bubblewrap not found'}): snippets can see host files and the network`,
      );
    }
    // Without bubblewrap a snippet is the core's own user: never host root.
    this.refusal =
      !opts.bwrap && (opts.root ?? coreIsRoot())
        ? `the core runs as root and the bubblewrap sandbox is not available (${opts.bwrapMissingReason ?? 'bubblewrap not found'}): snippets would run as host root, so none run — install bubblewrap (apt install bubblewrap) or run the emulator as a normal user`
        : null;
    if (this.refusal) degraded.push(this.refusal);
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

  /**
   * Housekeeping while the core runs (start-up is sweep()): limit groups of cores (or agents) that died
   * since, temp bundle dirs (`.<sha>.<pid>.<rand>`) of a process that is gone or untouched for
   * leftoverAgeMs, and spare dirs (`spare-<runtime>-<pid>-<host tag>-<n>`, before the tag `spare-<runtime>-<pid>-<n>`) of a core that is gone, and debug socket dirs (`svc-emu-debug-<pid>-XXXXXX` in the temp dir) of a core that is gone.
   */
  async housekeep(): Promise<{ groups: number; files: number }> {
    const groups = (await this.opts.backend.sweep?.((id) => isStaleGroup(id))) ?? 0;
    const policy = { pid: process.pid, alive: pidAlive, now: () => Date.now(), maxAgeMs: this.opts.leftoverAgeMs ?? 10 * 60_000 };
    const files =
      (await sweepLeftovers(this.bundles, /^\.[0-9a-f]+\.(?:(?<pid>\d+)\.)?[0-9a-f]{8}$/, policy)) +
      (await sweepLeftovers(this.spareDir, /^spare-(?:bun|python)-(?<pid>\d+)-(?:[0-9a-f]+-)?\d+$/, policy, false)) +
      (await sweepLeftovers(tmpdir(), DEBUG_DIR_LEFTOVER, policy, false));
    return { groups, files };
  }

  // One stat of a local directory, made synchronously: instant, where the async round trip took ~0.2 ms of a cold start.
  async hasBundle(sha: string): Promise<boolean> {
    return statSync(join(this.bundles, sha), { throwIfNoEntry: false })?.isDirectory() ?? false;
  }

  async materialize(sha: string, _entrypoint: string, files: Record<string, string>): Promise<void> {
    const { small } = this.rememberProfile(sha, files);
    if (await this.hasBundle(sha)) return;
    // A small bundle (SYNC_COPY_MAX) is written with sync calls: a few local writes, ~0.1 ms, where the async ones took ~0.7 ms.
    const fs = small ? SYNC_FS : ASYNC_FS;
    await fs.mkdir(this.bundles);
    // Outside the sandbox, snippets resolve shared packages through <bundles>/node_modules.
    const link = join(this.bundles, 'node_modules');
    if (!existsSync(link)) await symlink(this.opts.runtimes.bun.nodeModules, link).catch(() => {});
    // Named after this process, so housekeep() can tell a dead core's half-written copy from one in progress.
    const tmp = join(this.bundles, `.${sha}.${process.pid}.${randomBytes(4).toString('hex')}`);
    const dirs = new Set<string>([tmp]);
    for (const [path, content] of Object.entries(files)) {
      const file = join(tmp, path);
      for (let d = dirname(file); d.startsWith(tmp) && !dirs.has(d); d = dirname(d)) dirs.add(d);
      await fs.mkdir(dirname(file));
      await fs.writeFile(file, content);
      await fs.chmod(file, 0o644);
    }
    // Readable by the sandbox's user whatever the core's umask (a root core's snippets are another uid).
    for (const d of dirs) await fs.chmod(d, 0o755);
    try {
      await fs.rename(tmp, join(this.bundles, sha));
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      if (!(await this.hasBundle(sha))) throw err; // else: a concurrent materialise won the race
    }
  }

  private runnerArgv(
    runtime: SandboxSpec['runtime'],
    bundleDir: string,
    entry: string | null,
    preload: { modules: readonly string[]; warmup: string } | null,
    debugSocket: string | null = null,
  ): string[] {
    const { runtimes } = this.opts;
    const entryArgs =
      entry !== null ? ['--entry', entry] : preload ? ['--preload', preload.modules.join(','), '--warmup', preload.warmup] : [];
    if (runtime === 'bun') {
      // A debug run: Bun's inspector listens on the socket and runs nothing (not even the runner) until a debugger
      // attaches and says Inspector.initialized (executor/debug/types.ts).
      const inspect = debugSocket ? [`--inspect-wait=ws+unix://${debugSocket}`] : [];
      // --no-install: Bun would otherwise fetch a missing package from the registry (production cannot).
      return [
        runtimes.bun.bin,
        ...inspect,
        '--no-install',
        join(runtimes.runtimesDir, 'bun', 'runner.ts'),
        '--bundle',
        bundleDir,
        ...entryArgs,
      ];
    }
    return [runtimes.python.bin, '-I', '-u', join(runtimes.runtimesDir, 'python', 'svc_runner.py'), '--bundle', bundleDir, ...entryArgs];
  }

  private environment(): Record<string, string> {
    const { egressSocket, bwrap, caBundle } = this.opts;
    // A bundle that is not there is not named (a sandbox could not start with a bind of it): the defaults apply.
    const bundle = caBundle && existsSync(caBundle) ? (bwrap ? CA_BUNDLE_IN_SANDBOX : caBundle) : null;
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
      ...(bundle ? Object.fromEntries(CA_BUNDLE_VARS.map((k) => [k, bundle])) : {}),
    };
  }

  private identityBinds: Promise<Bind[]> | null = null;
  /** A synthetic /etc/passwd and /etc/group naming the sandbox user, written once. */
  private identity(): Promise<Bind[]> {
    const drop = this.opts.bwrap?.dropTo;
    return (this.identityBinds ??= writeSandboxIdentity(join(this.opts.workDir, 'identity'), drop?.uid, drop?.gid));
  }

  /** A runtime's directories, bound read-only at the same paths (executor/runtimes holds the runners and checkers). */
  private runtimeBinds(runtime: SandboxSpec['runtime']): Bind[] {
    const { runtimes } = this.opts;
    const binds: Bind[] = [{ src: runtimes.runtimesDir, dest: runtimes.runtimesDir }];
    if (runtime === 'bun') binds.push({ src: dirname(runtimes.bun.nodeModules), dest: dirname(runtimes.bun.nodeModules) });
    else
      binds.push(
        { src: runtimes.python.venv, dest: runtimes.python.venv },
        { src: runtimes.python.basePrefix, dest: runtimes.python.basePrefix },
      );
    return binds;
  }

  /**
   * How to start a code checker (executor/validate.ts): it reads tenants' code, so under bubblewrap it gets a
   * sandbox like a runner's — the runtime read-only, no network, no host files, the seccomp filter, and a root
   * core's dedicated uid — with no bundle and no limit group (it runs no tenant code; its input is size-capped).
   * Null without bubblewrap: the checker is then the core's own user, which is never root (a root core without
   * bubblewrap runs no snippet and checks none: `refusal`).
   */
  async checkerSandbox(runtime: SandboxSpec['runtime'], env: Record<string, string>): Promise<CheckerSandbox | null> {
    const { bwrap, runtimes } = this.opts;
    if (this.refusal) throw new Error(this.refusal);
    if (!bwrap) return null;
    const prefix = bwrapArgv({
      bwrap: bwrap.bin,
      features: bwrap.features,
      runtimeBinds: this.runtimeBinds(runtime),
      extraRoBinds: await this.identity(),
      bundleDir: runtimes.runtimesDir,
      bundleDest: APP,
      tmpSizeMb: 16,
      uid: 1000,
      gid: 1000,
      env,
      chdir: '/',
      ...(bwrap.dropTo ? { dropTo: bwrap.dropTo } : {}),
      ...(bwrap.seccomp ? { seccompFd: SECCOMP_FD } : {}),
    });
    return { prefix, seccompFd: bwrap.seccomp ? { fd: SECCOMP_FD, open: () => openSeccomp(bwrap.seccomp!) } : null };
  }

  /** Why no snippet may run on this host (root without bubblewrap), or null. */
  private readonly refusal: string | null;

  /** A started runner in its group, not yet handed a bundle (spare) or loading one (fresh). */
  private async spawnRunner(
    runtime: SandboxSpec['runtime'],
    id: string,
    appDir: string,
    entry: string | null,
    limits: { memoryMb: number; pidsMax: number; tmpSizeMb: number; cpuWeight?: CpuWeight },
    profile: ImportProfile = 'plain',
    debug: { protocol: DebugSpec['protocol']; hostDir: string } | null = null,
  ): Promise<Spawned> {
    const fw = FRAMEWORKS[runtime];
    const preload = profile === 'plain' ? null : { modules: [...fw.preload, ...fw.lazy], warmup: fw.warmup };
    const { backend, runtimes, bwrap } = this.opts;
    // A debug run's socket, as the runner sees it: in the dir bound at DEBUG_DIR_IN_SANDBOX, or the host dir itself.
    const debugSocket = debug ? join(bwrap ? DEBUG_DIR_IN_SANDBOX : debug.hostDir, DEBUG_SOCKET_NAME) : null;
    const env = {
      ...this.environment(),
      ...(debug ? { [DEBUG_ENV.protocol]: debug.protocol, [DEBUG_ENV.socket]: debugSocket! } : {}),
    };
    let inner: string[];
    let cwd: string;
    let childEnv: Record<string, string>;
    let egressBound = false;
    let seccompFd: number | null = null;
    if (this.refusal) throw new Error(this.refusal);
    if (bwrap) {
      const binds = this.runtimeBinds(runtime);
      const extra: Bind[] = [...(await this.identity())];
      // The TLS roots named in the environment (certificates only: the egress CA's key stays in the data dir).
      if (this.opts.caBundle && existsSync(this.opts.caBundle)) extra.push({ src: this.opts.caBundle, dest: CA_BUNDLE_IN_SANDBOX });
      // Snippets resolve shared packages from /opt/svc/app upwards: /opt/svc/node_modules.
      if (runtime === 'bun') extra.push({ src: runtimes.bun.nodeModules, dest: '/opt/svc/node_modules' });
      // The one way out of the sandbox's loopback-only network namespace. A socket that is not there (yet) is
      // not bound (bwrap would refuse to start): the runner's relay answers 502 until a new sandbox starts.
      egressBound = !!this.opts.egressSocket && existsSync(this.opts.egressSocket);
      // A root core's snippets are the dedicated uid: the socket (0600) is theirs to connect to, no one else's.
      if (egressBound && bwrap.dropTo) await chown(this.opts.egressSocket!, bwrap.dropTo.uid, bwrap.dropTo.gid);
      // No pids controller here: the kernel's per-user process limit stands in for it (fork bombs stop).
      const nproc =
        backend.name === 'none' ? nprocCap({ dropTo: bwrap.dropTo ?? null, prlimit: bwrap.prlimit ?? null }, limits.pidsMax) : null;
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
        runDirBinds: debug ? [{ src: debug.hostDir, dest: DEBUG_DIR_IN_SANDBOX }] : [],
        ...(bwrap.dropTo ? { dropTo: bwrap.dropTo } : {}),
        ...(bwrap.seccomp ? { seccompFd: SECCOMP_FD } : {}),
        ...(nproc ? { nproc } : {}),
      });
      inner = [...prefix, ...this.runnerArgv(runtime, APP, entry, preload, debugSocket)];
      cwd = '/';
      childEnv = {};
    } else {
      const pdeath = this.opts.setpriv ? [this.opts.setpriv, '--pdeathsig', 'KILL', '--'] : [];
      inner = [...pdeath, ...this.runnerArgv(runtime, appDir, entry, preload, debugSocket)];
      cwd = appDir;
      childEnv = env;
    }
    let group: LimitGroup;
    let child: ChildProcess;
    let started: number;
    try {
      group = await backend.create(groupId(id), {
        memoryMb: limits.memoryMb,
        pidsMax: limits.pidsMax,
        ...(limits.cpuWeight ? { cpuWeight: limits.cpuWeight } : {}),
      });
      const argv = group.wrap(inner);
      if (bwrap?.seccomp) seccompFd = openSeccomp(bwrap.seccomp);
      started = performance.now();
      child = spawn(argv[0]!, argv.slice(1), {
        cwd,
        env: childEnv,
        stdio: ['ignore', 'pipe', 'pipe', 'pipe', ...(seccompFd !== null ? [seccompFd] : [])],
        detached: true, // its own process group: signals to the core's terminal do not reach runners directly
      });
    } finally {
      if (seccompFd !== null) closeSync(seccompFd); // the child has its own copy
    }
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', () => resolve({ code: null, signal: 'spawn-error' }));
    });
    if (child.pid) group.track?.(child.pid);
    const channel = new RunnerChannel(child.stdio[3] as Duplex);
    const preloaded =
      entry === null
        ? new Promise<PreloadedFrame | null>((resolve) => {
            channel.once('preloaded', (f: PreloadedFrame) => resolve(f));
            void channel.closed.then(() => resolve(null));
          })
        : null;
    let destroyed = false;
    const stderr = { head: '' };
    const collect = (c: Buffer) => {
      if (stderr.head.length < 4000) stderr.head += c.toString('utf8');
    };
    child.stderr?.on('data', collect);
    const spawned: Spawned = {
      id,
      runtime,
      profile,
      preloaded,
      preload: null,
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
        // Its process group first: a wrapper still entering the group (a spare destroyed just after it started) would
        // otherwise enter it after the group was emptied, and the group stayed behind (rmdir: EBUSY, a second lost).
        if (child.exitCode === null && child.signalCode === null) {
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch {
            child.kill('SIGKILL');
          }
        }
        // Its processes are gone when this resolves (a timeout's or an OOM's answer waits for that: killed hard). The
        // emptied group's removal and a spare's dir follow off the caller's path (~2–3 ms here, more on a busy host):
        // close() waits for them.
        await group.killAll().catch(() => {});
        channel.close();
        this.removing(async () => {
          await group.destroy().catch(() => {});
          if (appDir.startsWith(this.spareDir)) await rm(appDir, { recursive: true, force: true }).catch(() => {});
        });
      },
    };
    void preloaded?.then((f) => (spawned.preload = f));
    return spawned;
  }

  /** Waits for the runner's ready (or init_error); failures say whether memory, an exit or time ran out. */
  private async finish(r: Spawned, spec: SandboxSpec, since: number, cpuPercent?: number | null, relay?: Relay): Promise<Sandbox> {
    try {
      const initTimeout = this.opts.initTimeoutMs ?? 60_000;
      // A debug runner waits for its debugger first (executor/debug/wait.ts).
      const waiting =
        relay && spec.debug
          ? waitDebugReady(r.channel, relay, { attachTimeoutMs: spec.debug.attachTimeoutMs })
          : r.channel.waitReady(initTimeout);
      const ready = await waiting.catch(async (err: { code?: string }) => {
        if (err.code === 'ready_timeout') {
          throw Object.assign(new Error(`the snippet did not finish loading within ${initTimeout / 1000} s`), { code: 'init_timeout' });
        }
        if (err.code === 'attach_timeout' || err.code === 'debug_closed') throw err;
        // The channel closed first: wait for the exit status (and the last of stderr) to say why.
        const e = await Promise.race([r.exited, new Promise<null>((res) => setTimeout(() => res(null), 1000))]);
        const how = e ? (e.signal ? `signal ${e.signal}` : `exit code ${e.code}`) : 'no exit status';
        const tail = r.stderr.head.trim().split('\n').slice(-5).join('\n').slice(0, 1000);
        throw Object.assign(new Error(`the snippet's process exited while loading (${how})${tail ? `: ${tail}` : ''}`), {
          code: 'init_exit',
        });
      });
      r.stopCollecting();
      // The sandbox's own processes (the group wrapper, bubblewrap, the runner, and whatever the bundle's
      // top level started while loading): each run's reap kills everything else in the group.
      const keep = r.group.killAllExcept ? new Set((await r.group.pids?.().catch(() => null)) ?? []) : null;
      const exit = new ExitEvent(r.exited);
      return {
        id: spec.id,
        channel: r.channel,
        ready,
        initMs: performance.now() - since,
        ...(cpuPercent !== undefined ? { cpuPercent } : {}),
        setCpuPercent: (p) => r.group.setCpuPercent(p),
        sample: (opts) => r.group.sample(opts),
        ...(r.group.resetPeak ? { resetPeak: () => r.group.resetPeak!() } : {}),
        killAll: () => r.group.killAll(),
        ...(keep?.size ? { reap: () => r.group.killAllExcept!(keep) } : {}),
        destroy: r.destroy,
        exited: r.exited,
        onExit: (fn) => exit.on(fn),
        stdout: r.child.stdout,
        stderr: r.child.stderr,
        ...(relay ? { debug: relay } : {}),
      };
    } catch (err) {
      // Out of memory while loading (a framework import is the snippet's memory too): say so.
      const at = await r.group.sample().catch(() => null);
      await r.destroy();
      if (at && (at.oom_kills > 0 || at.memory_bytes >= spec.memoryMb * 1024 * 1024 * 0.97)) {
        throw Object.assign(new Error(`loading the snippet exceeded max_memory_mb (${spec.memoryMb} MB) and it was killed`), {
          code: 'oom_killed',
          evidence: {
            during: 'init',
            limit_mb: spec.memoryMb,
            kernel_oom_kills: at.oom_kills,
            memory_mb: Math.round(at.memory_bytes / 104857.6) / 10,
          },
        });
      }
      throw err;
    }
  }

  async create(spec: SandboxSpec): Promise<Sandbox> {
    if (spec.debug) return this.createDebug(spec, spec.debug);
    const spare = await this.claimSpare(spec);
    if (spare) return spare;
    // None to claim: spares that kept dying were not replaced (SPARE_RETRIES); each cold start tries one again.
    if (this.plan.plain || this.plan.framework) setImmediate(() => this.refillSpares());
    const r = await this.spawnRunner(spec.runtime, spec.id, join(this.bundles, spec.bundleSha), spec.entrypoint, spec);
    return this.finish(r, spec, r.started);
  }

  /**
   * A debug sandbox (executor/debug/types.ts): never a spare (a spare's runtime started without its debugger), no
   * CPU quota, a private dir for the debugger's socket (0700, the sandbox user's) bound at DEBUG_DIR_IN_SANDBOX, and
   * the relay listening on loopback before the runner starts (spec.onListening says where). Its destroy closes the
   * relay and removes the dir.
   */
  private async createDebug(spec: SandboxSpec, debug: DebugSpec): Promise<Sandbox> {
    if (this.refusal) throw new Error(this.refusal);
    const { bwrap } = this.opts;
    // A short path: a unix socket's path is at most 107 bytes, and the relay connects to it on the host.
    // Named after this process: housekeep() removes those of a core that died (DEBUG_DIR_LEFTOVER).
    const hostDir = await mkdtemp(join(tmpdir(), `svc-emu-debug-${process.pid}-`));
    const bundleDir = join(this.bundles, spec.bundleSha);
    let relay: Relay | null = null;
    const cleanup = async () => {
      await relay?.close();
      await rm(hostDir, { recursive: true, force: true }).catch(() => {});
    };
    let r: Spawned;
    try {
      // A root core's snippets are the dedicated uid: the dir is theirs (and root's), no one else's.
      if (bwrap?.dropTo) await chown(hostDir, bwrap.dropTo.uid, bwrap.dropTo.gid);
      relay = await startRelay({
        protocol: debug.protocol,
        socketPath: join(hostDir, DEBUG_SOCKET_NAME),
        ...(debug.port !== undefined ? { port: debug.port } : {}),
        remoteRoot: bwrap ? APP : bundleDir,
      });
      debug.onListening(relay);
      // Closed (a cancel) before the runner started: nothing more to start.
      if (relay.closed) throw Object.assign(new Error('the debug run was ended while it waited for a debugger'), { code: 'debug_closed' });
      r = await this.spawnRunner(spec.runtime, spec.id, bundleDir, spec.entrypoint, spec, 'plain', {
        protocol: debug.protocol,
        hostDir,
      });
    } catch (err) {
      await cleanup();
      throw err;
    }
    const destroyRunner = r.destroy;
    r.destroy = async () => {
      await destroyRunner();
      await cleanup();
    };
    // No CPU quota: a debug run is held at breakpoints and steps; its CPU is not production's measure (docs/security.md).
    return this.finish(r, spec, r.started, null, relay);
  }

  // ---- import profiles: which spare a bundle takes -----------------------------------------------------

  /** Per bundle digest: its profile for each runtime and (Python) its top-level module names (executor/import-profile.ts). */
  private readonly profiles = new Map<string, BundleProfile>();

  private rememberProfile(sha: string, files: Record<string, string>, sizeKnown = true): BundleProfile {
    const paths = Object.keys(files);
    const bytes = paths.reduce((n, f) => n + Buffer.byteLength(files[f]!), 0);
    const p: BundleProfile = {
      bun: importProfile('bun', files),
      python: importProfile('python', files),
      modules: topLevelModules(files),
      small: sizeKnown && paths.length <= SYNC_COPY_MAX.files && bytes <= SYNC_COPY_MAX.bytes,
    };
    this.profiles.delete(sha);
    this.profiles.set(sha, p);
    // Oldest first out: a long-running core keeps a bounded number (a forgotten one is read again from disk).
    for (const old of this.profiles.keys()) {
      if (this.profiles.size <= PROFILES_KEPT) break;
      this.profiles.delete(old);
    }
    return p;
  }

  private async profileOf(sha: string): Promise<BundleProfile> {
    const known = this.profiles.get(sha);
    if (known) return known;
    // Read again from disk: only its source files' text is read, so its size is not known (copied the async way).
    return this.rememberProfile(sha, await readSources(join(this.bundles, sha)).catch(() => ({})), false);
  }

  // ---- spares: runners started ahead, each handed one bundle ------------------------------------------

  private readonly plan: SparePlan;
  private readonly spares: Record<SandboxSpec['runtime'], Record<SpareKind, Spawned[]>> = {
    bun: { plain: [], framework: [] },
    python: { plain: [], framework: [] },
  };
  private readonly spareDir: string;
  private spareSeq = 0;
  private get lowWeightMs(): number {
    return this.opts.spareLowWeightMs ?? SPARE_LOW_WEIGHT_MS;
  }
  /**
   * In every spare's id, so two hosts of one process (tests, a core beside its agent) never share a limit
   * group: creating a group of an existing id empties it, and destroying one kills what is in it.
   */
  private readonly spareTag = randomBytes(3).toString('hex');
  /** Spares of each runtime and kind that died unclaimed in a row, soon after they started (see SPARE_RETRIES). */
  private readonly spareDeaths: Record<`${SandboxSpec['runtime']}:${SpareKind}`, number> = {
    'bun:plain': 0,
    'bun:framework': 0,
    'python:plain': 0,
    'python:framework': 0,
  };
  private closed = false;

  /**
   * Starts the spares this host keeps, of one kind or both (called at start, after each one is claimed, and after
   * one dies unclaimed). Nothing waits for them: a core is ready before its spares are.
   */
  refillSpares(only?: SpareKind, after?: SpareStart): void {
    for (const runtime of ['bun', 'python'] as const) {
      for (const kind of only ? [only] : (['plain', 'framework'] as const)) {
        const slot: Spawned[] = this.spares[runtime][kind];
        while (!this.closed && slot.length < this.plan[kind]) this.startSpare(runtime, kind, slot, after);
      }
    }
  }

  /**
   * Starts a spare into `slot` (its place taken at once), now or `after` (its placeholder's startNow() cuts that
   * wait short: a claim that wants it, close()).
   */
  private startSpare(runtime: SandboxSpec['runtime'], kind: SpareKind, slot: Spawned[], after?: SpareStart): void {
    const id = `spare-${runtime}-${process.pid}-${this.spareTag}-${++this.spareSeq}`;
    const profile = profileOfKind(runtime, kind);
    const appDir = join(this.spareDir, id);
    // A framework spare has a low CPU weight until a version claims it (SPARE_CPU_WEIGHT).
    const limits = {
      memoryMb: SPARE_MEMORY_MB,
      pidsMax: this.opts.pidsMax ?? 256,
      tmpSizeMb: this.opts.tmpSizeMb ?? 64,
      cpuWeight: SPARE_CPU_WEIGHT[kind],
    };
    let startNow = () => {};
    const due = after
      ? new Promise<void>((go) => {
          let timer: NodeJS.Timeout | undefined;
          startNow = () => {
            clearTimeout(timer);
            go();
          };
          const wait = () => {
            timer = setTimeout(go, after.delayMs);
            timer.unref(); // nothing to keep a process alive for
          };
          after.settled.then(wait, wait);
        })
      : Promise.resolve();
    const pending = due
      .then(() => {
        if (this.closed) throw new Error('the host closed before this spare started');
        return mkdir(appDir, { recursive: true });
      })
      .then(() => chmod(appDir, 0o755)) // readable by the sandbox's user whatever the core's umask
      .then(() => this.spawnRunner(runtime, id, appDir, null, limits, profile));
    // Reserve the slot at once so a burst of claims does not start more than the budget.
    const placeholder = { pending, startNow: () => startNow(), taken: false } as unknown as Spawned & { taken: boolean };
    slot.push(placeholder);
    pending.then(
      (r) => {
        const i = slot.indexOf(placeholder);
        // Out of the slot: taken by a claim still starting (the claim has it now), or dropped by close().
        if (this.closed || (i < 0 && !placeholder.taken)) return void r.destroy();
        if (i < 0) return;
        slot[i] = r;
        // Still a spare and still warming at SPARE_LOW_WEIGHT_MS: the default weight (one already warm is idle: harmless).
        if (r.limits.cpuWeight === 'low') {
          const lift = setTimeout(
            () => {
              if (slot.includes(r) && r.alive()) void r.group.setCpuWeight?.('default').catch(() => {});
            },
            Math.max(0, this.lowWeightMs - (performance.now() - r.started)),
          );
          lift.unref();
          r.liftWeight = lift;
          void r.exited.then(() => clearTimeout(lift));
        }
        // Started: its runner is up (its `preloaded` frame: a framework spare's has imported the framework too).
        void r.preloaded?.then((f) => {
          if (!f || this.closed) return;
          this.opts.onSpare?.({ type: 'started', runtime, id, profile });
          if (kind === 'framework') {
            const warm = {
              ...(f.warmup_ms !== undefined ? { warmupMs: f.warmup_ms } : {}),
              ...(f.warmup_failed ? { warmupFailed: f.warmup_failed } : {}),
            };
            this.opts.onSpare?.({ type: 'preloaded', runtime, id, profile, ms: f.ms, failed: f.failed ?? [], ...warm });
          }
        });
        // Dead while idle: it leaves the pool (it would hold a place of the budget for ever) and another starts.
        void r.exited.then((e) => {
          const at = slot.indexOf(r);
          if (at < 0 || this.closed) return; // claimed, or ended by close(): no longer a spare
          slot.splice(at, 1);
          void r.destroy();
          this.spareDied(runtime, kind, id, performance.now() - r.started, { ...e, stderr: r.stderr.head });
        });
      },
      (err: unknown) => {
        const i = slot.indexOf(placeholder);
        if (i < 0) return;
        slot.splice(i, 1);
        this.spareDied(runtime, kind, id, 0, {
          code: null,
          signal: null,
          error: err instanceof Error ? err.message : String(err),
          stderr: '',
        });
      },
    );
  }

  /** A spare that died unclaimed (or never started): reported, and replaced unless it keeps dying at once. */
  private spareDied(
    runtime: SandboxSpec['runtime'],
    kind: SpareKind,
    id: string,
    livedMs: number,
    how: { code: number | null; signal: string | null; error?: string; stderr: string },
  ): void {
    const key = `${runtime}:${kind}` as const;
    this.spareDeaths[key] = livedMs < SPARE_QUICK_DEATH_MS ? this.spareDeaths[key] + 1 : 0;
    const replaced = !this.closed && this.spareDeaths[key] < SPARE_RETRIES;
    const profile = profileOfKind(runtime, kind);
    this.opts.onSpare?.({ type: 'died', runtime, id, profile, ...how, replaced });
    if (replaced) this.refillSpares(kind);
  }

  private claimed = 0;
  private readonly claimedBy: Record<ImportProfile, number> = { plain: 0, mastra: 0, langgraph: 0 };

  /**
   * Every spare with its runtime, profile, state and resident memory (one scan of /proc for all of them), the
   * plain ones ready per runtime (what a cold start of a plain bundle finds), and the cold starts they served.
   */
  spareStats(): SpareStats {
    const rows: { r: Spawned | null; runtime: SandboxSpec['runtime']; kind: SpareKind }[] = [];
    for (const runtime of ['bun', 'python'] as const)
      for (const kind of ['plain', 'framework'] as const)
        for (const r of this.spares[runtime][kind]) rows.push({ r: 'pending' in r || !r.alive() ? null : r, runtime, kind });
    const rss = treeRssBytes(rows.flatMap(({ r }) => (r?.child.pid ? [r.child.pid] : [])));
    const spares: SpareInfo[] = rows.map(({ r, runtime, kind }) => {
      const profile = profileOfKind(runtime, kind);
      if (!r) return { id: '', runtime, profile, state: 'starting', rss_mb: null };
      const bytes = r.child.pid ? (rss.get(r.child.pid) ?? null) : null;
      return {
        id: r.id,
        runtime,
        profile,
        state: r.preloaded && !r.preload ? (profile === 'plain' ? 'starting' : 'preloading') : 'ready',
        rss_mb: bytes === null ? null : Math.round((bytes / MB) * 10) / 10,
        ...(r.preload ? { preload_ms: Math.round(r.preload.ms) } : {}),
      };
    });
    const ready = (rt: SandboxSpec['runtime']) =>
      spares.filter((s) => s.runtime === rt && s.profile === 'plain' && s.state === 'ready').length;
    return {
      ready: { bun: ready('bun'), python: ready('python') },
      claimed: this.claimed,
      claimed_by_profile: { ...this.claimedBy },
      spares,
    };
  }

  /**
   * A cold start takes the spare of its bundle's import profile, if one is there (one still starting or importing is
   * waited for: its start runs uncapped, and a fresh start would do it all again). Its limits are set before the bundle loads: the
   * version's memory limit, its CPU quota (spec.cpuPercent) and the default CPU weight (SPARE_CPU_WEIGHT), so the snippet's
   * first instruction runs capped and weighed as any sandbox.
   * Null: none fits, start fresh — no spare of that profile, a spare of another shape, a framework spare already
   * over the version's memory limit (a fresh start's import meets the limit, as in production), or a Python bundle
   * with a module of a name the framework imported (in a fresh runner the bundle's would shadow it).
   */
  private async claimSpare(spec: SandboxSpec): Promise<Sandbox | null> {
    const bundle = await this.profileOf(spec.bundleSha);
    const profile = bundle[spec.runtime];
    const kind: SpareKind = profile === 'plain' ? 'plain' : 'framework';
    const slot = this.spares[spec.runtime][kind];
    const refill = () => this.refillSpares(kind);
    // Spares are all of one shape (this host's pids and /tmp limits): a version of another shape starts fresh,
    // and its spares stay for the versions they fit.
    if (spec.pidsMax !== (this.opts.pidsMax ?? 256) || spec.tmpSizeMb !== (this.opts.tmpSizeMb ?? 64)) return null;
    // Those there now, at most: each one discarded is replaced at once, and the replacement is for the next cold start.
    for (let tries = slot.length; tries > 0 && slot.length; tries--) {
      let r = slot.shift()!;
      const since = performance.now();
      // Not up yet: still starting (or waiting for its delay), or up but its `preloaded` frame not in.
      const wasStarting = 'pending' in r || !r.preload;
      if ('pending' in r) {
        // Still starting, or waiting for its delay (wanted now: startNow).
        const p = r as unknown as { pending: Promise<Spawned>; startNow(): void; taken: boolean };
        p.taken = true; // the claim's now, once it is up (before, one claimed while starting was destroyed as it came up)
        p.startNow();
        r = await p.pending.catch(() => null as never);
      }
      // Its replacement (below) starts once this claim has loaded, or now when this one is not used.
      // A spare started before the egress proxy listened has no way out; one started now would.
      const egressLate =
        !!r && this.opts.bwrap !== null && !!this.opts.egressSocket && !r.egressBound && existsSync(this.opts.egressSocket);
      // One still starting or importing is on this request's path now: the default CPU weight before it is waited for.
      const low = r?.limits.cpuWeight === 'low';
      let weighed = false;
      if (low && wasStarting && r?.alive() && !egressLate && r.group.setCpuWeight) {
        weighed = await r.group.setCpuWeight('default').then(
          () => true,
          () => false, // tried again with the limits below, where a failure starts fresh
        );
      }
      const preload = r?.preloaded ? await this.waitPreloaded(r) : null;
      if (!r || !r.alive() || (r.preloaded && !preload) || egressLate) {
        await r?.destroy();
        setImmediate(refill);
        continue;
      }
      const usage = await r.group.sample().catch(() => null);
      const resident = usage ? (usage.memory_anon_bytes ?? usage.memory_bytes) : 0;
      if (preload?.modules?.some((m) => bundle.modules.includes(m)) || resident >= spec.memoryMb * MB) {
        // Low again while its SPARE_LOW_WEIGHT_MS last (its lift is still set for then).
        if (weighed && performance.now() - r.started < this.lowWeightMs) await r.group.setCpuWeight?.('low').catch(() => {});
        slot.unshift(r); // fits another version: kept
        return null;
      }
      try {
        // The limits and the bundle's copy side by side: all are done before the `load` frame goes.
        const src = join(this.bundles, spec.bundleSha);
        await Promise.all([
          r.group.setMemoryMb(spec.memoryMb),
          spec.cpuPercent !== undefined ? r.group.setCpuPercent(spec.cpuPercent) : null,
          low && !weighed ? r.group.setCpuWeight?.('default') : null,
          // A sync copy's throw becomes this promise's rejection (the limit writes are already under way).
          bundle.small
            ? new Promise<void>((done) => done(cpSync(src, r.appDir, { recursive: true })))
            : cp(src, r.appDir, { recursive: true }),
        ]);
        r.channel.send({ t: 'load', entry: spec.entrypoint });
        // Cold starts back to back (this one found its spare still starting): the next one's wait for the replacement
        // matters more than the fork's 1–3 ms, so it starts now, during this load (back to back, measured: ~25–35 ms
        // a hello with it, ~40–60 ms with the delay; at a human's pace the delay wins by ~2–3 ms).
        if (kind === 'plain' && wasStarting) refill();
      } catch {
        await r.destroy(); // e.g. its memory could not be brought under this version's limit: start fresh
        setImmediate(refill);
        continue;
      }
      clearTimeout(r.liftWeight);
      this.claimed++;
      this.claimedBy[profile]++;
      this.spareDeaths[`${spec.runtime}:${kind}`] = 0;
      const done = this.finish(r, spec, since, spec.cpuPercent);
      // Its replacement takes its place now (listed as starting) and starts once this claim has loaded, a little after.
      this.refillSpares(kind, { settled: done, delayMs: kind === 'framework' ? FRAMEWORK_REFILL_DELAY_MS : PLAIN_REFILL_DELAY_MS });
      return done;
    }
    return null;
  }

  /** A spare's `preloaded` frame (it is up), waited for up to the init budget; null when it ended (or took longer). */
  private async waitPreloaded(r: Spawned): Promise<PreloadedFrame | null> {
    if (r.preload || !r.preloaded) return r.preload;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((res) => (timer = setTimeout(() => res(null), this.opts.initTimeoutMs ?? 60_000)));
    try {
      return await Promise.race([r.preloaded, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = (['bun', 'python'] as const).flatMap((rt) =>
      (['plain', 'framework'] as const).flatMap((k) => this.spares[rt][k].splice(0)),
    );
    await Promise.all(
      all.map(async (r) => {
        if ('pending' in r) (r as unknown as { startNow(): void }).startNow(); // one waiting for its delay ends now
        const spawned = 'pending' in r ? await (r as unknown as { pending: Promise<Spawned> }).pending.catch(() => null) : r;
        await spawned?.destroy();
      }),
    );
    while (this.removals.size) await Promise.all([...this.removals]);
  }

  /** Emptied groups (and spare dirs) still being removed after their sandbox's destroy resolved: close() waits for them. */
  private readonly removals = new Set<Promise<void>>();
  private removing(work: () => Promise<void>): void {
    const p: Promise<void> = work().finally(() => this.removals.delete(p));
    this.removals.add(p);
  }
}

/** The import profile a spare of this runtime and kind serves. */
function profileOfKind(runtime: SandboxSpec['runtime'], kind: SpareKind): ImportProfile {
  return kind === 'plain' ? 'plain' : FRAMEWORKS[runtime].profile;
}

/** When a claimed spare's replacement starts: `delayMs` after `settled` (the claim's load) settles. */
interface SpareStart {
  settled: Promise<unknown>;
  delayMs: number;
}

/** A bundle's import profile per runtime and its top-level Python module names (executor/import-profile.ts). */
interface BundleProfile {
  bun: ImportProfile;
  python: ImportProfile;
  modules: string[];
  /** Few and small files (SYNC_COPY_MAX): copied into a claimed spare with sync calls. */
  small: boolean;
}

/** The source files of a materialised bundle (what importProfile reads), by path relative to it. */
async function readSources(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const path = relative(dir, join(e.parentPath, e.name));
    out[path] = /\.(?:[cm]?[jt]sx?|py)$/.test(e.name) ? await readFile(join(dir, path), 'utf8') : '';
  }
  return out;
}
