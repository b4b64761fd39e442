import { readFileSync } from 'node:fs';
import { constants as fsConstants, promises as fsp } from 'node:fs';

/**
 * The file operations the cgroup backends need, behind one seam: the real cgroupfs in production, a temp
 * directory (or a wrapper that injects kernel errors such as EBUSY) in unit tests.
 */
export interface CgroupFs {
  /** File contents, or null when the file does not exist. */
  read(path: string): Promise<string | null>;
  /** One write(2) of `data` (cgroupfs files take one value per write). */
  write(path: string, data: string): Promise<void>;
  /** mkdir; an existing directory is fine. */
  mkdir(path: string): Promise<void>;
  /** rmdir; a missing directory is fine. Throws EBUSY while the group still has tasks. */
  rmdir(path: string): Promise<void>;
  exists(path: string): Promise<boolean>;
  /** access(W_OK) */
  writable(path: string): Promise<boolean>;
  /** Names of the subdirectories (child groups); optional: without it there is no sweep. */
  list?(path: string): Promise<string[]>;
}

export function errnoOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

export const nodeCgroupFs: CgroupFs = {
  async read(path) {
    // Synchronous on purpose: cgroup files are small kernel-generated text that never blocks on a disk.
    // Eight async reads cost ~0.7 ms through the libuv thread pool (32 round trips); these cost ~0.05 ms,
    // and a sample is taken twice per invocation plus every 50 ms.
    try {
      return readFileSync(path, 'utf8');
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return null;
      throw err;
    }
  },
  async write(path, data) {
    // 'w' = O_WRONLY|O_CREAT|O_TRUNC: harmless on cgroupfs (it cannot create files), and it lets a plain
    // directory stand in for cgroupfs in tests.
    const fh = await fsp.open(path, 'w');
    try {
      await fh.write(data);
    } catch (err) {
      const e = err as Error;
      e.message = `write ${JSON.stringify(data)} to ${path}: ${e.message}`;
      throw e;
    } finally {
      await fh.close();
    }
  },
  async mkdir(path) {
    try {
      await fsp.mkdir(path);
    } catch (err) {
      if (errnoOf(err) !== 'EEXIST') throw err;
    }
  },
  async rmdir(path) {
    try {
      await fsp.rmdir(path);
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err;
    }
  },
  async list(path) {
    try {
      return (await fsp.readdir(path, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return [];
      throw err;
    }
  },
  async exists(path) {
    try {
      await fsp.access(path, fsConstants.F_OK);
      return true;
    } catch {
      return false;
    }
  },
  async writable(path) {
    try {
      await fsp.access(path, fsConstants.W_OK);
      return true;
    } catch {
      return false;
    }
  },
};

/** Sends a signal; the seam tests use to observe kills. Throws like process.kill (ESRCH for a gone pid). */
export type KillFn = (pid: number, signal: NodeJS.Signals | 0) => void;
export const nodeKill: KillFn = (pid, signal) => {
  process.kill(pid, signal);
};

/** Runs a command; never rejects (a missing binary is `code: null` with `error`). */
export interface ExecResult {
  code: number | null;
  stdout: string;
  stderr: string;
  error?: string;
}
export type ExecFn = (file: string, args: string[], opts?: { timeoutMs?: number }) => Promise<ExecResult>;
