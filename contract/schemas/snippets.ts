import { z } from 'zod';
import { limitField, ResourceName, Runtime, Timestamp } from './common';

/** Snippets, their versions and the environments they are deployed to (`/v1/snippets`, `/v1/environments`). */

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

/** A segment: not `.`, `..` or `__proto__`, no `/`, backslash or NUL (BundlePath's rule, as a pattern for the document). */
const BUNDLE_SEGMENT = String.raw`(?!\.\.?(?:/|$))(?!__proto__(?:/|$))[^/\\\x00]+`;
const BUNDLE_PATH_RE = new RegExp(`^${BUNDLE_SEGMENT}(?:/${BUNDLE_SEGMENT})*$`);

const BundlePath = z
  .string()
  .min(1)
  .max(255)
  .regex(BUNDLE_PATH_RE, 'must be a relative path without "..", ".", "__proto__" or empty segments');

export const CreateVersion = z
  .object({
    code: z.string().optional().meta({ description: 'The whole snippet as one file.' }),
    files: z
      .preprocess(
        (value, ctx) => {
          // zod skips a `__proto__` key of a record without a word; a file must never vanish silently.
          if (value && typeof value === 'object' && Object.hasOwn(value, '__proto__')) {
            ctx.addIssue({ code: 'custom', message: 'key "__proto__" is not a valid file path', input: value });
          }
          return value;
        },
        z
          .record(BundlePath, z.string())
          .refine((files) => Object.keys(files).length >= 1, 'must hold at least one file')
          .refine((files) => Object.keys(files).length <= BUNDLE_MAX_FILES, `must hold at most ${BUNDLE_MAX_FILES} files`),
      )
      .optional()
      .meta({
        description: `A multi-file bundle: relative path → content (1 to ${BUNDLE_MAX_FILES} files, 1 MiB in all).`,
        minProperties: 1,
        maxProperties: BUNDLE_MAX_FILES,
      }),
    entrypoint: BundlePath.optional().meta({
      description: 'The file that exports the handler (default index.ts / main.py).',
    }),
    timeout_ms: Limits.timeout_ms.optional(),
    max_memory_mb: Limits.max_memory_mb.optional(),
    max_cpu_percent: Limits.max_cpu_percent.optional(),
  })
  .strict()
  // A version is `code` or `files`, never both and never neither: checked here, and said in the document by `oneOf`.
  .superRefine((v, ctx) => {
    if (v.code !== undefined && v.files !== undefined)
      ctx.addIssue({ code: 'custom', path: [], message: 'give either code or files, not both' });
    if (v.code === undefined && v.files === undefined) {
      ctx.addIssue({ code: 'custom', path: ['code'], message: 'is required (or files, for a multi-file bundle)' });
    }
  })
  .meta({
    id: 'CreateVersion',
    description: 'A version: `code` (one file) or `files` (a bundle), never both.',
    oneOf: [{ required: ['code'] }, { required: ['files'] }],
  });
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
export const Environment = z.object({ name: z.string(), builtin: z.boolean(), created_at: Timestamp }).meta({ id: 'Environment' });
/** The highest version number: nine digits, as a version in a path or query allows (contract/schemas/common.ts). */
export const VERSION_MAX = 999_999_999;

export const Deploy = z
  .object({
    version: z
      .number({ error: 'must be an integer' })
      .int('must be an integer')
      .min(1, 'must be at least 1')
      .max(VERSION_MAX, `must be at most ${VERSION_MAX}`),
  })
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
