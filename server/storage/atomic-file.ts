import { open, rename, readFile, unlink, mkdir } from 'node:fs/promises';
import { dirname, basename, join } from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * Write a file so that readers see the old content or the new, never a mix: write a temp file beside
 * it, fsync, rename over the target, fsync the directory. A crash at any point leaves one whole file.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  await writeFileAtomicNoDirSync(path, data, mode);
  await syncDir(dirname(path));
}

/**
 * writeFileAtomic without the directory's fsync: for many files written together, whose directories the
 * caller syncs once at the end (server/state/restore.ts writeFilesDurably).
 */
export async function writeFileAtomicNoDirSync(path: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    const fh = await open(tmp, 'w', mode);
    try {
      await fh.writeFile(data);
      await fh.datasync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => {}); // a full disk must not fill up further with our half-written copies
    throw err;
  }
}

export async function syncDir(dir: string): Promise<void> {
  // Directory fsync makes the rename itself durable; not supported everywhere (Windows), so best effort.
  try {
    const fh = await open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {
    /* best effort */
  }
}

export async function readFileIfExists(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

// The describer lives with the other JSON text checks (iterative, safe on any nesting); kept importable from here.
export { describeJsonError, jsonErrorOffset } from '../json-text';
