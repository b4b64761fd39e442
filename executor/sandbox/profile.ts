import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { release as osRelease, tmpdir } from 'node:os';
import { join } from 'node:path';
import { bwrapArgv, type BwrapFeatures } from './bwrap';
import { hostSeccompArch, seccompFilter, type SeccompArch } from './seccomp';

/**
 * Who a snippet is on this host, and how that is made so: the part of the sandbox that depends on who runs
 * the core. Shared by the sandbox host (executor/local-host.ts) and doctor's identity probe, so doctor
 * reports exactly what snippets get.
 */
export interface SandboxProfile {
  /** The bubblewrap binary and the options it understands. */
  bin: string;
  features: BwrapFeatures;
  /** The core is root: drop to this uid/gid inside the sandbox (executor/sandbox/bwrap.ts). */
  dropTo: { uid: number; gid: number; setpriv: string } | null;
  /** The compiled seccomp program, in a file opened afresh for each sandbox (bwrap reads its fd to the end). */
  seccomp: { arch: SeccompArch; path: string } | null;
  /**
   * `prlimit` (util-linux), to cap a sandbox's processes by RLIMIT_NPROC where the limit backend cannot
   * (`none`): null where it is missing, or where the kernel would count the cap against all of the core
   * user's processes rather than the sandbox's (see nprocCountedPerNamespace).
   */
  prlimit: string | null;
}

/**
 * Since Linux 5.14 RLIMIT_NPROC is counted per user namespace and uid: set inside a sandbox's own user
 * namespace, it counts that sandbox's processes only. Before, it counted every process of the host uid.
 */
export function nprocCountedPerNamespace(release: string = osRelease()): boolean {
  const m = /^(\d+)\.(\d+)/.exec(release);
  if (!m) return false;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > 5 || (major === 5 && minor >= 14);
}

/**
 * The RLIMIT_NPROC a sandbox gets when its limit backend has no pids controller. In its own user namespace
 * (a user's core) it counts that sandbox alone: the sandbox's pids cap. A root core's sandboxes share the
 * dedicated uid and no user namespace, so there it bounds them all together (a fork bomb still stops).
 */
export function nprocCap(profile: Pick<SandboxProfile, 'dropTo' | 'prlimit'>, pidsMax: number): { prlimit: string; max: number } | null {
  if (!profile.prlimit) return null;
  return { prlimit: profile.prlimit, max: profile.dropTo ? pidsMax * SHARED_NPROC_SANDBOXES : pidsMax };
}
/** How many sandboxes' worth of processes a root core's dedicated uid may hold in all, without a pids controller. */
export const SHARED_NPROC_SANDBOXES = 16;

/**
 * The dedicated uid/gid a root core's snippets run as: far from system accounts (< 1000), users
 * (1000–60000), the ranges systemd allocates (61184–65519, 524288–1879048191) and 65534 (nobody), so no
 * file or process of the host belongs to it. `SVC_EMU_SANDBOX_UID` / `SVC_EMU_SANDBOX_GID` choose another.
 */
export const DEFAULT_SANDBOX_UID = 2_000_000_000;

export function sandboxUser(env: NodeJS.ProcessEnv = process.env): { uid: number; gid: number } {
  const parse = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1000 || n > 4_294_967_293 || n === 65534) {
      throw new Error(`${name} must be an unused uid/gid of at least 1000 (not 65534), got ${JSON.stringify(raw)}`);
    }
    return n;
  };
  const uid = parse('SVC_EMU_SANDBOX_UID', DEFAULT_SANDBOX_UID);
  return { uid, gid: parse('SVC_EMU_SANDBOX_GID', uid) };
}

export const coreIsRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;

/** Writes the seccomp program for this machine's architecture into `dir` (null on one we have no table for). */
export async function prepareSeccomp(dir: string, arch: string = process.arch): Promise<SandboxProfile['seccomp']> {
  const a = hostSeccompArch(arch);
  if (!a) return null;
  await mkdir(dir, { recursive: true });
  const path = join(dir, `seccomp-${a}.bpf`);
  await writeFile(path, seccompFilter(a), { mode: 0o644 });
  return { arch: a, path };
}

/**
 * The profile for a core run by this user. Root without setpriv cannot drop privileges: refused, so that no
 * snippet runs as host root.
 */
export async function sandboxProfile(opts: {
  bwrap: { bin: string; features: BwrapFeatures };
  setpriv: string | null;
  workDir: string;
  root?: boolean;
  env?: NodeJS.ProcessEnv;
  /** util-linux's prlimit, when installed. */
  prlimit?: string | null;
  /** The kernel release (default: this host's). */
  release?: string;
}): Promise<SandboxProfile> {
  const root = opts.root ?? coreIsRoot();
  let dropTo: SandboxProfile['dropTo'] = null;
  if (root) {
    if (!opts.setpriv)
      throw new Error(
        'the core runs as root and setpriv (util-linux) is missing: snippets would run as host root, so none run (install util-linux, or run the emulator as a normal user)',
      );
    dropTo = { ...sandboxUser(opts.env), setpriv: opts.setpriv };
  }
  // In a user namespace the cap must be counted per namespace (5.14+), or it would count the user's every process.
  const prlimit = opts.prlimit && (root || nprocCountedPerNamespace(opts.release)) ? opts.prlimit : null;
  return { ...opts.bwrap, dropTo, seccomp: await prepareSeccomp(opts.workDir), prlimit };
}

/** Opens the seccomp program for one spawn (the caller closes it once the child has started). */
export function openSeccomp(seccomp: NonNullable<SandboxProfile['seccomp']>): number {
  return openSync(seccomp.path, 'r');
}

/** The snippet's identity as the HOST sees it (its /proc/PID/status read from outside the sandbox). */
export interface SandboxIdentity {
  ok: boolean;
  /** Host uid/gid of the sandboxed process (real, effective, saved, fs: all must be non-zero). */
  host_uid: number[];
  host_gid: number[];
  /** The uid the snippet sees (1000 in a user namespace; the dedicated uid when a root core dropped to it). */
  mode: 'user-namespace' | 'root-drop';
  cap_eff: string;
  cap_prm: string;
  cap_bnd: string;
  no_new_privs: boolean;
  seccomp: 'filter' | 'strict' | 'disabled';
  seccomp_filters: number;
  /** Why the identity is not what it must be; empty when ok. */
  problems: string[];
}

/** Parses the lines of /proc/PID/status that say who a process is. */
export function parseIdentity(status: string, mode: SandboxIdentity['mode']): SandboxIdentity {
  const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(status)?.[1]?.trim() ?? '';
  const ids = (name: string) => field(name).split(/\s+/).filter(Boolean).map(Number);
  const seccompMode = field('Seccomp');
  const id: SandboxIdentity = {
    ok: false,
    host_uid: ids('Uid'),
    host_gid: ids('Gid'),
    mode,
    cap_eff: field('CapEff'),
    cap_prm: field('CapPrm'),
    cap_bnd: field('CapBnd'),
    no_new_privs: field('NoNewPrivs') === '1',
    seccomp: seccompMode === '2' ? 'filter' : seccompMode === '1' ? 'strict' : 'disabled',
    seccomp_filters: Number(field('Seccomp_filters') || 0),
    problems: [],
  };
  if (id.host_uid.length !== 4 || id.host_uid.some((u) => u === 0)) id.problems.push(`runs as host uid ${id.host_uid.join('/')}`);
  if (id.host_gid.length !== 4 || id.host_gid.some((g) => g === 0)) id.problems.push(`runs as host gid ${id.host_gid.join('/')}`);
  if (!/^0+$/.test(id.cap_eff) || !/^0+$/.test(id.cap_prm))
    id.problems.push(`holds capabilities (CapEff ${id.cap_eff}, CapPrm ${id.cap_prm})`);
  if (mode === 'root-drop' && !/^0+$/.test(id.cap_bnd)) id.problems.push(`bounding set not empty (${id.cap_bnd})`);
  if (!id.no_new_privs) id.problems.push('no_new_privs is not set (setuid binaries would work)');
  if (id.seccomp !== 'filter') id.problems.push('no seccomp filter');
  id.ok = id.problems.length === 0;
  return id;
}

/**
 * Starts a sandbox with this profile around `cat` (which waits on its stdin), finds the sandboxed process
 * among bwrap's descendants, reads its status from the host's /proc, and ends it.
 */
export async function probeIdentity(profile: SandboxProfile, opts: { deadlineMs?: number } = {}): Promise<SandboxIdentity> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-emu-probe-'));
  await chmod(dir, 0o755);
  const fd = profile.seccomp ? openSeccomp(profile.seccomp) : null;
  const argv = bwrapArgv({
    bwrap: profile.bin,
    features: profile.features,
    runtimeBinds: [],
    bundleDir: dir,
    tmpSizeMb: 1,
    env: { PATH: '/usr/bin:/bin' },
    ...(profile.dropTo ? { dropTo: profile.dropTo } : {}),
    ...(fd !== null ? { seccompFd: 3 } : {}),
  });
  const child = spawn(argv[0]!, [...argv.slice(1), '/bin/cat'], { stdio: ['pipe', 'ignore', 'pipe', fd ?? 'ignore'] });
  if (fd !== null) closeSync(fd);
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((r) => child.once('close', () => r()));
  try {
    const deadline = Date.now() + (opts.deadlineMs ?? 5000);
    while (Date.now() < deadline && child.exitCode === null) {
      const leaf = await leafOf(child.pid!);
      if (leaf !== null) {
        const comm = (await readFile(`/proc/${leaf}/comm`, 'utf8').catch(() => '')).trim();
        if (comm === 'cat') {
          return parseIdentity(await readFile(`/proc/${leaf}/status`, 'utf8'), profile.dropTo ? 'root-drop' : 'user-namespace');
        }
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`the identity probe's sandbox did not start: ${stderr.trim() || `exit ${child.exitCode}`}`);
  } finally {
    child.stdin!.end();
    child.kill('SIGKILL');
    await exited;
    await rm(dir, { recursive: true, force: true });
  }
}

/** The deepest first descendant of a process (bwrap → its pid 1 → the command), from /proc's children lists. */
async function leafOf(pid: number): Promise<number | null> {
  let cur = pid;
  for (let depth = 0; depth < 8; depth++) {
    const kids = (await readFile(`/proc/${cur}/task/${cur}/children`, 'utf8').catch(() => '')).trim();
    if (!kids) return depth === 0 ? null : cur;
    cur = Number(kids.split(/\s+/)[0]);
  }
  return cur;
}
