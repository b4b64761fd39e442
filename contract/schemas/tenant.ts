import { z } from 'zod';
import { SecretName, Timestamp } from './common';
import { jsonValueDepth, VALUE_MAX_DEPTH } from './json';

/** The tenant's own resources: caps, webhook secret, secrets, the store and integrations. */

const utf8 = new TextEncoder();
const utf8Bytes = (s: string) => utf8.encode(s).length;

// ---- tenant ---------------------------------------------------------------------------------------

export const RuntimeLimits = z
  .object({
    timeout_ms: z.number().int(),
    max_memory_mb: z.number().int(),
    max_cpu_percent: z.number().int(),
    max_concurrency: z.number().int().meta({ description: 'Invocations of the tenant running at once.' }),
  })
  .meta({ id: 'RuntimeLimits', description: 'Tenant caps: each bounds the version field of the same name.' });

export const WebhookSecret = z
  .object({ secret: z.string().meta({ example: 'whsec_…' }), created_at: Timestamp })
  .meta({ id: 'WebhookSecret' });

// ---- secrets --------------------------------------------------------------------------------------

export const SECRET_MAX_BYTES = 64 * 1024;
export const PutSecret = z
  .object({
    value: z
      .string({ error: 'must be a string' })
      .min(1, 'must not be empty')
      .refine((v) => utf8Bytes(v) <= SECRET_MAX_BYTES, 'must be at most 64 KiB')
      .refine((v) => !v.includes('\0'), 'must not contain NUL (it becomes an environment variable)')
      .meta({ pattern: '^[^\\u0000]*$' }), // the NUL refine, said in the document
  })
  .strict()
  .meta({ id: 'PutSecret' });
export const SecretInfo = z
  .object({ name: z.string(), created_at: Timestamp, updated_at: Timestamp })
  .meta({ id: 'SecretInfo', description: 'A secret, without its value (values are never returned).' });

// ---- store ----------------------------------------------------------------------------------------

export const STORE_VALUE_MAX_BYTES = 1024 * 1024;
/** Ten years: the longest TTL a store key may have (REST and snippets alike). */
export const STORE_TTL_MAX_SECONDS = 315_360_000;
// The pieces below are shared with the snippets' host calls (server/services/host-calls.ts): one definition
// for every way in. The value's size (STORE_VALUE_MAX_BYTES) is checked by StoreService.set itself.
export const StoreValue = z
  .unknown()
  .refine((v) => v !== undefined, 'is required (any JSON value)')
  .refine(
    (v) => jsonValueDepth(v, VALUE_MAX_DEPTH) <= VALUE_MAX_DEPTH,
    `must not nest arrays/objects deeper than ${VALUE_MAX_DEPTH} levels`,
  );
export const StoreTtlSeconds = z
  .number({ error: 'must be an integer' })
  .int('must be an integer')
  .min(1, 'must be at least 1')
  .max(STORE_TTL_MAX_SECONDS, 'must be at most 10 years (315360000 seconds)');
export const StorePrefix = z.string().max(512, 'must be at most 512 characters');
export const PutStoreValue = z
  .object({
    value: StoreValue,
    ttl_seconds: StoreTtlSeconds.nullable().optional(),
  })
  .strict()
  .meta({ id: 'PutStoreValue' });
export const StoreEntry = z
  .object({ key: z.string(), value: z.unknown(), expires_at: Timestamp.nullable(), updated_at: Timestamp })
  .meta({ id: 'StoreEntry' });
export const StoreKeyInfo = z
  .object({ key: z.string(), size: z.number().int(), expires_at: Timestamp.nullable(), updated_at: Timestamp })
  .meta({ id: 'StoreKeyInfo' });

// ---- integrations ---------------------------------------------------------------------------------

export const PROVIDERS = ['http', 'openai'] as const;
const HttpUrl = z
  .string()
  .max(2048)
  .regex(/^https?:\/\/[^\s/?#@[\]\\]+(?:[/?#]\S*)?$/i, 'must be an http(s) URL')
  .refine((u) => {
    try {
      const p = new URL(u).protocol;
      return p === 'http:' || p === 'https:';
    } catch {
      return false;
    }
  }, 'must be an http(s) URL');

export const PutIntegration = z
  .object({
    provider: z.enum(PROVIDERS),
    base_url: HttpUrl.optional(),
    auth: z
      .object({
        type: z.enum(['bearer', 'header', 'basic', 'none']),
        secret: SecretName.optional().meta({ description: 'Name of the tenant secret holding the credential.' }),
        header: z
          .string()
          .regex(/^[A-Za-z0-9-]{1,64}$/, 'must be an HTTP header name')
          .optional(),
      })
      .strict(),
  })
  .strict()
  .superRefine((v, ctx) => {
    if (v.auth.type !== 'none' && !v.auth.secret) {
      ctx.addIssue({ code: 'custom', path: ['auth', 'secret'], message: `is required for auth type ${v.auth.type}` });
    }
    if (v.auth.type === 'none' && v.auth.secret) {
      ctx.addIssue({ code: 'custom', path: ['auth', 'secret'], message: 'must be absent for auth type none' });
    }
    if (v.auth.type === 'header' && !v.auth.header) {
      ctx.addIssue({ code: 'custom', path: ['auth', 'header'], message: 'is required for auth type header' });
    }
    if (v.provider === 'http' && !v.base_url) {
      ctx.addIssue({ code: 'custom', path: ['base_url'], message: 'is required for provider http' });
    }
  })
  // The rules above, said in the document too.
  .meta({
    id: 'PutIntegration',
    allOf: [
      {
        if: { properties: { auth: { properties: { type: { const: 'none' } } } } },
        then: { properties: { auth: { not: { properties: { secret: {} }, required: ['secret'] } } } },
        else: { properties: { auth: { properties: { secret: {} }, required: ['secret'] } } },
      },
      {
        if: { properties: { auth: { properties: { type: { const: 'header' } } } } },
        then: { properties: { auth: { properties: { header: {} }, required: ['header'] } } },
      },
      { if: { properties: { provider: { const: 'http' } } }, then: { properties: { base_url: {} }, required: ['base_url'] } },
    ],
  });
export const Integration = z
  .object({
    name: z.string(),
    provider: z.string(),
    base_url: z.string().nullable(),
    auth: z.object({ type: z.string(), secret: z.string().nullable(), header: z.string().nullable() }),
    secret_present: z.boolean().meta({ description: 'Whether the named secret exists now.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Integration' });
