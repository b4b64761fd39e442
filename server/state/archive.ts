import { gunzipSync, gzipSync } from 'node:zlib';
import { z } from 'zod';
import { STATE_FORMAT, STATE_FORMAT_VERSION, StateManifest, type StateCounts } from '../../contract/emu/state';
import { Cassette, CASSETTE_NAME_RE, EgressModeSetting } from '../../contract/schemas/cassette';
import { NAME_RE } from '../../contract/schemas/common';
import { NewFaultRule } from '../../contract/schemas/egress';
import { sha256Hex } from '../ids';
import { migrate } from '../storage/migrations';
import { DbData, SCHEMA_VERSION } from '../storage/schema';
import { readTar, TarError, writeTar, type TarEntry } from './tar';
import { openWithPassphrase, PassphraseError, sealWithPassphrase, type Kdf } from './passphrase';

/**
 * The state archive (docs/state.md): a gzip'd tar whose first part is `manifest.json` (format, version,
 * counts, what is included, every other part's sha256), then `db.json` (secrets taken out), the blobs it
 * names, the callback inbox, the egress rules, the cassettes and, with a passphrase, `secrets.enc`.
 * `buildArchive` writes one from a Snapshot; `parseArchive` checks every byte of one before anything
 * is written anywhere, and refuses with an ArchiveError saying what is wrong.
 */

/** Secret values as they are once opened with the source's key: never written anywhere in clear. */
export interface PlainSecrets {
  secrets: { tenant_id: string; name: string; value: string }[];
  webhooks: { tenant_id: string; secret: string; previous: string | null; previous_expires_at: string | null }[];
  /** The local tenant's shown key (schema.ts ApiKeyRecord.sealed). */
  keys: { id: string; tenant_id: string; key: string }[];
}

export const InboxResponseRecord = z.object({
  status: z.number().int().min(200).max(599),
  times: z.number().int().min(1).nullable(),
  retry_after_seconds: z.number().int().min(0).nullable(),
});

/** What lives outside db.json and comes along: the egress rules and mode, the inbox's chosen answers. */
export const Extras = z.object({
  egress: z.object({
    profile: z.enum(['local', 'production']),
    allow: z.array(z.string()),
    faults: z.array(NewFaultRule),
    mode: EgressModeSetting.nullable(),
  }),
  inbox_responses: z.record(z.string(), InboxResponseRecord),
});
export type Extras = z.infer<typeof Extras>;

export const ArchivedCassette = z.object({
  // Names only (they become path segments where the target keeps cassettes: services/egress-sessions.ts).
  tenant: z.string().regex(NAME_RE),
  snippet: z.string().regex(NAME_RE),
  name: z.string().regex(CASSETTE_NAME_RE),
  /** Where the source kept it: beside the workspace snippet, or in the data dir. */
  where: z.enum(['workspace', 'data_dir']),
  cassette: Cassette,
});
export type ArchivedCassette = z.infer<typeof ArchivedCassette>;

/** Everything an export collected, at one instant. */
export interface Snapshot {
  db: DbData;
  blobs: Map<string, Buffer>;
  /** `<name>.jsonl` files of the callback inbox, as they were. */
  inbox: Map<string, Buffer>;
  extras: Extras;
  cassettes: ArchivedCassette[];
  secrets: PlainSecrets;
}

/** A parsed archive, checked throughout; `db` is at this emulator's schema version, its secrets not yet filled in. */
export interface ParsedArchive {
  manifest: StateManifest;
  db: DbData;
  blobs: Map<string, Buffer>;
  inbox: Map<string, Buffer>;
  extras: Extras;
  cassettes: ArchivedCassette[];
  /** Null when the archive left them out. */
  secrets: PlainSecrets | null;
  fromSchemaVersion: number;
}

export class ArchiveError extends Error {
  constructor(
    message: string,
    readonly code: 'archive_invalid' | 'passphrase_required' | 'passphrase_wrong' = 'archive_invalid',
  ) {
    super(message);
  }
}

const PlainSecretsSchema = z.object({
  secrets: z.array(z.object({ tenant_id: z.string(), name: z.string(), value: z.string() })),
  webhooks: z.array(
    z.object({ tenant_id: z.string(), secret: z.string(), previous: z.string().nullable(), previous_expires_at: z.string().nullable() }),
  ),
  keys: z.array(z.object({ id: z.string(), tenant_id: z.string(), key: z.string() })),
});

/** The part names (all short: tar's 100-byte names). */
const BLOB_PART = /^blobs\/([0-9a-f]{64})$/;
const INBOX_PART = /^inbox\/([A-Za-z0-9._-]{1,80})\.jsonl$/;

export const MACHINE_LOCAL = [
  'the data dir’s secret key (secret.key): secrets are sealed again with the target’s own key',
  'the admin token (emulator.json): every start makes its own',
  'the GUI session key (gui-session.key): browsers sign in again',
  'the egress CA (egress-ca/): the target keeps its own, which its sandboxes trust',
];

/** The blobs a db names (version files, big store values, invocations' outputs, logs, timelines, …). */
export function blobsOf(db: Readonly<DbData>): Set<string> {
  const out = new Set<string>();
  for (const v of db.versions) for (const f of v.files) out.add(f.sha256);
  for (const r of db.store) if (r.blob) out.add(r.blob);
  for (const i of db.invocations)
    for (const b of [
      i.output_blob,
      i.logs_blob,
      i.timeline_blob,
      i.input_blob,
      i.events_blob,
      i.stored_input_blob,
      i.agent_blob,
      i.egress_blob,
    ])
      if (b) out.add(b);
  return out;
}

export function countsOf(db: Readonly<DbData>, extra: { blobs: number; inboxDeliveries: number; cassettes: number }): StateCounts {
  return {
    tenants: db.tenants.length,
    api_keys: db.api_keys.length,
    snippets: db.snippets.length,
    versions: db.versions.length,
    environments: db.environments.length,
    deployments: db.deployments.length,
    secrets: db.secrets.length,
    store: db.store.length,
    integrations: db.integrations.length,
    invocations: db.invocations.length,
    queued_jobs: db.invocations.filter((i) => i.mode === 'async' && (i.status === 'queued' || i.status === 'running')).length,
    pending_callbacks: db.invocations.filter((i) => i.callback?.status === 'pending').length,
    blobs: extra.blobs,
    inbox_deliveries: extra.inboxDeliveries,
    cassettes: extra.cassettes,
  };
}

const tenantName = (db: Readonly<DbData>, id: string) => db.tenants.find((t) => t.id === id)?.name ?? id;

/** Every secret an archive without a passphrase does not carry, in words a person can act on. */
export function leftOutSecrets(db: Readonly<DbData>): string[] {
  return [
    ...db.secrets.map((s) => `secret ${tenantName(db, s.tenant_id)}/${s.name}`),
    ...db.tenants.map((t) => `webhook signing secret of tenant ${t.name} (a new one is made on import)`),
    ...db.api_keys
      .filter((k) => k.sealed)
      .map((k) => `the shown API key of tenant ${tenantName(db, k.tenant_id)} (${k.prefix}…): it keeps working, but cannot be shown again`),
  ];
}

const countLines = (b: Buffer) =>
  b
    .toString('utf8')
    .split('\n')
    .filter((l) => l.trim()).length;

/** The archive's bytes. Secrets are in `secrets.enc` (sealed with `passphrase`) or nowhere. */
export async function buildArchive(
  snap: Snapshot,
  opts: { passphrase?: string; now: Date; emulatorVersion: string; gzipLevel?: number },
): Promise<{ bytes: Buffer; manifest: StateManifest }> {
  // db.json without a single secret: the values (sealed with the source's key, useless elsewhere) go.
  const db: DbData = {
    ...snap.db,
    journal_seq: 0,
    tenants: snap.db.tenants.map((t) => ({
      ...t,
      webhook_secret: '',
      previous_webhook_secret: null,
      previous_webhook_secret_expires_at: null,
    })),
    api_keys: snap.db.api_keys.map(({ sealed: _sealed, ...k }) => k),
    secrets: snap.db.secrets.map((s) => ({ ...s, sealed: '' })),
  };
  const parts: TarEntry[] = [{ name: 'db.json', data: Buffer.from(JSON.stringify(db)) }];
  for (const [hash, data] of [...snap.blobs].sort(([a], [b]) => a.localeCompare(b))) parts.push({ name: `blobs/${hash}`, data });
  for (const [name, data] of [...snap.inbox].sort(([a], [b]) => a.localeCompare(b))) parts.push({ name: `inbox/${name}.jsonl`, data });
  parts.push({ name: 'extras.json', data: Buffer.from(JSON.stringify(snap.extras)) });
  parts.push({ name: 'cassettes.json', data: Buffer.from(JSON.stringify(snap.cassettes)) });
  let kdf: Kdf | null = null;
  if (opts.passphrase !== undefined) {
    const sealed = await sealWithPassphrase(Buffer.from(JSON.stringify(snap.secrets)), opts.passphrase);
    kdf = sealed.kdf;
    parts.push({ name: 'secrets.enc', data: sealed.sealed });
  }
  const inboxDeliveries = [...snap.inbox.values()].reduce((n, b) => n + countLines(b), 0);
  const manifest: StateManifest = {
    format: STATE_FORMAT,
    format_version: STATE_FORMAT_VERSION,
    emulator_version: opts.emulatorVersion,
    created_at: opts.now.toISOString(),
    schema_version: SCHEMA_VERSION,
    counts: countsOf(snap.db, { blobs: snap.blobs.size, inboxDeliveries, cassettes: snap.cassettes.length }),
    includes: [
      'tenants and their caps',
      'api keys (as stored: hashed)',
      'snippets, versions and their code',
      'environments and deployments',
      'integrations',
      'the store',
      'invocation history with logs, outputs, timelines, stream events, agent steps and egress calls',
      'queued and running async jobs (running ones come back queued: at-least-once)',
      'pending callbacks with their next attempt times',
      'the callback inbox and its chosen answers',
      'egress rules (profile, allow list, fault rules) and the egress mode',
      'cassettes',
      opts.passphrase !== undefined
        ? 'secrets, webhook signing secrets and the shown API key, encrypted with the passphrase'
        : 'no secrets (no passphrase was given)',
    ],
    secrets: {
      mode: kdf ? 'encrypted' : 'left_out',
      left_out: kdf ? [] : leftOutSecrets(snap.db),
      kdf,
    },
    machine_local: MACHINE_LOCAL,
    parts: parts.map((p) => ({ name: p.name, size: p.data.length, sha256: sha256Hex(p.data) })),
  };
  const tar = writeTar(
    [{ name: 'manifest.json', data: Buffer.from(JSON.stringify(manifest, null, 2) + '\n') }, ...parts],
    opts.now.getTime(),
  );
  return { bytes: gzipSync(tar, { level: opts.gzipLevel ?? 6 }), manifest };
}

/**
 * Steps from one archive `format_version` to the next, applied to the manifest and parts before they
 * are checked (db.json's own schema is brought up by storage/migrations.ts). Add one with every change
 * of the archive's layout; version 1 is the first.
 */
type Parts = { manifest: Record<string, unknown>; parts: Map<string, Buffer> };
export const FORMAT_STEPS: Record<number, (p: Parts) => Parts> = {};

const zodProblems = (err: z.ZodError, max = 5) =>
  err.issues
    .slice(0, max)
    .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
    .join('; ') + (err.issues.length > max ? `; … ${err.issues.length - max} more` : '');

/** Reads and checks a whole archive; throws ArchiveError (nothing has been written anywhere). */
export async function parseArchive(
  bytes: Buffer,
  passphrase: string | undefined,
  maxUnpackedBytes = 4 * 1024 ** 3,
): Promise<ParsedArchive> {
  if (bytes.length < 2 || bytes[0] !== 0x1f || bytes[1] !== 0x8b) {
    throw new ArchiveError(
      'this is not a svc-emu state archive: it is not gzip-compressed (a .svcemu file starts with the gzip magic bytes 1f 8b)',
    );
  }
  let tarBytes: Buffer;
  try {
    tarBytes = gunzipSync(bytes, { maxOutputLength: maxUnpackedBytes });
  } catch (err) {
    throw new ArchiveError(`the archive is damaged: its gzip stream does not decompress (${(err as Error).message})`);
  }
  let entries: TarEntry[];
  try {
    entries = readTar(tarBytes);
  } catch (err) {
    const message = err instanceof TarError ? err.message : String(err);
    // Nothing tar-like at all: some other gzip'd file, not a damaged archive.
    if (/at byte 0\b/.test(message)) throw new ArchiveError(`this is not a svc-emu state archive: the gzip holds no tar (${message})`);
    throw new ArchiveError(`the archive is damaged: ${message}`);
  }
  const [first, ...rest] = entries;
  if (first?.name !== 'manifest.json') throw new ArchiveError('this is not a svc-emu state archive: its first part is not manifest.json');
  let rawManifest: Record<string, unknown>;
  try {
    rawManifest = JSON.parse(first.data.toString('utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new ArchiveError(`the archive's manifest.json is not JSON (${(err as Error).message})`);
  }
  if (typeof rawManifest !== 'object' || rawManifest === null || rawManifest.format !== STATE_FORMAT) {
    throw new ArchiveError(
      `this is not a svc-emu state archive: its manifest's format is ${JSON.stringify(rawManifest?.format)}, not "${STATE_FORMAT}"`,
    );
  }
  const fv = rawManifest.format_version;
  if (typeof fv !== 'number' || !Number.isInteger(fv) || fv < 1)
    throw new ArchiveError(`the manifest's format_version ${JSON.stringify(fv)} is not a version`);
  if (fv > STATE_FORMAT_VERSION) {
    throw new ArchiveError(
      `the archive has format_version ${fv}, written by a newer emulator (${String(rawManifest.emulator_version)}); this one reads up to ${STATE_FORMAT_VERSION}: update the emulator`,
    );
  }
  let stepped: Parts = { manifest: rawManifest, parts: new Map(rest.map((e) => [e.name, e.data])) };
  if (stepped.parts.size !== rest.length) throw new ArchiveError('the archive holds a part twice');
  // The parts are checked against the manifest they were written with, then brought up step by step.
  const written = StateManifest.safeParse({ ...rawManifest, format_version: STATE_FORMAT_VERSION });
  if (!written.success) throw new ArchiveError(`the archive's manifest does not fit: ${zodProblems(written.error)}`);
  const listed = new Map(written.data.parts.map((p) => [p.name, p]));
  for (const [name, data] of stepped.parts) {
    const p = listed.get(name);
    if (!p) throw new ArchiveError(`the archive holds a part its manifest does not list: ${name}`);
    if (p.size !== data.length || sha256Hex(data) !== p.sha256) {
      throw new ArchiveError(`the archive is damaged: part ${name} does not match its sha256 in the manifest`);
    }
  }
  for (const name of listed.keys())
    if (!stepped.parts.has(name)) throw new ArchiveError(`the archive is missing part ${name} (the manifest lists it)`);
  for (let v = fv; v < STATE_FORMAT_VERSION; v++) {
    const step = FORMAT_STEPS[v];
    if (!step) throw new ArchiveError(`no way from archive format_version ${v} to ${v + 1}`);
    stepped = step(stepped);
  }
  const manifest = StateManifest.parse(stepped.manifest);
  const parts = stepped.parts;
  const json = (name: string): unknown => {
    const data = parts.get(name);
    if (!data) throw new ArchiveError(`the archive is missing part ${name}`);
    try {
      return JSON.parse(data.toString('utf8'));
    } catch (err) {
      throw new ArchiveError(`the archive's ${name} is not JSON (${(err as Error).message})`);
    }
  };

  // db.json: brought up to this emulator's schema, then checked whole (secrets are filled in on import).
  const rawDb = json('db.json');
  if (typeof rawDb !== 'object' || rawDb === null || Array.isArray(rawDb)) throw new ArchiveError("the archive's db.json is not an object");
  const migrated = migrate(rawDb as Record<string, unknown>);
  if ('error' in migrated) throw new ArchiveError(`the archive's db.json cannot be used: ${migrated.error}`);
  const fill = (doc: Record<string, unknown>) => ({
    ...doc,
    tenants: Array.isArray(doc.tenants)
      ? doc.tenants.map((t: Record<string, unknown>) => ({
          ...t,
          webhook_secret: typeof t?.webhook_secret === 'string' ? t.webhook_secret : '',
        }))
      : doc.tenants,
  });
  const checked = DbData.safeParse(fill(migrated.doc));
  if (!checked.success) throw new ArchiveError(`the archive's db.json fails the load check: ${zodProblems(checked.error)}`);
  const db = checked.data;
  // Tenant, snippet and environment names become URL and path segments (the workspace, cassettes): names only.
  const badName = [
    ...db.tenants.map((t) => ['tenant', t.name] as const),
    ...db.snippets.map((x) => ['snippet', x.name] as const),
    ...db.environments.map((e) => ['environment', e.name] as const),
  ].find(([, n]) => !NAME_RE.test(n));
  if (badName)
    throw new ArchiveError(`the archive's db.json fails the load check: ${badName[0]} name ${JSON.stringify(badName[1])} is not a name`);

  const blobs = new Map<string, Buffer>();
  const inbox = new Map<string, Buffer>();
  for (const [name, data] of parts) {
    const b = BLOB_PART.exec(name);
    if (b) {
      if (sha256Hex(data) !== b[1]) throw new ArchiveError(`the archive is damaged: blob ${b[1]} does not hold what its name says`);
      blobs.set(b[1], data);
    }
    const i = INBOX_PART.exec(name);
    if (i) inbox.set(i[1]!, data);
  }
  const missing = [...blobsOf(db)].filter((h) => !blobs.has(h));
  if (missing.length) throw new ArchiveError(`the archive is missing ${missing.length} blob(s) its db.json names (first: ${missing[0]})`);

  const extras = Extras.safeParse(json('extras.json'));
  if (!extras.success) throw new ArchiveError(`the archive's extras.json does not fit: ${zodProblems(extras.error)}`);
  const cassettes = z.array(ArchivedCassette).safeParse(json('cassettes.json'));
  if (!cassettes.success) throw new ArchiveError(`the archive's cassettes.json does not fit: ${zodProblems(cassettes.error)}`);

  let secrets: PlainSecrets | null = null;
  if (manifest.secrets.mode === 'encrypted') {
    const sealed = parts.get('secrets.enc');
    if (!sealed || !manifest.secrets.kdf)
      throw new ArchiveError('the manifest says the secrets are encrypted, but the archive has no secrets.enc');
    if (passphrase === undefined) {
      throw new ArchiveError(
        'this archive carries its secrets encrypted: give its passphrase (--passphrase-file FILE or $SVC_EMU_PASSPHRASE; X-Emu-Passphrase over HTTP)',
        'passphrase_required',
      );
    }
    let plain: Buffer;
    try {
      plain = await openWithPassphrase(sealed, passphrase, manifest.secrets.kdf);
    } catch (err) {
      if (err instanceof PassphraseError) throw new ArchiveError(err.message, 'passphrase_wrong');
      throw err;
    }
    const parsed = PlainSecretsSchema.safeParse(JSON.parse(plain.toString('utf8')));
    if (!parsed.success) throw new ArchiveError(`the archive's secrets do not fit: ${zodProblems(parsed.error)}`);
    secrets = parsed.data;
  }
  return { manifest, db, blobs, inbox, extras: extras.data, cassettes: cassettes.data, secrets, fromSchemaVersion: migrated.from };
}
