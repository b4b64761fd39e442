/**
 * @svc/integrations: calls to the tenant's configured integrations, made by the host with the tenant's
 * credentials (the core adds them to the request: the snippet's code does not handle them).
 *
 *   import { integrations } from "@svc/integrations";
 *   const res = await integrations.call("github", { method: "GET", path: "/user" });
 *   // res = { status, headers, body }
 *
 * A call the host refuses or cannot make rejects with an Error carrying `code`. A non-2xx answer from the
 * remote API rejects too, with `code` 'integration_error' and the answer's `status` and `body`.
 */

export interface HostCallError extends Error {
  code: string;
  /** An integration's HTTP error: what the remote API answered. */
  status?: number;
  body?: unknown;
}

interface Host {
  call(op: string, args: Record<string, unknown>): Promise<unknown>;
}

function host(): Host {
  const h = (globalThis as Record<symbol, unknown>)[Symbol.for('svc.host')] as Host | undefined;
  if (!h || typeof h.call !== 'function') {
    const err = new Error('@svc/integrations works only inside a snippet runner') as HostCallError;
    err.code = 'no_runner';
    throw err;
  }
  return h;
}

export interface IntegrationRequest {
  method: string;
  path: string;
  query?: Record<string, string | number | boolean | Array<string | number | boolean>>;
  headers?: Record<string, string>;
  /** Any JSON value (sent as JSON), or a string (sent as is). */
  body?: unknown;
}

export interface IntegrationResponse<T = unknown> {
  status: number;
  headers: Record<string, string>;
  body: T;
}

export const integrations = {
  async call<T = unknown>(name: string, request: IntegrationRequest): Promise<IntegrationResponse<T>> {
    if (!request || typeof request !== 'object')
      throw new TypeError('integrations.call(name, { method, path, … }): the request is missing');
    const args: Record<string, unknown> = { name, method: request.method, path: request.path };
    if (request.query !== undefined) args.query = request.query;
    if (request.headers !== undefined) args.headers = request.headers;
    if (request.body !== undefined) args.body = request.body;
    return (await host().call('integrations.call', args)) as IntegrationResponse<T>;
  },
};

export default integrations;
