/**
 * The HTTP edge's own refusals and the data directory's errors. What services refuse is declared in
 * server/domain/errors.ts (no HTTP there) and mapped to statuses by the one table in server/http/problem.ts.
 */
/**
 * A refusal only the HTTP edge can make (a bad header, a method, an admin-only power, a run's outcome as a
 * status): it carries its status. server/http/problem.ts renders it as problem+json (RFC 9457). Services never
 * throw it. The CLI also uses it for a problem a running core answered.
 */
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
