import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { STATE_FORMAT_VERSION, type StateImportReport } from '../../contract/emu/state';
import type { SecretBox } from '../crypto/secret-box';
import { newApiKey, newId, newWebhookSecret, randomBase62, sha256Hex } from '../ids';
import { syncDir, writeFileAtomic, writeFileAtomicNoDirSync } from '../storage/atomic-file';
import type { DataDirPaths } from '../storage/data-dir';
import { DbData, SCHEMA_VERSION } from '../storage/schema';
import { GUI_SECRET_FILE } from '../storage/gui-secret';
import { keychainKeyPath } from '../crypto/secret-box';
import { ArchivedCassette, countsOf, Extras, leftOutSecrets, type ParsedArchive } from './archive';

/**
 * The import side of the state archive (docs/state.md): the archive's db made whole with this data dir's
 * key (`prepareImport`), the test of "empty" (`stateEmptiness`), and the swap into a data dir with no
 * core running (`importIntoDataDir`): everything is written into a temp folder first, then moved into
 * place, so a refusal at any earlier point leaves the data dir as it was.
 */

// The contexts the services seal with (services/secrets.ts, services/tenants.ts): a sealed value opens only where it belongs.
const secretContext = (tenantId: string, name: string) => `secret:${tenantId}:${name}`;
const webhookContext = (tenantId: string) => `webhook_secret:${tenantId}`;
const previousContext = (tenantId: string) => `previous_webhook_secret:${tenantId}`;
const keyContext = (k: { id: string; tenant_id: string }) => `api_key:${k.tenant_id}:${k.id}`;

export interface PreparedImport {
  db: DbData;
  parsed: ParsedArchive;
  report: StateImportReport;
}

/** The archive's db with every secret sealed again with `box` (this data dir's key), or left out and said. */
export function prepareImport(parsed: ParsedArchive, box: SecretBox, now: Date): PreparedImport {
  const src = parsed.db;
  const plain = parsed.secrets;
  const newWebhooks: string[] = [];
  const tenants = src.tenants.map((t) => {
    const w = plain?.webhooks.find((x) => x.tenant_id === t.id);
    if (!w) newWebhooks.push(t.name);
    const stillSigning = w?.previous && w.previous_expires_at && Date.parse(w.previous_expires_at) > now.getTime();
    return {
      ...t,
      webhook_secret: box.seal(w?.secret ?? newWebhookSecret(), webhookContext(t.id)),
      webhook_secret_created_at: w ? t.webhook_secret_created_at : now.toISOString(),
      previous_webhook_secret: stillSigning ? box.seal(w.previous!, previousContext(t.id)) : null,
      previous_webhook_secret_expires_at: stillSigning ? w.previous_expires_at : null,
    };
  });
  const secrets = plain
    ? src.secrets.flatMap((s) => {
        const v = plain.secrets.find((x) => x.tenant_id === s.tenant_id && x.name === s.name);
        return v ? [{ ...s, sealed: box.seal(v.value, secretContext(s.tenant_id, s.name)) }] : [];
      })
    : [];
  const api_keys: DbData['api_keys'] = src.api_keys.map((k) => {
    const shown = plain?.keys.find((x) => x.id === k.id && x.tenant_id === k.tenant_id);
    const { sealed: _drop, ...rest } = k;
    return shown ? { ...rest, sealed: box.seal(shown.key, keyContext(k)) } : rest;
  });
  // The GUI acts for the tenant `local` with its one shown key (services/tenants.ts localKey). When the archive
  // did not carry it (secrets left out), a new key is made and shown; the archive's keys still work (as hashes).
  const local = src.tenants.find((t) => t.name === 'local');
  let newLocalKey = false;
  if (local && !api_keys.some((k) => k.tenant_id === local.id && k.sealed)) {
    const key = newApiKey();
    const rec = { id: newId('key'), tenant_id: local.id, hash: sha256Hex(key), prefix: key.slice(0, 8), created_at: now.toISOString() };
    api_keys.push({ ...rec, sealed: box.seal(key, keyContext(rec)) });
    newLocalKey = true;
  }
  const db: DbData = DbData.parse({ ...src, schema_version: SCHEMA_VERSION, journal_seq: 0, tenants, secrets, api_keys });
  const inboxDeliveries = [...parsed.inbox.values()].reduce(
    (n, b) =>
      n +
      b
        .toString('utf8')
        .split('\n')
        .filter((l) => l.trim()).length,
    0,
  );
  const leftOut = plain ? [] : leftOutSecrets(src).filter((s) => !s.startsWith('webhook signing secret'));
  const notes: string[] = [];
  if (parsed.extras.egress.profile !== 'local') {
    notes.push(
      `the archive was made under the '${parsed.extras.egress.profile}' egress profile: start with --egress-profile ${parsed.extras.egress.profile} to run the same way`,
    );
  }
  if (parsed.extras.egress.allow.length)
    notes.push(`the archive's egress allow list: ${parsed.extras.egress.allow.join(', ')} (start with --egress-allow for each)`);
  if (newLocalKey)
    notes.push(
      'the archive did not carry the tenant local’s shown API key (secrets were left out): a new key was made for it (the GUI and `svc-emu serve` show it); the archive’s keys still work',
    );
  if (parsed.fromSchemaVersion !== SCHEMA_VERSION)
    notes.push(`the archive's db was at schema_version ${parsed.fromSchemaVersion}; brought up to ${SCHEMA_VERSION}`);
  if (parsed.manifest.format_version !== STATE_FORMAT_VERSION)
    notes.push(`archive format_version ${parsed.manifest.format_version} read as ${STATE_FORMAT_VERSION}`);
  return {
    db,
    parsed,
    report: {
      format_version: parsed.manifest.format_version,
      emulator_version: parsed.manifest.emulator_version,
      created_at: parsed.manifest.created_at,
      schema_version: { archive: parsed.fromSchemaVersion, now: SCHEMA_VERSION },
      counts: countsOf(db, { blobs: parsed.blobs.size, inboxDeliveries, cassettes: parsed.cassettes.length }),
      secrets: { mode: plain ? 'encrypted' : 'left_out', left_out: leftOut, new_webhook_secrets: newWebhooks },
      replaced: null,
      notes,
    },
  };
}

/**
 * Whether a state holds only what a first start makes (the local tenant with its one key, the built-in
 * environments, the workspace's snippets): what an import may go into without `--replace`. `why` names
 * what makes it not empty.
 */
export function stateEmptiness(db: Readonly<DbData>): { empty: boolean; why: string[] } {
  const why: string[] = [];
  const n = (count: number, what: string) => count && why.push(`${count} ${what}`);
  n(db.invocations.length, 'invocation(s)');
  n(db.secrets.length, 'secret(s)');
  n(db.store.length, 'store value(s)');
  n(db.integrations.length, 'integration(s)');
  n(db.tenants.filter((t) => t.name !== 'local').length, 'tenant(s) besides local');
  n(Math.max(0, db.api_keys.length - 1), 'API key(s) besides the first');
  n(db.environments.filter((e) => !e.builtin).length, 'environment(s) of your own');
  n(db.versions.filter((v) => v.source === 'api').length, 'version(s) made over the API');
  n(
    db.snippets.filter((s) => !db.versions.some((v) => v.snippet_id === s.id && v.source === 'workspace')).length,
    'snippet(s) made over the API',
  );
  return { empty: why.length === 0, why };
}

/**
 * Writes many files durably without paying two fsyncs each in turn (1,000 blobs one by one took ~20 s
 * here): each is written to a temp name and fdatasync'd, many at once (the file system commits them
 * together), then renamed, then each directory synced once. Files already there are left as they are
 * (blobs are content-addressed: same name, same bytes).
 */
export async function writeFilesDurably(files: readonly (readonly [string, Uint8Array])[], concurrency = 32): Promise<void> {
  const dirs = new Set<string>();
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const [path, data] = files[next++]!;
      if (await exists(path)) continue;
      const dir = dirname(path);
      if (!dirs.has(dir)) {
        await mkdir(dir, { recursive: true, mode: 0o700 });
        dirs.add(dir);
      }
      await writeFileAtomicNoDirSync(path, data);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, files.length) }, worker));
  await Promise.all([...dirs].map((d) => syncDir(d)));
}

/** Cassettes, fault rules, the egress mode and the inbox's answers: applied by the next core to start (server/state/service.ts). */
export const PENDING_IMPORT_FILE = 'state-import-pending.json';
export const PendingImport = z.object({ extras: Extras, cassettes: z.array(ArchivedCassette) });
export type PendingImport = z.infer<typeof PendingImport>;

/** What belongs to the machine, not the state: never moved aside, never replaced. */
const MACHINE_FILES = (paths: DataDirPaths) =>
  new Set(
    // egress-ca: the egress CA (server/egress/tls/ca.ts), the machine's like its secret key; a running core holds it.
    ['emulator.json', 'secret.key', keychainKeyPath('secret.key'), GUI_SECRET_FILE, 'sandboxes', 'egress.sock', 'egress-ca'].concat([
      paths.secretKey.split('/').pop()!,
    ]),
  );

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

/**
 * May an import go into this data dir? Returns the names of the state's files there (the machine's own
 * files are not state); throws StateNotEmptyError unless it holds no state or only a first start's, or `replace`.
 */
export async function checkImportTarget(
  paths: DataDirPaths,
  opts: { replace: boolean; current: Readonly<DbData> | null },
): Promise<string[]> {
  const machine = MACHINE_FILES(paths);
  const names = (await readdir(paths.root).catch(() => [] as string[])).filter(
    (n) => !machine.has(n) && !n.startsWith('replaced-') && !n.startsWith('.import-'),
  );
  if (!opts.replace) {
    if (opts.current) {
      const { empty, why } = stateEmptiness(opts.current);
      if (!empty) throw new StateNotEmptyError(paths.root, why);
    } else if (names.length) {
      // Files but no db.json we could read: not ours to drop.
      throw new StateNotEmptyError(paths.root, [`files that are not a state we can read: ${names.slice(0, 5).join(', ')}`]);
    }
  }
  return names;
}

/**
 * Writes the prepared state into the data dir (no core may own it: the caller holds its lock). A state
 * that is not empty is refused unless `replace`, which moves it into `<data-dir>/replaced-<time>/`.
 */
export async function importIntoDataDir(
  paths: DataDirPaths,
  prep: PreparedImport,
  opts: { replace: boolean; now: Date; current: Readonly<DbData> | null },
): Promise<StateImportReport> {
  const report = { ...prep.report, notes: [...prep.report.notes] };
  const names = await checkImportTarget(paths, opts);
  await mkdir(paths.root, { recursive: true, mode: 0o700 });
  const staging = join(paths.root, `.import-${randomBase62(8)}`);
  try {
    await mkdir(staging, { mode: 0o700 });
    await writeFileAtomic(join(staging, 'db.json'), JSON.stringify(prep.db, null, 2));
    await writeFilesDurably([
      ...[...prep.parsed.blobs].map(([hash, data]) => [join(staging, 'blobs', hash.slice(0, 2), hash), data] as const),
      ...[...prep.parsed.inbox].map(([name, data]) => [join(staging, 'inbox', `${name}.jsonl`), data] as const),
    ]);
    const pending: PendingImport = { extras: prep.parsed.extras, cassettes: prep.parsed.cassettes };
    await writeFile(join(staging, PENDING_IMPORT_FILE), JSON.stringify(pending), { mode: 0o600 });

    if (names.length && opts.replace) {
      const aside = join(paths.root, `replaced-${opts.now.toISOString().replace(/[:.]/g, '-')}`);
      await mkdir(aside, { mode: 0o700 });
      for (const n of names) await rename(join(paths.root, n), join(aside, n));
      report.replaced = aside;
      report.notes.push(`the previous state was kept in ${aside}`);
    } else {
      // A first start's state (the local tenant, its key, built-in environments): made again by the next start if needed.
      for (const n of names) await rm(join(paths.root, n), { recursive: true, force: true });
    }
    for (const n of await readdir(staging)) if (n !== 'db.json') await rename(join(staging, n), join(paths.root, n));
    await rename(join(staging, 'db.json'), paths.db); // last: until here a start would see no state, never half of one
    await syncDir(paths.root);
    return report;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

export class StateNotEmptyError extends Error {
  constructor(
    readonly root: string,
    readonly why: string[],
  ) {
    super(
      `${root} already holds state (${why.join(', ')}): import with --replace to keep it aside in ${root}/replaced-<time>/ and import over it`,
    );
  }
}

export async function readPendingImport(root: string): Promise<PendingImport | null> {
  const text = await readFile(join(root, PENDING_IMPORT_FILE), 'utf8').catch(() => null);
  if (text === null) return null;
  const parsed = PendingImport.safeParse(JSON.parse(text));
  return parsed.success ? parsed.data : null;
}

export const pendingImportPath = (root: string) => join(root, PENDING_IMPORT_FILE);
export { exists };
