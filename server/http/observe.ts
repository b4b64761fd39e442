import type { Middleware } from 'koa';
import { newRequestId } from '../ids';
import type { Logger } from '../logger';
import type { Metrics } from './metrics';

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Request id (the caller's `X-Request-Id` when it is a sane token, else ours), one debug log line per
 * request and the HTTP metrics. Logs carry the route template, never bodies, headers or query values.
 */
export function observeMiddleware(logger: Logger, metrics: Metrics, now: () => number = () => performance.now()): Middleware {
  return async (ctx, next) => {
    const incoming = ctx.get('x-request-id');
    const requestId = SAFE_REQUEST_ID.test(incoming) ? incoming : newRequestId();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    const start = now();
    try {
      await next();
    } finally {
      const ms = now() - start;
      // Never the raw path: it may carry names, and distinct paths would grow the metrics without bound.
      const route = (ctx.state.routeTemplate as string | undefined) ?? '(unmatched)';
      metrics.observeRequest(ctx.method, route, ctx.status, ms / 1000);
      // Requests are detail, shown with `--log-level debug`: a failed run has its own line (server/terminal-lines.ts),
      // an error of ours its own `internal error` line (http/problem.ts).
      logger.log('debug', 'request', {
        request_id: requestId,
        method: ctx.method,
        route,
        status: ctx.status,
        ms: Math.round(ms * 100) / 100,
      });
    }
  };
}
