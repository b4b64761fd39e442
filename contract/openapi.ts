import { z } from 'zod';
import type { Method, Operation, ResponseSpec } from './operation';
import { operations } from './index';
import { AllowHeaders, RequestIdHeader, WwwAuthenticateHeaders } from './headers';
import { PROBLEMS } from './problems';

/**
 * The OpenAPI 3.1 document, generated from the Operations (contract/index.ts) by zod's own JSON Schema
 * output. Pure: the server serves it at /openapi.json, and `npm run openapi` writes it to
 * docs/openapi.json, checked in; test/server/openapi.test.ts fails when they differ.
 *
 * - A schema with a `.meta({ id })` becomes a component. Requests are described as zod reads them (`io:
 *   'input'`: a query's string before its transform, a field with a default optional), responses as the
 *   core writes them (`io: 'output'`); a component that differs between the two gets an `…Input` twin.
 * - Every response carries `X-Request-Id`; a problem response's `code` is an enum of the codes that
 *   status can carry there (contract/problems.ts), and its description lists them.
 * - Each operation's responses already hold what the HTTP edge answers for it (contract/edge.ts).
 * - OpenAPI 3.1 has no schema for the items of a `text/event-stream`: such a response is text whose
 *   `contentSchema` is the frames (`{event, data}`, one branch per event), and its events are also
 *   listed as `x-sse-events` (event name → schema of its JSON `data`) beside the media type.
 */
type Json = Record<string, unknown>;

const COMPONENT_REF = '#/components/schemas/';
const METHOD_ORDER: readonly Method[] = ['get', 'put', 'post', 'patch', 'delete'];
const HEADER_NAMES: Record<string, string> = {
  'www-authenticate': 'WWW-Authenticate',
  'x-emu-limits': 'X-Emu-Limits',
  'x-emu-admin': 'X-Emu-Admin',
};
/** `x-invoke-mode` → `X-Invoke-Mode` (names are case-insensitive; the document shows them as people write them). */
export const headerName = (name: string) =>
  HEADER_NAMES[name] ?? name.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());

/** zod → JSON Schema for many schemas at once, so components are shared: slot name → schema, plus the `$defs`. */
function convert(slots: Map<string, z.ZodType>, io: 'input' | 'output') {
  const all = z.object(Object.fromEntries(slots));
  const json = z.toJSONSchema(all, { target: 'draft-2020-12', io, unrepresentable: 'any', reused: 'inline', cycles: 'ref' }) as Json & {
    properties: Record<string, Json>;
    $defs?: Record<string, Json>;
  };
  return { slots: json.properties, defs: json.$defs ?? {} };
}

/** Rewrites `#/$defs/X` into component references (renamed where `rename` says). */
function rewriteRefs<T>(value: T, rename: (id: string) => string): T {
  return JSON.parse(JSON.stringify(value), (key, v: unknown) =>
    key === '$ref' && typeof v === 'string' && v.startsWith('#/$defs/') ? COMPONENT_REF + rename(v.slice('#/$defs/'.length)) : v,
  ) as T;
}

const stripSchemaKeyword = (s: Json): Json => {
  const { $schema: _drop, ...rest } = s;
  return rest;
};

export function buildOpenApi(all: readonly Operation[] = Object.values(operations), version = '0.1.0') {
  // A fixed order (a module namespace's key order differs between loaders): by path, then by method.
  const ops = [...all].sort((a, b) =>
    a.path === b.path ? METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method) : a.path < b.path ? -1 : 1,
  );
  // 1. Every schema in one pass per direction, each in its own slot.
  const inputs = new Map<string, z.ZodType>();
  const outputs = new Map<string, z.ZodType>();
  ops.forEach((op, i) => {
    for (const part of ['params', 'query', 'headers', 'body'] as const) if (op[part]) inputs.set(`${i}.${part}`, op[part]);
    const all = Object.entries(op.responses);
    if (op.defaultResponse) all.push(['default', op.defaultResponse]);
    for (const [status, spec] of all) {
      for (const [type, s] of mediaTypes(spec)) {
        if (s.schema) outputs.set(`${i}.${status}.${type}`, s.schema);
        for (const [event, schema] of Object.entries(s.events ?? {})) outputs.set(`${i}.${status}.${type}.event.${event}`, schema);
        if (s.headers) outputs.set(`${i}.${status}.${type}.headers`, s.headers);
      }
    }
  });
  outputs.set('edge.requestId', RequestIdHeader);
  outputs.set('edge.wwwAuthenticate', WwwAuthenticateHeaders);
  outputs.set('edge.allow', AllowHeaders);
  const inPass = convert(inputs, 'input');
  const outPass = convert(outputs, 'output');

  // 2. Components: one per id; an id whose request form differs from its response form gets an `…Input` twin.
  const differs = (id: string) => id in outPass.defs && JSON.stringify(outPass.defs[id]) !== JSON.stringify(inPass.defs[id]);
  const inName = (id: string) => (differs(id) ? `${id}Input` : id);
  const inSlots = rewriteRefs(inPass.slots, inName);
  const outSlots = rewriteRefs(outPass.slots, (id) => id);
  const components: Record<string, Json> = {};
  for (const [id, def] of Object.entries(rewriteRefs(outPass.defs, (x) => x))) components[id] = def;
  for (const [id, def] of Object.entries(rewriteRefs(inPass.defs, inName))) components[inName(id)] ??= def;

  // 3. Paths.
  const paths: Record<string, Partial<Record<Method, Json>>> = {};
  const seen: { r: Json; at: Record<string, Json>; status: string }[] = [];
  ops.forEach((op, i) => {
    const parameters = [
      ...parametersOf(inSlots[`${i}.params`], 'path'),
      ...parametersOf(inSlots[`${i}.query`], 'query'),
      ...parametersOf(inSlots[`${i}.headers`], 'header'),
    ];
    const responses: Record<string, Json> = {};
    for (const [status, spec] of Object.entries(op.responses).sort(([a], [b]) => Number(a) - Number(b))) {
      responses[status] = response(spec, Number(status), `${i}.${status}`, outSlots);
    }
    if (op.defaultResponse) responses.default = response(op.defaultResponse, 0, `${i}.default`, outSlots);
    for (const [status, r] of Object.entries(responses)) seen.push({ r, at: responses, status });
    (paths[op.path] ??= {})[op.method] = {
      operationId: op.operationId,
      summary: op.summary,
      ...(op.description ? { description: op.description } : {}),
      tags: [op.tag],
      security: op.auth === 'tenant' ? [{ apiKey: [] }] : op.auth === 'admin' ? [{ adminToken: [] }] : [],
      ...(parameters.length ? { parameters } : {}),
      ...(op.body
        ? {
            requestBody: {
              required: !op.bodyOptional,
              content: { 'application/json': { schema: stripSchemaKeyword(inSlots[`${i}.body`]!) } },
            },
          }
        : op.rawBody
          ? {
              requestBody: {
                required: true,
                description: op.rawBody.description,
                content: { [op.rawBody.contentType]: { schema: { type: 'string', format: 'binary', maxLength: op.rawBody.maxBytes } } },
              },
            }
          : {}),
      responses,
    };
  });

  const shared = shareResponses(seen);
  const refsText = JSON.stringify([paths, shared]);
  const used = new Set(ops.map((op) => op.tag));
  const tags = [...Object.keys(TAGS).filter((t) => used.delete(t)), ...used].map((name) => ({ name, description: TAGS[name] ?? name }));
  return {
    openapi: '3.1.0',
    info: {
      title: 'Snippet Invocation Service (emulator)',
      version,
      description:
        'The production `/v1` contract as the Snippet Emulator implements it, plus the emulator-only `/_emu` surface. Errors are application/problem+json with a stable `code` (each response lists the codes it can carry). Any answer carries `X-Request-Id`. A method a known path does not take answers 405 `method_not_allowed` with `Allow`; an unknown path 404 `not_found`; a method this server implements nowhere, on an unknown path, 501 `not_implemented`.',
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: 'http://127.0.0.1:7070', description: 'The emulator on its default port.' }],
    tags,
    paths,
    components: {
      schemas: Object.fromEntries(Object.entries(components).sort(([a], [b]) => a.localeCompare(b))),
      responses: shared,
      headers: Object.fromEntries(
        [outSlots['edge.requestId'], outSlots['edge.wwwAuthenticate'], outSlots['edge.allow']]
          .flatMap((h) => Object.entries(headerObjects(h)))
          .filter(([name]) => refsText.includes(`"#/components/headers/${name}"`)),
      ),
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'A tenant API key, `svc_…`.' },
        adminToken: {
          type: 'http',
          scheme: 'bearer',
          description:
            "The emulator's admin token (`emu_…`, from `<data-dir>/emulator.json`; it changes at every start). The GUI's session cookie `svc_emu_session` (set by opening the GUI with `?token=`) is accepted in its place from the GUI's own pages, never on `/v1`.",
        },
      },
    },
  };
}

const TAGS: Record<string, string> = {
  Meta: 'Unauthenticated probes.',
  Snippets: 'Snippets: named, runtime-bound code.',
  Versions: 'Immutable versions of a snippet with their limits.',
  Environments: 'Environments and what each runs.',
  Invoke: 'Running a snippet: sync, async or streamed.',
  Invocations: 'Invocation records, logs, cancellation and callbacks.',
  Tenant: 'The tenant’s caps and webhook secret.',
  Secrets: 'Secrets, injected as environment variables.',
  Store: 'The tenant’s key-value store.',
  Integrations: 'Outbound integrations with their credentials.',
  Emulator: 'The emulator’s own surface (admin token).',
};

/** A response's media types: its own, then its alternatives. */
function mediaTypes(spec: ResponseSpec): [string, ResponseSpec][] {
  const own: [string, ResponseSpec][] = spec.schema || spec.events ? [[spec.contentType ?? 'application/json', spec]] : [];
  return [...own, ...Object.entries(spec.alternatives ?? {}).map(([type, alt]) => [type, alt] as [string, ResponseSpec])];
}

/** The edge's headers, by reference to `components.headers`. */
const headerRef = (name: string): Json => ({ $ref: `#/components/headers/${name}` });

/**
 * A problem response written the same way by several operations (the edge's 401, 403, 421 and 500, most
 * others) moves to `components.responses` once, named by its status and codes, and each use refers to it.
 */
function shareResponses(seen: { r: Json; at: Record<string, Json>; status: string }[]): Record<string, Json> {
  const byText = new Map<string, typeof seen>();
  for (const s of seen) {
    const key = JSON.stringify(s.r);
    byText.set(key, [...(byText.get(key) ?? []), s]);
  }
  const shared: Record<string, Json> = {};
  for (const uses of byText.values()) {
    if (uses.length < 2) continue;
    const { r, status } = uses[0]!;
    const codes =
      JSON.stringify(r)
        .match(/"enum":\[("[a-z_]+",?)+\]/)?.[0]
        .match(/[a-z_]{2,}/g)
        ?.filter((c) => c !== 'enum') ?? [];
    if (!codes.length) continue; // a success answer says what it returns where it is
    const base = [status === 'default' ? 'Default' : `Status${status}`, ...codes.map(camel)].join('');
    let name = base;
    for (let n = 2; name in shared; n++) name = `${base}${n}`;
    shared[name] = r;
    for (const u of uses) u.at[u.status] = { $ref: `#/components/responses/${name}` };
  }
  return Object.fromEntries(Object.entries(shared).sort(([a], [b]) => a.localeCompare(b)));
}

const camel = (code: string) => code.replace(/(^|_)([a-z])/g, (_m, _u: string, c: string) => c.toUpperCase());

function response(spec: ResponseSpec, status: number, slot: string, outSlots: Record<string, Json>): Json {
  const headers: Record<string, Json> = { 'X-Request-Id': headerRef('X-Request-Id') };
  if (status === 401) headers['WWW-Authenticate'] = headerRef('WWW-Authenticate');
  if (status === 405) headers.Allow = headerRef('Allow');
  const content: Record<string, Json> = {};
  for (const [type, s] of mediaTypes(spec)) {
    Object.assign(headers, headerObjects(outSlots[`${slot}.${type}.headers`]));
    let schema = stripSchemaKeyword(outSlots[`${slot}.${type}`] ?? {});
    if (s.codes?.length) {
      schema = { allOf: [schema, { type: 'object', properties: { code: { type: 'string', enum: [...s.codes] } }, required: ['code'] }] };
    }
    const events = Object.entries(s.events ?? {}).map(([e]) => [e, stripSchemaKeyword(outSlots[`${slot}.${type}.event.${e}`]!)] as const);
    if (events.length) {
      // The stream is text; `contentSchema` (JSON Schema 2020-12) says what each frame carries, and
      // `x-sse-events` maps each event name to the schema of its `data`, the same components both ways.
      schema = {
        ...schema,
        contentMediaType: 'text/event-stream',
        contentSchema: {
          description: 'Each frame: its `event:` name and its `data:` line, parsed as JSON.',
          oneOf: events.map(([event, data]) => ({
            type: 'object',
            properties: { event: { const: event }, data },
            required: ['event', 'data'],
          })),
        },
      };
    }
    content[type] = { schema, ...(events.length ? { 'x-sse-events': Object.fromEntries(events) } : {}) };
  }
  const codes = mediaTypes(spec).flatMap(([, s]) => s.codes ?? []);
  const description =
    codes.length && !codes.every((c) => spec.description.includes(`\`${c}\``))
      ? `${spec.description} Codes: ${codes.map((c) => `\`${c}\``).join(', ')}.`
      : spec.description;
  return { description, headers, ...(Object.keys(content).length ? { content } : {}) };
}

/** A z.object's JSON Schema → OpenAPI parameters. */
function parametersOf(schema: Json | undefined, where: 'path' | 'query' | 'header'): Json[] {
  if (!schema) return [];
  const properties = (schema.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.entries(properties).map(([name, s]) => {
    const { description, ...rest } = s;
    return {
      name: where === 'header' ? headerName(name) : name,
      in: where,
      required: where === 'path' || required.has(name),
      ...(typeof description === 'string' ? { description } : {}),
      schema: rest,
    };
  });
}

/** A z.object's JSON Schema → OpenAPI response headers. */
function headerObjects(schema: Json | undefined): Record<string, Json> {
  if (!schema) return {};
  const properties = (schema.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema.required ?? []) as string[]);
  return Object.fromEntries(
    Object.entries(properties).map(([name, s]) => {
      const { description, ...rest } = s;
      return [
        headerName(name),
        { ...(typeof description === 'string' ? { description } : {}), required: required.has(name), schema: rest },
      ];
    }),
  );
}

/** The problem codes operations name that contract/problems.ts does not register (none, or a test fails). */
export const unregisteredCodes = (ops: readonly Operation[] = Object.values(operations)) =>
  [
    ...new Set(
      ops.flatMap((op) =>
        Object.values(op.responses).flatMap((r) => [
          ...(r.codes ?? []),
          ...Object.values(r.alternatives ?? {}).flatMap((a) => a.codes ?? []),
        ]),
      ),
    ),
  ].filter((c) => !(c in PROBLEMS));
