// Real processes for the conformance suites: a small tree (a shell, its children and a grandchild level) to put in a
// group and kill, and a liveness check that counts a zombie as gone (it is dead, only waiting for its reaper).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { vi } from 'vitest';

/** The argv of a six-process tree: a shell, two `sleep 30`, and a subshell with two `sleep 30` of its own. */
export const TREE_ARGV = ['/bin/sh', '-c', 'sleep 30 & sleep 30 & (sleep 30 & sleep 30; wait) & wait'];
const TREE_SIZE = 6;

/** Running: not a zombie, not gone. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}

/** The children of `pid` (every thread's), from /proc. */
export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** `pid` and all its descendants. */
export function treeOf(pid: number): number[] {
  return [pid, ...childrenOf(pid).flatMap(treeOf)];
}

export interface Tree {
  child: ChildProcess;
  /** The shell and its descendants. */
  pids: number[];
  exited: Promise<void>;
}

/** Spawns `argv` (TREE_ARGV, wrapped by a wrapper that execs it) and resolves once all six processes run. */
export async function spawnTree(argv: string[], opts: { detached?: boolean } = {}): Promise<Tree> {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore', detached: opts.detached ?? false });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const shell = child.pid!;
  const pids = await vi.waitFor(
    () => {
      const all = treeOf(shell);
      if (all.length < TREE_SIZE) throw new Error(`the tree of ${shell} has ${all.length} of its ${TREE_SIZE} processes`);
      return all;
    },
    { timeout: 5000, interval: 10 },
  );
  return { child, pids, exited };
}
