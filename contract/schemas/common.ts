import { z } from 'zod';

/**
 * The shapes every part of the wire shares: names, primitives, problems and pages. Requests are
 * validated with these schemas and the OpenAPI document is generated from them (contract/openapi.ts), so
 * the two cannot drift.
 */

// ---- names and primitives -------------------------------------------------------------------------

export const NAME_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const SECRET_NAME_RE = /^[A-Z_][A-Z0-9_]*$/;
export const STORE_KEY_RE = /^[\x21-\x7e]{1,512}$/;

export const ResourceName = z
  .string()
  .regex(NAME_RE, 'must be 1–63 characters of a-z, 0-9 and "-", starting with a letter or digit')
  .meta({ example: 'hello-world' });

export const SecretName = z
  .string()
  .max(128, 'must be at most 128 characters')
  .regex(SECRET_NAME_RE, 'must match [A-Z_][A-Z0-9_]* (an environment variable name)')
  .refine((n) => !n.startsWith('SVC_'), 'the prefix SVC_ is reserved for the service')
  .meta({ example: 'OPENAI_API_KEY', not: { pattern: '^SVC_' } });

export const StoreKey = z
  .string()
  .regex(STORE_KEY_RE, 'must be 1–512 printable ASCII characters without spaces')
  .meta({ example: 'counter:visits' });

export const Runtime = z.enum(['bun', 'python']).meta({ id: 'Runtime' });
export const Timestamp = z.string().meta({ format: 'date-time', example: '2026-11-21T10:00:00.000Z' });

export const limitField = (what: string, example: number) =>
  z
    .number({ error: 'must be an integer' })
    .int('must be an integer')
    .min(1, 'must be at least 1')
    .max(2_147_483_647, 'is too large')
    .meta({ description: what, example });

/** A version number in a path or query: 1, 2, 3, … */
export const VersionNumber = z
  .string()
  .regex(/^[1-9]\d{0,8}$/, 'must be a version number (1, 2, 3, …)')
  .transform(Number);

// ---- problems and lists ---------------------------------------------------------------------------

export const Problem = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().meta({ description: 'Stable, snake_case machine-readable code.' }),
    request_id: z.string(),
    errors: z
      .array(
        z.object({
          location: z.string(),
          message: z.string(),
          // Code that does not compile (server/services/snippets.ts) also says where.
          file: z.string().optional().meta({ description: 'The bundle file a compile error is in.' }),
          line: z.number().int().min(1).optional(),
          column: z.number().int().min(1).optional(),
        }),
      )
      .optional(),
  })
  .catchall(z.unknown())
  .meta({ id: 'Problem', description: 'RFC 9457 problem details (application/problem+json).' });

export const PageQuery = z.object({
  limit: z
    .string()
    .regex(/^(?:[1-9]\d{0,2}|1000)$/, 'must be an integer between 1 and 1000')
    .transform(Number)
    .optional()
    .meta({ description: 'Page size, 1–1000 (default 100).' }),
  cursor: z.string().max(1024).optional().meta({ description: 'The `next_cursor` of the previous page.' }),
});

export const page = <T extends z.ZodType>(item: T, id: string) =>
  z
    .object({ data: z.array(item), next_cursor: z.string().nullable() })
    .meta({ id, description: 'One page; pass `next_cursor` as `cursor` for the next (null on the last page).' });
