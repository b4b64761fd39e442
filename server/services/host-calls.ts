import { z } from 'zod';
import { validationFailed } from '../domain/errors';
import { BODY_LIMIT_BYTES } from '../json-text';
import { jsonValueDepth, VALUE_MAX_DEPTH } from '../../contract/schemas/json';
import { fieldErrors } from './field-errors';
import { ResourceName, StoreKey } from '../../contract/schemas/common';
import { PutStoreValue, StorePrefix } from '../../contract/schemas/tenant';
import type { HostOp } from '../../executor';

/**
 * The arguments of the snippets' host calls (executor/protocol.ts), built from the schemas of the REST
 * routes that do the same thing, so a snippet and an HTTP client meet the same rules and caps:
 *   store.get / store.delete  {key}                    the `{key}` of GET/DELETE /v1/store/{key}
 *   store.set                 {key, value, ttl_seconds?} the body of PUT /v1/store/{key} (10-year TTL cap)
 *   store.list                {prefix?}                  the `prefix` of GET /v1/store
 *   integrations.call         {name, method, path, …}    `name` as in PUT /v1/integrations/{name}
 * Sizes that the services check themselves (a store value's 1 MiB) are checked there, for both paths.
 */

/** A header name (an HTTP token) and a value Node will send (no CR, LF or NUL). */
const HEADER_NAME_RE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$/;
const HEADER_VALUE_RE = /^[\t\x20-\x7e\x80-\uffff]{0,16384}$/;

/** A JSON value sent on somewhere: nested no deeper than a body's value, at most `maxBytes` as JSON. */
export function jsonValueProblem(value: unknown, maxBytes: number): string | null {
  if (jsonValueDepth(value, VALUE_MAX_DEPTH) > VALUE_MAX_DEPTH) return `nests arrays/objects deeper than ${VALUE_MAX_DEPTH} levels`;
  const json = JSON.stringify(value);
  const size = json === undefined ? 0 : Buffer.byteLength(json, 'utf8');
  return size > maxBytes ? `is ${size} bytes as JSON; at most ${maxBytes} are accepted` : null;
}

const Scalar = z.union([z.string().max(4096), z.number(), z.boolean()]);

export const IntegrationCallArgs = z
  .object({
    name: ResourceName,
    method: z.string().regex(/^[A-Za-z]{1,16}$/, 'must be an HTTP method'),
    path: z.string().max(4096, 'must be at most 4096 characters'),
    query: z
      .record(z.string().max(256), z.union([Scalar, z.array(Scalar).max(100)]))
      .refine((q) => Object.keys(q).length <= 100, 'must have at most 100 parameters')
      .optional(),
    headers: z
      .record(
        z.string().regex(HEADER_NAME_RE, 'must be an HTTP header name'),
        z.string().regex(HEADER_VALUE_RE, 'must be a header value (no CR, LF or NUL; at most 16 KiB)'),
      )
      .refine((h) => Object.keys(h).length <= 100, 'must have at most 100 headers')
      .optional(),
    // Optional (a GET has none): zod 4 makes a refined z.unknown() required unless it says so.
    body: z
      .unknown()
      .superRefine((v, ctx) => {
        if (v === undefined) return;
        const problem = jsonValueProblem(v, BODY_LIMIT_BYTES);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      })
      .optional(),
  })
  .strict();
export type IntegrationCallArgs = z.infer<typeof IntegrationCallArgs>;

export const HostCallArgs = {
  'store.get': z.object({ key: StoreKey }).strict(),
  'store.set': z.object({ key: StoreKey, ...PutStoreValue.shape }).strict(),
  'store.delete': z.object({ key: StoreKey }).strict(),
  'store.list': z.object({ prefix: StorePrefix.optional() }).strict(),
  'integrations.call': IntegrationCallArgs,
} satisfies Record<HostOp, z.ZodType>;

export type HostCallArgs = { [K in HostOp]: z.infer<(typeof HostCallArgs)[K]> };

/**
 * Checks a host call's arguments; a refusal is the same 422 `validation_failed` a REST client gets, with
 * the op as the location (`store.set.ttl_seconds: must be at most 10 years …`), which the snippet's
 * library raises as an error carrying that code and message.
 */
export function parseHostCall<K extends HostOp>(op: K, args: unknown): HostCallArgs[K] {
  const parsed = (HostCallArgs[op] as z.ZodType).safeParse(args);
  if (!parsed.success) throw validationFailed(fieldErrors(parsed.error, op));
  return parsed.data as HostCallArgs[K];
}
