import type { Context } from 'koa';
import type { z } from 'zod';
import type { TenantRecord } from '../storage/schema';
import type { Services } from '../services';
import type { Auth, Operation, ResponseSpec } from '../../contract/operation';

/**
 * One HTTP route: an Operation of the wire contract (contract/operation.ts: its schemas validate the
 * request and describe it in the OpenAPI document) bound to a handler that returns a reply instead of
 * poking at the Koa context.
 */
export type { Auth, ResponseSpec };

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface RouteInput<P, Q, B, H = Record<string, string | undefined>> {
  params: P;
  query: Q;
  body: B;
  /** The request headers the operation declares, validated (an empty value counts as absent). */
  headers: H;
  services: Services;
  /** The key's tenant (tenant-authenticated routes only). */
  tenant: TenantRecord;
  ctx: Context;
}

export type Handler<P = unknown, Q = unknown, B = unknown, H = unknown> = (input: RouteInput<P, Q, B, H>) => Promise<Reply> | Reply;

/** An Operation with the handler that implements it; the router mounts these and nothing else. */
export interface RouteDef extends Operation {
  handler: Handler<never, never, never, never>;
}

/** Binds a handler to its Operation; the handler sees the request as the Operation's schemas output it. */
export function implement<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType, H extends z.ZodType>(
  op: Operation<P, Q, B, H>,
  handler: Handler<z.output<P>, z.output<Q>, z.output<B>, z.output<H>>,
): RouteDef {
  return { ...(op as unknown as Operation), handler };
}

/** `/v1/snippets/{id}` → `/v1/snippets/:id` for @koa/router. */
export const koaPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1');
