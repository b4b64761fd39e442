/**
 * Every problem `code` the core answers with (application/problem+json, RFC 9457), with the statuses it
 * comes with and its title: the one registry. An operation's responses name the codes each status can
 * carry (contract/responses.ts checks them against this list at compile time), and the OpenAPI document
 * lists them per response.
 */
export const PROBLEMS = {
  // ---- requests
  bad_request: { statuses: [400], title: 'Bad request' },
  malformed_json: { statuses: [400], title: 'Bad request' },
  validation_failed: { statuses: [400, 422], title: 'Validation failed' },
  unauthenticated: { statuses: [401], title: 'Unauthenticated' },
  forbidden: { statuses: [403], title: 'Forbidden' },
  forbidden_origin: { statuses: [403], title: 'Forbidden origin' },
  not_found: { statuses: [404], title: 'Not found' },
  method_not_allowed: { statuses: [405], title: 'Method not allowed' },
  request_timeout: { statuses: [408], title: 'Request timeout' },
  conflict: { statuses: [409], title: 'Conflict' },
  state_not_empty: { statuses: [409], title: 'The state is not empty' },
  payload_too_large: { statuses: [413], title: 'Payload too large' },
  unsupported_media_type: { statuses: [415], title: 'Unsupported media type' },
  misdirected_request: { statuses: [421], title: 'Misdirected request' },
  limit_exceeds_tenant_cap: { statuses: [422], title: 'Limit exceeds the tenant cap' },
  idempotency_key_reused: { statuses: [422], title: 'Idempotency-Key reused' },
  callback_url_refused: { statuses: [422], title: 'Callback URL refused' },
  archive_invalid: { statuses: [422], title: 'Not a usable state archive' },
  passphrase_required: { statuses: [422], title: 'The archive’s secrets need its passphrase' },
  passphrase_wrong: { statuses: [422], title: 'Wrong passphrase' },
  invalid_report: { statuses: [422], title: 'Not a run report' },
  rate_limited: { statuses: [429], title: 'Too many requests' },
  headers_too_large: { statuses: [431], title: 'Request header fields too large' },
  internal: { statuses: [500], title: 'Internal error' },
  not_implemented: { statuses: [501], title: 'Not implemented' },
  shutting_down: { statuses: [503], title: 'Shutting down' },
  // ---- an invocation's outcome (sync invoke): the status is the outcome's
  handler_error: { statuses: [500], title: 'The snippet failed' },
  oom_killed: { statuses: [500], title: 'The snippet ran out of memory' },
  timeout: { statuses: [504], title: 'The snippet timed out' },
  cancelled: { statuses: [409], title: 'The invocation was cancelled' },
  failed: { statuses: [503], title: 'The service failed to run the snippet' },
  // ---- /_emu
  gc_unavailable: { statuses: [409], title: 'Garbage collection unavailable' },
  terminal_disabled: { statuses: [403], title: 'Terminal disabled' },
  terminal_exited: { statuses: [409], title: 'Terminal exited' },
  terminal_target_unavailable: { statuses: [409], title: 'Terminal target unavailable' },
  too_many_terminals: { statuses: [409], title: 'Too many terminals' },
  terminal_spawn_failed: { statuses: [503], title: 'Terminal could not start' },
  executor_local: { statuses: [409], title: 'Snippets run on this host' },
  agent_unreachable: { statuses: [502], title: 'The VM’s agent did not answer' },
  vm_unavailable: { statuses: [409], title: 'The VM cannot be managed here' },
  vm_operation_running: { statuses: [409], title: 'A VM operation is running' },
  vm_exists: { statuses: [409], title: 'The VM exists already' },
  vm_missing: { statuses: [409], title: 'The VM does not exist' },
  vm_running: { statuses: [409], title: 'The VM is running' },
  vm_not_running: { statuses: [409], title: 'The VM is not running' },
  limactl_failed: { statuses: [502], title: 'limactl failed' },
} as const satisfies Record<string, { statuses: readonly number[]; title: string }>;

export type ProblemCode = keyof typeof PROBLEMS;
export const PROBLEM_CODES = Object.keys(PROBLEMS) as ProblemCode[];

export const isProblemCode = (code: string): code is ProblemCode => Object.hasOwn(PROBLEMS, code);
