// One set-up at a time: two `npm test` runs must not run `npm ci` into the same node_modules (a lock dir with the
// holder's pid; a dead holder's lock is taken over).
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { LOCK_DIR, ROOT } from './paths.mjs';
import { SetupError } from './tool.mjs';

export async function acquireLock(ctx) {
  mkdirSync(dirname(LOCK_DIR), { recursive: true });
  const deadline = Date.now() + 20 * 60 * 1000;
  let said = false;
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      writeFileSync(join(LOCK_DIR, 'pid'), String(process.pid));
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        rmSync(LOCK_DIR, { recursive: true, force: true });
      };
      process.once('exit', release);
      return release;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
    }
    if (lockIsStale()) {
      rmSync(LOCK_DIR, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new SetupError(`another set-up holds ${relative(ROOT, LOCK_DIR)}; remove it if none runs`);
    if (!said) {
      ctx.log('setup: waiting for another set-up to finish…');
      said = true;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

function lockIsStale() {
  let pid;
  try {
    pid = Number(readFileSync(join(LOCK_DIR, 'pid'), 'utf8'));
  } catch {
    // Created but no pid yet: stale only if it is old.
    try {
      return Date.now() - statSync(LOCK_DIR).mtimeMs > 10_000;
    } catch {
      return false;
    }
  }
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return error.code === 'ESRCH';
  }
}
