import { readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { STATE_ARCHIVE_TYPE, StateImportReport } from '../../contract/emu/state';
import { DataDirError } from '../errors';
import { acquireDataDir, dataDirPaths, liveOwner, type DataDirPaths } from '../storage/data-dir';
import { openState } from '../open-state';
import { keyFileProvider, aesGcmSecretBox } from '../crypto/secret-box';
import { migrate } from '../storage/migrations';
import { DbData } from '../storage/schema';
import { writeFileAtomic } from '../storage/atomic-file';
import { EMULATOR_VERSION } from '../version';
import { ArchiveError, buildArchive, parseArchive } from '../state/archive';
import { takeSnapshot } from '../state/service';
import { cassetteLister } from '../state/wiring';
import { FileCassetteStore } from '../egress/cassette/store';
import { cassetteFolder } from '../services/egress-sessions';
import { checkImportTarget, importIntoDataDir, prepareImport, StateNotEmptyError } from '../state/restore';
import type { Target } from './locate';

/**
 * `svc-emu export FILE` and `svc-emu import FILE` (docs/state.md): through the running core when one owns
 * the data dir (`POST /_emu/state/*`), else on the data dir's files under its lock (the operator
 * commands' pattern: server/cli/operator.ts). The passphrase comes from a file or the environment, never
 * from argv (other users can read a process's arguments).
 */

export const STATE_COMMANDS = ['export', 'import'] as const;
export type StateCommand = (typeof STATE_COMMANDS)[number];
export const isStateCommand = (cmd: string | undefined): cmd is StateCommand => STATE_COMMANDS.includes(cmd as StateCommand);

export const STATE_OPTIONS = { 'passphrase-file': { type: 'string' }, replace: { type: 'boolean' } } as const;
export const STATE_ACCEPTS: Record<StateCommand, readonly string[]> = {
  export: ['passphrase-file'],
  import: ['passphrase-file', 'replace'],
};

export const STATE_USAGE = `  svc-emu export FILE [--passphrase-file F]
                                 (the whole state in one archive, while the emulator runs or not; secrets are LEFT
                                 OUT unless a passphrase is given: --passphrase-file F or $SVC_EMU_PASSPHRASE)
  svc-emu import FILE [--replace] [--passphrase-file F]
                                 (into a data dir with no state yet; --replace keeps the old one in
                                 <data-dir>/replaced-<time>/; a damaged or foreign archive changes nothing)`;

export interface StateIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  cwd: string;
}

class Usage extends Error {}
/** A refusal with its stable code (exit 1). */
export class StateCliError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

async function passphraseOf(values: Record<string, unknown>, cwd: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  const file = values['passphrase-file'] as string | undefined;
  let p: string | undefined;
  if (file !== undefined) {
    const path = resolve(cwd, file);
    const text = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
      throw new StateCliError('unreadable', `--passphrase-file: cannot read ${path}: ${err.code ?? err.message}`);
    });
    p = text.replace(/\r?\n$/, '');
  } else if (env.SVC_EMU_PASSPHRASE) p = env.SVC_EMU_PASSPHRASE;
  if (p !== undefined && p.length < 8) throw new Usage('the passphrase must be at least 8 characters');
  return p;
}

/** Runs `export` or `import`; returns the exit code (0 ok, 1 failed, 2 usage). */
export async function runStateCommand(
  cmd: StateCommand,
  args: string[],
  values: Record<string, unknown>,
  target: () => Promise<Target>,
  io: StateIO,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const json = values.json === true;
  try {
    if (args.length !== 1) throw new Usage(`usage: svc-emu ${cmd} FILE${cmd === 'import' ? ' [--replace]' : ''} [--passphrase-file F]`);
    const file = resolve(io.cwd, args[0]!);
    const passphrase = await passphraseOf(values, io.cwd, env);
    const t = await target();
    const core = t.kind === 'url' ? (t.adminToken ? { url: t.url, token: t.adminToken } : null) : await coreOf(dataDirPaths(t.dataDir));
    if (t.kind === 'url' && !core)
      throw new DataDirError(t.url, 'needs the admin token', 'Set SVC_EMU_ADMIN_TOKEN (it is in <data-dir>/emulator.json).');
    if (cmd === 'export') {
      const { bytes, manifest } = core
        ? await exportViaCore(core, passphrase)
        : await exportOnFiles(dataDirPaths((t as { dataDir: string }).dataDir), passphrase);
      await writeFileAtomic(file, bytes, 0o600);
      if (manifest.secrets.mode === 'left_out' && manifest.secrets.left_out.length) {
        io.stderr(
          `svc-emu: SECRETS LEFT OUT of ${file} (no passphrase given; give --passphrase-file F or $SVC_EMU_PASSPHRASE to carry them encrypted):\n` +
            manifest.secrets.left_out.map((s) => `  - ${s}\n`).join(''),
        );
      }
      const c = manifest.counts;
      if (json) io.stdout(JSON.stringify({ file, bytes: bytes.length, manifest }) + '\n');
      else
        io.stdout(
          `wrote ${file} (${bytes.length} bytes): ${c.tenants} tenant(s), ${c.snippets} snippet(s), ${c.versions} version(s), ${c.invocations} invocation(s) ` +
            `(${c.queued_jobs} queued job(s), ${c.pending_callbacks} pending callback(s)), ${c.store} store value(s), ${c.cassettes} cassette(s); ` +
            `secrets ${manifest.secrets.mode === 'encrypted' ? 'encrypted with the passphrase' : 'left out'}\n`,
        );
      return 0;
    }
    const bytes = await readFile(file).catch((err: NodeJS.ErrnoException) => {
      throw new StateCliError('unreadable', `cannot read ${file}: ${err.code ?? err.message}`);
    });
    const report = core
      ? await importViaCore(core, bytes, passphrase, values.replace === true)
      : await importOnFiles(dataDirPaths((t as { dataDir: string }).dataDir), bytes, passphrase, values.replace === true);
    if (report.secrets.left_out.length) {
      io.stderr(`svc-emu: the archive carried NO SECRETS; set these again:\n${report.secrets.left_out.map((s) => `  - ${s}\n`).join('')}`);
    }
    if (report.secrets.new_webhook_secrets.length) {
      io.stderr(
        `svc-emu: NEW webhook signing secrets were made for tenant(s) ${report.secrets.new_webhook_secrets.join(', ')} (the archive did not carry theirs): receivers must use the new one (GET /v1/tenant/webhook-secret)\n`,
      );
    }
    for (const n of report.notes) io.stderr(`svc-emu: ${n}\n`);
    const c = report.counts;
    if (json) io.stdout(JSON.stringify(report) + '\n');
    else
      io.stdout(
        `imported ${file}: ${c.tenants} tenant(s), ${c.snippets} snippet(s), ${c.invocations} invocation(s); ${c.queued_jobs} queued job(s) run ` +
          `and ${c.pending_callbacks} pending callback(s) go out ${core ? 'now' : 'when the emulator starts'}\n`,
      );
    return 0;
  } catch (err) {
    const fail = (code: number, human: string, obj: Record<string, unknown>) => {
      if (json) io.stdout(JSON.stringify(obj) + '\n');
      else io.stderr(human);
      return code;
    };
    if (err instanceof Usage) return fail(2, `svc-emu: ${err.message}\n`, { code: 'usage', detail: err.message });
    if (err instanceof ArchiveError) return fail(1, `svc-emu: ${err.message} (${err.code})\n`, { code: err.code, detail: err.message });
    if (err instanceof StateNotEmptyError)
      return fail(1, `svc-emu: ${err.message}\n`, { code: 'state_not_empty', detail: err.message, why: err.why });
    if (err instanceof StateCliError)
      return fail(1, `svc-emu: ${err.message} (${err.code})\n`, { ...err.extra, code: err.code, detail: err.message });
    throw err; // main's report() says the rest (data dir errors, the unexpected)
  }
}

async function coreOf(paths: DataDirPaths): Promise<{ url: string; token: string } | null> {
  const owner = await liveOwner(paths);
  if (owner?.kind === 'core' && owner.url && owner.admin_token) return { url: owner.url, token: owner.admin_token };
  if (owner?.kind === 'core')
    throw new DataDirError(paths.root, `an emulator (pid ${owner.pid}) is still starting on it`, 'Try again in a moment.');
  return null;
}

async function problemOf(res: Response): Promise<StateCliError> {
  const body = (await res.json().catch(() => ({}))) as { code?: string; detail?: string };
  return new StateCliError(body.code ?? `http_${res.status}`, body.detail ?? `the emulator answered ${res.status}`, body);
}

async function exportViaCore(core: { url: string; token: string }, passphrase: string | undefined) {
  const res = await fetch(`${core.url}/_emu/state/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${core.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(passphrase === undefined ? {} : { passphrase }),
  });
  if (!res.ok) throw await problemOf(res);
  const bytes = Buffer.from(await res.arrayBuffer());
  // The manifest is the archive's first part: read back from the bytes (checked like any import would).
  const parsed = await parseArchive(bytes, passphrase);
  return { bytes, manifest: parsed.manifest };
}

async function importViaCore(core: { url: string; token: string }, bytes: Buffer, passphrase: string | undefined, replace: boolean) {
  const res = await fetch(`${core.url}/_emu/state/import${replace ? '?replace=true' : ''}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${core.token}`,
      'content-type': STATE_ARCHIVE_TYPE,
      ...(passphrase === undefined ? {} : { 'x-emu-passphrase': encodeURIComponent(passphrase) }),
    },
    body: bytes,
  });
  if (!res.ok) throw await problemOf(res);
  return StateImportReport.parse(await res.json());
}

/** On the data dir, no core running: its lock held for the length of the command. */
export async function exportOnFiles(paths: DataDirPaths, passphrase: string | undefined) {
  const fresh = await readdir(paths.root).then(
    (n) => !n.includes('db.json'),
    () => true,
  );
  if (fresh) throw new DataDirError(paths.root, 'holds no state to export', 'Check --data-dir (or start the emulator once).');
  const lock = await acquireDataDir(paths, 'cli', EMULATOR_VERSION);
  try {
    const { deps } = await openState(paths.root);
    try {
      // The data dir's own cassettes (snippets made over the API); a workspace's live beside its snippets, committed with them.
      const store = new FileCassetteStore({
        locate: cassetteFolder({ workspace: null, dataDir: paths.root }),
        creatorVersion: EMULATOR_VERSION,
      });
      const cassettes = { list: cassetteLister(store), put: async () => {} };
      const snap = await takeSnapshot(
        deps,
        { inbox: fileInbox(paths.root), egress: null, cassettes, dataDir: paths.root },
        passphrase !== undefined,
      );
      return await buildArchive(snap, { passphrase, now: deps.clock(), emulatorVersion: EMULATOR_VERSION });
    } finally {
      await deps.repo.close();
    }
  } finally {
    await lock.release();
  }
}

/** The inbox's files as they are (no core appends to them while the lock is held); its chosen answers lived in that core. */
function fileInbox(root: string) {
  return {
    async snapshot() {
      const files = new Map<string, Buffer>();
      const dir = join(root, 'inbox');
      for (const f of await readdir(dir).catch(() => [] as string[]))
        if (f.endsWith('.jsonl')) files.set(f.slice(0, -6), await readFile(join(dir, f)));
      return { files, responses: {} };
    },
    async restore() {},
  };
}

/** The data dir's state as it is on disk (null: none, or none we can read), without writing anything. */
async function currentState(paths: DataDirPaths): Promise<DbData | null> {
  const text = await readFile(paths.db, 'utf8').catch(() => null);
  if (text === null) return null;
  try {
    const m = migrate(JSON.parse(text) as Record<string, unknown>);
    if ('error' in m) return null;
    const db = DbData.parse(m.doc);
    // Invocations written since the last db.json write are in the journal: any line there is state.
    const journal = await readdir(join(paths.root, 'journal')).catch(() => [] as string[]);
    for (const f of journal) {
      const lines = (await readFile(join(paths.root, 'journal', f), 'utf8').catch(() => '')).split('\n').filter((l) => l.trim());
      if (lines.length) return { ...db, invocations: [...db.invocations, ...(lines.map(() => ({})) as never[])] };
    }
    return db;
  } catch {
    return null;
  }
}

export async function importOnFiles(paths: DataDirPaths, bytes: Buffer, passphrase: string | undefined, replace: boolean) {
  const parsed = await parseArchive(bytes, passphrase); // everything checked before the data dir is touched
  const lock = await acquireDataDir(paths, 'cli', EMULATOR_VERSION);
  try {
    const current = await currentState(paths);
    const now = new Date();
    // A state we may not go into is refused before the key file is made (a fresh data dir gets its own key).
    await checkImportTarget(paths, { replace, current });
    const box = aesGcmSecretBox(await keyFileProvider(paths.secretKey)());
    return await importIntoDataDir(paths, prepareImport(parsed, box, now), { replace, now, current });
  } finally {
    await lock.release();
  }
}
