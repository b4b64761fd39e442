import { z } from 'zod';
import { defineOperation } from '../operation';
import { noContent, ok, problems } from '../responses';
import { InboxDelivery, InboxParams, InboxReceipt, InboxResponse, InboxSummary } from '../schemas/inbox';

/**
 * The callback inbox (emulator only): `POST /_emu/inbox/{name}` is a webhook receiver anyone on this
 * machine may call (it is what a `callback_url` points at); reading, clearing and choosing its answer
 * take the admin token.
 */

export const inboxReceive = defineOperation({
  operationId: 'inboxReceive',
  method: 'post',
  path: '/_emu/inbox/{name}',
  auth: 'none',
  tag: 'Emulator',
  summary: 'The callback inbox: records a delivery and answers with the chosen status',
  description:
    'Point a `callback_url` here. Any body is accepted (6 MiB at most; the first 256 KiB is kept). The answer is `?status=NNN` when given, else the status chosen with `PUT /_emu/inbox/{name}/response`, else 200.',
  params: InboxParams,
  query: z.object({
    status: z
      .string()
      .regex(/^[2-5]\d\d$/, 'must be an HTTP status, 200–599')
      .transform(Number)
      .optional(),
  }),
  responses: {
    200: ok('Recorded.', InboxReceipt),
    204: { description: 'Recorded, answered 204 as chosen (`?status=204` or the inbox’s chosen answer): no body, as HTTP requires.' },
    ...problems(413, 422),
  },
  defaultResponse: ok(
    'Recorded, answered with the chosen status (`?status=`, or `PUT /_emu/inbox/{name}/response`), with `Retry-After` when one was chosen.',
    InboxReceipt,
    z.object({ 'retry-after': z.string().optional().meta({ description: 'Seconds, when a Retry-After was chosen.' }) }),
  ),
});

export const emuListInboxes = defineOperation({
  operationId: 'emuListInboxes',
  method: 'get',
  path: '/_emu/inbox',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'List the callback inboxes',
  responses: {
    200: ok('Every inbox that has deliveries or a chosen answer.', z.object({ data: z.array(InboxSummary) })),
    ...problems(401),
  },
});

export const emuGetInbox = defineOperation({
  operationId: 'emuGetInbox',
  method: 'get',
  path: '/_emu/inbox/{name}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'An inbox’s deliveries, newest first, with whether each signature verifies',
  params: InboxParams,
  responses: {
    200: ok('The deliveries (the last 200).', z.object({ name: z.string(), response: InboxResponse, data: z.array(InboxDelivery) })),
    ...problems(401, 422),
  },
});

export const emuClearInbox = defineOperation({
  operationId: 'emuClearInbox',
  method: 'delete',
  path: '/_emu/inbox/{name}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Clear an inbox',
  params: InboxParams,
  responses: { 204: noContent, ...problems(401, 422) },
});

export const emuSetInboxResponse = defineOperation({
  operationId: 'emuSetInboxResponse',
  method: 'put',
  path: '/_emu/inbox/{name}/response',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Choose what the inbox answers (to rehearse retries)',
  description:
    'e.g. `{"status": 500, "times": 2}`: the next two deliveries get a 500, then 200 again. `{"status": 410}` stops the retries.',
  params: InboxParams,
  body: InboxResponse,
  responses: { 200: ok('The answer now.', InboxResponse), ...problems(400, 401, 415, 422) },
});
