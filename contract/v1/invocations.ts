import { z } from 'zod';
import { defineOperation } from '../operation';
import { ok, problem, problems, sse } from '../responses';
import { page } from '../schemas/common';
import {
  CancelResult,
  Invocation,
  InvocationId,
  InvocationListQuery,
  InvocationLogs,
  InvokeHeaders,
  InvokeParams,
  InvokeQuery,
  Queued,
  STREAM_EVENTS,
} from '../schemas/invocations';
import { QueuedHeaders, RetryAfterHeaders, RunHeaders } from '../headers';

/** Invoking a snippet and reading its invocations (`/v1/invoke`, `/v1/invocations`). */

export const invoke = defineOperation({
  operationId: 'invoke',
  method: 'post',
  path: '/v1/invoke/{snippet}',
  auth: 'tenant',
  tag: 'Invoke',
  summary: 'Invoke a snippet',
  description:
    'Runs the snippet: `version` > `env` > what `prod` runs > the latest version. Mode by `X-Invoke-Mode` (absent = sync). A repeat with the same `Idempotency-Key` within 24 h answers the earlier invocation instead of running again. Sync success: 200 with the handler’s return value; failure: problem+json whose `code` is the outcome (handler_error 500, timeout 504, oom_killed 500, cancelled 409, failed 503). Stream (`X-Invoke-Mode: stream`): server-sent events, flushed as the handler yields; a client that disconnects cancels the run. Async (`X-Invoke-Mode: async`): 202 once the job is stored durably; `callback_url` (taken out of the input) receives the finished record, signed per Standard Webhooks; a callback target production would refuse is a 422 `callback_url_refused` under the emulator’s production egress profile. A replay answers with `Idempotent-Replayed: true`. Headers X-Invocation-Id, X-Snippet-Version, X-Snippet-Env name the run.',
  params: InvokeParams,
  query: InvokeQuery,
  headers: InvokeHeaders,
  body: z.record(z.string(), z.unknown()).meta({ description: 'The handler’s input (a JSON object).' }),
  bodyOptional: true,
  responses: {
    200: {
      ...ok('Sync: the handler’s return value (any JSON).', z.unknown().meta({ description: 'The handler’s return value.' }), RunHeaders),
      alternatives: {
        'text/event-stream': sse(
          'Stream: `start`, a `chunk` per yielded value, then `result` or `error`, each with an increasing `id:`; `: ping` comments at least every 15 s.',
          STREAM_EVENTS,
        ),
      },
    },
    202: ok('Queued (async): stored durably before this answer. `Location` names the invocation.', Queued, QueuedHeaders),
    400: problem(
      400,
      ['validation_failed', 'malformed_json'],
      'Malformed request: bad JSON, query, path or header (`X-Invoke-Mode`, `Idempotency-Key`, `X-Emu-Limits`, `X-Emu-Debug`); `X-Emu-Debug` with an `Idempotency-Key`.',
    ),
    ...problems(401),
    403: problem(
      403,
      ['forbidden'],
      '`X-Emu-Limits`, `X-Emu-Egress-Mode`, `X-Emu-Cassette` or `X-Emu-Debug` without the admin token in `X-Emu-Admin`.',
    ),
    404: problem(404, ['not_found'], 'No such snippet, environment, deployment or version.'),
    409: problem(
      409,
      ['conflict', 'cancelled'],
      '`conflict`: the invocation with this `Idempotency-Key` is still running. `cancelled` (sync): the run was cancelled.',
      RunHeaders.partial(),
    ),
    ...problems(413, 415),
    422: problem(
      422,
      ['validation_failed', 'limit_exceeds_tenant_cap', 'idempotency_key_reused', 'callback_url_refused'],
      'Validation failed; an `Idempotency-Key` used for another snippet; a `callback_url` refused (async).',
    ),
    429: problem(429, ['rate_limited'], 'The tenant’s max_concurrency is reached; see Retry-After.', RetryAfterHeaders),
    500: problem(
      500,
      ['handler_error', 'oom_killed', 'internal'],
      'handler_error or oom_killed (with `invocation_id` and the run’s headers).',
      RunHeaders.partial(),
    ),
    503: problem(503, ['failed'], '`failed`: the service failed to run the snippet (with `invocation_id`).', RunHeaders.partial()),
    504: problem(504, ['timeout'], '`timeout` (with `invocation_id` and the run’s headers).', RunHeaders.partial()),
  },
});

export const getInvocation = defineOperation({
  operationId: 'getInvocation',
  method: 'get',
  path: '/v1/invocations/{id}',
  auth: 'tenant',
  tag: 'Invocations',
  summary: 'Read an invocation',
  params: InvocationId,
  responses: { 200: ok('The invocation.', Invocation), ...problems(401, 404) },
});

export const listInvocations = defineOperation({
  operationId: 'listInvocations',
  method: 'get',
  path: '/v1/invocations',
  auth: 'tenant',
  tag: 'Invocations',
  summary: 'List invocations (newest first)',
  query: InvocationListQuery,
  responses: { 200: ok('A page of invocations.', page(Invocation, 'InvocationPage')), ...problems(400, 401) },
});

export const getInvocationLogs = defineOperation({
  operationId: 'getInvocationLogs',
  method: 'get',
  path: '/v1/invocations/{id}/logs',
  auth: 'tenant',
  tag: 'Invocations',
  summary: "The snippet's stdout/stderr (capped at 1 MiB)",
  params: InvocationId,
  responses: {
    200: ok('The logs.', InvocationLogs),
    ...problems(401, 404),
  },
});

export const cancelInvocation = defineOperation({
  operationId: 'cancelInvocation',
  method: 'post',
  path: '/v1/invocations/{id}/cancel',
  auth: 'tenant',
  tag: 'Invocations',
  summary: 'Cancel an invocation',
  description:
    'A queued async job never runs (`cancelled`: its outcome is `cancelled` at once); a running invocation is killed (`cancelling`: its outcome becomes `cancelled`). A finished one is a 409.',
  params: InvocationId,
  responses: {
    202: ok('Cancelled, or being cancelled.', CancelResult),
    ...problems(401, 404, 409),
  },
});

export const redeliverCallback = defineOperation({
  operationId: 'redeliverCallback',
  method: 'post',
  path: '/v1/invocations/{id}/callback/redeliver',
  auth: 'tenant',
  tag: 'Invocations',
  summary: 'Send the callback again now',
  description:
    'POSTs the invocation record to its `callback_url` once more, outside the retry schedule, with the same `webhook-id` (receivers deduplicate on it). 409 when the invocation has no callback or has not finished.',
  params: InvocationId,
  responses: { 200: ok('The invocation after the attempt.', Invocation), ...problems(401, 404, 409) },
});
