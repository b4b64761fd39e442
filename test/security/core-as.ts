/**
 * Starts a real core (test/helpers/core-process.mts) in its own process, as root or as an unprivileged uid
 * (through `setpriv --reuid --regid --clear-groups`), on a temp data dir that uid owns.
 *
 * As another uid the core must reach the runtimes. The checkout and .runtimes/ are world-readable here, but
 * the Python install the venv links to may sit under a home only its owner can traverse (/root/.pyenv on
 * these machines): then the install and the venv are hard-linked (same bytes, same inodes, no copy; a real
 * copy where the temp dir is on another file system) into a traversable temp dir, and a runtime lock naming them is handed over with SVC_EMU_RUNTIMES_DIR (the
 * variable scripts/setup.mjs and executor/runtime-info.ts use for another runtimes dir).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync, statSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { TestContext } from 'vitest';

export const ROOT = resolve(__dirname, '../..');
const SCRIPT = join(ROOT, 'test', 'helpers', 'core-process.mts');

export interface CoreAs {
  proc: ChildProcess;
  url: string;
  port: number;
  key: string;
  admin: string;
  pid: number;
  dataDir: string;
  /** The uid the core runs as. */
  uid: number;
  /** The runtime paths the sandboxes bind (for the probes' write attempts). */
  runtimeDirs: string[];
  runtimeLock: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr: () => string;
  /** SIGTERM, wait for the exit (SIGKILL after 15 s), remove the temp dirs. */
  stop(): Promise<void>;
}

/** Every directory from / down to path can be traversed (o+x) by any uid. */
export function worldTraversable(path: string): string | null {
  let p = resolve(path);
  for (;;) {
    try {
      const st = statSync(p);
      if (st.isDirectory() && !(st.mode & 0o001)) return p;
    } catch {
      return p;
    }
    if (p === '/') return null;
    p = dirname(p);
  }
}

interface Lock {
  bun: { bin: string; nodeModules: string; bindReadOnly: string[] };
  python: { bin: string; basePrefix: string; baseExecutable: string | null; venv: string; sitePackages: string; bindReadOnly: string[] };
}

const defaultLockPath = () => join(process.env.SVC_EMU_RUNTIMES_DIR ?? join(ROOT, '.runtimes'), 'runtime-lock.json');

/** Why a core as `uid` cannot run snippets here (null: it can), before any work is done. */
export function nonRootObstacle(): string | null {
  if (!existsSync(defaultLockPath())) return `no runtimes installed (${defaultLockPath()} missing)`;
  const lock = JSON.parse(readFileSync(defaultLockPath(), 'utf8')) as Lock;
  for (const p of [ROOT, lock.bun.bin, lock.bun.nodeModules, lock.python.venv]) {
    const blocked = worldTraversable(p);
    if (blocked) return `${p} cannot be reached by another uid (${blocked} is not world-traversable)`;
  }
  return null;
}

/** Hard-links the Python install and the venv into `dir` when another uid cannot reach them; returns the lock to use. */
async function reachableRuntimes(dir: string): Promise<{ lockDir: string | null; lock: Lock }> {
  const lock = JSON.parse(await readFile(defaultLockPath(), 'utf8')) as Lock & Record<string, unknown>;
  if (!worldTraversable(lock.python.basePrefix)) return { lockDir: null, lock };
  const base = join(dir, 'python-base');
  const venv = join(dir, 'python-venv');
  for (const [src, dest] of [
    [lock.python.basePrefix, base],
    [lock.python.venv, venv],
  ] as const) {
    // Hard links where the temp dir is on the same file system; a real copy where it is not.
    let r = spawnSync('cp', ['-al', src, dest], { encoding: 'utf8' });
    if (r.status !== 0) {
      await rm(dest, { recursive: true, force: true });
      r = spawnSync('cp', ['-a', src, dest], { encoding: 'utf8' });
    }
    if (r.status !== 0) throw new Error(`cp -a ${src} ${dest}: ${r.stderr}`);
  }
  // The venv's own pointers to its base: replaced (unlinked first: the hard link is shared with the original).
  const exe = (lock.python.baseExecutable ?? join(lock.python.basePrefix, 'bin', 'python3')).replace(lock.python.basePrefix, base);
  await unlink(join(venv, 'bin', 'python'));
  await symlink(exe, join(venv, 'bin', 'python'));
  const cfgPath = join(venv, 'pyvenv.cfg');
  const cfg = (await readFile(cfgPath, 'utf8')).replace(/^home = .*$/m, `home = ${join(base, 'bin')}`);
  await unlink(cfgPath);
  await writeFile(cfgPath, cfg);
  const swap = (p: string) => p.replace(lock.python.venv, venv).replace(lock.python.basePrefix, base);
  const next = {
    ...lock,
    python: {
      ...lock.python,
      bin: swap(lock.python.bin),
      basePrefix: base,
      baseExecutable: lock.python.baseExecutable ? swap(lock.python.baseExecutable) : null,
      venv,
      sitePackages: swap(lock.python.sitePackages),
      bindReadOnly: lock.python.bindReadOnly.map(swap),
    },
  };
  const lockDir = join(dir, 'runtimes');
  await mkdir(lockDir);
  await writeFile(join(lockDir, 'runtime-lock.json'), JSON.stringify(next, null, 2));
  return { lockDir, lock: next };
}

export async function startCoreAs(opts: { uid: number | null; gid?: number; env: Record<string, string> }): Promise<CoreAs> {
  const work = await mkdtemp(join(tmpdir(), 'svc-emu-escape-'));
  await chmod(work, 0o755);
  const dataDir = join(work, 'data');
  await mkdir(dataDir, { mode: 0o700 });
  const home = join(work, 'home');
  await mkdir(home, { mode: 0o700 });
  let prefix: string[] = [];
  let lockDir: string | null = null;
  let lock = JSON.parse(await readFile(defaultLockPath(), 'utf8')) as Lock;
  const uid = opts.uid ?? process.getuid!();
  if (opts.uid !== null && opts.uid !== process.getuid!()) {
    const gid = opts.gid ?? opts.uid;
    await chown(dataDir, opts.uid, gid);
    await chown(home, opts.uid, gid);
    ({ lockDir, lock } = await reachableRuntimes(work));
    prefix = ['setpriv', `--reuid=${opts.uid}`, `--regid=${gid}`, '--clear-groups', '--'];
  }
  accessSync(ROOT, constants.R_OK);
  const argv = [...prefix, process.execPath, '--import', 'tsx', SCRIPT, dataDir, '--project-root', ROOT];
  const proc = spawn(argv[0]!, argv.slice(1), {
    cwd: ROOT,
    env: { ...process.env, HOME: home, ...(lockDir ? { SVC_EMU_RUNTIMES_DIR: lockDir } : {}), ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr.on('data', (c: Buffer) => {
    if (err.length < 200_000) err += c.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    proc.once('exit', (code, signal) => res({ code, signal })),
  );
  const line = await Promise.race([
    new Promise<string>((res) => createInterface({ input: proc.stdout }).once('line', res)),
    exited.then((e) => Promise.reject(new Error(`core exited (${JSON.stringify(e)}) before it listened:\n${err.slice(-4000)}`))),
    new Promise<string>((_, rej) => setTimeout(() => rej(new Error(`core did not start in 30 s:\n${err.slice(-4000)}`)), 30_000)),
  ]);
  const info = JSON.parse(line) as { url: string; key: string; admin: string; pid: number };
  const runtimeDirs = [join(ROOT, 'executor', 'runtimes'), ...lock.bun.bindReadOnly, ...lock.python.bindReadOnly];
  return {
    proc,
    ...info,
    port: Number(new URL(info.url).port),
    dataDir,
    uid,
    runtimeDirs,
    runtimeLock: join(lockDir ?? dirname(defaultLockPath()), 'runtime-lock.json'),
    exited,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        const t = setTimeout(() => proc.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(t);
      }
      await rm(work, { recursive: true, force: true });
    },
  };
}

/**
 * A core as root (`uid` null) or as `uid`, with the parity sandbox, for a test that judges the sandbox from the
 * host; skips (saying why) where this host cannot give that: the test not run as root, no usable unprivileged
 * uid, no bubblewrap. The core goes into `cores` for the file's afterAll to stop.
 */
export async function sandboxedCoreAs(ctx: TestContext, uid: number | null, cores: CoreAs[]): Promise<CoreAs> {
  const mode = uid === null ? 'root' : `uid ${uid}`;
  if (process.getuid?.() !== 0) ctx.skip(`the core runs as this uid (${process.getuid?.()}): switching to ${mode} needs root`);
  if (uid !== null) {
    const obstacle = nonRootObstacle();
    if (obstacle) ctx.skip(obstacle);
  }
  const core = await startCoreAs({ uid, env: {} });
  cores.push(core);
  const doctor = (await (await fetch(`${core.url}/_emu/doctor`, { headers: { authorization: `Bearer ${core.admin}` } })).json()) as {
    sandbox?: { bubblewrap?: boolean; reason?: string | null };
  };
  if (!doctor.sandbox?.bubblewrap) ctx.skip(`no parity sandbox: ${doctor.sandbox?.reason ?? 'unknown'}`);
  return core;
}

/** The parent of a process, from /proc (null when it is gone). */
export function parentOf(pid: number): number | null {
  try {
    // The command name, in parentheses, may hold spaces: the fields after its closing parenthesis are fixed.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return null;
  }
}

export function descendsFrom(pid: number, ancestor: number): boolean {
  for (let p: number | null = pid, n = 0; p !== null && p > 1 && n < 64; p = parentOf(p), n++) if (p === ancestor) return true;
  return false;
}
