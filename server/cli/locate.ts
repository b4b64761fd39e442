import { existsSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { dataDirPaths, liveOwner } from '../storage/data-dir';
import { coresDir, runningCores, type CoreRecord } from '../storage/running-cores';

/**
 * Which emulator a CLI command talks to, from any folder. In order:
 *   1. `--data-dir DIR` (or `$SVC_EMU_DATA_DIR`, which the GUI's terminals set);
 *   2. `$SVC_EMU_URL` (with `$SVC_EMU_ADMIN_TOKEN`): a core reached over HTTP, e.g. on another machine;
 *   3. `./.svc-emu` when the current folder has one;
 *   4. the per-user list of running emulators (server/storage/running-cores.ts): the one whose workspace
 *      (else the folder holding its data dir) contains the current folder, else the only one running;
 *      several and none of them here: an error listing them;
 *   5. `./.svc-emu` (where the operator commands edit files, and the client commands say nothing runs).
 * The admin token is never copied around: a data dir's is read from its emulator.json when needed.
 */
export type Target =
  | { kind: 'dir'; dataDir: string; how: 'flag' | 'env' | 'cwd' | 'running' | 'default' }
  | { kind: 'url'; url: string; adminToken: string | null };

/** No single emulator could be chosen: `code` and `detail` for `--json`, the message for people. */
export class LocateError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export interface LocateInput {
  /** `--data-dir` as given. */
  dataDir?: string | undefined;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

const within = (dir: string, root: string) => dir === root || dir.startsWith(root.endsWith(sep) ? root : root + sep);

/** The folder a running core serves: its workspace, else the folder holding its data dir. */
const homeOf = (r: CoreRecord) => r.workspace ?? dirname(r.data_dir);

export async function locate(input: LocateInput): Promise<Target> {
  const cwd = resolve(input.cwd);
  if (input.dataDir !== undefined) return { kind: 'dir', dataDir: resolve(cwd, input.dataDir), how: 'flag' };
  if (input.env.SVC_EMU_DATA_DIR) return { kind: 'dir', dataDir: resolve(cwd, input.env.SVC_EMU_DATA_DIR), how: 'env' };
  if (input.env.SVC_EMU_URL) {
    const url = input.env.SVC_EMU_URL.replace(/\/+$/, '');
    if (!/^https?:\/\/[^/]+$/.test(url))
      throw new LocateError('bad_url', `SVC_EMU_URL: '${input.env.SVC_EMU_URL}' is not the emulator's base URL (http://HOST:PORT)`);
    return { kind: 'url', url, adminToken: input.env.SVC_EMU_ADMIN_TOKEN || null };
  }
  const here = join(cwd, '.svc-emu');
  if (existsSync(here)) return { kind: 'dir', dataDir: here, how: 'cwd' };
  const running = await runningEmulators(input.env);
  const containing = running.filter((r) => within(cwd, resolve(homeOf(r)))).sort((a, b) => homeOf(b).length - homeOf(a).length);
  const chosen = containing[0] ?? (running.length === 1 ? running[0] : undefined);
  if (chosen) return { kind: 'dir', dataDir: chosen.data_dir, how: 'running' };
  if (running.length > 1) {
    throw new LocateError(
      'several_emulators',
      [
        `${running.length} emulators are running and none serves ${cwd}; choose one with --data-dir DIR (or cd into its workspace):`,
        ...running.map((r) => `  --data-dir ${r.data_dir}   ${r.url}${r.workspace ? `   workspace ${r.workspace}` : ''}   (pid ${r.pid})`),
      ].join('\n'),
      { running: running.map(({ url, data_dir, workspace, pid }) => ({ url, data_dir, workspace, pid })) },
    );
  }
  return { kind: 'dir', dataDir: here, how: 'default' };
}

/** The running emulators of this user whose data dir still names them as its owner. */
export async function runningEmulators(env: NodeJS.ProcessEnv = process.env): Promise<CoreRecord[]> {
  const out: CoreRecord[] = [];
  for (const r of await runningCores(coresDir(env))) {
    const owner = await liveOwner(dataDirPaths(r.data_dir)).catch(() => null);
    if (owner?.kind === 'core' && owner.url === r.url) out.push(r);
  }
  return out;
}
