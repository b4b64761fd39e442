/**
 * What the core's services (and the parts beside them: the workspace loader, the terminals, the memory
 * reading) can refuse, in the domain's words: a closed set of error classes, each with a stable snake_case
 * `code` and the data that explains it, and no HTTP. The HTTP edge (server/http/problem.ts) maps each kind
 * to a status, a title and headers, and renders the problem+json body from `code`, `message` and `data`.
 */

/** One problem with one field of the input. */
export interface FieldError {
  /** Where the problem is: `body.timeout_ms`, `path.name`, `query.cursor`, `header.content-type`. */
  location: string;
  message: string;
  /** For code problems: where in which file of the bundle. */
  file?: string;
  line?: number;
  column?: number;
}

/** Every kind of refusal, with the codes each may carry (the first is its default). */
export const DOMAIN_CODES = {
  not_found: ['not_found'],
  conflict: ['conflict', 'state_not_empty', 'too_many_terminals', 'terminal_exited', 'terminal_target_unavailable', 'gc_unavailable'],
  /** The request's own shape (a cursor this API never returned): the caller must not retry it as is. */
  invalid_request: ['validation_failed'],
  /** The values are understood but refused. */
  validation_failed: [
    'validation_failed',
    'callback_url_refused',
    'idempotency_key_reused',
    'invalid_report',
    'archive_invalid',
    'passphrase_required',
    'passphrase_wrong',
  ],
  limit_exceeds_tenant_cap: ['limit_exceeds_tenant_cap'],
  payload_too_large: ['payload_too_large'],
  rate_limited: ['rate_limited'],
  forbidden: ['forbidden'],
  unauthenticated: ['unauthenticated'],
  unavailable: ['shutting_down', 'terminal_spawn_failed'],
} as const;

export type DomainErrorKind = keyof typeof DOMAIN_CODES;
export type DomainCode<K extends DomainErrorKind = DomainErrorKind> = (typeof DOMAIN_CODES)[K][number];

/** The base of the closed set: only the classes below extend it (each fixes its `kind` and the codes it may carry). */
export abstract class DomainError extends Error {
  abstract readonly kind: DomainErrorKind;
  protected constructor(
    readonly code: DomainCode,
    detail: string,
    /** What the refusal carries besides its detail (`errors`, `field`, `cap`, …): the problem body's extra members. */
    readonly data: Readonly<Record<string, unknown>> = {},
  ) {
    super(detail);
  }
}

/** Something named by the caller does not exist (or belongs to another tenant: the same words either way). */
export class NotFoundError extends DomainError {
  readonly kind = 'not_found';
  constructor(
    readonly what: string,
    readonly identifier: string | number,
  ) {
    super('not_found', `${what} '${identifier}' not found`);
    this.name = 'NotFoundError';
  }
}

/** The state does not allow it now (it exists already, it is still running, it has finished, …). */
export class ConflictError extends DomainError {
  readonly kind = 'conflict';
  constructor(detail: string, code: DomainCode<'conflict'> = 'conflict', data: Record<string, unknown> = {}) {
    super(code, detail, data);
    this.name = 'ConflictError';
  }
}

/** The request itself is malformed where no body value is to blame (a cursor this API never returned). */
export class InvalidRequestError extends DomainError {
  readonly kind = 'invalid_request';
  constructor(
    readonly errors: FieldError[],
    detail: string,
  ) {
    super('validation_failed', detail, { errors });
    this.name = 'InvalidRequestError';
  }
}

/** Input values refused, field by field (with no field to blame, `errors` is left out of `data`). */
export class ValidationError extends DomainError {
  readonly kind = 'validation_failed';
  constructor(
    readonly errors: FieldError[],
    detail?: string,
    code: DomainCode<'validation_failed'> = 'validation_failed',
  ) {
    super(code, detail ?? errors.map((e) => `${e.location}: ${e.message}`).join('; '), errors.length ? { errors } : {});
    this.name = 'ValidationError';
  }
}

/** A limit asked for is above what the tenant may use. */
export class LimitExceedsTenantCapError extends DomainError {
  readonly kind = 'limit_exceeds_tenant_cap';
  constructor(
    readonly field: string,
    readonly value: number,
    readonly cap: number,
  ) {
    super('limit_exceeds_tenant_cap', `${field} ${value} exceeds the tenant cap of ${cap}`, {
      errors: [{ location: `body.${field}`, message: `must be at most ${cap} (the tenant cap)` }],
      field,
      cap,
    });
    this.name = 'LimitExceedsTenantCapError';
  }
}

/** Something the caller handed over is bigger than the core keeps. */
export class PayloadTooLargeError extends DomainError {
  readonly kind = 'payload_too_large';
  constructor(detail: string) {
    super('payload_too_large', detail);
    this.name = 'PayloadTooLargeError';
  }
}

/** The tenant's concurrency cap is reached; the same request may succeed after `retryAfterSeconds`. */
export class RateLimitedError extends DomainError {
  readonly kind = 'rate_limited';
  constructor(
    detail: string,
    readonly retryAfterSeconds: number,
  ) {
    super('rate_limited', detail);
    this.name = 'RateLimitedError';
  }
}

/** The caller is known but may not do this. */
export class ForbiddenError extends DomainError {
  readonly kind = 'forbidden';
  constructor(detail: string) {
    super('forbidden', detail);
    this.name = 'ForbiddenError';
  }
}

/** The caller did not say who it is, or said it wrongly. */
export class UnauthenticatedError extends DomainError {
  readonly kind = 'unauthenticated';
  constructor(detail: string) {
    super('unauthenticated', detail);
    this.name = 'UnauthenticatedError';
  }
}

/** The part that would do it cannot now (stopping, could not start); a later try may work. */
export class UnavailableError extends DomainError {
  readonly kind = 'unavailable';
  constructor(detail: string, code: DomainCode<'unavailable'>) {
    super(code, detail);
    this.name = 'UnavailableError';
  }
}

/** Not found. The detail names only what the caller sent, so another tenant's resource answers the same bytes. */
export const notFound = (what: string, name: string | number) => new NotFoundError(what, name);

export const conflict = (detail: string) => new ConflictError(detail);

export const validationFailed = (errors: FieldError[], detail?: string) => new ValidationError(errors, detail);

export const limitExceedsTenantCap = (field: string, value: number, cap: number) => new LimitExceedsTenantCapError(field, value, cap);

export const payloadTooLarge = (detail: string) => new PayloadTooLargeError(detail);

export const unauthenticated = (detail: string) => new UnauthenticatedError(detail);
