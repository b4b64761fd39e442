import { lstatSync, readlinkSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { nodeExec } from '../limits/common';
import type { ExecFn } from '../limits/cgroupfs';

/**
 * The parity sandbox: bubblewrap (0.8 on Debian bookworm; no overlay options there) around a runner.
 *
 *   namespaces  all of them (user, pid, net, ipc, uts, cgroup): own PID namespace, a network namespace with
 *               only loopback (egress goes through unix sockets bound in under /run, see unixSocketBinds).
 *               As root, `--unshare-all` does not imply a user namespace: `--unshare-user` is explicit, so
 *               `--uid/--gid` (non-zero) and `--disable-userns` are accepted (STACK.md).
 *   environment `--clearenv`, then exactly `env` (bwrap itself adds PWD, the --chdir directory).
 *   filesystem  read-only /usr (and /bin, /sbin, /lib* as symlinks into usr/ on merged-usr hosts, read-only
 *               binds otherwise); a minimal /etc (TLS roots, name service config, the dynamic linker's cache,
 *               Debian's alternatives, time zone); fresh /proc and /dev; a private sized /tmp (tmpfs) and /run;
 *               the runtime directories and the bundle read-only (the bundle at /opt/svc/app).
 *               Nothing else of the host (not the data dir, not $HOME) is visible.
 *   lifetime    `--die-with-parent` (no runner outlives the core); `--new-session` (no TIOCSTI into the
 *               core's terminal; the runner never needs a controlling tty).
 *
 * The result is an argv prefix ending in `--`: append the runner's argv. Wrap the whole thing with the limit
 * group's `wrap()` so bwrap itself, and everything it starts, is inside the cgroup before any code runs.
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
  /** Unix sockets (e.g. the egress proxy's) bound read-write; dest must be under /run or /tmp. */
  unixSocketBinds?: Bind[];
  hostname?: string;
  /** How a host path looks (injectable for tests); default lstat/readlink. */
  inspect?: (path: string) => HostPath;
  /** Options this bwrap understands (from bwrapAvailable); default: all (bubblewrap ≥ 0.8). */
  features?: BwrapFeatures;
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

export function bwrapArgv(o: BwrapOptions): string[] {
  const inspect = o.inspect ?? inspectHostPath;
  const uid = o.uid ?? 1000;
  const gid = o.gid ?? 1000;
  if (uid === 0 || gid === 0) throw new Error('bwrap: the sandbox must not run as uid/gid 0');
  if (!(o.tmpSizeMb > 0)) throw new Error('bwrap: tmpSizeMb must be > 0');
  const bundleDest = o.bundleDest ?? DEFAULT_BUNDLE_DEST;
  checkAbs('bundleDir', o.bundleDir);
  checkAbs('bundleDest', bundleDest);

  const f = o.features ?? ALL_FEATURES;
  const a: string[] = [o.bwrap ?? 'bwrap'];
  a.push('--unshare-all', '--unshare-user');
  if (f.disableUserns) a.push('--disable-userns');
  a.push('--uid', String(uid), '--gid', String(gid));
  a.push('--hostname', o.hostname ?? 'sandbox');
  a.push('--die-with-parent', '--new-session');

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

  a.push('--proc', '/proc', '--dev', '/dev');
  if (f.size) a.push('--size', String(Math.round(o.tmpSizeMb * 1024 * 1024)));
  if (f.perms) a.push('--perms', '1777');
  a.push('--tmpfs', '/tmp');
  a.push('--tmpfs', '/run');

  for (const b of o.runtimeBinds) {
    checkAbs('runtime bind', b.src);
    checkAbs('runtime bind', b.dest);
    a.push('--ro-bind', b.src, b.dest);
  }
  for (const b of o.extraRoBinds ?? []) {
    checkAbs('extra bind', b.src);
    checkAbs('extra bind', b.dest);
    a.push('--ro-bind', b.src, b.dest);
  }
  a.push('--ro-bind', o.bundleDir, bundleDest);
  for (const b of o.unixSocketBinds ?? []) {
    checkAbs('socket bind', b.src);
    if (!/^\/(run|tmp)\//.test(b.dest)) throw new Error(`bwrap: socket dest ${b.dest} must be under /run or /tmp (tmpfs)`);
    a.push('--bind', b.src, b.dest);
  }
  a.push('--chdir', o.chdir ?? bundleDest);
  a.push('--');
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
  await writeFile(passwd, `root:x:0:0:root:/root:/usr/sbin/nologin\nsvc:x:${uid}:${gid}:snippet:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`);
  await writeFile(group, `root:x:0:\nsvc:x:${gid}:\nnogroup:x:65534:\n`);
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
  const args = ['--unshare-all', '--unshare-user', ...(features.disableUserns ? ['--disable-userns'] : []),
    '--uid', '1000', '--gid', '1000', '--ro-bind', '/', '/', '--proc', '/proc', 'true'];
  const r = await exec(bwrap, args);
  if (r.code !== 0) {
    return { ok: false, bwrap, version, features, reason: `bubblewrap cannot create namespaces here: ${(r.stderr || r.error || `exit ${r.code}`).trim()}` };
  }
  return { ok: true, bwrap, version, features, reason: null };
}
