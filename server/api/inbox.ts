import { z } from 'zod';
import { defineRoute } from '../http/route';
import { readRawBody } from '../http/body';
import { ResourceName } from './schemas';
import { noContent, ok, problems } from './common';

/**
 * The callback inbox (emulator only): `POST /_emu/inbox/{name}` is a webhook receiver anyone on this
 * machine may call (it is what a `callback_url` points at); reading, clearing and choosing its answer
 * take the admin token.
 */
const InboxParams = z.object({ name: ResourceName });

const InboxResponse = z
  .object({
    status: z.number().int().min(200).max(599).meta({ description: 'The HTTP status the inbox answers with.' }),
    times: z.number().int().min(1).nullable().default(null).meta({ description: 'For this many deliveries, then back to 200 (null: until changed).' }),
    retry_after_seconds: z.number().int().min(0).max(86_400).nullable().default(null).meta({ description: 'Sent as Retry-After with a non-2xx answer.' }),
  })
  .strict()
  .meta({ id: 'InboxResponse' });

const InboxDelivery = z
  .object({
    id: z.string(),
    received_at: z.string(),
    method: z.string(),
    query: z.string(),
    headers: z.record(z.string(), z.string()),
    body: z.string(),
    body_truncated: z.boolean(),
    json: z.unknown(),
    signature: z.object({
      verified: z.boolean(),
      tenant: z.string().nullable(),
      timestamp_ok: z.boolean(),
      reason: z.string().nullable(),
    }),
    answered: z.number().int(),
  })
  .meta({ id: 'InboxDelivery' });

const InboxSummary = z
  .object({ name: z.string(), deliveries: z.number().int(), last_received_at: z.string().nullable(), response: InboxResponse })
  .meta({ id: 'InboxSummary' });

export const inboxRoutes = [
  defineRoute({
    method: 'post', path: '/_emu/inbox/{name}', auth: 'none', tag: 'Emulator',
    summary: 'The callback inbox: records a delivery and answers with the chosen status',
    description:
      'Point a `callback_url` here. Any body is accepted (6 MiB at most; the first 256 KiB is kept). The answer is `?status=NNN` when given, else the status chosen with `PUT /_emu/inbox/{name}/response`, else 200.',
    params: InboxParams,
    query: z.object({ status: z.string().regex(/^[2-5]\d\d$/, 'must be an HTTP status, 200–599').transform(Number).optional() }),
    responses: { 200: ok('Recorded (or the chosen status).', z.object({ received: z.literal(true), id: z.string() })), ...problems(413, 422) },
    handler: async ({ services, params, query, ctx }) => {
      const body = await readRawBody(ctx);
      const { status, retryAfter, delivery } = await services.inbox.receive(params.name, {
        method: ctx.method,
        query: ctx.querystring,
        statusParam: query.status,
        headers: ctx.headers,
        body,
      });
      return {
        status,
        body: { received: true, id: delivery.id },
        headers: retryAfter !== null ? { 'Retry-After': String(retryAfter) } : undefined,
      };
    },
  }),
  defineRoute({
    method: 'get', path: '/_emu/inbox', auth: 'admin', tag: 'Emulator', summary: 'List the callback inboxes',
    responses: { 200: ok('Every inbox that has deliveries or a chosen answer.', z.object({ data: z.array(InboxSummary) })), ...problems(401) },
    handler: async ({ services }) => ({ status: 200, body: { data: await services.inbox.list() } }),
  }),
  defineRoute({
    method: 'get', path: '/_emu/inbox/{name}', auth: 'admin', tag: 'Emulator',
    summary: 'An inbox’s deliveries, newest first, with whether each signature verifies',
    params: InboxParams,
    responses: {
      200: ok('The deliveries (the last 200).', z.object({ name: z.string(), response: InboxResponse, data: z.array(InboxDelivery) })),
      ...problems(401, 422),
    },
    handler: async ({ services, params }) => ({
      status: 200,
      body: { name: params.name, response: services.inbox.response(params.name), data: await services.inbox.deliveries(params.name) },
    }),
  }),
  defineRoute({
    method: 'delete', path: '/_emu/inbox/{name}', auth: 'admin', tag: 'Emulator', summary: 'Clear an inbox',
    params: InboxParams,
    responses: { 204: noContent, ...problems(401, 422) },
    handler: async ({ services, params }) => {
      await services.inbox.clear(params.name);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'put', path: '/_emu/inbox/{name}/response', auth: 'admin', tag: 'Emulator',
    summary: 'Choose what the inbox answers (to rehearse retries)',
    description: 'e.g. `{"status": 500, "times": 2}`: the next two deliveries get a 500, then 200 again. `{"status": 410}` stops the retries.',
    params: InboxParams, body: InboxResponse,
    responses: { 200: ok('The answer now.', InboxResponse), ...problems(400, 401, 415, 422) },
    handler: ({ services, params, body }) => ({ status: 200, body: services.inbox.setResponse(params.name, body) }),
  }),
];
