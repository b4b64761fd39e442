import { z } from 'zod';
import { PageQuery, VersionNumber } from './common';
import { CallbackDelivery, TimelineSample } from './emu';
import { CASSETTE_NAME_RE, EGRESS_MODES, InvocationEgress } from './cassette';
import { DEBUG_HEADER_RE, InvocationDebug } from './debug';

/** Invocations: the invoke request, the invocation record, and the events of a streamed run. */

export const INVOKE_MODES = ['async', 'stream'] as const;
export const INVOCATION_STATUSES = ['queued', 'running', 'succeeded', 'failed'] as const;
export const OUTCOMES = ['success', 'handler_error', 'timeout', 'oom_killed', 'cancelled', 'failed'] as const;
export const LIMIT_OVERRIDE_KEYS = ['timeout_ms', 'max_memory_mb', 'max_cpu_percent'] as const;

export const Usage = z
  .object({
    duration_ms: z.number(),
    init_ms: z.number(),
    cpu_ms: z.number(),
    cpu_throttled_ms: z.number(),
    peak_memory_mb: z.number(),
  })
  .meta({ id: 'Usage' });

export const InvokeParams = z.object({ snippet: z.string().meta({ description: 'Snippet name (or id).' }) });
export const InvokeQuery = z.object({
  env: z.string().max(63).optional().meta({ description: 'Environment whose deployment runs.' }),
  version: VersionNumber.optional().meta({ description: 'Explicit version (wins over env).' }),
});

export const CallbackInfo = z
  .object({
    url: z.string(),
    status: z.enum(['pending', 'delivered', 'failed']).meta({
      description:
        'pending: waiting for the run to end or for the next attempt; delivered: a 2xx came back; failed: the retries ran out, 410 Gone, or the target was refused.',
    }),
    attempts: z.number().int(),
    webhook_id: z.string().meta({ description: 'The `webhook-id` header: the same on every attempt and redelivery.' }),
    next_attempt_at: z.string().nullable(),
    last_attempt: z.object({ at: z.string(), status_code: z.number().int().nullable(), error: z.string().nullable() }).nullable(),
  })
  .meta({ id: 'Callback' });

export const Invocation = z
  .object({
    id: z.string(),
    snippet: z.string(),
    version: z.number().int(),
    env: z.string().nullable(),
    mode: z.enum(['sync', 'async', 'stream']),
    status: z.enum(INVOCATION_STATUSES),
    outcome: z.enum(OUTCOMES).nullable(),
    output: z.unknown(),
    error: z.object({ code: z.string(), message: z.string(), stack: z.string().optional() }).nullable(),
    usage: Usage.nullable(),
    limits: z.object({ timeout_ms: z.number().int(), max_memory_mb: z.number().int(), max_cpu_percent: z.number().int() }),
    parity: z.object({ status: z.enum(['full', 'degraded']), reasons: z.array(z.string()) }),
    created_at: z.string(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
    attempts: z.number().int().meta({
      description:
        'Runs started: an async job interrupted by a crash of the service runs again (at-least-once), so 2 or more means it may have run twice.',
    }),
    callback: CallbackInfo.nullable(),
    parity_warnings: z.array(z.string()).meta({ description: 'Where production would behave differently (emulator only).' }),
  })
  .meta({ id: 'Invocation' });

/** Per-run limit overrides (`X-Emu-Limits`), as a record: only the limits that were overridden. */
export const LimitOverrides = z
  .object({
    timeout_ms: z.number().int().min(1).optional(),
    max_memory_mb: z.number().int().min(1).optional(),
    max_cpu_percent: z.number().int().min(1).optional(),
  })
  .meta({ id: 'LimitOverrides' });

export const Queued = z
  .object({
    invocation_id: z.string(),
    status: z.enum(INVOCATION_STATUSES),
    status_url: z.string().meta({ description: 'Where the invocation can be read: `/v1/invocations/{id}`.' }),
  })
  .meta({ id: 'QueuedInvocation' });

export const InvocationListQuery = PageQuery.extend({
  snippet: z.string().max(64).optional().meta({ description: 'Only this snippet (name or id).' }),
  status: z.enum(INVOCATION_STATUSES).optional(),
});

export const InvocationId = z.object({ id: z.string() });

export const InvocationLogs = z
  .object({ invocation_id: z.string(), logs: z.string(), truncated: z.boolean() })
  .meta({ id: 'InvocationLogs' });

export const CancelResult = z.object({ id: z.string(), status: z.enum(['cancelled', 'cancelling']) }).meta({ id: 'CancelResult' });

// ---- request headers of POST /v1/invoke/{snippet} ---------------------------------------------------

// ASCII classes and no lookahead: the document's pattern is read by other regex engines too (Python's \d and \s take
// any Unicode digit and space, and Schemathesis's coverage phase could not build values from a lookahead).
const OVERRIDE_PART = `\\s*(?:${LIMIT_OVERRIDE_KEYS.join('|')})\\s*=\\s*[1-9]\\d{0,8}\\s*`;
/** `timeout_ms=500,max_memory_mb=64`: names among the three limits, values 1–999999999 (no leading zeros). */
export const LIMIT_OVERRIDES_RE = new RegExp(`^${OVERRIDE_PART}(?:,${OVERRIDE_PART})*$`);
export const IDEMPOTENCY_KEY_RE = /^[\x21-\x7e]{1,255}$/;

export const InvokeHeaders = z.object({
  'x-invoke-mode': z.enum(INVOKE_MODES, { error: 'must be async or stream (absent = sync)' }).optional().meta({
    description: 'Absent: sync. `async`: 202, then poll or get a callback. `stream`: server-sent events. Anything else (`sync` too) → 400.',
  }),
  'idempotency-key': z
    .string()
    .regex(IDEMPOTENCY_KEY_RE, 'must be 1–255 printable ASCII characters')
    .optional()
    .meta({ description: 'A repeat with the same key within 24 h answers the earlier invocation instead of running again.' }),
  'x-emu-limits': z.string().regex(LIMIT_OVERRIDES_RE, 'must look like timeout_ms=500,max_memory_mb=64').optional().meta({
    description:
      'Emulator only: per-run limit overrides, `name=value` pairs of timeout_ms, max_memory_mb, max_cpu_percent (each ≥ 1). Needs `X-Emu-Admin` (else 403 `forbidden`).',
  }),
  'x-emu-egress-mode': z.enum(EGRESS_MODES, { error: 'must be live, record or replay' }).optional().meta({
    description:
      'Emulator only: this run’s egress mode — `live` (calls go out), `record` (they go out and are written to the snippet’s cassette), `replay` (answered from the cassette, nothing goes out). Needs `X-Emu-Admin` (else 403 `forbidden`).',
  }),
  'x-emu-cassette': z.string().regex(CASSETTE_NAME_RE, 'must be a cassette name: a-z 0-9 . _ -').optional().meta({
    description:
      'Emulator only: the cassette this run records to or replays from (default: the snippet’s, else `default`). Needs `X-Emu-Admin`.',
  }),
  'x-emu-debug': z.string().regex(DEBUG_HEADER_RE, 'must be 1 (any free port) or port=N (1024–65535)').optional().meta({
    description:
      'Emulator only: a debug run — a fresh sandbox with the runtime’s debugger listening on loopback (Bun inspector or debugpy); see `GET /_emu/debug/sessions` and the `debug.session` event for where to attach. While a debugger is attached the timeout clock is paused; a debug run has no CPU cap; memory stays enforced. Needs `X-Emu-Admin` (else 403 `forbidden`).',
  }),
  'x-emu-admin': z.string().optional().meta({
    description: 'Emulator only: the admin token, which `X-Emu-Limits`, `X-Emu-Egress-Mode`, `X-Emu-Cassette` and `X-Emu-Debug` need.',
  }),
});

// ---- the events of a streamed invocation (text/event-stream) -----------------------------------------

export const StreamStart = z
  .object({ invocation_id: z.string(), snippet: z.string(), version: z.number().int(), env: z.string().nullable() })
  .meta({ id: 'StreamStart', description: 'SSE `start`: the run is recorded.' });
export const StreamChunk = z
  .object({ data: z.unknown() })
  .meta({ id: 'StreamChunk', description: 'SSE `chunk`: one value the handler yielded.' });
export const StreamResult = z
  .object({ output: z.unknown(), usage: Usage.nullable() })
  .meta({ id: 'StreamResult', description: 'SSE `result`: the handler returned (last event).' });
export const StreamError = z
  .object({ code: z.string(), message: z.string(), invocation_id: z.string() })
  .meta({ id: 'StreamError', description: 'SSE `error`: the run failed; `code` is the outcome (last event).' });
export const STREAM_EVENTS = { start: StreamStart, chunk: StreamChunk, result: StreamResult, error: StreamError } as const;

/** `GET /_emu/invocations/{id}`: the invocation with its evidence. */
export const EmuInvocation = Invocation.extend({
  tenant_id: z.string(),
  overridden: z.boolean().meta({ description: 'Limits came from `X-Emu-Limits`.' }),
  warm: z.boolean().nullable().meta({ description: 'Ran in a warm sandbox (null: never started).' }),
  error_evidence: z.record(z.string(), z.unknown()).nullable(),
  callback_deliveries: z.array(CallbackDelivery),
  queue_wait_ms: z.number().nullable(),
  logs_truncated: z.boolean(),
  timeline: z.array(TimelineSample),
  input: z.record(z.string(), z.unknown()).nullable().meta({
    description:
      'The input the handler received (async: without `callback_url`), kept for replay, with every tenant secret’s value replaced by `"[secret NAME]"`. Null when it was over 64 KiB of JSON (`input_truncated`) or the run predates stored inputs.',
  }),
  input_truncated: z.boolean().meta({ description: 'The input was over 64 KiB of JSON, so it was not kept (`input` is null).' }),
  overrides: LimitOverrides.nullable().meta({ description: 'The run’s `X-Emu-Limits` overrides (null: none).' }),
  egress: InvocationEgress.nullable().meta({
    description:
      'How the run’s outbound calls were handled: live, recorded or replayed, and how many (null: the run predates egress modes).',
  }),
  debug: InvocationDebug.nullable().meta({
    description:
      'A debug run (`X-Emu-Debug`): its protocol, the limits relaxed while a debugger held it, and for how long (null: not a debug run).',
  }),
}).meta({ id: 'EmuInvocation' });

export const StreamEventRecord = z
  .object({
    id: z.number().int(),
    event: z.enum(['start', 'chunk', 'result', 'error']),
    data: z.unknown(),
    at: z.string(),
    t_ms: z.number(),
  })
  .meta({ id: 'StreamEventRecord', description: 'One event a stream-mode invocation sent, with its time.' });

export const EmuInvocationEvents = z
  .object({
    invocation_id: z.string(),
    live: z.boolean(),
    truncated: z.boolean().meta({ description: 'More than 10 000 chunks: the rest were sent but not kept.' }),
    data: z.array(StreamEventRecord),
  })
  .meta({ id: 'EmuInvocationEvents' });
