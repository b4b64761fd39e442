import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** Whether a process runs (one of another user's counts: EPERM means it exists). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** When a temporary entry is no longer in use (see sweepLeftovers). */
export interface LeftoverPolicy {
  /** Our own pid: entries named after it are ours, in use unless old. */
  pid: number;
  alive(pid: number): boolean;
  now(): number;
  /** Untouched for longer than this, an entry is not in use, whoever made it (a pid may have been reused). */
  maxAgeMs: number;
}

/**
 * Removes the entries of `dir` whose names match `pattern` and that no running process uses: named after
 * a process (the `pid` capture group) that is gone, or, with `byAge`, not modified for `maxAgeMs`.
 * A missing `dir` is nothing to do. Returns how many went.
 */
export async function sweepLeftovers(dir: string, pattern: RegExp, policy: LeftoverPolicy, byAge = true): Promise<number> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    const m = pattern.exec(name);
    if (!m) continue;
    const pid = m.groups?.pid ? Number(m.groups.pid) : null;
    let unused = pid !== null && pid !== policy.pid && !policy.alive(pid);
    if (!unused && byAge) {
      const st = await stat(join(dir, name)).catch(() => null);
      unused = st !== null && policy.now() - st.mtimeMs > policy.maxAgeMs;
    }
    if (!unused) continue;
    await rm(join(dir, name), { recursive: true, force: true }).then(
      () => removed++,
      () => {},
    );
  }
  return removed;
}
