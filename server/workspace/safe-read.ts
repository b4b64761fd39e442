import { constants, type Stats } from 'node:fs';
import { lstat, open, realpath } from 'node:fs/promises';
import { isAbsolute, relative } from 'node:path';
import type { SkipCode } from '../../contract/schemas/workspace';

/**
 * Reading a workspace file without ever blocking the core. The workspace is the user's folder, so anything
 * can be in it: a FIFO with no writer (a blocking open would hold a libuv threadpool thread forever, and four
 * of them stop the core), a socket, a device, a symlink to /dev/zero or out of the workspace, a loop of
 * symlinks, a file far over the bundle limit. Only regular files inside the workspace are read: lstat first,
 * a symlink only when its real path is a regular file inside the workspace, the size checked before reading,
 * and the file opened O_NOFOLLOW|O_NONBLOCK (an open that never waits, even if a FIFO is swapped in after
 * the lstat) and fstat-checked again before a bounded read.
 */
export { SKIP_CODES, SkippedEntry, type SkipCode } from '../../contract/schemas/workspace';

export type Inspected =
  | { kind: 'file'; path: string; size: number; dev: number; ino: number }
  | { kind: 'dir'; path: string }
  | { kind: 'skip'; code: SkipCode; reason: string };

/** "a FIFO (named pipe)" for the kinds of entry the loader refuses to open. */
export function kindOf(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isDirectory()) return 'a directory';
  if (st.isSymbolicLink()) return 'a symlink';
  return 'not a regular file';
}

export const isInside = (root: string, path: string): boolean => {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
};

const SPECIAL_FIX = 'the loader reads regular files only: replace it with a regular file, or move it out of the workspace';

/**
 * What `path` is, without opening it: a regular file or a directory the loader may use (a symlink's real
 * path when it resolves to one inside `root`, the workspace's real path), or why it is skipped.
 */
export async function inspect(path: string, root: string): Promise<Inspected> {
  let st: Stats;
  try {
    st = await lstat(path);
  } catch (err) {
    return { kind: 'skip', code: 'unreadable', reason: `could not be examined (${errCode(err)}): check its permissions` };
  }
  if (st.isFile()) return { kind: 'file', path, size: st.size, dev: st.dev, ino: st.ino };
  if (st.isDirectory()) return { kind: 'dir', path };
  if (!st.isSymbolicLink()) return { kind: 'skip', code: 'special_file', reason: `${kindOf(st)}, not a regular file: ${SPECIAL_FIX}` };
  let real: string;
  try {
    real = await realpath(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const what =
      code === 'ELOOP'
        ? 'a symlink loop'
        : code === 'ENOENT'
          ? 'a symlink whose target does not exist'
          : `a symlink that does not resolve (${errCode(err)})`;
    return { kind: 'skip', code: 'symlink_broken', reason: `${what}: fix or remove the link` };
  }
  if (!isInside(root, real)) {
    return {
      kind: 'skip',
      code: 'symlink_outside',
      reason:
        `a symlink to ${real}, outside the workspace: ` +
        'the loader follows symlinks only within the workspace; copy the file into the folder',
    };
  }
  let target: Stats;
  try {
    target = await lstat(real);
  } catch (err) {
    return { kind: 'skip', code: 'symlink_broken', reason: `a symlink whose target vanished (${errCode(err)}): fix or remove the link` };
  }
  if (target.isFile()) return { kind: 'file', path: real, size: target.size, dev: target.dev, ino: target.ino };
  return {
    kind: 'skip',
    code: 'symlink_not_file',
    reason: `a symlink to ${kindOf(target)} (${real}): only symlinks to regular files are followed; copy or link the files themselves`,
  };
}

export type ReadResult = { ok: true; text: string; bytes: number } | { ok: false; code: SkipCode; reason: string };

/**
 * Reads an inspected regular file as UTF-8, at most `maxBytes`. The open cannot wait (O_NONBLOCK), cannot
 * follow a symlink swapped in since the lstat (O_NOFOLLOW), and the opened fd must still be the same regular
 * file (fstat: type, device and inode) before a single byte is read; the read stops at `maxBytes + 1`.
 */
export async function readInspected(
  file: { path: string; dev: number; ino: number },
  maxBytes: number,
  limitName: string,
): Promise<ReadResult> {
  let fh;
  try {
    fh = await open(file.path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOENT') {
      return { ok: false, code: 'changed_while_reading', reason: `changed while it was read (${code}): the next save reads it again` };
    }
    return { ok: false, code: 'unreadable', reason: `could not be opened (${code ?? String(err)}): check its permissions` };
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return { ok: false, code: 'special_file', reason: `${kindOf(st)}, not a regular file: ${SPECIAL_FIX}` };
    if (st.dev !== file.dev || st.ino !== file.ino) {
      return { ok: false, code: 'changed_while_reading', reason: 'was replaced while it was read: the next save reads it again' };
    }
    if (st.size > maxBytes) return { ok: false, code: 'too_large', reason: tooLarge(st.size, maxBytes, limitName) };
    const buf = Buffer.alloc(Math.min(st.size, maxBytes) + 1);
    let got = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, got, buf.length - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
      if (got === buf.length) break;
    }
    // It grew between the fstat and the read: read no further than the limit, and never keep half a file.
    if (got > maxBytes) return { ok: false, code: 'too_large', reason: tooLarge(got, maxBytes, limitName) };
    if (got > st.size) return { ok: false, code: 'changed_while_reading', reason: 'grew while it was read: the next save reads it again' };
    return { ok: true, text: buf.subarray(0, got).toString('utf8'), bytes: got };
  } catch (err) {
    return { ok: false, code: 'unreadable', reason: `could not be read (${(err as NodeJS.ErrnoException).code ?? String(err)})` };
  } finally {
    await fh.close().catch(() => {});
  }
}

export function tooLarge(size: number, maxBytes: number, limitName: string): string {
  const fix = 'move it out of the folder (or into a dotfolder, which is never read)';
  return `${size.toLocaleString('en')}${size > maxBytes ? '' : '+'} bytes is over the ${limitName}: ${fix}`;
}

const errCode = (err: unknown): string => (err as NodeJS.ErrnoException).code ?? String(err);
