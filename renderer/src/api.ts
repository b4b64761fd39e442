// The GUI's one way to the core: `/v1` with the tenant's key, `/_emu` with the session cookie the browser
// sends by itself (renderer/src/session.ts). No React here, so it can be tested under Node.
import { createClient, type Client } from '../../contract/client';

/**
 * An RFC 9457 problem the core answered, with its stable `code`, `detail` and, for validation, the field
 * errors: the typed client's error (contract/client.ts), shown by ui/kit.tsx's ProblemNotice.
 */
export { ProblemError, type EventStream } from '../../contract/client';
export { operations } from '../../contract';

export interface Api {
  /**
   * The typed client (contract/client.ts) with the local tenant's key on `/v1` ops and the session cookie (or
   * a token given to createApi, in tests) on `/_emu` ops: `api.client.call(operations.getSnippet, { params: { id } })`. An error answer throws ProblemError.
   */
  readonly client: Client;
  /** The local tenant's key (shown on the overview, used for /v1). */
  readonly key: string | null;
}

export function createApi(opts: { token?: string | null; key: string | null; fetchImpl?: typeof fetch }): Api {
  const client = createClient({ key: opts.key, adminToken: opts.token ?? null, ...(opts.fetchImpl ? { fetch: opts.fetchImpl } : {}) });
  return { key: opts.key, client };
}

/**
 * An event of a typed stream (`api.client.stream(op, …)`) as the frame the core wrote it (server/http/sse.ts
 * writes `data` as one line of JSON), for the stream page's wire view.
 */
export function rawFrame(e: { id: string | undefined; event: string; data: unknown }): string {
  return `${e.id === undefined ? '' : `id: ${e.id}\n`}event: ${e.event}\ndata: ${JSON.stringify(e.data)}`;
}
