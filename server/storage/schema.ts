import { z } from 'zod';
import { InvocationEgress, SnippetEgress } from '../../contract/schemas/cassette';
import { InvocationDebug } from '../../contract/schemas/debug';

/**
 * The shape of `db.json`. Parsed with these schemas on every load, so a hand-edited file that no longer
 * fits is reported field by field instead of failing later somewhere deep.
 */
export const SCHEMA_VERSION = 3;

const isoTime = z.string().datetime({ offset: true });
/** A blob's name (storage/blobs.ts): anything else could never be read, so it fails the load check. */
const blobHash = z.string().regex(/^[0-9a-f]{64}$/, 'must be a blob name (64 hex digits)');

export const CapsRecord = z.object({
  timeout_ms: z.number().int().min(1),
  max_memory_mb: z.number().int().min(1),
  max_cpu_percent: z.number().int().min(1),
  max_concurrency: z.number().int().min(1),
});

export const TenantRecord = z.object({
  id: z.string(),
  name: z.string(),
  caps: CapsRecord,
  /** Sealed with the secret box; `whsec_…` once opened. */
  webhook_secret: z.string(),
  webhook_secret_created_at: isoTime,
  /** The secret before the last rotation, still signing (as a second signature) until it expires. */
  previous_webhook_secret: z.string().nullable(),
  previous_webhook_secret_expires_at: isoTime.nullable(),
  created_at: isoTime,
});

export const ApiKeyRecord = z.object({
  id: z.string(),
  tenant_id: z.string(),
  /** SHA-256 of the key, hex. The key itself is never stored… */
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  prefix: z.string(),
  /** …except the local tenant's first key, sealed, so the GUI can show it (docs/contract.md, "Starting it"). */
  sealed: z.string().optional(),
  created_at: isoTime,
});

export const FileEntry = z.object({ path: z.string(), size: z.number().int().min(0), sha256: blobHash });

export const SnippetRecord = z.object({
  id: z.string(),
  tenant_id: z.string(),
  name: z.string(),
  runtime: z.enum(['bun', 'python']),
  description: z.string(),
  latest_version: z.number().int().min(0),
  created_at: isoTime,
  updated_at: isoTime,
});

export const VersionRecord = z.object({
  snippet_id: z.string(),
  version: z.number().int().min(1),
  entrypoint: z.string(),
  files: z.array(FileEntry),
  sha256: z.string(),
  size_bytes: z.number().int().min(0),
  timeout_ms: z.number().int().min(1),
  max_memory_mb: z.number().int().min(1),
  max_cpu_percent: z.number().int().min(1),
  source: z.enum(['api', 'workspace']),
  /** `egress` of the snippet.json the version was made from (workspace versions only; contract/schemas/cassette.ts). */
  egress: SnippetEgress.optional(),
  created_at: isoTime,
});

export const EnvironmentRecord = z.object({
  tenant_id: z.string(),
  name: z.string(),
  builtin: z.boolean(),
  created_at: isoTime,
});

export const DeploymentRecord = z.object({
  snippet_id: z.string(),
  env: z.string(),
  version: z.number().int().min(1),
  previous_version: z.number().int().min(1).nullable(),
  deployed_at: isoTime,
});

export const SecretRecord = z.object({
  tenant_id: z.string(),
  name: z.string(),
  sealed: z.string(),
  created_at: isoTime,
  updated_at: isoTime,
});

export const StoreRecord = z.object({
  tenant_id: z.string(),
  key: z.string(),
  /** Small values inline; large ones in a blob file named by `blob`. Exactly one is set. */
  value: z.unknown().optional(),
  blob: blobHash.optional(),
  size: z.number().int().min(0),
  expires_at: isoTime.nullable(),
  created_at: isoTime,
  updated_at: isoTime,
});

export const IntegrationRecord = z.object({
  tenant_id: z.string(),
  name: z.string(),
  provider: z.string(),
  base_url: z.string().nullable(),
  auth: z.object({
    type: z.enum(['bearer', 'header', 'basic', 'none']),
    secret: z.string().nullable(),
    header: z.string().nullable(),
  }),
  created_at: isoTime,
  updated_at: isoTime,
});

/** One POST of a callback: what the receiver answered, or why nothing was answered. */
export const DeliveryRecord = z.object({
  at: isoTime,
  status_code: z.number().int().nullable(),
  error: z.string().nullable(),
  duration_ms: z.number(),
  /** False for a redelivery asked for through the API (outside the retry schedule). */
  scheduled: z.boolean(),
});

export const CallbackRecord = z.object({
  url: z.string(),
  /** The Standard Webhooks `webhook-id`: the same for every attempt and redelivery. */
  webhook_id: z.string(),
  /** pending: waiting for the run to end or for the next attempt; delivered: a 2xx came back; failed: gave up. */
  status: z.enum(['pending', 'delivered', 'failed']),
  deliveries: z.array(DeliveryRecord),
  next_attempt_at: isoTime.nullable(),
});

export const InvocationRecord = z.object({
  id: z.string(),
  tenant_id: z.string(),
  snippet_id: z.string(),
  snippet: z.string(),
  version: z.number().int().min(1),
  env: z.string().nullable(),
  mode: z.enum(['sync', 'async', 'stream']),
  status: z.enum(['queued', 'running', 'succeeded', 'failed']),
  outcome: z.enum(['success', 'handler_error', 'timeout', 'oom_killed', 'cancelled', 'failed']).nullable(),
  /** Small outputs inline, large ones in a blob (exactly one of output/output_blob when finished). */
  output: z.unknown().optional(),
  output_blob: blobHash.optional(),
  error: z
    .object({ code: z.string(), message: z.string(), stack: z.string().optional(), evidence: z.record(z.string(), z.unknown()).optional() })
    .nullable(),
  usage: z
    .object({
      duration_ms: z.number(),
      init_ms: z.number(),
      cpu_ms: z.number(),
      cpu_throttled_ms: z.number(),
      peak_memory_mb: z.number(),
    })
    .nullable(),
  limits: z.object({ timeout_ms: z.number().int(), max_memory_mb: z.number().int(), max_cpu_percent: z.number().int() }),
  overridden: z.boolean(),
  parity: z.object({ status: z.enum(['full', 'degraded']), reasons: z.array(z.string()) }),
  warm: z.boolean().nullable(),
  /** Small logs and timelines inline, large ones in blobs (at most one of each pair is set). */
  logs: z.string().optional(),
  logs_blob: blobHash.nullable(),
  logs_truncated: z.boolean(),
  timeline: z.array(z.object({ t_ms: z.number(), memory_mb: z.number(), cpu_percent: z.number(), throttled: z.boolean() })).optional(),
  timeline_blob: blobHash.nullable(),
  idempotency_key: z.string().nullable(),
  /** Runs started (async jobs that were running when the core died run again: at-least-once). */
  attempts: z.number().int().min(0),
  /** An async job's input, kept until it has run (small inline, large in a blob). */
  input: z.record(z.string(), z.unknown()).optional(),
  input_blob: blobHash.optional(),
  /** The input kept for replay (secrets' values redacted, ≤ 64 KiB of JSON: services/stored-input.ts), in a blob. */
  stored_input_blob: blobHash.optional(),
  /** The input was over the cap, so none was kept. */
  input_truncated: z.boolean().optional(),
  /** The run's X-Emu-Limits overrides, only the limits named there. */
  overrides: z
    .object({
      timeout_ms: z.number().int().optional(),
      max_memory_mb: z.number().int().optional(),
      max_cpu_percent: z.number().int().optional(),
    })
    .optional(),
  callback: CallbackRecord.nullable(),
  /** Stream mode: every event sent, with its time (a blob; emulator only, for the stream inspector). */
  events_blob: blobHash.optional(),
  /** Agent steps and graph the frameworks reported (server/services/agent-steps.ts; a blob; emulator only). */
  agent_blob: blobHash.optional(),
  /** How the run's outbound calls were handled (live / record / replay) and their counts (emulator only). */
  egress: InvocationEgress.optional(),
  /**
   * The run's outbound calls as HAR entries (a JSON array of contract/schemas/cassette.ts HarEntry, redacted,
   * bodies capped), in a blob: what the run report embeds and `import-report` turns back into a cassette.
   */
  egress_blob: blobHash.optional(),
  /** A debug run (X-Emu-Debug; contract/schemas/debug.ts): what was relaxed and for how long (emulator only). */
  debug: InvocationDebug.optional(),
  /** Async jobs: ms from being queued to being handed to the executor (monotonic clock; emulator only). */
  queue_wait_ms: z.number().optional(),
  /** Where production would behave differently for this invocation (e.g. a callback it would refuse). */
  parity_warnings: z.array(z.string()),
  created_at: isoTime,
  started_at: isoTime.nullable(),
  finished_at: isoTime.nullable(),
});

export const DbData = z.object({
  schema_version: z.literal(SCHEMA_VERSION),
  /** The last journal entry this document includes (see journal.ts): newer ones are replayed on open. */
  journal_seq: z.number().int().min(0),
  tenants: z.array(TenantRecord),
  api_keys: z.array(ApiKeyRecord),
  snippets: z.array(SnippetRecord),
  versions: z.array(VersionRecord),
  environments: z.array(EnvironmentRecord),
  deployments: z.array(DeploymentRecord),
  secrets: z.array(SecretRecord),
  store: z.array(StoreRecord),
  integrations: z.array(IntegrationRecord),
  invocations: z.array(InvocationRecord),
});

export type CapsRecord = z.infer<typeof CapsRecord>;
export type TenantRecord = z.infer<typeof TenantRecord>;
export type ApiKeyRecord = z.infer<typeof ApiKeyRecord>;
export type SnippetRecord = z.infer<typeof SnippetRecord>;
export type VersionRecord = z.infer<typeof VersionRecord>;
export type EnvironmentRecord = z.infer<typeof EnvironmentRecord>;
export type DeploymentRecord = z.infer<typeof DeploymentRecord>;
export type SecretRecord = z.infer<typeof SecretRecord>;
export type StoreRecord = z.infer<typeof StoreRecord>;
export type IntegrationRecord = z.infer<typeof IntegrationRecord>;
export type InvocationRecord = z.infer<typeof InvocationRecord>;
export type CallbackRecord = z.infer<typeof CallbackRecord>;
export type DeliveryRecord = z.infer<typeof DeliveryRecord>;
export type DbData = z.infer<typeof DbData>;

export const emptyDb = (): DbData => ({
  schema_version: SCHEMA_VERSION,
  journal_seq: 0,
  tenants: [],
  api_keys: [],
  snippets: [],
  versions: [],
  environments: [],
  deployments: [],
  secrets: [],
  store: [],
  integrations: [],
  invocations: [],
});
