import { closeSync, openSync, readFileSync, readSync, statfsSync, writeSync } from 'node:fs';
import { constants as fsConstants, promises as fsp } from 'node:fs';
import { basename, dirname } from 'node:path';

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
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
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

/** statfs f_type of cgroup v1 and of cgroup2. */
const CGROUP_MAGIC = new Set([0x27e0eb, 0x63677270]);

/**
 * Writes that return at once on cgroupfs (a counter reset, a quota, the freezer's state): done with one
 * synchronous write(2), not three thread-pool round trips. A memory limit stays asynchronous: lowering
 * it below usage makes the writer reclaim, which can take a while.
 */
const INSTANT_WRITES = new Set([
  'memory.max_usage_in_bytes',
  'memory.failcnt',
  'memory.memsw.failcnt',
  'memory.peak',
  'cpu.cfs_quota_us',
  'cpu.max',
  'cpu.shares',
  'cpu.weight',
  'freezer.state',
  'cgroup.freeze',
]);

/**
 * Read by path every time: cgroup v1 keeps a process list per open file and hands it out again to a later
 * read of that file for up to a second (kernel/cgroup/cgroup-v1.c, cgroup_pidlist_start), so a re-read
 * through a kept descriptor would list processes that are gone.
 */
const NEVER_KEPT = new Set(['cgroup.procs', 'tasks']);

/**
 * The node fs as a CgroupFs that keeps each group file it has read open and reads it again with one
 * pread(2) at offset 0 (cgroupfs makes the text anew on every read from the start): ~0.6 µs a file against
 * ~3.7 µs for open, fstat, read and close; a sample reads nine, twice per invocation (docs/architecture.md,
 * "The warm path"). Process lists (NEVER_KEPT) are not kept. Only files on a cgroup filesystem are kept
 * (statfs, once per directory), so a plain directory standing in for cgroupfs in a test is read afresh every
 * time; descriptors are opened close-on-exec (libuv's default: no runner inherits one). `rmdir` closes the directory's descriptors; a
 * read of a group removed by someone else fails with ENODEV and falls back to a read by path.
 * Instant writes (INSTANT_WRITES) are synchronous, through a kept descriptor too. Each detected backend
 * gets its own (limits/detect.ts).
 */
export function createNodeCgroupFs(): CgroupFs {
  const dirs = new Map<string, Map<string, number> | null>();
  const buf = Buffer.allocUnsafe(64 * 1024);
  const forget = (dir: string) => {
    const files = dirs.get(dir);
    dirs.delete(dir);
    for (const fd of files?.values() ?? []) closeQuietly(fd);
  };
  const filesOf = (dir: string): Map<string, number> | null => {
    let files = dirs.get(dir);
    if (files === undefined) {
      let onCgroupFs = false;
      try {
        onCgroupFs = CGROUP_MAGIC.has(statfsSync(dir).type);
      } catch {
        /* absent: read by path */
      }
      files = onCgroupFs ? new Map() : null;
      if (files) dirs.set(dir, files);
    }
    return files;
  };
  return {
    ...nodeCgroupFs,
    async read(path) {
      const dir = dirname(path);
      const name = basename(path);
      const files = dirs.get(dir);
      const kept = files?.get(name);
      if (kept !== undefined) {
        try {
          const n = readSync(kept, buf, 0, buf.length, 0);
          if (n < buf.length) return buf.toString('utf8', 0, n);
        } catch {
          // ENODEV: the group went away under us; the read by path below says what is there now.
          files!.delete(name);
          closeQuietly(kept);
        }
      }
      let fd: number;
      try {
        fd = openSync(path, 'r');
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') return null;
        throw err;
      }
      let keep = false;
      try {
        const n = readSync(fd, buf, 0, buf.length, 0);
        if (n >= buf.length) return readFileSync(path, 'utf8');
        const fresh = NEVER_KEPT.has(name) ? null : filesOf(dir);
        if (fresh && !fresh.has(name)) {
          fresh.set(name, fd);
          keep = true;
        }
        return buf.toString('utf8', 0, n);
      } finally {
        if (!keep) closeQuietly(fd);
      }
    },
    async write(path, data) {
      const name = basename(path);
      if (!INSTANT_WRITES.has(name)) return nodeCgroupFs.write(path, data);
      // Kept open too (the per-run peak reset is written before every warm run), under its own key.
      const dir = dirname(path);
      const key = `>${name}`;
      const files = dirs.get(dir);
      const kept = files?.get(key);
      if (kept !== undefined) {
        try {
          writeSync(kept, data, 0);
          return;
        } catch {
          // The group went away, or the kernel refused the value: the write by path below says which.
          files!.delete(key);
          closeQuietly(kept);
        }
      }
      const fd = openSync(path, 'w');
      let keep = false;
      try {
        writeSync(fd, data);
        const fresh = filesOf(dir);
        if (fresh && !fresh.has(key)) {
          fresh.set(key, fd);
          keep = true;
        }
      } catch (err) {
        const e = err as Error;
        e.message = `write ${JSON.stringify(data)} to ${path}: ${e.message}`;
        throw e;
      } finally {
        if (!keep) closeSync(fd);
      }
    },
    async rmdir(path) {
      forget(path.replace(/\/+$/, ''));
      return nodeCgroupFs.rmdir(path);
    },
  };
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    /* already closed */
  }
}

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
