import { z } from 'zod';
import { ResourceName } from './common';

/**
 * The callback inbox (emulator only): `POST /_emu/inbox/{name}` is a webhook receiver anyone on this
 * machine may call (it is what a `callback_url` points at); reading, clearing and choosing its answer
 * take the admin token.
 */
export const InboxParams = z.object({ name: ResourceName });

export const InboxResponse = z
  .object({
    status: z.number().int().min(200).max(599).meta({ description: 'The HTTP status the inbox answers with.' }),
    times: z
      .number()
      .int()
      .min(1)
      .nullable()
      .default(null)
      .meta({ description: 'For this many deliveries, then back to 200 (null: until changed).' }),
    retry_after_seconds: z
      .number()
      .int()
      .min(0)
      .max(86_400)
      .nullable()
      .default(null)
      .meta({ description: 'Sent as Retry-After with a non-2xx answer.' }),
  })
  .strict()
  .meta({ id: 'InboxResponse' });

export const InboxDelivery = z
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

export const InboxSummary = z
  .object({ name: z.string(), deliveries: z.number().int(), last_received_at: z.string().nullable(), response: InboxResponse })
  .meta({ id: 'InboxSummary' });

export const InboxReceipt = z.object({ received: z.literal(true), id: z.string() }).meta({ id: 'InboxReceipt' });
