// Switching the desktop app to another workspace: the app starts again on it, with the data dir that
// belongs to it (`<workspace>/.svc-emu`: one data dir per workspace), keeping every other flag.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';

const OWN_FLAGS = new Set(['--workspace', '--data-dir']);

/** argv for the relaunch: `argv` without its workspace and data-dir flags, then the new ones. */
export function relaunchArgs(argv: readonly string[], workspace: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (OWN_FLAGS.has(arg)) {
      i++; // and its value
      continue;
    }
    if ([...OWN_FLAGS].some((f) => arg.startsWith(`${f}=`))) continue;
    out.push(arg);
  }
  return [...out, '--workspace', workspace, '--data-dir', join(workspace, '.svc-emu')];
}

/** Throws an Error saying why `path` cannot be a workspace. */
export async function checkWorkspaceDir(path: string): Promise<void> {
  const info = await stat(path).catch(() => null);
  if (!info) throw new Error(`${path} does not exist`);
  if (!info.isDirectory()) throw new Error(`${path} is not a folder`);
}
