import { z } from 'zod';
import { defineOperation } from '../operation';
import { ok, problem, problems } from '../responses';

/**
 * Export and import of the whole state (emulator only; docs/state.md): one archive file (`.svcemu`, a
 * gzip'd tar with a manifest) that another emulator imports into an empty data dir. Secrets are left out
 * unless a passphrase is given (then they travel encrypted with it); the data dir's own key, the admin
 * token and the GUI's session key are machine-local and never travel.
 */

/** The archive's media type (a gzip'd POSIX tar: `tar tzf FILE` lists its parts). */
export const STATE_ARCHIVE_TYPE = 'application/vnd.svc-emu.state+gzip';
/** The `format` of every archive, and the newest `format_version` this emulator writes and reads. */
export const STATE_FORMAT = 'svc-emu-state';
export const STATE_FORMAT_VERSION = 1;
/** The largest archive `POST /_emu/state/import` takes (the CLI on a data dir has no limit but memory). */
export const STATE_IMPORT_LIMIT_BYTES = 512 * 1024 * 1024;

const count = z.number().int().min(0);

export const StateCounts = z
  .object({
    tenants: count,
    api_keys: count,
    snippets: count,
    versions: count,
    environments: count,
    deployments: count,
    secrets: count,
    store: count,
    integrations: count,
    invocations: count,
    queued_jobs: count.meta({ description: 'Async jobs queued or running at export (running ones come back queued: at-least-once).' }),
    pending_callbacks: count.meta({ description: 'Callbacks still to be delivered, each at its `next_attempt_at`.' }),
    blobs: count,
    inbox_deliveries: count,
    cassettes: count,
  })
  .meta({ id: 'StateCounts' });

export const StatePart = z.object({
  name: z.string().meta({ description: 'The part’s path in the tar (`db.json`, `blobs/<sha256>`, `inbox/<name>.jsonl`, …).' }),
  size: count,
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

/** `manifest.json`, the archive's first part. */
export const StateManifest = z
  .object({
    format: z.literal(STATE_FORMAT),
    format_version: z.number().int().min(1),
    emulator_version: z.string(),
    created_at: z.string(),
    schema_version: z
      .number()
      .int()
      .min(0)
      .meta({ description: 'The schema version of the archive’s `db.json` (storage/migrations.ts brings older ones up).' }),
    counts: StateCounts,
    includes: z.array(z.string()).meta({ description: 'What the archive holds, in words (`tenants`, `store`, `inbox`, `cassettes`, …).' }),
    secrets: z.object({
      mode: z.enum(['left_out', 'encrypted']),
      /** Every secret the archive does not carry (mode `left_out`), named: `secret local/OPENAI_API_KEY`, `webhook signing secret of tenant local`. */
      left_out: z.array(z.string()),
      /** How the passphrase became the key (mode `encrypted`). */
      kdf: z
        .object({ name: z.literal('scrypt'), salt: z.string(), N: z.number().int(), r: z.number().int(), p: z.number().int() })
        .nullable(),
    }),
    machine_local: z
      .array(z.string())
      .meta({ description: 'What never travels: the data dir’s secret key, the admin token, the GUI session key.' }),
    parts: z.array(StatePart),
  })
  .meta({ id: 'StateManifest' });

export const StateExportRequest = z
  .object({
    passphrase: z.string().min(8).max(1024).optional().meta({
      description:
        'Encrypts the secrets into the archive (scrypt + AES-256-GCM). Without it every secret is left out, and the manifest names each.',
    }),
  })
  .meta({ id: 'StateExportRequest' });

export const StateImportReport = z
  .object({
    format_version: z.number().int(),
    emulator_version: z.string().meta({ description: 'The emulator that wrote the archive.' }),
    created_at: z.string().meta({ description: 'When the archive was written.' }),
    schema_version: z.object({ archive: z.number().int(), now: z.number().int() }),
    counts: StateCounts,
    secrets: z.object({
      mode: z.enum(['left_out', 'encrypted']),
      /** Secrets the import could not restore (left out of the archive), named. */
      left_out: z.array(z.string()),
      /** Tenants whose webhook signing secret was made anew here (the archive did not carry it). */
      new_webhook_secrets: z.array(z.string()),
    }),
    /** Where the data dir's previous state was kept (`--replace` / `?replace=true`), or null. */
    replaced: z.string().nullable(),
    /** Everything else worth saying (an egress profile the archive had and this core does not run with, …). */
    notes: z.array(z.string()),
  })
  .meta({ id: 'StateImportReport' });

export type StateCounts = z.infer<typeof StateCounts>;
export type StateManifest = z.infer<typeof StateManifest>;
export type StateImportReport = z.infer<typeof StateImportReport>;

export const emuExportState = defineOperation({
  operationId: 'emuExportState',
  method: 'post',
  path: '/_emu/state/export',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Export the whole state as one archive, while the emulator runs (a consistent snapshot)',
  description:
    'The answer is the archive (`application/vnd.svc-emu.state+gzip`). Secrets are left out unless `passphrase` is given; `X-Emu-Secrets` and the manifest say which. Runs in flight keep running: the snapshot is the state at one instant (async jobs running then come back queued on import).',
  body: StateExportRequest,
  bodyOptional: true,
  responses: {
    200: {
      description: 'The archive (a gzip’d tar: `manifest.json`, `db.json`, blobs, inbox, cassettes, …).',
      contentType: STATE_ARCHIVE_TYPE,
      schema: z.string().meta({ format: 'binary' }),
      headers: z.object({
        'content-disposition': z.string().meta({ description: '`attachment; filename="svc-emu-<time>.svcemu"`.' }),
        'x-emu-secrets': z
          .enum(['left_out', 'encrypted'])
          .meta({ description: 'Whether the secrets travel (encrypted) or were left out.' }),
      }),
    },
    ...problems(400, 401, 415, 422),
  },
});

export const emuImportState = defineOperation({
  operationId: 'emuImportState',
  method: 'post',
  path: '/_emu/state/import',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Import an archive into this emulator (its state must be empty unless `replace=true`)',
  description:
    'The body is the archive’s bytes (`Content-Type: application/vnd.svc-emu.state+gzip` or `application/octet-stream`, 512 MiB at most). Everything is checked before anything changes: a damaged or foreign archive is refused with `archive_invalid` saying what is wrong, and the state is as it was. After the import, queued jobs run and pending callbacks go out at their `next_attempt_at`.',
  query: z.object({
    replace: z
      .enum(['true', 'false'])
      .optional()
      .transform((v) => v === 'true')
      .meta({ description: 'Replace a state that is not empty; the old one is kept in `<data-dir>/replaced-<time>/`.' }),
  }),
  headers: z.object({
    'x-emu-passphrase': z.string().optional().meta({
      description:
        'The passphrase the archive’s secrets were encrypted with, percent-encoded (UTF-8). Without it an encrypted archive’s secrets are refused (`passphrase_required`).',
    }),
  }),
  // Declared as octet-stream, which every HTTP tool can send (Schemathesis has no serializer for the vnd type);
  // the core reads the bytes whatever the declared type (server/api/state.ts), `application/vnd.svc-emu.state+gzip` too.
  rawBody: {
    contentType: 'application/octet-stream',
    description:
      'The archive, as `svc-emu export` or `POST /_emu/state/export` wrote it (`application/vnd.svc-emu.state+gzip` is taken too).',
    maxBytes: STATE_IMPORT_LIMIT_BYTES,
  },
  responses: {
    200: ok('Imported: what came in, and every secret that did not.', StateImportReport),
    ...problems(401, 413, 415),
    400: problem(400, ['validation_failed']),
    409: problem(409, ['state_not_empty'], 'This emulator already has state: import with `replace=true` (the old state is kept aside).'),
    422: problem(
      422,
      ['archive_invalid', 'passphrase_required', 'passphrase_wrong'],
      'The archive is damaged, foreign or newer than this emulator, or its passphrase is missing or wrong; nothing was changed.',
    ),
  },
});
