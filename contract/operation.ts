import type { z } from 'zod';
import { withEdgeResponses } from './edge';

/**
 * The seam of the wire contract: one HTTP operation of `/v1` or `/_emu`, declared once with zod. The
 * server implements it (server/http/route.ts binds a handler to it), the OpenAPI document is generated
 * from it, and the one typed client (contract/client.ts) calls it. Nothing here may import from the
 * server, the executor, main or the renderer: every layer imports the contract, the contract imports
 * only zod.
 */
export type Auth = 'tenant' | 'admin' | 'none';
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface ResponseSpec {
  description: string;
  /** The body's schema: JSON, a problem (with `contentType` application/problem+json), or absent. */
  schema?: z.ZodType;
  /** `application/json` when absent. `text/event-stream` responses describe their frames in `events`. */
  contentType?: string;
  /** Response headers this status carries (lower-case names). */
  headers?: z.ZodObject;
  /** For problem responses: every stable `code` this status can carry. */
  codes?: readonly string[];
  /** For `text/event-stream`: each SSE event name with the schema of its JSON `data`. */
  events?: Readonly<Record<string, z.ZodType>>;
  /** Other content types of the same status, by content type (the invoke's `text/event-stream` beside its JSON). */
  alternatives?: Readonly<Record<string, ResponseSpec>>;
}

export interface Operation<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  H extends z.ZodType = z.ZodType,
  R extends Readonly<Record<number, ResponseSpec>> = Readonly<Record<number, ResponseSpec>>,
> {
  /** Unique, camelCase; the client's method name and the OpenAPI `operationId`. */
  operationId: string;
  method: Method;
  /** OpenAPI style: `/v1/snippets/{id}`. */
  path: string;
  auth: Auth;
  tag: string;
  summary: string;
  description?: string;
  params?: P;
  query?: Q;
  /** The JSON body; `bodyOptional` lets an empty body through as `{}`. */
  body?: B;
  bodyOptional?: boolean;
  /**
   * A body that is not JSON (an archive's bytes): the handler reads it itself, up to `maxBytes`
   * (server/http/body.ts readRawBody); the document describes it as `contentType`, binary.
   */
  rawBody?: { contentType: string; description: string; maxBytes: number };
  /** Request headers the operation reads (lower-case names), validated like the rest of the request. */
  headers?: H;
  responses: R;
  /** Any other status (`default` in the document): for the callback inbox, which answers what it was told to. */
  defaultResponse?: ResponseSpec;
}

/**
 * Declares an operation, keeping every schema's exact type for the client and the server. Its
 * `responses` also get what the HTTP edge answers for any request of this shape (contract/edge.ts):
 * 401 where it needs credentials, 400/422 for a bad query, header, path or body, 413/415 for a body, and
 * 403 `forbidden_origin`, 421 and 500 anywhere — merged into a status the operation declares itself.
 */
export function defineOperation<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  H extends z.ZodType = z.ZodType,
  const R extends Readonly<Record<number, ResponseSpec>> = Readonly<Record<number, ResponseSpec>>,
>(op: Operation<P, Q, B, H, R>): Operation<P, Q, B, H, R> {
  return { ...op, responses: withEdgeResponses(op) as R };
}
