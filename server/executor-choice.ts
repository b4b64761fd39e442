import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { limaAgentArgv } from '../executor';

export type ExecutorChoice = 'local' | 'lima';

/**
 * Where snippets run, for the CLI and the desktop app alike: given `--executor`, or by default inside the
 * Lima VM on macOS when `limactl` is on PATH (limits then bite as on Linux), else on this host. Returns
 * the agent argv for the core's `executorAgent` (null: on this host).
 */
export function executorAgentFor(opts: {
  choice?: ExecutorChoice;
  projectRoot: string | null;
  platform: NodeJS.Platform;
  path: string | undefined;
  /** A limactl that is not on PATH (`--limactl`): Lima is then the default on macOS, and this one is used. */
  limactl?: string;
}): string[] | null {
  const choice = opts.choice ?? (opts.platform === 'darwin' && (opts.limactl || onPath('limactl', opts.path)) ? 'lima' : 'local');
  return choice === 'lima' && opts.projectRoot ? limaAgentArgv({ projectRoot: opts.projectRoot, limactl: opts.limactl }) : null;
}

function onPath(cmd: string, path: string | undefined): boolean {
  return (path ?? '').split(delimiter).some((dir) => dir && existsSync(join(dir, cmd)));
}
