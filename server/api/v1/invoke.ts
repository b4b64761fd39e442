import { z } from 'zod';
import { defineRoute } from '../../http/route';
import { ApiError, badRequest } from '../../errors';
import { secretEquals } from '../../ids';
import { ok, problems } from '../common';
import { PageQuery, page } from '../schemas';
import type { Outcome } from '../../../executor';
import type { InvocationView } from '../../services/invocations';

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
    callback: z.object({ url: z.string(), status: z.string(), attempts: z.number().int() }).nullable(),
  })
  .meta({ id: 'Invocation' });

const runHeaders = (v: InvocationView) => ({
  'X-Invocation-Id': v.id,
  'X-Snippet-Version': String(v.version),
  'X-Snippet-Env': v.env ?? 'none',
});

export const invokeRoutes = [
  defineRoute({
    method: 'post', path: '/v1/invoke/{snippet}', auth: 'tenant', tag: 'Invoke', summary: 'Invoke a snippet',
    description:
      'Runs the snippet: `version` > `env` > what `prod` runs > the latest version. Mode by `X-Invoke-Mode` (absent = sync). A repeat with the same `Idempotency-Key` within 24 h answers the earlier invocation instead of running again. Sync success: 200 with the handler’s return value; failure: problem+json whose `code` is the outcome (handler_error 500, timeout 504, oom_killed 500, cancelled 409, failed 503). Headers X-Invocation-Id, X-Snippet-Version, X-Snippet-Env name the run.',
    params: InvokeParams, query: InvokeQuery,
    body: z.record(z.string(), z.unknown()).meta({ description: 'The handler’s input (a JSON object).' }),
    bodyOptional: true,
    responses: {
      200: ok('The handler’s return value (sync).'),
      ...problems(400, 401, 404, 413, 415, 422),
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
      if (mode !== 'sync') {
        throw new ApiError(501, 'not_implemented', 'Not implemented', `${mode} mode is not built into this emulator yet`);
      }
      const overrides = parseLimitOverrides(ctx.get('x-emu-limits'), ctx.get('x-emu-admin'), services.facts.adminToken);
      const idempotencyKey = ctx.get('idempotency-key') || null;
      if (idempotencyKey !== null && !/^[\x21-\x7e]{1,255}$/.test(idempotencyKey)) {
        throw badRequest('validation_failed', 'Idempotency-Key must be 1–255 printable ASCII characters without spaces', {
          errors: [{ location: 'header.idempotency-key', message: 'must be 1–255 printable ASCII characters' }],
        });
      }
      const { record } = await services.invoke.invoke({
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
      if (record.outcome === 'success') return { status: 200, body: view.output, headers: runHeaders(view) };
      const outcome = (record.outcome ?? 'failed') as Exclude<Outcome, 'success'>;
      throw new ApiError(
        OUTCOME_STATUS[outcome],
        outcome,
        OUTCOME_TITLE[outcome],
        view.error?.message ?? outcome,
        { invocation_id: view.id, ...(view.error?.stack ? { stack: view.error.stack } : {}) },
        runHeaders(view),
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
    method: 'post', path: '/v1/invocations/{id}/cancel', auth: 'tenant', tag: 'Invocations', summary: 'Cancel a running invocation',
    params: z.object({ id: z.string() }),
    responses: { 202: ok('Cancellation requested.', z.object({ id: z.string(), status: z.string() })), ...problems(401, 404, 409) },
    handler: ({ services, tenant, params }) => {
      if (!services.invoke.cancel(tenant, params.id)) throw new ApiError(409, 'conflict', 'Conflict', `invocation '${params.id}' is not running`);
      return { status: 202, body: { id: params.id, status: 'cancelling' } };
    },
  }),
];
