import Koa from 'koa';
import Router from '@koa/router';
import type { z } from 'zod';
import { ApiError, badRequest } from '../errors';
import { unauthenticated, validationFailed } from '../domain/errors';
import { fieldErrors } from '../services/field-errors';
import { secretEquals } from '../ids';
import type { Logger } from '../logger';
import type { Services } from '../services';
import { readJsonBody } from './body';
import { hostAndOriginGuard, type HostPolicy } from './guards';
import type { Metrics } from './metrics';
import { observeMiddleware } from './observe';
import { problemMiddleware } from './problem';
import { implement, koaPath, type RouteDef } from './route';
import * as meta from '../../contract/meta';
import { staticGui } from './static-gui';
import { guiSignIn, sessionAuthenticates } from './gui-session';
import type { GuiSession } from '../services/gui-session';

export interface AppOptions {
  services: Services;
  routes: RouteDef[];
  logger: Logger;
  metrics: Metrics;
  hostPolicy: HostPolicy;
  adminToken: string;
  /** The GUI's session cookie: admin routes accept it as they accept the admin token (./gui-session.ts). */
  guiSession: GuiSession;
  /** The OpenAPI document, built on first request (it costs ~20 ms: not worth paying at start-up). */
  openapi: () => unknown;
  rendererDir: string | null;
}

function parse<T>(schema: z.ZodType<T> | undefined, value: unknown, where: string, status: 400 | 422): T {
  if (!schema) return value as T;
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const errors = fieldErrors(result.error, where);
  if (status === 422) throw validationFailed(errors);
  throw badRequest('validation_failed', errors.map((e) => `${e.location}: ${e.message}`).join('; '), { errors });
}

/** The request's headers with an empty value dropped: `X-Invoke-Mode:` with nothing after it is no mode at all. */
function declaredHeaders(ctx: Koa.Context): Record<string, string | string[]> {
  return Object.fromEntries(Object.entries(ctx.headers).filter((e): e is [string, string | string[]] => e[1] !== undefined && e[1] !== ''));
}

function bearer(ctx: Koa.Context): string | undefined {
  return /^Bearer (\S+)$/i.exec(ctx.get('authorization'))?.[1];
}

/** The Koa app: middleware in the order a request meets it, then the declared routes. */
export function createApp(opts: AppOptions): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true; // errors are answered and logged by problemMiddleware, not printed by Koa
  const router = new Router();

  // Every route is an Operation of the contract, the document and the metrics too (contract/meta.ts).
  const own = [
    implement(meta.getOpenApi, () => ({ status: 200, body: opts.openapi() })),
    implement(meta.getMetrics, () => ({
      status: 200,
      body: opts.metrics.render(),
      headers: { 'Content-Type': 'text/plain; version=0.0.4' },
    })),
  ];
  for (const route of [...opts.routes, ...own]) {
    router[route.method](koaPath(route.path), async (ctx) => {
      ctx.state.routeTemplate = route.path;
      let tenant = undefined as never;
      if (route.auth === 'tenant') {
        tenant = opts.services.tenants.authenticate(ctx.get('authorization')) as never;
      } else if (route.auth === 'admin') {
        const token = bearer(ctx) ?? ctx.get('x-emu-admin');
        // A token, when sent, decides; without one, the GUI's session cookie (never on /v1: tenant routes skip this).
        const ok = token ? secretEquals(token, opts.adminToken) : sessionAuthenticates(ctx, opts.guiSession);
        if (!ok) {
          throw unauthenticated(
            'This is the emulator’s own surface: send the admin token from <data-dir>/emulator.json as "Authorization: Bearer emu_…" (the GUI signs in once with the URL the emulator printed at start).',
          );
        }
      }
      const params = parse(route.params, ctx.params, 'path', 422);
      const query = parse(route.query, ctx.query, 'query', 400);
      let body: unknown;
      if (route.body) {
        const raw = await readJsonBody(ctx);
        if (raw === undefined && !route.bodyOptional) {
          throw validationFailed([{ location: 'body', message: 'a JSON object body is required' }]);
        }
        // Only an absent body stands for `{}`: a JSON `null` is a value, and the route's schema judges it.
        body = parse(route.body, raw === undefined ? {} : raw, 'body', 422);
      }
      const headers = route.headers ? parse(route.headers, declaredHeaders(ctx), 'header', 400) : {};
      const reply = await route.handler({ params, query, body, headers, services: opts.services, tenant, ctx } as never);
      ctx.status = reply.status;
      for (const [k, v] of Object.entries(reply.headers ?? {})) ctx.set(k, v);
      if (reply.body === null) {
        // JSON null is a value (a handler may return it): Koa would turn a null body into 204.
        ctx.type = 'application/json';
        ctx.body = 'null';
      } else if (reply.body !== undefined) ctx.body = reply.body;
    });
  }

  app.use(observeMiddleware(opts.logger, opts.metrics));
  app.use(problemMiddleware(opts.logger));
  app.use(hostAndOriginGuard(opts.hostPolicy));
  app.use(async (ctx, next) => {
    // Nothing here is meant for other origins: answer preflights with a plain refusal, no CORS headers.
    if (ctx.method === 'OPTIONS') throw new ApiError(405, 'method_not_allowed', 'Method not allowed', 'CORS is not offered');
    await next();
  });
  app.use(router.routes());
  app.use(router.allowedMethods());
  app.use(guiSignIn(opts.guiSession, opts.adminToken)); // `?token=` on a GUI path: the session cookie, then the URL without it
  app.use(staticGui(opts.rendererDir));
  return app;
}
