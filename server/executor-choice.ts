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
}): string[] | null {
  const choice = opts.choice ?? (opts.platform === 'darwin' && onPath('limactl', opts.path) ? 'lima' : 'local');
  return choice === 'lima' && opts.projectRoot ? limaAgentArgv({ projectRoot: opts.projectRoot }) : null;
}

function onPath(cmd: string, path: string | undefined): boolean {
  return (path ?? '').split(delimiter).some((dir) => dir && existsSync(join(dir, cmd)));
}
