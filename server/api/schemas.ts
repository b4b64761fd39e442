import { z } from 'zod';

/**
 * The wire schemas of the public contract (API.md). Requests are validated with them and the OpenAPI
 * document is generated from them, so the two cannot drift.
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
  .meta({ example: 'OPENAI_API_KEY' });

export const StoreKey = z
  .string()
  .regex(STORE_KEY_RE, 'must be 1–512 printable ASCII characters without spaces')
  .meta({ example: 'counter:visits' });

export const Runtime = z.enum(['bun', 'python']).meta({ id: 'Runtime' });
export const Timestamp = z.string().meta({ format: 'date-time', example: '2026-11-21T10:00:00.000Z' });

const limitField = (what: string, example: number) =>
  z
    .number({ error: 'must be an integer' })
    .int('must be an integer')
    .min(1, 'must be at least 1')
    .max(2_147_483_647, 'is too large')
    .meta({ description: what, example });

// ---- problems and lists ---------------------------------------------------------------------------

export const Problem = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().meta({ description: 'Stable, snake_case machine-readable code.' }),
    request_id: z.string(),
    errors: z.array(z.object({ location: z.string(), message: z.string() })).optional(),
  })
  .catchall(z.unknown())
  .meta({ id: 'Problem', description: 'RFC 9457 problem details (application/problem+json).' });

export const PageQuery = z.object({
  limit: z
    .string()
    .regex(/^\d{1,4}$/, 'must be an integer between 1 and 1000')
    .transform(Number)
    .refine((n) => n >= 1 && n <= 1000, 'must be an integer between 1 and 1000')
    .optional()
    .meta({ description: 'Page size, 1–1000 (default 100).' }),
  cursor: z.string().max(1024).optional().meta({ description: 'The `next_cursor` of the previous page.' }),
});

export const page = <T extends z.ZodType>(item: T, id: string) =>
  z
    .object({ data: z.array(item), next_cursor: z.string().nullable() })
    .meta({ id, description: 'One page; pass `next_cursor` as `cursor` for the next (null on the last page).' });

// ---- snippets and versions ------------------------------------------------------------------------

export const CreateSnippet = z
  .object({
    name: ResourceName,
    runtime: Runtime,
    description: z.string().max(1000, 'must be at most 1000 characters').optional(),
  })
  .strict()
  .meta({ id: 'CreateSnippet' });

export const Snippet = z
  .object({
    id: z.string().meta({ example: 'snp_0Fz3kq9XbY2mN4pL8rT1' }),
    name: z.string(),
    runtime: Runtime,
    description: z.string(),
    latest_version: z.number().int().nullable(),
    deployments: z.record(z.string(), z.number().int()).meta({ description: 'Environment name → deployed version.' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Snippet' });

export const Limits = {
  timeout_ms: limitField('Wall-clock limit of one run, in milliseconds (default 60000).', 60000),
  max_memory_mb: limitField('Memory limit of the sandbox, in megabytes (default 200).', 200),
  max_cpu_percent: limitField('CPU cap, in percent of one CPU (default 10 = 0.1 vCPU).', 10),
};

export const BUNDLE_MAX_BYTES = 1024 * 1024;
export const BUNDLE_MAX_FILES = 200;

const BundlePath = z
  .string()
  .min(1)
  .max(255)
  .refine(
    (p) =>
      !p.startsWith('/') &&
      !p.includes('\\') &&
      !p.includes('\0') &&
      p.split('/').every((s) => s !== '' && s !== '.' && s !== '..' && s !== '__proto__'),
    'must be a relative path without "..", ".", "__proto__" or empty segments',
  );

export const CreateVersion = z
  .object({
    code: z.string().optional().meta({ description: 'The whole snippet as one file.' }),
    files: z
      .preprocess((value, ctx) => {
        // zod skips a `__proto__` key of a record without a word; a file must never vanish silently.
        if (value && typeof value === 'object' && Object.hasOwn(value, '__proto__')) {
          ctx.addIssue({ code: 'custom', message: 'key "__proto__" is not a valid file path', input: value });
        }
        return value;
      }, z.record(BundlePath, z.string()))
      .optional()
      .meta({ description: 'A multi-file bundle: relative path → content (1 MiB in all).' }),
    entrypoint: BundlePath.optional().meta({
      description: 'The file that exports the handler (default index.ts / main.py).',
    }),
    timeout_ms: Limits.timeout_ms.optional(),
    max_memory_mb: Limits.max_memory_mb.optional(),
    max_cpu_percent: Limits.max_cpu_percent.optional(),
  })
  .strict()
  .meta({ id: 'CreateVersion' });
export type CreateVersion = z.infer<typeof CreateVersion>;

export const FileManifestEntry = z.object({ path: z.string(), size: z.number().int(), sha256: z.string() });

export const Version = z
  .object({
    snippet: z.string(),
    snippet_id: z.string(),
    version: z.number().int().meta({ example: 3 }),
    runtime: Runtime,
    entrypoint: z.string(),
    manifest: z.array(FileManifestEntry),
    sha256: z.string().meta({ description: 'Digest of the whole bundle.' }),
    size_bytes: z.number().int(),
    timeout_ms: z.number().int(),
    max_memory_mb: z.number().int(),
    max_cpu_percent: z.number().int(),
    source: z.enum(['api', 'workspace']),
    created_at: Timestamp,
    files: z.record(z.string(), z.string()).optional().meta({ description: 'Contents; only on the single-version read.' }),
  })
  .meta({ id: 'Version' });

// ---- environments ---------------------------------------------------------------------------------

export const CreateEnvironment = z.object({ name: ResourceName }).strict().meta({ id: 'CreateEnvironment' });
export const Environment = z
  .object({ name: z.string(), builtin: z.boolean(), created_at: Timestamp })
  .meta({ id: 'Environment' });
export const Deploy = z
  .object({ version: z.number({ error: 'must be an integer' }).int('must be an integer').min(1, 'must be at least 1') })
  .strict()
  .meta({ id: 'Deploy' });
export const Deployment = z
  .object({
    env: z.string(),
    version: z.number().int().nullable(),
    previous_version: z.number().int().nullable(),
    deployed_at: Timestamp.nullable(),
  })
  .meta({ id: 'Deployment' });

// ---- tenant ---------------------------------------------------------------------------------------

export const RuntimeLimits = z
  .object({
    timeout_ms: z.number().int(),
    max_memory_mb: z.number().int(),
    max_cpu_percent: z.number().int(),
    max_concurrency: z.number().int().meta({ description: "Invocations of the tenant running at once." }),
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
      .refine((v) => Buffer.byteLength(v) <= SECRET_MAX_BYTES, 'must be at most 64 KiB')
      .refine((v) => !v.includes('\0'), 'must not contain NUL (it becomes an environment variable)'),
  })
  .strict()
  .meta({ id: 'PutSecret' });
export const SecretInfo = z
  .object({ name: z.string(), created_at: Timestamp, updated_at: Timestamp })
  .meta({ id: 'SecretInfo', description: 'A secret, without its value (values are never returned).' });

// ---- store ----------------------------------------------------------------------------------------

export const STORE_VALUE_MAX_BYTES = 1024 * 1024;
export const PutStoreValue = z
  .object({
    value: z.unknown().refine((v) => v !== undefined, 'is required (any JSON value)'),
    ttl_seconds: z
      .number({ error: 'must be an integer' })
      .int('must be an integer')
      .min(1, 'must be at least 1')
      .max(315_360_000, 'must be at most 10 years')
      .nullable()
      .optional(),
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
  .meta({ id: 'PutIntegration' });
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

// ---- operator surface (/_emu) ---------------------------------------------------------------------

export const CreateTenant = z.object({ name: ResourceName }).strict().meta({ id: 'CreateTenant' });
export const CapsPatch = z
  .object({
    timeout_ms: limitField('Cap for timeout_ms.', 900000).optional(),
    max_memory_mb: limitField('Cap for max_memory_mb.', 2048).optional(),
    max_cpu_percent: limitField('Cap for max_cpu_percent.', 100).optional(),
    max_concurrency: limitField('Invocations running at once.', 10).optional(),
  })
  .strict()
  .meta({ id: 'CapsPatch' });
export const TenantInfo = z
  .object({
    id: z.string(),
    name: z.string(),
    caps: RuntimeLimits,
    keys: z.array(z.object({ id: z.string(), prefix: z.string(), created_at: Timestamp })),
    created_at: Timestamp,
  })
  .meta({ id: 'TenantInfo' });
export const CreatedKey = z
  .object({ id: z.string(), tenant: z.string(), key: z.string(), prefix: z.string(), created_at: Timestamp })
  .meta({ id: 'CreatedKey', description: 'The key is shown this once; only its hash is kept.' });
