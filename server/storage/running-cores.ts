import { mkdir, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { writeFileAtomic } from './atomic-file';
import { isAlive, processStartTime } from './data-dir';

/**
 * The per-user list of running emulators: each core started by `svc-emu serve` or the desktop app writes
 * `<dir>/<pid>-<port>.json` (0600, in a 0700 folder) once it listens and removes it when it stops, so the
 * CLI finds a running emulator from any folder (server/cli/locate.ts). A record only points at the data
 * dir: the admin token stays in that data dir's emulator.json. A record whose process is gone (a crash,
 * a kill -9) is stale: readers ignore it and delete it.
 */
export const CoreRecord = z.object({
  pid: z.number().int(),
  /** Kernel start time of `pid` (Linux), so a reused pid is not mistaken for the core. */
  pid_start: z.string().nullable(),
  url: z.string(),
  data_dir: z.string(),
  workspace: z.string().nullable(),
  started_at: z.string(),
  version: z.string(),
});
export type CoreRecord = z.infer<typeof CoreRecord>;

/**
 * Where the records live: `$SVC_EMU_RUNTIME_DIR` (tests, unusual set-ups), else
 * `$XDG_RUNTIME_DIR/svc-emu/cores` (a per-user tmpfs on systemd desktops), else `~/.local/state/svc-emu/cores`.
 */
export function coresDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVC_EMU_RUNTIME_DIR) return env.SVC_EMU_RUNTIME_DIR;
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, 'svc-emu', 'cores');
  return join(env.HOME || homedir(), '.local', 'state', 'svc-emu', 'cores');
}

/** Writes this core's record; the returned function removes it (called at stop). */
export async function recordCore(dir: string, record: Omit<CoreRecord, 'pid' | 'pid_start'>, port: number): Promise<() => Promise<void>> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${process.pid}-${port}.json`);
  const full: CoreRecord = { pid: process.pid, pid_start: processStartTime(process.pid), ...record };
  await writeFileAtomic(file, JSON.stringify(full, null, 2) + '\n', 0o600);
  return () => unlink(file).catch(() => {});
}

/** How long an unreadable record counts as being written rather than stale. */
const UNREADABLE_GRACE_MS = 5_000;

/** The records of running cores, oldest first; stale and unreadable ones are deleted on the way. */
export async function runningCores(dir: string): Promise<(CoreRecord & { file: string })[]> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  const found: (CoreRecord & { file: string })[] = [];
  for (const name of names) {
    const file = join(dir, name);
    let record: CoreRecord;
    try {
      record = CoreRecord.parse(JSON.parse(await readFile(file, 'utf8')));
    } catch {
      const info = await stat(file).catch(() => null);
      if (info && Date.now() - info.mtimeMs > UNREADABLE_GRACE_MS) await unlink(file).catch(() => {});
      continue;
    }
    if (!isAlive(record.pid, record.pid_start)) {
      await unlink(file).catch(() => {});
      continue;
    }
    found.push({ ...record, file });
  }
  return found.sort((a, b) => a.started_at.localeCompare(b.started_at));
}
