import { z } from 'zod';

/**
 * Response headers, as zod objects keyed by their lower-case names. `X-Request-Id` is on every answer
 * (the generator adds it to each response); the rest are where their operation declares them.
 */
export const RequestIdHeader = z.object({
  'x-request-id': z.string().meta({ description: 'This request’s id, also in the problem body and the emulator’s log.' }),
});

/** The headers naming the run, on every invoke response that ran (or replayed) one. */
export const RunHeaders = z.object({
  'x-invocation-id': z.string().meta({ description: 'The invocation’s id (`inv_…`).' }),
  'x-snippet-version': z.string().meta({ description: 'The version that ran.' }),
  'x-snippet-env': z.string().meta({ description: 'The environment whose deployment ran, or `none`.' }),
  'idempotent-replayed': z.literal('true').optional().meta({ description: 'Present on an `Idempotency-Key` replay.' }),
});

export const QueuedHeaders = RunHeaders.extend({
  location: z.string().meta({ description: 'The invocation: `/v1/invocations/{id}`.' }),
});

export const RetryAfterHeaders = z.object({
  'retry-after': z.string().meta({ description: 'Seconds to wait before trying again.' }),
});

export const WwwAuthenticateHeaders = z.object({
  'www-authenticate': z.literal('Bearer').meta({ description: 'The scheme to authenticate with.' }),
});

export const AllowHeaders = z.object({
  allow: z.string().meta({ description: 'The methods the path allows.' }),
});
