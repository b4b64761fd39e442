import type { z } from 'zod';
import type { Operation, ResponseSpec } from './operation';
import { parseSse, parseSseText, type ByteSource } from './sse';

/**
 * The one typed client of the core's HTTP surface (`/v1`, `/_emu`), built from the contract's Operations
 * (contract/operation.ts): the renderer, the CLI, the bench and the tests all call the core through it.
 *
 * - `call(op, input)` → the success body, typed by the op's 2xx schema; an error answer throws `ProblemError`.
 * - `request(op, input)` → the same with the status and headers.
 * - `send(op, input)` → `{status, headers, body, text}` for any status, never throwing on one (tests that
 *   assert statuses).
 * - `stream(op, input)` → the response's SSE events, typed by the op's `events`, as they arrive.
 * - `validate: true` checks every response against the op: a status the op does not declare, a content type
 *   or body or header that does not match its schema, a problem `code` outside its `codes`, an event name or
 *   `data` outside its `events` all throw `ContractError`. Tests turn it on, so each test is a contract check.
 *
 * The credential follows the op's `auth`: `tenant` sends `Authorization: Bearer <key>`, `admin` sends the
 * admin token the same way (server/http/app.ts accepts it as a bearer token on `/_emu`), `none` sends nothing.
 * Path params are URL-encoded. Nothing here imports more than zod and the contract: it runs in Node and in
 * the browser.
 */

// ---- types ---------------------------------------------------------------------------------------

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyOperation = Operation<any, any, any, any, any>;

type PartsOf<O> = O extends Operation<infer P, infer Q, infer B, infer H, infer R> ? { p: P; q: Q; b: B; h: H; r: R } : never;

/** True when the schema is one the op declared (not the wide default `z.ZodType` of an absent one). */
type Declared<S> = [S] extends [z.ZodType] ? (z.ZodType extends S ? false : true) : false;

type ParamsInput<P> = Declared<P> extends true ? { params: z.input<P> } : { params?: undefined };
type QueryInput<Q> = Declared<Q> extends true ? { query?: z.input<Q> } : { query?: undefined };
type BodyInput<B> = Declared<B> extends true ? { body?: z.input<B> } : { body?: undefined };
type HeadersInput<H> = {
  /** Request headers: the op's declared ones (typed) and any other (lower- or mixed-case names). */
  headers?: (Declared<H> extends true ? Partial<z.input<H>> : unknown) & Record<string, string | undefined>;
};

interface CommonInput {
  signal?: AbortSignal;
  /** A raw request body sent as is instead of `body` (tests of malformed requests); set its content type in `headers`. */
  raw?: string | Uint8Array;
  /** Overrides the client's credential for this one call (`null`: send none). */
  credential?: string | null;
}

export type CallInput<O extends AnyOperation> = ParamsInput<PartsOf<O>['p']> &
  QueryInput<PartsOf<O>['q']> &
  BodyInput<PartsOf<O>['b']> &
  HeadersInput<PartsOf<O>['h']> &
  CommonInput;

/** The input argument, optional when the op needs nothing (no path params). */
type Args<O extends AnyOperation> = Declared<PartsOf<O>['p']> extends true ? [input: CallInput<O>] : [input?: CallInput<O>];

type OkStatus = 200 | 201 | 202 | 203 | 204 | 205 | 206 | 207 | 208 | 226;
type BodyOf<S> = S extends { schema: infer Z extends z.ZodType } ? z.output<Z> : undefined;
/**
 * The op's responses by their literal statuses: an index signature (`...problems(401, 404)` spreads a
 * `Record<number, ResponseSpec>`) is dropped, so `{ 200: ok(…), ...problems(…) }` still types its 200.
 */
type ResponsesOf<O> = { [K in keyof PartsOf<O>['r'] as number extends K ? never : K]: PartsOf<O>['r'][K] };
type OkOf<O> = Extract<keyof ResponsesOf<O>, OkStatus>;

/** The body of the op's success answers (the union over its 2xx statuses; `unknown` where none is declared literally). */
export type SuccessBody<O extends AnyOperation> = [OkOf<O>] extends [never]
  ? unknown
  : { [K in OkOf<O>]: BodyOf<ResponsesOf<O>[K]> }[OkOf<O>];

/** A response's events: its own, or those of an alternative content type (the invoke's `text/event-stream`). */
type EventMap<S> = S extends { events: infer E extends Readonly<Record<string, z.ZodType>> }
  ? E
  : S extends { alternatives: infer A }
    ? EventMap<A[keyof A]>
    : never;
type EventsOf<O> = { [K in keyof ResponsesOf<O>]: EventMap<ResponsesOf<O>[K]> }[keyof ResponsesOf<O>];

/** An event of a stream whose op does not type its events literally. */
export interface AnyStreamEvent {
  event: string;
  id: string | undefined;
  data: unknown;
}

/** One event of the op's stream, discriminated by its name, `data` typed by the op's `events` schema. */
export type StreamEvent<O extends AnyOperation> = [EventsOf<O>] extends [never]
  ? AnyStreamEvent
  : EventsOf<O> extends infer E extends Readonly<Record<string, z.ZodType>>
    ? { [N in LiteralKeys<E>]: { event: N; id: string | undefined; data: z.output<E[N]> } }[LiteralKeys<E>]
    : AnyStreamEvent;

/**
 * An events map's literal names: the map merged with the edge's responses (contract/edge.ts) also carries
 * ResponseSpec's `Record<string, …>` index, which would widen every event to `string` and its data to `unknown`.
 */
type LiteralKeys<E> = keyof { [N in keyof E as string extends N ? never : number extends N ? never : N]: true } & string;

export interface Reply<T> {
  status: number;
  headers: Headers;
  body: T;
}

/** What `send` answers: any status, the body parsed as JSON when it is JSON (else undefined), and its text. */
export interface RawReply {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  text: string;
}

export interface PathInit {
  auth?: Operation['auth'];
  body?: unknown;
  raw?: string | Uint8Array;
  headers?: Record<string, string | undefined>;
  credential?: string | null;
  signal?: AbortSignal;
}

export interface EventStream<O extends AnyOperation> extends AsyncIterable<StreamEvent<O>> {
  status: number;
  headers: Headers;
}

export interface ClientOptions {
  /** Prefix of every path (`http://127.0.0.1:7070`); empty in a page served by the core. */
  baseUrl?: string;
  /** The tenant's API key, sent on `tenant` ops. */
  key?: string | null;
  /** The emulator's admin token, sent on `admin` ops. */
  adminToken?: string | null;
  fetch?: typeof fetch;
  /** Check every response against the op (see above). */
  validate?: boolean;
  /** Called with each comment of a stream (`ping`). */
  onComment?: (text: string) => void;
}

export interface Client {
  call<O extends AnyOperation>(op: O, ...args: Args<O>): Promise<SuccessBody<O>>;
  request<O extends AnyOperation>(op: O, ...args: Args<O>): Promise<Reply<SuccessBody<O>>>;
  send<O extends AnyOperation>(op: O, ...args: Args<O>): Promise<RawReply>;
  stream<O extends AnyOperation>(op: O, ...args: Args<O>): Promise<EventStream<O>>;
  /** The path (with query) a call would request, e.g. for a link. */
  path<O extends AnyOperation>(op: O, ...args: Args<O>): string;
  /**
   * An untyped request by method and path, for what no Operation names (a test's unknown route or method, a
   * page served beside the API): the same credentials (`auth`, `tenant` when absent), body and headers.
   */
  fetchPath(method: string, path: string, init?: PathInit): Promise<Response>;
  /** `fetchPath`, read whole as `send` reads it (never throwing on a status). */
  sendPath(method: string, path: string, init?: PathInit): Promise<RawReply>;
  /** The same client with other credentials (a second tenant's key, none at all). */
  with(opts: Partial<ClientOptions>): Client;
  readonly options: Readonly<ClientOptions>;
}

// ---- errors --------------------------------------------------------------------------------------

/** An RFC 9457 problem's members as the core sends them. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  errors?: { location: string; message: string }[];
  [member: string]: unknown;
}

const STANDARD_MEMBERS = new Set(['type', 'title', 'status', 'detail', 'code', 'errors']);

/** An error answer: the problem's members (and any extra ones, such as `invocation_id`, in `extra`). */
export class ProblemError extends Error {
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string;
  readonly type: string;
  readonly errors: { location: string; message: string }[];
  /** Members beyond RFC 9457's and `code`/`errors`: `invocation_id`, `stack`, `cap`, … */
  readonly extra: Readonly<Record<string, unknown>>;

  constructor(
    readonly operationId: string,
    status: number,
    readonly headers: Headers,
    readonly problem: Problem,
    readonly text: string,
  ) {
    const code = typeof problem.code === 'string' ? problem.code : `http_${status}`;
    const detail = typeof problem.detail === 'string' ? problem.detail : text.trim().slice(0, 500) || `${operationId} answered ${status}`;
    super(detail);
    this.name = 'ProblemError';
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.title = typeof problem.title === 'string' ? problem.title : '';
    this.type = typeof problem.type === 'string' ? problem.type : 'about:blank';
    this.errors = Array.isArray(problem.errors) ? problem.errors : [];
    this.extra = Object.fromEntries(Object.entries(problem).filter(([k]) => !STANDARD_MEMBERS.has(k)));
  }
}

/** A response that breaks the op's contract (only with `validate: true`). */
export class ContractError extends Error {
  constructor(
    readonly operationId: string,
    readonly status: number,
    message: string,
    readonly issues: readonly unknown[] = [],
  ) {
    super(`${operationId} → ${status}: ${message}${issues.length ? `\n${JSON.stringify(issues, null, 2)}` : ''}`);
    this.name = 'ContractError';
  }
}

// ---- the client ----------------------------------------------------------------------------------

export function createClient(options: ClientOptions = {}): Client {
  const doFetch = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  const base = (options.baseUrl ?? '').replace(/\/+$/, '');

  function open(op: AnyOperation, input: CallInput<AnyOperation> = {}, accept?: string): Promise<Response> {
    return openPath(op.method, pathOf(op, input), { ...(input as PathInit), auth: op.auth }, accept);
  }

  async function openPath(method: string, path: string, input: PathInit = {}, accept?: string): Promise<Response> {
    const headers = new Headers();
    if (accept) headers.set('accept', accept);
    const auth = input.auth ?? 'tenant';
    const credential =
      input.credential !== undefined
        ? input.credential
        : auth === 'tenant'
          ? options.key
          : auth === 'admin'
            ? options.adminToken
            : undefined;
    if (credential) headers.set('authorization', `Bearer ${credential}`);
    let body: string | Uint8Array | undefined;
    if (input.raw !== undefined) body = input.raw;
    else if (input.body !== undefined) {
      body = JSON.stringify(input.body);
      headers.set('content-type', 'application/json');
    }
    for (const [name, value] of Object.entries(input.headers ?? {})) {
      if (value !== undefined) headers.set(name, String(value));
    }
    return doFetch(base + path, {
      method: method.toUpperCase(),
      headers,
      body: body as BodyInit | undefined,
      signal: input.signal,
    });
  }

  async function readPath(res: Response): Promise<RawReply> {
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.status, headers: res.headers, body, text };
  }

  async function read(op: AnyOperation, res: Response): Promise<RawReply> {
    const reply = await readPath(res);
    if (options.validate) check(op, reply);
    return reply;
  }

  function fail(op: AnyOperation, reply: RawReply): never {
    const problem = reply.body && typeof reply.body === 'object' && !Array.isArray(reply.body) ? (reply.body as Problem) : {};
    throw new ProblemError(op.operationId, reply.status, reply.headers, problem, reply.text);
  }

  const isOk = (status: number) => (status >= 200 && status < 300) || status === 304;

  const client: Client = {
    options,
    with: (more) => createClient({ ...options, ...more }),
    path: (op, ...[input]) => pathOf(op, input ?? {}),
    fetchPath: (method, path, init) => openPath(method, path, init),
    async sendPath(method, path, init) {
      return readPath(await openPath(method, path, init));
    },
    async send(op, ...[input]) {
      return read(op, await open(op, input));
    },
    async request(op, ...[input]) {
      const reply = await read(op, await open(op, input, 'application/json'));
      if (!isOk(reply.status)) fail(op, reply);
      // The body is the op's declared success body (checked against its schema when `validate` is on).
      // eslint-disable-next-line @typescript-eslint/no-unsafe-assignment
      return { status: reply.status, headers: reply.headers, body: reply.body };
    },
    async call(op, ...[input]) {
      const reply = await read(op, await open(op, input, 'application/json'));
      if (!isOk(reply.status)) fail(op, reply);
      // As in request: the op's declared success body.
      // eslint-disable-next-line @typescript-eslint/no-unsafe-return
      return reply.body;
    },
    async stream<O extends AnyOperation>(op: O, ...[input]: Args<O>): Promise<EventStream<O>> {
      const res = await open(op, input, 'text/event-stream');
      const type = res.headers.get('content-type') ?? '';
      if (!type.startsWith('text/event-stream') || !res.body) {
        const reply = await read(op, res);
        if (!isOk(reply.status)) fail(op, reply);
        throw new ContractError(op.operationId, res.status, `expected text/event-stream, got ${type || 'no content type'}`);
      }
      const spec = options.validate ? declared(op, res.status, 'text/event-stream') : undefined;
      if (spec) checkHeaders(op, res.status, spec, res.headers);
      if (spec && !spec.events) throw new ContractError(op.operationId, res.status, 'an event stream where the op declares none');
      const body = res.body as ByteSource;
      const signal = input?.signal;
      const onComment = options.onComment;
      async function* events(): AsyncGenerator<StreamEvent<O>> {
        for await (const e of parseSse(body, { ...(signal ? { signal } : {}), ...(onComment ? { onComment } : {}) })) {
          const data = spec ? checkEvent(op, res.status, spec, e.event, e.data) : jsonOrText(e.data);
          yield { event: e.event, id: e.id, data } as StreamEvent<O>;
        }
      }
      return { status: res.status, headers: res.headers, [Symbol.asyncIterator]: events };
    },
  };
  return client;
}

// ---- requests ------------------------------------------------------------------------------------

/** `/v1/snippets/{id}` with `params.id` URL-encoded, then the query's defined values. */
export function pathOf(op: AnyOperation, input: { params?: unknown; query?: unknown }): string {
  const params = (input.params ?? {}) as Record<string, unknown>;
  const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined || value === null || value === '') throw new TypeError(`${op.operationId}: path param '${name}' is missing`);
    return encodeURIComponent(typeof value === 'string' ? value : JSON.stringify(value));
  });
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries((input.query ?? {}) as Record<string, unknown>)) {
    if (value === undefined || value === null) continue;
    for (const v of Array.isArray(value) ? value : [value]) query.append(name, String(v));
  }
  const qs = query.toString();
  return qs ? `${path}?${qs}` : path;
}

// ---- validation ----------------------------------------------------------------------------------

/** The op's spec for a status, or for one of its alternative content types (the invoke's event stream beside its JSON). */
function declared(op: AnyOperation, status: number, contentType?: string): ResponseSpec {
  const spec = (op.responses as Record<number, ResponseSpec>)[status];
  if (!spec) {
    const known = Object.keys(op.responses as Record<number, ResponseSpec>).join(', ');
    throw new ContractError(op.operationId, status, `status ${status} is not declared (the op declares ${known})`);
  }
  return (contentType && spec.alternatives?.[contentType]) || spec;
}

function checkHeaders(op: AnyOperation, status: number, spec: ResponseSpec, headers: Headers): void {
  if (!spec.headers) return;
  const parsed = spec.headers.safeParse(Object.fromEntries(headers.entries()));
  if (!parsed.success) throw new ContractError(op.operationId, status, 'response headers', parsed.error.issues);
}

/** The reply against the op's spec for its status: content type, body schema, problem code, headers. */
function check(op: AnyOperation, reply: RawReply): void {
  const got = (reply.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  const spec = declared(op, reply.status, got);
  checkHeaders(op, reply.status, spec, reply.headers);
  if (spec.events) {
    if (got !== 'text/event-stream')
      throw new ContractError(op.operationId, reply.status, `content type ${got || 'none'}, declared text/event-stream`);
    for (const e of parseSseText(reply.text)) checkEvent(op, reply.status, spec, e.event, e.data);
    return;
  }
  if (!spec.schema) {
    if (reply.text !== '' && !spec.contentType)
      throw new ContractError(op.operationId, reply.status, `a ${got || 'untyped'} body where the op declares none`);
    if (spec.contentType && reply.text !== '' && got !== spec.contentType.toLowerCase())
      throw new ContractError(op.operationId, reply.status, `content type ${got}, declared ${spec.contentType}`);
    return;
  }
  const want = (spec.contentType ?? 'application/json').toLowerCase();
  if (got !== want) throw new ContractError(op.operationId, reply.status, `content type ${got || 'none'}, declared ${want}`);
  // A text answer (the run report's HTML, the metrics) is checked as the text it is; JSON ones as JSON.
  const json = want === 'application/json' || want.endsWith('+json');
  if (json && reply.body === undefined && reply.text !== '') throw new ContractError(op.operationId, reply.status, 'the body is not JSON');
  const parsed = spec.schema.safeParse(json ? reply.body : reply.text);
  if (!parsed.success) throw new ContractError(op.operationId, reply.status, 'response body', parsed.error.issues);
  const code = (reply.body as { code?: unknown } | undefined)?.code;
  if (spec.codes && typeof code === 'string' && !spec.codes.includes(code))
    throw new ContractError(op.operationId, reply.status, `problem code '${code}' is not among the declared ${spec.codes.join(', ')}`);
}

const jsonOrText = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

/** One SSE event against the spec's `events`: its name declared, its `data` JSON matching that event's schema. */
function checkEvent(op: AnyOperation, status: number, spec: ResponseSpec, event: string, text: string): unknown {
  const schema = spec.events?.[event];
  if (!schema) throw new ContractError(op.operationId, status, `event '${event}' is not among the op's events`);
  const data = jsonOrText(text);
  const parsed = schema.safeParse(data);
  if (!parsed.success) throw new ContractError(op.operationId, status, `event '${event}' data`, parsed.error.issues);
  return data;
}
