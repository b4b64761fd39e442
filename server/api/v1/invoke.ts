import { z } from 'zod';
import { defineRoute } from '../../http/route';
import { ApiError, badRequest } from '../../errors';
import { secretEquals } from '../../ids';
import { ok, problems } from '../common';
import { PageQuery, page } from '../schemas';
import type { Outcome } from '../../../executor';
import { runHeaders, streamInvocation } from './stream';

/** Sync outcome → HTTP status (API.md). */
export const OUTCOME_STATUS: Record<Exclude<Outcome, 'success'>, number> = {
  handler_error: 500,
  timeout: 504,
  oom_killed: 500,
  cancelled: 409,
  failed: 503,
};
const OUTCOME_TITLE: Record<Exclude<Outcome, 'success'>, string> = {
  handler_error: 'The snippet failed',
  timeout: 'The snippet timed out',
  oom_killed: 'The snippet ran out of memory',
  cancelled: 'The invocation was cancelled',
  failed: 'The service failed to run the snippet',
};

const LIMIT_KEYS = ['timeout_ms', 'max_memory_mb', 'max_cpu_percent'] as const;

/** `X-Emu-Limits: timeout_ms=500,max_memory_mb=64` → overrides; only with the admin token in X-Emu-Admin. */
export function parseLimitOverrides(header: string, adminHeader: string, adminToken: string) {
  if (!header) return undefined;
  if (!adminHeader || !secretEquals(adminHeader, adminToken)) {
    throw new ApiError(403, 'forbidden', 'Forbidden', 'X-Emu-Limits is an emulator power: send the admin token as X-Emu-Admin too');
  }
  const out: Partial<Record<(typeof LIMIT_KEYS)[number], number>> = {};
  for (const part of header.split(',')) {
    const m = /^\s*([a-z_]+)\s*=\s*(\d{1,9})\s*$/.exec(part);
    const key = m?.[1] as (typeof LIMIT_KEYS)[number] | undefined;
    if (!m || !key || !LIMIT_KEYS.includes(key) || Number(m[2]) < 1) {
      throw badRequest('validation_failed', `X-Emu-Limits: '${part.trim()}' is not name=value with name one of ${LIMIT_KEYS.join(', ')} and value ≥ 1`, {
        errors: [{ location: 'header.x-emu-limits', message: 'must look like timeout_ms=500,max_memory_mb=64' }],
      });
    }
    out[key] = Number(m[2]);
  }
  return out;
}

const InvokeParams = z.object({ snippet: z.string().meta({ description: 'Snippet name (or id).' }) });
const InvokeQuery = z.object({
  env: z.string().max(63).optional().meta({ description: 'Environment whose deployment runs.' }),
  version: z
    .string()
    .regex(/^[1-9]\d{0,8}$/, 'must be a version number (1, 2, 3, …)')
    .transform(Number)
    .optional()
    .meta({ description: 'Explicit version (wins over env).' }),
});

const CallbackInfo = z
  .object({
    url: z.string(),
    status: z.enum(['pending', 'delivered', 'failed']).meta({
      description: 'pending: waiting for the run to end or for the next attempt; delivered: a 2xx came back; failed: the retries ran out, 410 Gone, or the target was refused.',
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
    status: z.enum(['queued', 'running', 'succeeded', 'failed']),
    outcome: z.enum(['success', 'handler_error', 'timeout', 'oom_killed', 'cancelled', 'failed']).nullable(),
    output: z.unknown(),
    error: z.object({ code: z.string(), message: z.string(), stack: z.string().optional() }).nullable(),
    usage: z
      .object({ duration_ms: z.number(), init_ms: z.number(), cpu_ms: z.number(), cpu_throttled_ms: z.number(), peak_memory_mb: z.number() })
      .nullable(),
    limits: z.object({ timeout_ms: z.number().int(), max_memory_mb: z.number().int(), max_cpu_percent: z.number().int() }),
    parity: z.object({ status: z.enum(['full', 'degraded']), reasons: z.array(z.string()) }),
    created_at: z.string(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
    attempts: z.number().int().meta({ description: 'Runs started: an async job interrupted by a crash of the service runs again (at-least-once), so 2 or more means it may have run twice.' }),
    callback: CallbackInfo.nullable(),
    parity_warnings: z.array(z.string()).meta({ description: 'Where production would behave differently (emulator only).' }),
  })
  .meta({ id: 'Invocation' });

const Queued = z
  .object({
    invocation_id: z.string(),
    status: z.enum(['queued', 'running', 'succeeded', 'failed']),
    status_url: z.string().meta({ description: 'Where the invocation can be read: `/v1/invocations/{id}`.' }),
  })
  .meta({ id: 'QueuedInvocation' });


export const invokeRoutes = [
  defineRoute({
    method: 'post', path: '/v1/invoke/{snippet}', auth: 'tenant', tag: 'Invoke', summary: 'Invoke a snippet',
    description:
      'Runs the snippet: `version` > `env` > what `prod` runs > the latest version. Mode by `X-Invoke-Mode` (absent = sync). A repeat with the same `Idempotency-Key` within 24 h answers the earlier invocation instead of running again. Sync success: 200 with the handler’s return value; failure: problem+json whose `code` is the outcome (handler_error 500, timeout 504, oom_killed 500, cancelled 409, failed 503). Stream (`X-Invoke-Mode: stream`): server-sent events, flushed as the handler yields; a client that disconnects cancels the run. Async (`X-Invoke-Mode: async`): 202 once the job is stored durably; `callback_url` (taken out of the input) receives the finished record, signed per Standard Webhooks; a callback target production would refuse is a 422 `callback_url_refused` under the emulator’s production egress profile. A replay answers with `Idempotent-Replayed: true`. Headers X-Invocation-Id, X-Snippet-Version, X-Snippet-Env name the run.',
    params: InvokeParams, query: InvokeQuery,
    body: z.record(z.string(), z.unknown()).meta({ description: 'The handler’s input (a JSON object).' }),
    bodyOptional: true,
    responses: {
      200: ok('Sync: the handler’s return value. Stream: `text/event-stream` — `start`, a `chunk` per yielded value, then `result` or `error`, each with an increasing `id:`; `: ping` comments at least every 15 s.'),
      202: ok('Queued (async): stored durably before this answer. `Location` names the invocation.', Queued),
      ...problems(400, 401, 404, 409, 413, 415, 422),
      429: ok('The tenant’s max_concurrency is reached; see Retry-After.'),
      500: ok('handler_error or oom_killed (problem+json with invocation_id).'),
      504: ok('timeout (problem+json with invocation_id).'),
    },
    handler: async ({ services, tenant, params, query, body, ctx }) => {
      // API.md: absent = sync; `async` or `stream`; anything else (`sync` included) → 400.
      const modeHeader = ctx.get('x-invoke-mode');
      const mode = modeHeader === '' ? 'sync' : modeHeader;
      if (modeHeader === 'sync' || (mode !== 'sync' && mode !== 'async' && mode !== 'stream')) {
        throw badRequest('validation_failed', `X-Invoke-Mode must be absent, "async" or "stream", not "${modeHeader}"`, {
          errors: [{ location: 'header.x-invoke-mode', message: 'must be async or stream (absent = sync)' }],
        });
      }
      const overrides = parseLimitOverrides(ctx.get('x-emu-limits'), ctx.get('x-emu-admin'), services.facts.adminToken);
      const idempotencyKey = ctx.get('idempotency-key') || null;
      if (idempotencyKey !== null && !/^[\x21-\x7e]{1,255}$/.test(idempotencyKey)) {
        throw badRequest('validation_failed', 'Idempotency-Key must be 1–255 printable ASCII characters without spaces', {
          errors: [{ location: 'header.idempotency-key', message: 'must be 1–255 printable ASCII characters' }],
        });
      }
      if (mode === 'stream') {
        return streamInvocation(services, ctx, { tenant, snippet: params.snippet, env: query.env, version: query.version, input: body, overrides, idempotencyKey });
      }
      if (mode === 'async') {
        // API.md: `callback_url` is taken out of the input in async mode.
        const { callback_url: callbackUrl, ...input } = body;
        const { record, replayed } = await services.async.submit({
          tenant,
          snippet: params.snippet,
          env: query.env,
          version: query.version,
          input,
          overrides,
          idempotencyKey,
          callbackUrl,
        });
        const statusUrl = `/v1/invocations/${record.id}`;
        return {
          status: 202,
          body: { invocation_id: record.id, status: record.status, status_url: statusUrl },
          headers: { Location: statusUrl, ...runHeaders(record), ...(replayed ? { 'Idempotent-Replayed': 'true' } : {}) },
        };
      }
      const { record, replayed } = await services.invoke.invoke({
        idempotencyKey,
        tenant,
        snippet: params.snippet,
        env: query.env,
        version: query.version,
        input: body,
        mode: 'sync',
        overrides,
      });
      const view = await services.invocations.view(record);
      const headers = { ...runHeaders(record), ...(replayed ? { 'Idempotent-Replayed': 'true' } : {}) };
      if (record.outcome === 'success') return { status: 200, body: view.output, headers };
      const outcome = (record.outcome ?? 'failed') as Exclude<Outcome, 'success'>;
      throw new ApiError(
        OUTCOME_STATUS[outcome],
        outcome,
        OUTCOME_TITLE[outcome],
        view.error?.message ?? outcome,
        { invocation_id: view.id, ...(view.error?.stack ? { stack: view.error.stack } : {}) },
        headers,
      );
    },
  }),
  defineRoute({
    method: 'get', path: '/v1/invocations/{id}', auth: 'tenant', tag: 'Invocations', summary: 'Read an invocation',
    params: z.object({ id: z.string() }),
    responses: { 200: ok('The invocation.', Invocation), ...problems(401, 404) },
    handler: async ({ services, tenant, params }) => ({
      status: 200,
      body: await services.invocations.view(services.invocations.find(tenant, params.id)),
    }),
  }),
  defineRoute({
    method: 'get', path: '/v1/invocations', auth: 'tenant', tag: 'Invocations', summary: 'List invocations (newest first)',
    query: PageQuery.extend({
      snippet: z.string().max(64).optional().meta({ description: 'Only this snippet (name or id).' }),
      status: z.enum(['queued', 'running', 'succeeded', 'failed']).optional(),
    }),
    responses: { 200: ok('A page of invocations.', page(Invocation, 'InvocationPage')), ...problems(400, 401) },
    handler: async ({ services, tenant, query }) => ({
      status: 200,
      body: await services.invocations.list(tenant, { snippet: query.snippet, status: query.status }, query),
    }),
  }),
  defineRoute({
    method: 'get', path: '/v1/invocations/{id}/logs', auth: 'tenant', tag: 'Invocations',
    summary: "The snippet's stdout/stderr (capped at 1 MiB)",
    params: z.object({ id: z.string() }),
    responses: {
      200: ok('The logs.', z.object({ invocation_id: z.string(), logs: z.string(), truncated: z.boolean() })),
      ...problems(401, 404),
    },
    handler: async ({ services, tenant, params }) => ({
      status: 200,
      body: await services.invocations.logs(services.invocations.find(tenant, params.id)),
    }),
  }),
  defineRoute({
    method: 'post', path: '/v1/invocations/{id}/cancel', auth: 'tenant', tag: 'Invocations', summary: 'Cancel an invocation',
    description:
      'A queued async job never runs (`cancelled`: its outcome is `cancelled` at once); a running invocation is killed (`cancelling`: its outcome becomes `cancelled`). A finished one is a 409.',
    params: z.object({ id: z.string() }),
    responses: {
      202: ok('Cancelled, or being cancelled.', z.object({ id: z.string(), status: z.enum(['cancelled', 'cancelling']) })),
      ...problems(401, 404, 409),
    },
    handler: async ({ services, tenant, params }) => ({
      status: 202,
      body: { id: params.id, status: await services.async.cancel(tenant, params.id) },
    }),
  }),
  defineRoute({
    method: 'post', path: '/v1/invocations/{id}/callback/redeliver', auth: 'tenant', tag: 'Invocations',
    summary: 'Send the callback again now',
    description:
      'POSTs the invocation record to its `callback_url` once more, outside the retry schedule, with the same `webhook-id` (receivers deduplicate on it). 409 when the invocation has no callback or has not finished.',
    params: z.object({ id: z.string() }),
    responses: { 200: ok('The invocation after the attempt.', Invocation), ...problems(401, 404, 409) },
    handler: async ({ services, tenant, params }) => ({
      status: 200,
      body: await services.invocations.view(await services.callbacks.redeliver(tenant, params.id)),
    }),
  }),
];
