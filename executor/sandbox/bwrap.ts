import { lstatSync, readlinkSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { nodeExec } from '../limits/common';
import type { ExecFn } from '../limits/cgroupfs';

/**
 * The parity sandbox: bubblewrap (0.8 on Debian bookworm; no overlay options there) around a runner.
 *
 *   identity    The snippet never runs as host uid 0 and holds no capability in the initial user namespace.
 *               A core run by a normal user: a new user namespace (`--unshare-user`, uid/gid 1000 inside,
 *               the user's own uid outside, no capabilities; `--disable-userns`). A core run by root: bwrap
 *               run by root maps the sandbox's uid to host root (docs/security.md), so no user namespace;
 *               bwrap mounts as root (it can bind paths only root may traverse, such as a Python under
 *               /root), then, inside, `setpriv` drops to a dedicated unprivileged uid/gid, clears the
 *               groups, the inheritable and bounding capability sets and sets no_new_privs before it execs
 *               the runner (`dropTo`).
 *   seccomp     a filter (executor/sandbox/seccomp.ts) loaded by bwrap before it execs what follows.
 *   namespaces  PID (own pid 1, the host's processes invisible), network (only loopback; egress goes through
 *               unix sockets bound in under /run, see unixSocketBinds), IPC, UTS, cgroup.
 *   environment `--clearenv`, then exactly `env` (bwrap itself adds PWD, the --chdir directory).
 *   filesystem  read-only everywhere but a sized private /tmp and a sized /dev/shm: the root and /etc are
 *               remounted read-only once built, /run (a tmpfs holding only the sockets bound in) too, and
 *               /dev (bwrap's minimal one). Read-only /usr (and /bin, /sbin, /lib* as symlinks into usr/ on
 *               merged-usr hosts); a minimal /etc (TLS roots, name service config, the dynamic linker's
 *               cache, Debian's alternatives, time zone); the runtime directories and the bundle read-only
 *               (the bundle at /opt/svc/app). A fresh /proc with the host-wide knobs (/proc/sys,
 *               /proc/sysrq-trigger, /proc/irq, /proc/bus, /proc/fs) read-only and the kernel's secrets
 *               (/proc/kcore, /proc/keys, /proc/kallsyms, /proc/timer_list …) masked, as Docker does; no
 *               /sys. Nothing else of the host (not the data dir, not $HOME) is visible.
 *   lifetime    `--die-with-parent` (no runner outlives the core); `--new-session` (no TIOCSTI into the
 *               core's terminal; the runner never needs a controlling tty).
 *
 * The result is an argv prefix (ending in `--`, or in the `setpriv … --` that drops privileges): append the
 * runner's argv. Wrap the whole thing with the limit group's `wrap()` so bwrap itself, and everything it
 * starts, is inside the cgroup before any code runs.
 */

export interface Bind {
  src: string;
  dest: string;
}

export interface BwrapOptions {
  /** The bwrap binary (default "bwrap" from PATH). */
  bwrap?: string;
  /** Runtime directories (Bun, the Python venv and its base interpreter, shared node_modules), read-only. */
  runtimeBinds: Bind[];
  bundleDir: string;
  bundleDest?: string;
  /** Size of the private /tmp. */
  tmpSizeMb: number;
  uid?: number;
  gid?: number;
  extraRoBinds?: Bind[];
  /** The complete environment of the sandbox. */
  env: Record<string, string>;
  /** Working directory inside (default: the bundle). */
  chdir?: string;
  /** Unix sockets (e.g. the egress proxy's) bound read-write; dest must be under /run. */
  unixSocketBinds?: Bind[];
  /**
   * Directories bound read-write under /run (a debug run's socket dir, executor/debug/types.ts): the one place
   * besides /tmp and /dev/shm the sandbox may write, and one the host sees too. `--remount-ro /run` does not reach it.
   */
  runDirBinds?: Bind[];
  hostname?: string;
  /** How a host path looks (injectable for tests); default lstat/readlink. */
  inspect?: (path: string) => HostPath;
  /** Options this bwrap understands (from bwrapAvailable); default: all (bubblewrap ≥ 0.8). */
  features?: BwrapFeatures;
  /**
   * The core runs as root: no user namespace; inside, `setpriv` drops to this uid/gid (never 0) before the
   * runner starts. `uid`/`gid` above are then ignored (the sandbox's uid is this one, inside and out).
   */
  dropTo?: { uid: number; gid: number; setpriv: string };
  /** An fd (in the spawned bwrap) from which bwrap reads the seccomp program (executor/sandbox/seccomp.ts). */
  seccompFd?: number;
  /** Size of /dev/shm (default 8 MiB): with /tmp, the only writable places. */
  shmSizeMb?: number;
  /**
   * A process cap by RLIMIT_NPROC, for hosts whose limit backend has no pids controller: `prlimit` sets it
   * inside the sandbox, after bwrap made the user namespace, where the kernel counts it per namespace.
   */
  nproc?: { prlimit: string; max: number };
}

/** Options that older bubblewraps lack (Ubuntu 22.04 ships 0.6): without them the argv leaves them out. */
export interface BwrapFeatures {
  /** --disable-userns (0.8): no nested user namespaces inside the sandbox. */
  disableUserns: boolean;
  /** --size before --tmpfs: a sized /tmp (else /tmp is unsized: bounded only by the memory cgroup). */
  size: boolean;
  /** --perms before --tmpfs/--dir. */
  perms: boolean;
}
export const ALL_FEATURES: BwrapFeatures = { disableUserns: true, size: true, perms: true };

export type HostPath = { kind: 'dir' } | { kind: 'file' } | { kind: 'symlink'; target: string } | { kind: 'missing' };

export const DEFAULT_BUNDLE_DEST = '/opt/svc/app';

/** Top-level system paths: bound read-only, or recreated as the same symlink (merged /usr). */
const SYSTEM_PATHS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/** Minimal /etc: each bound read-only when present. */
const ETC_PATHS = [
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/pki', // Fedora/RHEL TLS roots
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/host.conf',
  '/etc/gai.conf',
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/alternatives',
  '/etc/localtime',
  '/etc/mime.types',
];

export function inspectHostPath(path: string): HostPath {
  try {
    const st = lstatSync(path);
    if (st.isSymbolicLink()) return { kind: 'symlink', target: readlinkSync(path) };
    if (st.isDirectory()) return { kind: 'dir' };
    return { kind: 'file' };
  } catch {
    return { kind: 'missing' };
  }
}

function checkAbs(what: string, p: string): void {
  if (!p.startsWith('/')) throw new Error(`bwrap: ${what} must be an absolute path (got ${JSON.stringify(p)})`);
}

/** Host-wide /proc knobs made read-only inside (Docker's readonly paths), when the kernel has them. */
const PROC_READONLY = ['/proc/sys', '/proc/sysrq-trigger', '/proc/irq', '/proc/bus', '/proc/fs'];
/** /proc files and directories masked inside (Docker's masked paths): kernel memory, keys, addresses, timers. */
const PROC_MASKED_FILES = [
  '/proc/kcore',
  '/proc/keys',
  '/proc/kallsyms',
  '/proc/timer_list',
  '/proc/sched_debug',
  '/proc/latency_stats',
  '/proc/config.gz',
];
const PROC_MASKED_DIRS = ['/proc/acpi', '/proc/asound', '/proc/scsi'];

const DEFAULT_SHM_MB = 8;

export function bwrapArgv(o: BwrapOptions): string[] {
  const inspect = o.inspect ?? inspectHostPath;
  const drop = o.dropTo ?? null;
  const uid = drop ? drop.uid : (o.uid ?? 1000);
  const gid = drop ? drop.gid : (o.gid ?? 1000);
  if (!Number.isInteger(uid) || !Number.isInteger(gid) || uid <= 0 || gid <= 0) {
    throw new Error('bwrap: the sandbox must run as a non-zero uid/gid');
  }
  if (drop) checkAbs('setpriv', drop.setpriv);
  if (!(o.tmpSizeMb > 0)) throw new Error('bwrap: tmpSizeMb must be > 0');
  const bundleDest = o.bundleDest ?? DEFAULT_BUNDLE_DEST;
  checkAbs('bundleDir', o.bundleDir);
  checkAbs('bundleDest', bundleDest);

  const f = o.features ?? ALL_FEATURES;
  const a: string[] = [o.bwrap ?? 'bwrap'];
  if (drop) {
    // bwrap run by root: every namespace but the user one (a user namespace made by root maps to host root).
    a.push('--unshare-pid', '--unshare-net', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try');
    // Only what setpriv needs to drop to the sandbox's uid; setpriv then clears every set.
    a.push('--cap-drop', 'ALL', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID', '--cap-add', 'CAP_SETPCAP');
  } else {
    a.push('--unshare-all', '--unshare-user');
    if (f.disableUserns) a.push('--disable-userns');
    a.push('--uid', String(uid), '--gid', String(gid));
  }
  a.push('--hostname', o.hostname ?? 'sandbox');
  a.push('--die-with-parent', '--new-session');
  if (o.seccompFd !== undefined) a.push('--seccomp', String(o.seccompFd));

  a.push('--clearenv');
  for (const [k, v] of Object.entries(o.env)) {
    if (!k || k.includes('=') || k.includes('\0') || v.includes('\0')) throw new Error(`bwrap: bad env var ${JSON.stringify(k)}`);
    a.push('--setenv', k, v);
  }

  for (const p of SYSTEM_PATHS) {
    const h = inspect(p);
    if (h.kind === 'symlink') a.push('--symlink', h.target, p);
    else if (h.kind === 'dir') a.push('--ro-bind', p, p);
  }
  if (f.perms) a.push('--perms', '0755');
  a.push('--dir', '/etc');
  for (const p of ETC_PATHS) {
    const h = inspect(p);
    if (h.kind !== 'missing') a.push('--ro-bind-try', p, p);
  }

  a.push('--proc', '/proc');
  for (const p of PROC_READONLY) if (inspect(p).kind !== 'missing') a.push('--ro-bind-try', p, p);
  for (const p of PROC_MASKED_FILES) if (inspect(p).kind !== 'missing') a.push('--ro-bind-try', '/dev/null', p);
  for (const p of PROC_MASKED_DIRS) if (inspect(p).kind === 'dir') a.push('--tmpfs', p, '--remount-ro', p);
  a.push('--dev', '/dev');
  if (f.size) a.push('--size', String(Math.round((o.shmSizeMb ?? DEFAULT_SHM_MB) * 1024 * 1024)));
  if (f.perms) a.push('--perms', '1777');
  a.push('--tmpfs', '/dev/shm');
  if (f.size) a.push('--size', String(Math.round(o.tmpSizeMb * 1024 * 1024)));
  if (f.perms) a.push('--perms', '1777');
  a.push('--tmpfs', '/tmp');
  a.push('--tmpfs', '/run');

  // bwrap makes a bind's missing parents mode 0700, owned by root when root runs it: traversable (0755) instead,
  // or a root core's snippets (another uid) could not reach their runtimes and bundle.
  const made = new Set<string>(['/etc', '/tmp', '/run', '/proc', '/dev']);
  const bound: string[] = [];
  const parents = (dest: string) => {
    const parts = dest.split('/').filter(Boolean);
    for (let i = 1; i < parts.length; i++) {
      const dir = `/${parts.slice(0, i).join('/')}`;
      const taken = (p: string) => dir === p || dir.startsWith(`${p}/`);
      if (made.has(dir) || SYSTEM_PATHS.some(taken) || bound.some(taken)) continue;
      made.add(dir);
      if (f.perms) a.push('--perms', '0755');
      a.push('--dir', dir);
    }
  };
  const roBind = (what: string, b: Bind) => {
    checkAbs(what, b.src);
    checkAbs(what, b.dest);
    parents(b.dest);
    a.push('--ro-bind', b.src, b.dest);
    bound.push(b.dest);
  };
  for (const b of o.runtimeBinds) roBind('runtime bind', b);
  for (const b of o.extraRoBinds ?? []) roBind('extra bind', b);
  roBind('bundle', { src: o.bundleDir, dest: bundleDest });
  for (const b of o.unixSocketBinds ?? []) {
    checkAbs('socket bind', b.src);
    if (!/^\/run\//.test(b.dest)) throw new Error(`bwrap: socket dest ${b.dest} must be under /run (tmpfs)`);
    a.push('--bind', b.src, b.dest);
  }
  for (const b of o.runDirBinds ?? []) {
    checkAbs('run dir bind', b.src);
    if (!/^\/run\/[^/]+$/.test(b.dest)) throw new Error(`bwrap: run dir dest ${b.dest} must be a directory right under /run (tmpfs)`);
    a.push('--bind', b.src, b.dest);
  }
  // Built: everything but /tmp and /dev/shm (sized tmpfs) becomes read-only (a bound socket still connects).
  a.push('--remount-ro', '/run', '--remount-ro', '/dev', '--remount-ro', '/');
  a.push('--chdir', o.chdir ?? bundleDest);
  a.push('--');
  if (drop) {
    a.push(
      drop.setpriv,
      `--reuid=${uid}`,
      `--regid=${gid}`,
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--no-new-privs',
      '--',
    );
  }
  if (o.nproc) {
    checkAbs('prlimit', o.nproc.prlimit);
    if (!Number.isInteger(o.nproc.max) || o.nproc.max < 1) throw new Error('bwrap: nproc.max must be a positive integer');
    a.push(o.nproc.prlimit, `--nproc=${o.nproc.max}:${o.nproc.max}`, '--');
  }
  return a;
}

/**
 * A synthetic /etc/passwd and /etc/group naming the sandbox user (so `getpass.getuser()`, `id -un` and
 * `os.userInfo()` work) without exposing the host's accounts. Bind them with extraRoBinds.
 */
export async function writeSandboxIdentity(dir: string, uid = 1000, gid = 1000): Promise<Bind[]> {
  await mkdir(dir, { recursive: true });
  const passwd = join(dir, 'passwd');
  const group = join(dir, 'group');
  await writeFile(
    passwd,
    `root:x:0:0:root:/root:/usr/sbin/nologin\nsvc:x:${uid}:${gid}:snippet:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
  );
  await writeFile(group, `root:x:0:\nsvc:x:${gid}:\nnogroup:x:65534:\n`);
  // Readable by the sandbox's user whatever the core's umask (a root core's snippets are another uid).
  await Promise.all([chmod(passwd, 0o644), chmod(group, 0o644)]);
  return [
    { src: passwd, dest: '/etc/passwd' },
    { src: group, dest: '/etc/group' },
  ];
}

export interface BwrapProbe {
  ok: boolean;
  bwrap: string;
  version: string | null;
  features: BwrapFeatures;
  /** Why it is not usable (missing, or the kernel/host refuses the namespaces). */
  reason: string | null;
}

/** Is bubblewrap installed, which of our options does it know, and does it work here with them? */
export async function bwrapAvailable(bwrap = 'bwrap', exec: ExecFn = nodeExec): Promise<BwrapProbe> {
  const none: BwrapFeatures = { disableUserns: false, size: false, perms: false };
  const v = await exec(bwrap, ['--version']);
  if (v.code !== 0) {
    const why = v.error?.includes('ENOENT') ? `${bwrap} not found` : `${bwrap} --version failed: ${(v.error ?? v.stderr).trim()}`;
    return { ok: false, bwrap, version: null, features: none, reason: why };
  }
  const version = v.stdout.trim().replace(/^bubblewrap\s+/, '') || null;
  const help = await exec(bwrap, ['--help']);
  const text = `${help.stdout}\n${help.stderr}`;
  const features: BwrapFeatures = {
    disableUserns: text.includes('--disable-userns'),
    size: /--size\b/.test(text),
    perms: /--perms\b/.test(text),
  };
  const args = [
    '--unshare-all',
    '--unshare-user',
    ...(features.disableUserns ? ['--disable-userns'] : []),
    '--uid',
    '1000',
    '--gid',
    '1000',
    '--ro-bind',
    '/',
    '/',
    '--proc',
    '/proc',
    'true',
  ];
  const r = await exec(bwrap, args);
  if (r.code !== 0) {
    return {
      ok: false,
      bwrap,
      version,
      features,
      reason: `bubblewrap cannot create namespaces here: ${(r.stderr || r.error || `exit ${r.code}`).trim()}`,
    };
  }
  return { ok: true, bwrap, version, features, reason: null };
}
