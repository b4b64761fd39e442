import type { Middleware } from 'koa';
import { ApiError } from '../errors';
import { DOMAIN_CODES, DomainError, RateLimitedError, type DomainCode, type DomainErrorKind } from '../domain/errors';
import type { Logger } from '../logger';

export const PROBLEM_TYPE_BASE = 'https://svc.dev/problems/';

interface DomainProblem<K extends DomainErrorKind> {
  status: number;
  /** The problem's `title`, per code. */
  titles: Record<DomainCode<K>, string>;
  headers?: (err: DomainError) => Record<string, string>;
}

/**
 * The one table from the domain's refusals (server/domain/errors.ts) to HTTP: status, title and headers
 * per kind. Every kind and every code must have a row (the type says so), so a new refusal cannot reach a
 * client unmapped.
 */
export const DOMAIN_PROBLEMS: { [K in DomainErrorKind]: DomainProblem<K> } = {
  not_found: { status: 404, titles: { not_found: 'Not found' } },
  conflict: {
    status: 409,
    titles: {
      conflict: 'Conflict',
      state_not_empty: 'The state is not empty',
      too_many_terminals: 'Too many terminals',
      terminal_exited: 'Terminal exited',
      terminal_target_unavailable: 'Terminal target unavailable',
      gc_unavailable: 'Garbage collection unavailable',
    },
  },
  invalid_request: { status: 400, titles: { validation_failed: 'Bad request' } },
  validation_failed: {
    status: 422,
    titles: {
      validation_failed: 'Validation failed',
      callback_url_refused: 'Callback URL refused',
      idempotency_key_reused: 'Idempotency-Key reused',
      invalid_report: 'Not a run report',
      archive_invalid: 'Not a usable state archive',
      passphrase_required: 'The archive’s secrets need its passphrase',
      passphrase_wrong: 'Wrong passphrase',
    },
  },
  limit_exceeds_tenant_cap: { status: 422, titles: { limit_exceeds_tenant_cap: 'Limit exceeds the tenant cap' } },
  payload_too_large: { status: 413, titles: { payload_too_large: 'Payload too large' } },
  rate_limited: {
    status: 429,
    titles: { rate_limited: 'Too many requests' },
    headers: (err) => ({ 'Retry-After': String(err instanceof RateLimitedError ? err.retryAfterSeconds : 1) }),
  },
  forbidden: { status: 403, titles: { forbidden: 'Forbidden' } },
  unauthenticated: { status: 401, titles: { unauthenticated: 'Unauthenticated' }, headers: () => ({ 'WWW-Authenticate': 'Bearer' }) },
  unavailable: {
    status: 503,
    titles: { shutting_down: 'Shutting down', terminal_spawn_failed: 'Terminal could not start' },
  },
};

/** Every domain problem `code` with the statuses it can be answered with (what the contract's problem registry must agree with). */
export function domainProblemStatuses(): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const kind of Object.keys(DOMAIN_CODES) as DomainErrorKind[]) {
    for (const code of DOMAIN_CODES[kind]) {
      const statuses = (out[code] ??= []);
      if (!statuses.includes(DOMAIN_PROBLEMS[kind].status)) statuses.push(DOMAIN_PROBLEMS[kind].status);
    }
  }
  for (const statuses of Object.values(out)) statuses.sort((a, b) => a - b);
  return out;
}

/** A domain refusal as the problem the edge answers: its kind's status and headers, its code's title. */
export function problemOfDomainError(err: DomainError): ApiError {
  const row = DOMAIN_PROBLEMS[err.kind] as DomainProblem<DomainErrorKind>;
  const title = (row.titles as Record<string, string>)[err.code] ?? err.code;
  return new ApiError(row.status, err.code, title, err.message, { ...err.data }, row.headers?.(err) ?? {});
}

/** The one place errors become responses: `application/problem+json` with a stable `code`. */
export function problemMiddleware(logger: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new ApiError(404, 'not_found', 'Not found', `no route for ${ctx.method} ${ctx.path}`);
      }
      if (ctx.status === 405 && ctx.body === undefined) {
        throw new ApiError(
          405,
          'method_not_allowed',
          'Method not allowed',
          `${ctx.method} is not supported on ${ctx.path}`,
          {},
          {
            Allow: String(ctx.response.get('Allow') ?? ''),
          },
        );
      }
      if (ctx.status === 501 && ctx.body === undefined) {
        // A method the router implements on no route (TRACE, PROPFIND, …). On a path that exists, the resource does not
        // support it: 405 with the path's Allow (RFC 9110 §15.5.6), as for any other method it lacks; elsewhere 501.
        const allow = String(ctx.response.get('Allow') ?? '');
        if (allow) {
          throw new ApiError(
            405,
            'method_not_allowed',
            'Method not allowed',
            `${ctx.method} is not supported on ${ctx.path}`,
            {},
            { Allow: allow },
          );
        }
        ctx.remove('Allow'); // the router sets an empty one for a path it does not know
        throw notImplemented(ctx.method, null);
      }
    } catch (err) {
      const requestId = String(ctx.state.requestId ?? '');
      let problem: ApiError;
      if (err instanceof ApiError) {
        problem = err;
      } else if (err instanceof DomainError) {
        problem = problemOfDomainError(err);
      } else {
        logger.log('error', 'internal error', {
          request_id: requestId,
          error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
          stack: err instanceof Error ? err.stack : undefined,
        });
        problem = new ApiError(
          500,
          'internal',
          'Internal error',
          `an internal error occurred; the emulator's log has the details under request id ${requestId}`,
        );
      }
      ctx.status = problem.status;
      for (const [k, v] of Object.entries(problem.headers)) if (v) ctx.set(k, v);
      ctx.type = 'application/problem+json';
      ctx.body = problemBody(problem, requestId);
    }
  };
}

/** The RFC 9457 body of a problem (also written by server/http/protocol-errors.ts, below Koa). */
export function problemBody(problem: ApiError, requestId: string): Record<string, unknown> {
  return {
    type: PROBLEM_TYPE_BASE + problem.code,
    title: problem.title,
    status: problem.status,
    detail: problem.message,
    code: problem.code,
    request_id: requestId,
    ...problem.extra,
  };
}

/** 501 `not_implemented`: a method this server implements on no route (RFC 9110 §15.6.2). */
export function notImplemented(method: string, hint: string | null, allow = ''): ApiError {
  const detail = `${method} is not a method this server implements${hint ? `; ${hint}` : ''}`;
  return new ApiError(501, 'not_implemented', 'Not implemented', detail, {}, allow ? { Allow: allow } : {});
}
