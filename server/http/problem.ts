import type { Middleware } from 'koa';
import { ApiError } from '../errors';
import type { Logger } from '../logger';

export const PROBLEM_TYPE_BASE = 'https://svc.dev/problems/';

/** The one place errors become responses: `application/problem+json` with a stable `code`. */
export function problemMiddleware(logger: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new ApiError(404, 'not_found', 'Not found', `no route for ${ctx.method} ${ctx.path}`);
      }
      if (ctx.status === 405 && ctx.body === undefined) {
        throw new ApiError(405, 'method_not_allowed', 'Method not allowed', `${ctx.method} is not supported on ${ctx.path}`, {}, {
          Allow: String(ctx.response.get('Allow') ?? ''),
        });
      }
    } catch (err) {
      const requestId = String(ctx.state.requestId ?? '');
      let problem: ApiError;
      if (err instanceof ApiError) {
        problem = err;
      } else {
        logger.log('error', 'internal error', {
          request_id: requestId,
          error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
          stack: err instanceof Error ? err.stack : undefined,
        });
        problem = new ApiError(500, 'internal', 'Internal error', `an internal error occurred; the emulator's log has the details under request id ${requestId}`);
      }
      ctx.status = problem.status;
      for (const [k, v] of Object.entries(problem.headers)) if (v) ctx.set(k, v);
      ctx.type = 'application/problem+json';
      ctx.body = {
        type: PROBLEM_TYPE_BASE + problem.code,
        title: problem.title,
        status: problem.status,
        detail: problem.message,
        code: problem.code,
        request_id: requestId,
        ...problem.extra,
      };
    }
  };
}
