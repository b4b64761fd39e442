import { mkdir, open, readFile, unlink, chmod, stat } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { DataDirError, DataDirInUseError } from '../errors';
import { writeFileAtomic } from './atomic-file';

/** Where everything of one emulator state lives. */
export interface DataDirPaths {
  root: string;
  db: string;
  blobs: string;
  lock: string;
  secretKey: string;
}

export function dataDirPaths(dir: string): DataDirPaths {
  const root = resolve(dir);
  return {
    root,
    db: join(root, 'db.json'),
    blobs: join(root, 'blobs'),
    lock: join(root, 'emulator.json'),
    secretKey: join(root, 'secret.key'),
  };
}

/**
 * `emulator.json`: the data dir's owner. A core writes `{kind: 'core', port, url, admin_token}` once it
 * listens; the CLI, editing files while no core runs, holds it as `{kind: 'cli'}` for the length of one
 * command. Created with O_EXCL, so two owners cannot both win; mode 0600 (it carries the admin token).
 */
export const LockFile = z.object({
  kind: z.enum(['core', 'cli']),
  pid: z.number().int(),
  /** Kernel start time of `pid` (Linux), so a reused pid after a reboot is not mistaken for the owner. */
  pid_start: z.string().nullable(),
  port: z.number().int().nullable(),
  url: z.string().nullable(),
  admin_token: z.string().nullable(),
  started_at: z.string(),
  version: z.string(),
});
export type LockFile = z.infer<typeof LockFile>;

export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime); the command name (field 2) may hold spaces, so count from its closing paren.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

/** The process `pid` runs, and is the same process as when `pidStart` was read (not a reused pid). */
export function isAlive(pid: number, pidStart: string | null): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (pidStart === null) return true;
  const now = processStartTime(pid);
  return now === null || now === pidStart;
}

export async function readLock(paths: DataDirPaths): Promise<LockFile | null> {
  let text: string;
  try {
    text = await readFile(paths.lock, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    return LockFile.parse(JSON.parse(text));
  } catch {
    return null; // half-written or foreign: treated as stale
  }
}

/** The live owner of the data dir, if any. */
export async function liveOwner(paths: DataDirPaths): Promise<LockFile | null> {
  const lock = await readLock(paths);
  return lock && isAlive(lock.pid, lock.pid_start) ? lock : null;
}

/** How long an unreadable emulator.json counts as "being written" rather than stale. */
const UNREADABLE_LOCK_GRACE_MS = 5_000;
const ageMs = async (path: string) => {
  const info = await stat(path).catch(() => null);
  return info ? Date.now() - info.mtimeMs : Infinity;
};

export interface DataDirLock {
  /** Replace the lock's content (the core does so once it knows its port). */
  update(patch: Partial<LockFile>): Promise<void>;
  release(): Promise<void>;
}

export async function acquireDataDir(paths: DataDirPaths, kind: LockFile['kind'], version: string): Promise<DataDirLock> {
  await mkdir(paths.root, { recursive: true, mode: 0o700 });
  let content: LockFile = {
    kind,
    pid: process.pid,
    pid_start: processStartTime(process.pid),
    port: null,
    url: null,
    admin_token: null,
    started_at: new Date().toISOString(),
    version,
  };
  for (let attempt = 0; ; attempt++) {
    try {
      const fh = await open(paths.lock, 'wx', 0o600);
      try {
        await fh.writeFile(JSON.stringify(content, null, 2));
      } finally {
        await fh.close();
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new DataDirError(paths.lock, `cannot be created: ${(err as Error).message}`);
      }
      const owner = await readLock(paths);
      if (owner && isAlive(owner.pid, owner.pid_start)) throw new DataDirInUseError(paths.root, owner);
      if (!owner && (await ageMs(paths.lock)) < UNREADABLE_LOCK_GRACE_MS) {
        // Unreadable but fresh: an owner is writing it right now (create and write are two steps).
        throw new DataDirInUseError(paths.root, { pid: 0, kind: 'core', url: null });
      }
      if (attempt >= 2) throw new DataDirError(paths.lock, 'could not be taken over (it keeps reappearing)');
      await unlink(paths.lock).catch(() => {}); // stale: its owner is gone
    }
  }
  let released = false;
  return {
    async update(patch) {
      content = { ...content, ...patch };
      await writeFileAtomic(paths.lock, JSON.stringify(content, null, 2), 0o600);
      await chmod(paths.lock, 0o600);
    },
    async release() {
      if (released) return;
      released = true;
      const current = await readLock(paths);
      if (current && current.pid === process.pid) await unlink(paths.lock).catch(() => {});
    },
  };
}
