import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  acquireDataDir,
  dataDirPaths,
  liveOwner,
  processStartTime,
  readLock,
  type DataDirLock,
  type DataDirPaths,
  type LockFile,
} from '../../server/storage/data-dir';
import { DataDirError, DataDirInUseError } from '../../server/errors';

let base: string;
let paths: DataDirPaths;
const held: DataDirLock[] = [];

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), 'svc-emu-datadir-'));
  paths = dataDirPaths(join(base, 'state'));
});

afterEach(async () => {
  for (const lock of held.splice(0)) await lock.release();
  await rm(base, { recursive: true, force: true });
});

async function acquire(kind: LockFile['kind'] = 'core'): Promise<DataDirLock> {
  const lock = await acquireDataDir(paths, kind, '0.0.0-test');
  held.push(lock);
  return lock;
}

/** The pid of a process that has exited (and been reaped). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  const pid = child.pid!;
  await new Promise<void>((resolve, reject) => {
    child.on('exit', () => resolve());
    child.on('error', reject);
  });
  // The child has been reaped once 'exit' fired and the pid no longer answers signal 0.
  expect(() => process.kill(pid, 0)).toThrow();
  return pid;
}

function lockFor(pid: number, patch: Partial<LockFile> = {}): LockFile {
  return {
    kind: 'core',
    pid,
    pid_start: null,
    port: 7070,
    url: 'http://127.0.0.1:7070',
    admin_token: 'emu_x',
    started_at: '2026-01-01T00:00:00.000Z',
    version: '0.0.0-old',
    ...patch,
  };
}

const modeOf = async (p: string) => (await stat(p)).mode & 0o777;

describe('dataDirPaths', () => {
  it('places every file inside the resolved root', () => {
    const p = dataDirPaths('relative/dir');
    expect(p.root).toBe(join(process.cwd(), 'relative/dir'));
    expect(p.db).toBe(join(p.root, 'db.json'));
    expect(p.lock).toBe(join(p.root, 'emulator.json'));
    expect(p.blobs).toBe(join(p.root, 'blobs'));
    expect(p.secretKey).toBe(join(p.root, 'secret.key'));
  });
});

describe('acquireDataDir', () => {
  it('creates the data dir and a 0600 lock file naming this process', async () => {
    await acquire('cli');
    expect(await modeOf(paths.root)).toBe(0o700);
    expect(await modeOf(paths.lock)).toBe(0o600);
    const lock = await readLock(paths);
    expect(lock).not.toBeNull();
    expect(lock!.pid).toBe(process.pid);
    expect(lock!.kind).toBe('cli');
    expect(lock!.version).toBe('0.0.0-test');
    expect(lock!.pid_start).toBe(processStartTime(process.pid));
    expect(await liveOwner(paths)).toEqual(lock);
  });

  it('refuses a second acquire while the first is held, naming the owner pid', async () => {
    await acquire();
    const err = await acquireDataDir(paths, 'cli', '0.0.0-test').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirInUseError);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toContain(`pid ${process.pid}`);
    expect((err as Error).message).toContain(paths.root);
    expect((err as DataDirInUseError).owner.pid).toBe(process.pid);
    // The refused attempt did not disturb the owner's lock.
    expect((await readLock(paths))!.pid).toBe(process.pid);
  });

  it('lets exactly one of several concurrent acquires win', async () => {
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => acquireDataDir(paths, 'cli', '0.0.0-test')));
    const won = results.filter((r): r is PromiseFulfilledResult<DataDirLock> => r.status === 'fulfilled');
    held.push(...won.map((r) => r.value));
    expect(won).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(DataDirInUseError);
    }
  });

  it('names the URL of a running core in the in-use message', async () => {
    const lock = await acquire('core');
    await lock.update({ port: 7171, url: 'http://127.0.0.1:7171' });
    const err = await acquireDataDir(paths, 'cli', '0.0.0-test').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirInUseError);
    expect((err as Error).message).toContain('http://127.0.0.1:7171');
    expect((err as Error).message).toContain('emulator');
  });

  it('takes over a stale lock left by a process that has exited', async () => {
    const pid = await deadPid();
    await acquire(); // creates the directory
    await rm(paths.lock);
    await writeFile(paths.lock, JSON.stringify(lockFor(pid)), { mode: 0o600 });
    expect(await liveOwner(paths)).toBeNull();
    await acquire('cli');
    const lock = await readLock(paths);
    expect(lock!.pid).toBe(process.pid);
    expect(lock!.kind).toBe('cli');
    expect(lock!.admin_token).toBeNull(); // nothing of the dead owner's content survives
    expect(await modeOf(paths.lock)).toBe(0o600);
  });

  it('takes over a lock whose pid is alive but belongs to another process start (pid reused)', async () => {
    await acquire();
    await rm(paths.lock);
    await writeFile(paths.lock, JSON.stringify(lockFor(process.pid, { pid_start: '1' })), { mode: 0o600 });
    expect(await liveOwner(paths)).toBeNull();
    await acquire('cli');
    expect((await readLock(paths))!.pid_start).toBe(processStartTime(process.pid));
  });

  it('treats a fresh unreadable lock as an owner still writing it, and an old one as stale', async () => {
    await acquire();
    await rm(paths.lock);
    await writeFile(paths.lock, 'not json', { mode: 0o600 });
    expect(await readLock(paths)).toBeNull();
    // Fresh: an owner is between creating the file and writing it.
    await expect(acquire('cli')).rejects.toThrow(DataDirInUseError);
    // Old: nobody is writing it any more.
    const past = new Date(Date.now() - 60_000);
    await utimes(paths.lock, past, past);
    await acquire('cli');
    expect((await readLock(paths))!.pid).toBe(process.pid);
  });
});

describe('DataDirLock', () => {
  it('update replaces the content and keeps mode 0600', async () => {
    const lock = await acquire('core');
    await lock.update({ port: 7070, url: 'http://127.0.0.1:7070', admin_token: 'emu_secret' });
    expect(await modeOf(paths.lock)).toBe(0o600);
    const after = await readLock(paths);
    expect(after).toMatchObject({ kind: 'core', pid: process.pid, port: 7070, admin_token: 'emu_secret' });
    await lock.update({ port: 7071 });
    expect(await modeOf(paths.lock)).toBe(0o600);
    expect(await readLock(paths)).toMatchObject({ port: 7071, admin_token: 'emu_secret' });
    expect((await readdir(paths.root)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });

  it('release removes the lock, after which the dir can be acquired again', async () => {
    const lock = await acquire();
    await lock.release();
    expect(await readLock(paths)).toBeNull();
    expect(await liveOwner(paths)).toBeNull();
    await acquire('cli');
    expect((await readLock(paths))!.kind).toBe('cli');
  });

  it('release leaves a lock that is not ours in place', async () => {
    const lock = await acquire();
    const other = lockFor(process.pid + 100000, { kind: 'cli' });
    await rm(paths.lock);
    await writeFile(paths.lock, JSON.stringify(other), { mode: 0o600 });
    await lock.release();
    expect(JSON.parse(await readFile(paths.lock, 'utf8'))).toEqual(other);
  });

  it('release is idempotent', async () => {
    const lock = await acquire();
    await lock.release();
    await lock.release();
    expect(await readLock(paths)).toBeNull();
  });
});

describe('readLock / liveOwner', () => {
  it('readLock is null without a lock file, and liveOwner too', async () => {
    expect(await readLock(paths)).toBeNull();
    expect(await liveOwner(paths)).toBeNull();
  });

  it('liveOwner is null for a dead pid and the lock for a live one', async () => {
    await acquire();
    await rm(paths.lock);
    const dead = lockFor(await deadPid());
    await writeFile(paths.lock, JSON.stringify(dead));
    expect(await readLock(paths)).toEqual(dead);
    expect(await liveOwner(paths)).toBeNull();
    const live = lockFor(process.pid, { pid_start: processStartTime(process.pid) });
    await writeFile(paths.lock, JSON.stringify(live));
    expect(await liveOwner(paths)).toEqual(live);
  });
});
