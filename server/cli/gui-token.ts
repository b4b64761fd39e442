import { existsSync } from 'node:fs';
import { createClient, ProblemError } from '../../contract/client';
import { operations as ops } from '../../contract';
import { ApiError, DataDirError } from '../errors';
import { acquireDataDir, dataDirPaths, liveOwner } from '../storage/data-dir';
import { writeNewGuiSecret } from '../storage/gui-secret';
import { EMULATOR_VERSION } from '../version';

/**
 * `svc-emu gui-token rotate`: a new GUI session secret (server/storage/gui-secret.ts), so every browser signed
 * in so far is signed out. Through the running core's `/_emu/gui-session/rotate` when one runs (it takes the new
 * secret at once and answers the new sign-in URL), else on the data dir's file, holding its lock.
 */
export const GUI_TOKEN_USAGE = `  svc-emu gui-token rotate        (signs every browser out of the GUI; prints the URL that signs in again)`;

export interface GuiTokenOptions {
  json: boolean;
  dataDir: string;
  /** A core reached by URL (`$SVC_EMU_URL`) instead of the data dir's. */
  core?: { url: string; token: string };
}

export interface GuiTokenIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export interface Rotated {
  rotated: true;
  /** Whether a running core took the new secret (else it was written for the next start). */
  running: boolean;
  /** The URL that signs a browser in again (null: no core runs; the next start prints it). */
  sign_in_url: string | null;
  data_dir: string | null;
}

export async function rotateGuiToken(opts: Omit<GuiTokenOptions, 'json'>): Promise<Rotated> {
  const paths = dataDirPaths(opts.dataDir);
  let core = opts.core ?? null;
  if (!core) {
    const owner = await liveOwner(paths);
    if (owner?.kind === 'core' && owner.url && owner.admin_token) core = { url: owner.url, token: owner.admin_token };
    else if (owner?.kind === 'core')
      throw new DataDirError(paths.root, `an emulator (pid ${owner.pid}) is still starting on it`, 'Try again in a moment.');
  }
  if (core) {
    const client = createClient({ baseUrl: core.url, adminToken: core.token });
    try {
      const { sign_in_url } = await client.call(ops.emuRotateGuiSession);
      return { rotated: true, running: true, sign_in_url, data_dir: opts.core ? null : paths.root };
    } catch (err) {
      if (err instanceof ProblemError) throw new ApiError(err.status, err.code, err.title || 'Error', err.detail, { ...err.problem });
      throw new DataDirError(core.url, `the running emulator did not answer (${(err as Error).message})`);
    }
  }
  if (!existsSync(paths.root)) {
    throw new DataDirError(paths.root, 'does not exist', 'Start the emulator once with `svc-emu serve --data-dir …`, or check --data-dir.');
  }
  const lock = await acquireDataDir(paths, 'cli', EMULATOR_VERSION);
  try {
    await writeNewGuiSecret(paths.root);
  } finally {
    await lock.release();
  }
  return { rotated: true, running: false, sign_in_url: null, data_dir: paths.root };
}

/** Runs `gui-token …`; errors other than usage are thrown (the CLI's one error report prints them). */
export async function runGuiToken(args: string[], opts: GuiTokenOptions, io: GuiTokenIO): Promise<number> {
  if (args.length !== 1 || args[0] !== 'rotate') {
    const detail = `usage: svc-emu gui-token rotate${args[0] && args[0] !== 'rotate' ? ` (not '${args[0]}')` : ''}`;
    if (opts.json) io.stdout(JSON.stringify({ code: 'usage', detail }) + '\n');
    else io.stderr(`svc-emu: ${detail}\n`);
    return 2;
  }
  const r = await rotateGuiToken(opts);
  if (opts.json) io.stdout(JSON.stringify(r) + '\n');
  else if (r.sign_in_url) io.stdout(`Every browser is signed out of the GUI. Sign in again with:\n  ${r.sign_in_url}\n`);
  else
    io.stdout(
      `Every browser is signed out of the GUI (the new secret is in ${r.data_dir}).\nNo emulator runs on it: the sign-in URL is printed when it starts (npm start, svc-emu serve).\n`,
    );
  return 0;
}
