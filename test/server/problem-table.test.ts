// The one table from domain refusals (server/domain/errors.ts) to HTTP (server/http/problem.ts): every kind and
// code has a status and a title, and what a client receives is byte for byte what the core answered when
// services threw HTTP errors themselves (status, title, headers, body members and their order).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConflictError,
  DOMAIN_CODES,
  DomainError,
  ForbiddenError,
  InvalidRequestError,
  RateLimitedError,
  UnavailableError,
  ValidationError,
  conflict,
  limitExceedsTenantCap,
  notFound,
  payloadTooLarge,
  unauthenticated,
  validationFailed,
  type DomainErrorKind,
} from '../../server/domain/errors';
import { DOMAIN_PROBLEMS, domainProblemStatuses, problemMiddleware, problemOfDomainError } from '../../server/http/problem';
import { silentLogger } from '../../server/logger';

interface Expected {
  status: number;
  headers?: Record<string, string>;
  /** The body exactly, as JSON text (member order included). */
  body: string;
}

const REQUEST_ID = 'req_fixed';
const body = (status: number, code: string, title: string, detail: string, extra = '') =>
  `{"type":"https://svc.dev/problems/${code}","title":"${title}","status":${status},"detail":"${detail}","code":"${code}","request_id":"${REQUEST_ID}"${extra}}`;

// What the core answered for each refusal before the table existed (server/errors.ts built them with their status).
const CASES: [string, () => DomainError, Expected][] = [
  [
    'not found',
    () => notFound('snippet', 'hello'),
    { status: 404, body: body(404, 'not_found', 'Not found', "snippet 'hello' not found") },
  ],
  [
    'conflict',
    () => conflict("tenant 'a' already exists"),
    { status: 409, body: body(409, 'conflict', 'Conflict', "tenant 'a' already exists") },
  ],
  [
    'validation failed',
    () => validationFailed([{ location: 'body.files', message: 'must hold at least one file' }]),
    {
      status: 422,
      body: body(
        422,
        'validation_failed',
        'Validation failed',
        'body.files: must hold at least one file',
        ',"errors":[{"location":"body.files","message":"must hold at least one file"}]',
      ),
    },
  ],
  [
    'limit over the tenant cap',
    () => limitExceedsTenantCap('timeout_ms', 9000, 5000),
    {
      status: 422,
      body: body(
        422,
        'limit_exceeds_tenant_cap',
        'Limit exceeds the tenant cap',
        'timeout_ms 9000 exceeds the tenant cap of 5000',
        ',"errors":[{"location":"body.timeout_ms","message":"must be at most 5000 (the tenant cap)"}],"field":"timeout_ms","cap":5000',
      ),
    },
  ],
  [
    'payload too large',
    () => payloadTooLarge('too big'),
    { status: 413, body: body(413, 'payload_too_large', 'Payload too large', 'too big') },
  ],
  [
    'unauthenticated',
    () => unauthenticated('The API key is not valid.'),
    {
      status: 401,
      headers: { 'www-authenticate': 'Bearer' },
      body: body(401, 'unauthenticated', 'Unauthenticated', 'The API key is not valid.'),
    },
  ],
  [
    'rate limited',
    () => new RateLimitedError('the tenant already runs 1 invocations (max_concurrency 1); retry shortly', 1),
    {
      status: 429,
      headers: { 'retry-after': '1' },
      body: body(429, 'rate_limited', 'Too many requests', 'the tenant already runs 1 invocations (max_concurrency 1); retry shortly'),
    },
  ],
  [
    'a cursor this API never returned',
    () =>
      new InvalidRequestError(
        [{ location: 'query.cursor', message: 'is not a cursor this API returned' }],
        'cursor is not one this API returned',
      ),
    {
      status: 400,
      body: body(
        400,
        'validation_failed',
        'Bad request',
        'cursor is not one this API returned',
        ',"errors":[{"location":"query.cursor","message":"is not a cursor this API returned"}]',
      ),
    },
  ],
  [
    'callback URL refused',
    () => new ValidationError([{ location: 'body.callback_url', message: 'private address' }], 'private address', 'callback_url_refused'),
    {
      status: 422,
      body: body(
        422,
        'callback_url_refused',
        'Callback URL refused',
        'private address',
        ',"errors":[{"location":"body.callback_url","message":"private address"}]',
      ),
    },
  ],
  [
    'Idempotency-Key reused (no field to blame: no errors member)',
    () => new ValidationError([], 'this Idempotency-Key was used for another snippet', 'idempotency_key_reused'),
    {
      status: 422,
      body: body(422, 'idempotency_key_reused', 'Idempotency-Key reused', 'this Idempotency-Key was used for another snippet'),
    },
  ],
  [
    'too many terminals',
    () => new ConflictError('8 terminals are running already: close one first', 'too_many_terminals', { max_live: 8 }),
    {
      status: 409,
      body: body(409, 'too_many_terminals', 'Too many terminals', '8 terminals are running already: close one first', ',"max_live":8'),
    },
  ],
  [
    'shutting down',
    () => new UnavailableError('the emulator is stopping', 'shutting_down'),
    { status: 503, body: body(503, 'shutting_down', 'Shutting down', 'the emulator is stopping') },
  ],
  ['forbidden', () => new ForbiddenError('not yours'), { status: 403, body: body(403, 'forbidden', 'Forbidden', 'not yours') }],
];

describe('the domain → HTTP table', () => {
  it('has a status and a title for every kind and every code a kind may carry', () => {
    for (const kind of Object.keys(DOMAIN_CODES) as DomainErrorKind[]) {
      const row = DOMAIN_PROBLEMS[kind];
      expect(row.status, kind).toBeGreaterThanOrEqual(400);
      expect(row.status, kind).toBeLessThan(600);
      for (const code of DOMAIN_CODES[kind]) {
        expect(code, kind).toMatch(/^[a-z][a-z0-9_]*$/);
        expect((row.titles as Record<string, string>)[code], `${kind}/${code}`).toMatch(/\S/);
      }
    }
    expect(Object.keys(DOMAIN_PROBLEMS).sort()).toEqual(Object.keys(DOMAIN_CODES).sort());
  });

  it('lists each domain code with the statuses it can be answered with', () => {
    expect(domainProblemStatuses()).toEqual({
      not_found: [404],
      conflict: [409],
      state_not_empty: [409],
      too_many_terminals: [409],
      terminal_exited: [409],
      terminal_target_unavailable: [409],
      gc_unavailable: [409],
      validation_failed: [400, 422],
      callback_url_refused: [422],
      idempotency_key_reused: [422],
      invalid_report: [422],
      archive_invalid: [422],
      passphrase_required: [422],
      passphrase_wrong: [422],
      limit_exceeds_tenant_cap: [422],
      payload_too_large: [413],
      rate_limited: [429],
      forbidden: [403],
      unauthenticated: [401],
      shutting_down: [503],
      terminal_spawn_failed: [503],
    });
  });

  it('carries no status on a domain error: only the edge knows it', () => {
    for (const [name, make] of CASES) {
      const err = make();
      expect(err, name).not.toHaveProperty('status');
      expect(err, name).not.toHaveProperty('headers');
      expect(problemOfDomainError(err).code, name).toBe(err.code);
    }
  });
});

describe('problem+json through the middleware', () => {
  let server: Server;
  let base = '';
  beforeAll(async () => {
    const app = new Koa();
    app.use(async (ctx, next) => {
      ctx.state.requestId = REQUEST_ID;
      await next();
    });
    app.use(problemMiddleware(silentLogger));
    app.use((ctx) => {
      const index = Number(ctx.path.slice(1));
      throw CASES[index]![1]();
    });
    const handle = app.callback();
    server = createServer((req, res) => void handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it.each(CASES.map(([name, , expected], index) => [name, index, expected] as const))(
    '%s answers the same status, headers and bytes as before',
    async (_name, index, expected) => {
      const res = await fetch(`${base}/${index}`);
      expect(res.status).toBe(expected.status);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      for (const [k, v] of Object.entries(expected.headers ?? {})) expect(res.headers.get(k), k).toBe(v);
      if (!expected.headers?.['www-authenticate']) expect(res.headers.get('www-authenticate')).toBeNull();
      if (!expected.headers?.['retry-after']) expect(res.headers.get('retry-after')).toBeNull();
      expect(await res.text()).toBe(expected.body);
    },
  );
});
