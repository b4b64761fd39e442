/**
 * The closed set of errors the core turns into problem+json (RFC 9457). Anything else that escapes a
 * handler is an internal error: logged with its stack, answered with a generic 500 that leaks nothing.
 */
export interface FieldError {
  /** Where the problem is: `body.timeout_ms`, `path.name`, `query.cursor`, `header.content-type`. */
  location: string;
  message: string;
  /** For code problems: where in which file of the bundle. */
  file?: string;
  line?: number;
  column?: number;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly title: string,
    detail: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.name = 'ApiError';
  }
}

export const badRequest = (code: string, detail: string, extra?: Record<string, unknown>) =>
  new ApiError(400, code, 'Bad request', detail, extra);

export const validationFailed = (errors: FieldError[], detail?: string) =>
  new ApiError(
    422,
    'validation_failed',
    'Validation failed',
    detail ?? errors.map((e) => `${e.location}: ${e.message}`).join('; '),
    { errors },
  );

export const limitExceedsTenantCap = (field: string, value: number, cap: number) =>
  new ApiError(
    422,
    'limit_exceeds_tenant_cap',
    'Limit exceeds the tenant cap',
    `${field} ${value} exceeds the tenant cap of ${cap}`,
    { errors: [{ location: `body.${field}`, message: `must be at most ${cap} (the tenant cap)` }], field, cap },
  );

/** Not found. The detail names only what the caller sent, so another tenant's resource answers the same bytes. */
export const notFound = (what: string, name: string | number) =>
  new ApiError(404, 'not_found', 'Not found', `${what} '${name}' not found`);

export const conflict = (detail: string) => new ApiError(409, 'conflict', 'Conflict', detail);

export const unauthenticated = (detail: string) =>
  new ApiError(401, 'unauthenticated', 'Unauthenticated', detail, {}, { 'WWW-Authenticate': 'Bearer' });

export const payloadTooLarge = (detail: string) =>
  new ApiError(413, 'payload_too_large', 'Payload too large', detail);

/** Errors of the data directory itself: reported to a person with the path and the problem, never a stack. */
export class DataDirError extends Error {
  constructor(
    readonly path: string,
    readonly problem: string,
    readonly hint?: string,
  ) {
    super(`${path}: ${problem}${hint ? `\n  ${hint}` : ''}`);
    this.name = 'DataDirError';
  }
}

/** Another core already owns this data dir. */
export class DataDirInUseError extends DataDirError {
  constructor(
    path: string,
    readonly owner: { pid: number; url?: string | null; kind: string },
  ) {
    super(
      path,
      `in use by another ${owner.kind === 'cli' ? 'svc-emu command' : 'emulator'} (${owner.pid ? `pid ${owner.pid}` : 'starting now'}${owner.url ? `, ${owner.url}` : ''})`,
      'Stop it first, or pass --data-dir to run with a separate state.',
    );
    this.name = 'DataDirInUseError';
  }
}
