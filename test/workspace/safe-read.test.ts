/**
 * The pieces under the workspace loader's reads (server/workspace/safe-read.ts, watch-budget.ts): the race
 * between the lstat and the open (a FIFO or a symlink swapped in) never blocks and never reads the new
 * entry; reads stop at their cap; the watcher's budget stays bounded and frees room when paths go away.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/core';
import { inspect, readInspected } from '../../server/workspace/safe-read';
import { WatchBudget } from '../../server/workspace/watch-budget';

let root: string;
beforeAll(async () => {
  root = await tempDir('svc-emu-safe-read-');
  await mkdir(join(root, 'snippets', 'a'), { recursive: true });
});
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});
const at = (name: string) => join(root, 'snippets', 'a', name);

async function inspectedFile(path: string) {
  const it = await inspect(path, root);
  if (it.kind !== 'file') throw new Error(`${path} inspected as ${JSON.stringify(it)}`);
  return it;
}

describe('readInspected', () => {
  it('reads a regular file inspected a moment ago', async () => {
    await writeFile(at('ok.ts'), 'export const x = 1;\n');
    const read = await readInspected(await inspectedFile(at('ok.ts')), 1024, 'test limit');
    expect(read).toEqual({ ok: true, text: 'export const x = 1;\n', bytes: 20 });
  });

  it('a FIFO swapped in after the lstat is opened without waiting and refused by its fstat', async () => {
    await writeFile(at('swap.ts'), 'export const x = 1;\n');
    const file = await inspectedFile(at('swap.ts'));
    await rm(at('swap.ts'));
    execFileSync('mkfifo', [at('swap.ts')]);
    // No writer ever comes: a blocking open would never return (the test would time out).
    const read = await readInspected(file, 1024, 'test limit');
    expect(read).toMatchObject({ ok: false, code: 'special_file', reason: expect.stringContaining('FIFO') });
  });

  it('a symlink swapped in after the lstat is not followed (O_NOFOLLOW)', async () => {
    await writeFile(at('link.ts'), 'export const x = 1;\n');
    const file = await inspectedFile(at('link.ts'));
    await rm(at('link.ts'));
    await symlink('/dev/zero', at('link.ts'));
    expect(await readInspected(file, 1024, 'test limit')).toMatchObject({ ok: false, code: 'changed_while_reading' });
  });

  it('another regular file swapped in (a new inode) is not read as the one inspected', async () => {
    await writeFile(at('inode.ts'), 'export const x = 1;\n');
    const file = await inspectedFile(at('inode.ts'));
    await writeFile(at('inode.ts.new'), 'export const x = 2;\n');
    await rm(at('inode.ts'));
    execFileSync('mv', [at('inode.ts.new'), at('inode.ts')]);
    expect(await readInspected(file, 1024, 'test limit')).toMatchObject({ ok: false, code: 'changed_while_reading' });
  });

  it('a file over the cap is refused by its fstat size', async () => {
    await writeFile(at('big.txt'), 'x'.repeat(2048));
    const big = await readInspected(await inspectedFile(at('big.txt')), 1024, 'test limit');
    expect(big).toMatchObject({ ok: false, code: 'too_large', reason: expect.stringContaining('2,048 bytes is over the test limit') });
  });
});

describe('inspect', () => {
  it('follows a symlink only to a regular file inside the root', async () => {
    await writeFile(join(root, 'shared.ts'), 'export const s = 1;\n');
    await symlink(join('..', '..', 'shared.ts'), at('in.ts'));
    expect(await inspect(at('in.ts'), root)).toMatchObject({ kind: 'file', path: join(root, 'shared.ts') });
    await symlink('/etc/hostname', at('out.ts'));
    expect(await inspect(at('out.ts'), root)).toMatchObject({ kind: 'skip', code: 'symlink_outside' });
    await symlink('..', at('up'));
    expect(await inspect(at('up'), root)).toMatchObject({ kind: 'skip', code: 'symlink_not_file' });
    await symlink('nowhere.ts', at('dangling.ts'));
    const dangling = await inspect(at('dangling.ts'), root);
    expect(dangling).toMatchObject({ kind: 'skip', code: 'symlink_broken', reason: expect.stringContaining('does not exist') });
  });

  it('a root that is a prefix of a sibling is not "inside" (…/ws vs …/ws-other)', async () => {
    const sibling = `${root}-other`;
    await mkdir(sibling, { recursive: true });
    try {
      await writeFile(join(sibling, 'x.ts'), 'export {};\n');
      await symlink(join(sibling, 'x.ts'), at('sibling.ts'));
      expect(await inspect(at('sibling.ts'), root)).toMatchObject({ kind: 'skip', code: 'symlink_outside' });
    } finally {
      await rm(sibling, { recursive: true, force: true });
    }
  });
});

describe('WatchBudget', () => {
  it('admits at most maxFolders folders and maxEntries paths in each, and frees room when paths go away', () => {
    const b = new WatchBudget({ maxFolders: 2, maxEntries: 3 });
    expect(['a', 'b'].map((f) => b.admit(f, 'dir'))).toEqual([true, true]);
    expect(b.admit('c', 'dir')).toBe(false);
    expect(b.overflowed).toBe(true);
    expect(['a/1', 'a/2', 'a/lib', 'a/lib/x'].map((p) => b.admit(p))).toEqual([true, true, true, false]);
    expect(b.admit('a/1')).toBe(true); // already admitted: stays watched
    b.release('a/lib');
    expect(b.admit('a/lib/x')).toBe(true);
    b.release('b');
    expect(b.admit('c', 'dir')).toBe(true);
  });

  it('files directly under snippets/ are counted apart: a thousand of them never crowd out a snippet folder', () => {
    const b = new WatchBudget({ maxFolders: 2, maxEntries: 3 });
    expect(['x.md', 'y.md', 'z.md'].map((f) => b.admit(f, 'other'))).toEqual([true, true, false]);
    expect(b.overflowed).toBe(true);
    expect(b.admit('hello', 'dir')).toBe(true);
    expect(b.admit('hello/index.ts', 'other')).toBe(true);
    expect(b.admit('x.md')).toBe(true); // admitted before: no second count
    expect(b.admit('later', 'dir')).toBe(true);
    // Both counts full: an entry of unknown kind is refused; one asked about without stats while there
    // was room is counted only when its stats come.
    expect(b.admit('unknown')).toBe(false);
  });
});
