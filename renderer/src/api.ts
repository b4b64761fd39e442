// The GUI's one way to the core: `/v1` with the tenant's key, `/_emu` with the admin token. No React
// here, so it can be tested under Node.

/** An RFC 9457 problem the core answered, with its stable `code` and, for validation, the field errors. */
export class ApiProblem extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly errors: { location: string; message: string }[] = [],
  ) {
    super(detail);
  }
}

export interface ApiReply<T> {
  status: number;
  headers: Headers;
  body: T;
}

export interface Api {
  /** A `/v1` call as the local tenant. Throws ApiProblem for an error answer. */
  v1<T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiReply<T>>;
  /** A `/_emu` call with the admin token. Throws ApiProblem for an error answer. */
  emu<T = any>(method: string, path: string, body?: unknown): Promise<ApiReply<T>>;
  /** A raw streaming call (SSE): the Response, headers sent as given plus the credential. */
  stream(path: string, init: { method?: string; body?: unknown; headers?: Record<string, string>; admin?: boolean; signal?: AbortSignal }): Promise<Response>;
  /** The local tenant's key (shown on the overview, used for /v1). */
  readonly key: string | null;
}

export function createApi(opts: { token: string; key: string | null; fetchImpl?: typeof fetch }): Api {
  const doFetch = opts.fetchImpl ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  async function call<T>(credential: string | null, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiReply<T>> {
    const res = await doFetch(path, {
      method,
      headers: {
        Accept: 'application/json',
        ...(credential ? { Authorization: `Bearer ${credential}` } : {}),
        ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = text;
    }
    if (!res.ok && res.status !== 304) {
      const p = (json ?? {}) as { code?: string; detail?: string; errors?: { location: string; message: string }[] };
      throw new ApiProblem(res.status, p.code ?? `http_${res.status}`, p.detail ?? `${method} ${path} answered ${res.status}`, p.errors ?? []);
    }
    return { status: res.status, headers: res.headers, body: json as T };
  }
  return {
    key: opts.key,
    v1: (method, path, body, headers) => call(opts.key, method, path, body, headers),
    emu: (method, path, body) => call(opts.token, method, path, body),
    stream: (path, init) =>
      doFetch(path, {
        method: init.method ?? 'GET',
        headers: {
          Authorization: `Bearer ${init.admin ? opts.token : (opts.key ?? '')}`,
          ...(init.body !== undefined ? { 'Content-Type': 'application/json' } : {}),
          ...init.headers,
        },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: init.signal,
      }),
  };
}

/** Server-sent events from a streaming Response, as they arrive (`: ping` comments skipped). */
export async function* sseEvents(res: Response): AsyncGenerator<{ id: number; event: string; data: unknown; raw: string }> {
  if (!res.body) return;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    for (let end = buf.indexOf('\n\n'); end >= 0; end = buf.indexOf('\n\n')) {
      const raw = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const fields: Record<string, string> = {};
      for (const line of raw.split('\n')) {
        const m = /^(\w+): ?(.*)$/.exec(line);
        if (m) fields[m[1]!] = m[2]!;
      }
      if (fields.event && fields.data !== undefined) yield { id: Number(fields.id), event: fields.event, data: JSON.parse(fields.data), raw };
    }
  }
}
