import type { Context } from 'koa';
import type { z } from 'zod';
import type { TenantRecord } from '../storage/schema';
import type { Services } from '../services';

/**
 * One HTTP route, declared once: its schemas validate the request and describe it in the OpenAPI
 * document, and its handler returns a reply instead of poking at the Koa context.
 */
export type Auth = 'tenant' | 'admin' | 'none';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface ResponseSpec {
  description: string;
  schema?: z.ZodType;
  contentType?: string;
}

export interface RouteInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  services: Services;
  /** The key's tenant (tenant-authenticated routes only). */
  tenant: TenantRecord;
  ctx: Context;
}

export interface RouteDef<P extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI style: `/v1/snippets/{id}`. */
  path: string;
  auth: Auth;
  tag: string;
  summary: string;
  description?: string;
  params?: P;
  query?: Q;
  /** Validated as the JSON body; `bodyOptional` lets an empty body through as `{}`. */
  body?: B;
  bodyOptional?: boolean;
  responses: Record<number, ResponseSpec>;
  /** Emulator-only routes are left out of the /v1 contract's tags but still documented. */
  handler(input: RouteInput<z.output<P>, z.output<Q>, z.output<B>>): Promise<Reply> | Reply;
}

export function defineRoute<P extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType>(
  def: RouteDef<P, Q, B>,
): RouteDef {
  return def as unknown as RouteDef;
}

/** `/v1/snippets/{id}` → `/v1/snippets/:id` for @koa/router. */
export const koaPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1');
