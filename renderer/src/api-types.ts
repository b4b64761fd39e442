// Generated from docs/openapi.json by `npm run openapi` (server/api/client-types.ts). Do not edit.
// The shapes the core answers with, for the GUI (which may import nothing else from the core).

export type Callback = {
  url: string;
  /** pending: waiting for the run to end or for the next attempt; delivered: a 2xx came back; failed: the retries ran out, 410 Gone, or the target was refused. */
  status: "pending" | "delivered" | "failed";
  attempts: number;
  /** The `webhook-id` header: the same on every attempt and redelivery. */
  webhook_id: string;
  next_attempt_at: string | null;
  last_attempt: {
    at: string;
    status_code: number | null;
    error: string | null;
  } | null;
} | null;

export type CapsPatch = {
  /** Cap for timeout_ms. */
  timeout_ms?: number;
  /** Cap for max_memory_mb. */
  max_memory_mb?: number;
  /** Cap for max_cpu_percent. */
  max_cpu_percent?: number;
  /** Invocations running at once. */
  max_concurrency?: number;
};

/** The key is shown this once; only its hash is kept. */
export type CreatedKey = {
  id: string;
  tenant: string;
  key: string;
  prefix: string;
  created_at: string;
};

export type CreateEnvironment = {
  name: string;
};

export type CreateSnippet = {
  name: string;
  runtime: Runtime;
  description?: string;
};

export type CreateTenant = {
  name: string;
};

export type CreateVersion = {
  /** The whole snippet as one file. */
  code?: string;
  /** A multi-file bundle: relative path → content (1 MiB in all). */
  files?: Record<string, string>;
  /** The file that exports the handler (default index.ts / main.py). */
  entrypoint?: string;
  /** Wall-clock limit of one run, in milliseconds (default 60000). */
  timeout_ms?: number;
  /** Memory limit of the sandbox, in megabytes (default 200). */
  max_memory_mb?: number;
  /** CPU cap, in percent of one CPU (default 10 = 0.1 vCPU). */
  max_cpu_percent?: number;
};

export type Deploy = {
  version: number;
};

export type Deployment = {
  env: string;
  version: number | null;
  previous_version: number | null;
  deployed_at: string | null;
};

export type EgressEntry = {
  id: number;
  at: string;
  source: "snippet" | "integration";
  tenant: string | null;
  invocation_id: string | null;
  integration: string | null;
  method: string;
  host: string;
  port: number;
  path: string | null;
  status: number | null;
  bytes_out: number;
  bytes_in: number;
  duration_ms: number;
  fault: string | null;
  refused: string | null;
  error: string | null;
};

export type EmuInfo = {
  version: string;
  url: string;
  data_dir: string;
  workspace: string | null;
  started_at: string;
  pid: number;
  /** The local tenant’s key, for the GUI and the tour. */
  local_api_key: string | null;
  egress: {
    profile: "local" | "production";
    allow: Array<string>;
  };
  async_queue: {
    queued: number;
    running: number;
    max_workers: number;
    tenants_waiting: number;
  };
  tenants: Array<TenantInfo>;
};

export type Environment = {
  name: string;
  builtin: boolean;
  created_at: string;
};

/** One page; pass `next_cursor` as `cursor` for the next (null on the last page). */
export type EnvironmentPage = {
  data: Array<Environment>;
  next_cursor: string | null;
};

export type FaultRule = {
  id: string;
  host?: string;
  integration?: string;
  action: Record<string, unknown>;
  times: number | null;
  hits: number;
  created_at: string;
};

export type InboxDelivery = {
  id: string;
  received_at: string;
  method: string;
  query: string;
  headers: Record<string, string>;
  body: string;
  body_truncated: boolean;
  json?: unknown;
  signature: {
    verified: boolean;
    tenant: string | null;
    timestamp_ok: boolean;
    reason: string | null;
  };
  answered: number;
};

export type InboxResponse = {
  /** The HTTP status the inbox answers with. */
  status: number;
  /** For this many deliveries, then back to 200 (null: until changed). */
  times?: number | null;
  /** Sent as Retry-After with a non-2xx answer. */
  retry_after_seconds?: number | null;
};

export type InboxSummary = {
  name: string;
  deliveries: number;
  last_received_at: string | null;
  response: InboxResponse;
};

export type Integration = {
  name: string;
  provider: string;
  base_url: string | null;
  auth: {
    type: string;
    secret: string | null;
    header: string | null;
  };
  /** Whether the named secret exists now. */
  secret_present: boolean;
  created_at: string;
  updated_at: string;
};

/** One page; pass `next_cursor` as `cursor` for the next (null on the last page). */
export type IntegrationPage = {
  data: Array<Integration>;
  next_cursor: string | null;
};

export type Invocation = {
  id: string;
  snippet: string;
  version: number;
  env: string | null;
  mode: "sync" | "async" | "stream";
  status: "queued" | "running" | "succeeded" | "failed";
  outcome: "success" | "handler_error" | "timeout" | "oom_killed" | "cancelled" | "failed" | null;
  output?: unknown;
  error: {
    code: string;
    message: string;
    stack?: string;
  } | null;
  usage: {
    duration_ms: number;
    init_ms: number;
    cpu_ms: number;
    cpu_throttled_ms: number;
    peak_memory_mb: number;
  } | null;
  limits: {
    timeout_ms: number;
    max_memory_mb: number;
    max_cpu_percent: number;
  };
  parity: {
    status: "full" | "degraded";
    reasons: Array<string>;
  };
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** Runs started: an async job interrupted by a crash of the service runs again (at-least-once), so 2 or more means it may have run twice. */
  attempts: number;
  callback: Callback;
  /** Where production would behave differently (emulator only). */
  parity_warnings: Array<string>;
};

/** One page; pass `next_cursor` as `cursor` for the next (null on the last page). */
export type InvocationPage = {
  data: Array<Invocation>;
  next_cursor: string | null;
};

export type NewFaultRule = {
  host?: string;
  integration?: string;
  action: {
    type: "latency";
    ms: number;
  } | {
    type: "status";
    status: number;
    body?: string;
  } | {
    type: "drop";
  } | {
    type: "timeout";
  };
  times?: number | null;
};

/** RFC 9457 problem details (application/problem+json). */
export type Problem = {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** Stable, snake_case machine-readable code. */
  code: string;
  request_id: string;
  errors?: Array<{
    location: string;
    message: string;
  }>;
  [key: string]: unknown;
};

export type PutIntegration = {
  provider: "http" | "openai";
  base_url?: string;
  auth: {
    type: "bearer" | "header" | "basic" | "none";
    /** Name of the tenant secret holding the credential. */
    secret?: string;
    header?: string;
  };
};

export type PutSecret = {
  value: string;
};

export type PutStoreValue = {
  value: unknown;
  ttl_seconds?: number | null;
};

export type QueuedInvocation = {
  invocation_id: string;
  status: "queued" | "running" | "succeeded" | "failed";
  /** Where the invocation can be read: `/v1/invocations/{id}`. */
  status_url: string;
};

export type Runtime = "bun" | "python";

/** Tenant caps: each bounds the version field of the same name. */
export type RuntimeLimits = {
  timeout_ms: number;
  max_memory_mb: number;
  max_cpu_percent: number;
  /** Invocations of the tenant running at once. */
  max_concurrency: number;
};

/** A secret, without its value (values are never returned). */
export type SecretInfo = {
  name: string;
  created_at: string;
  updated_at: string;
};

/** One page; pass `next_cursor` as `cursor` for the next (null on the last page). */
export type SecretPage = {
  data: Array<SecretInfo>;
  next_cursor: string | null;
};

export type Snippet = {
  id: string;
  name: string;
  runtime: Runtime;
  description: string;
  latest_version: number | null;
  /** Environment name → deployed version. */
  deployments: Record<string, number>;
  created_at: string;
  updated_at: string;
};

/** One page; pass `next_cursor` as `cursor` for the next (null on the last page). */
export type SnippetPage = {
  data: Array<Snippet>;
  next_cursor: string | null;
};

export type StoreEntry = {
  key: string;
  value?: unknown;
  expires_at: string | null;
  updated_at: string;
};

export type StoreKeyInfo = {
  key: string;
  size: number;
  expires_at: string | null;
  updated_at: string;
};

/** One page; pass `next_cursor` as `cursor` for the next (null on the last page). */
export type StoreKeyPage = {
  data: Array<StoreKeyInfo>;
  next_cursor: string | null;
};

export type TenantInfo = {
  id: string;
  name: string;
  caps: RuntimeLimits;
  keys: Array<{
    id: string;
    prefix: string;
    created_at: string;
  }>;
  created_at: string;
};

export type Terminal = {
  id: string;
  target: "workspace" | "vm";
  /** The command on the pty, e.g. `/bin/bash` or `limactl shell svc-emu`. */
  shell: string;
  cwd: string;
  pid: number;
  cols: number;
  rows: number;
  status: "running" | "exited";
  exit_code: number | null;
  /** The signal that ended it (`SIGHUP`), or null. */
  signal: string | null;
  created_at: string;
  exited_at: string | null;
};

export type Version = {
  snippet: string;
  snippet_id: string;
  version: number;
  runtime: Runtime;
  entrypoint: string;
  manifest: Array<{
    path: string;
    size: number;
    sha256: string;
  }>;
  /** Digest of the whole bundle. */
  sha256: string;
  size_bytes: number;
  timeout_ms: number;
  max_memory_mb: number;
  max_cpu_percent: number;
  source: "api" | "workspace";
  created_at: string;
  /** Contents; only on the single-version read. */
  files?: Record<string, string>;
};

/** One page; pass `next_cursor` as `cursor` for the next (null on the last page). */
export type VersionPage = {
  data: Array<Version>;
  next_cursor: string | null;
};

export type VmInfo = {
  name: string;
  status: string;
  dir?: string;
  vm_type?: string;
  arch?: string;
  cpus?: number;
  memory?: number;
  disk?: number;
  message?: string;
  errors?: Array<string>;
};

export type VmOperation = {
  kind: "create" | "start" | "stop";
  state: "running" | "succeeded" | "failed";
  started_at: string;
  finished_at?: string;
  exit_code?: number | null;
  error?: string;
  command: Array<string>;
  log: Array<string>;
  log_total: number;
};

export type VmStatus = {
  available: boolean;
  reason?: string;
  limactl: string | null;
  limactl_version?: string;
  error?: string;
  vm: VmInfo;
  operation: VmOperation | null;
};

export type WebhookSecret = {
  secret: string;
  created_at: string;
};
