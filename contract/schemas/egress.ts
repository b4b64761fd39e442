import { z } from 'zod';

/**
 * The egress inspector and fault injection (emulator only): every outbound call a snippet made (through
 * the proxy or `integrations.call`), and rules that slow, fail, drop or hang them on purpose.
 */
/** What a fault rule does to a matching call. */
export const FaultAction = z.discriminatedUnion('type', [
  z.object({ type: z.literal('latency'), ms: z.number().int().min(1).max(600_000) }).strict(),
  z.object({ type: z.literal('status'), status: z.number().int().min(400).max(599), body: z.string().max(65_536).optional() }).strict(),
  z.object({ type: z.literal('drop') }).strict(),
  z.object({ type: z.literal('timeout') }).strict(),
]);

export const NewFaultRule = z
  .object({
    /** Exact host (case-insensitive) or `*.example.com` for its subdomains. */
    host: z.string().min(1).max(253).optional(),
    /** An integration's name: its calls (made by the core) match. */
    integration: z.string().min(1).max(63).optional(),
    action: FaultAction,
    /** For this many matching calls, then the rule goes (null: until deleted). */
    times: z.number().int().min(1).nullable().default(null),
  })
  .strict()
  .refine((r) => r.host !== undefined || r.integration !== undefined, { message: 'name a host or an integration to match', path: ['host'] })
  // The refine, said in the document too (a refine has no JSON Schema of its own).
  .meta({ id: 'NewFaultRule', anyOf: [{ required: ['host'] }, { required: ['integration'] }] });

export type FaultAction = z.infer<typeof FaultAction>;
export type NewFaultRule = z.infer<typeof NewFaultRule>;
export const EgressEntry = z
  .object({
    id: z.number().int(),
    at: z.string(),
    source: z.enum(['snippet', 'integration']),
    tenant: z.string().nullable(),
    invocation_id: z.string().nullable(),
    integration: z.string().nullable(),
    method: z.string(),
    host: z.string(),
    port: z.number().int(),
    path: z.string().nullable(),
    status: z.number().int().nullable(),
    bytes_out: z.number().int(),
    bytes_in: z.number().int(),
    duration_ms: z.number(),
    fault: z.string().nullable(),
    refused: z.string().nullable(),
    error: z.string().nullable(),
  })
  .meta({ id: 'EgressEntry' });

export const FaultRule = z
  .object({
    id: z.string(),
    host: z.string().optional(),
    integration: z.string().optional(),
    action: z.record(z.string(), z.unknown()),
    times: z.number().int().nullable(),
    hits: z.number().int(),
    created_at: z.string(),
  })
  .meta({ id: 'FaultRule' });
