import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type Router from '@koa/router';
import { buildOpenApi, unregisteredCodes } from '../../contract/openapi';
import { operations } from '../../contract';
import { PROBLEMS, type ProblemCode } from '../../contract/problems';
import type { Operation as ContractOperation } from '../../contract/operation';
import { allRoutes } from '../../server/api/routes';
import { createApp } from '../../server/http/app';
import { Metrics } from '../../server/http/metrics';
import { silentLogger } from '../../server/logger';
import { EMULATOR_VERSION } from '../../server/version';

type Operation = {
  operationId?: string;
  tags?: string[];
  summary?: string;
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean; schema?: { enum?: string[]; pattern?: string } }[];
  requestBody?: { required?: boolean; content: Record<string, unknown> };
  responses: Record<string, { description: string; headers?: Record<string, unknown>; content?: Record<string, Record<string, unknown>> }>;
};
type Doc = {
  openapi: string;
  info: { version: string };
  paths: Record<string, Record<string, Operation>>;
  components?: { securitySchemes?: Record<string, unknown> };
};

/** Every route the Koa app mounts (its router's layers), as `{method, path}` in the document's spelling. */
function mountedRoutes(): { method: string; path: string }[] {
  const app = createApp({
    services: {} as never,
    routes: allRoutes,
    logger: silentLogger,
    metrics: new Metrics(),
    hostPolicy: { boundHost: '127.0.0.1', allowedHosts: [] },
    adminToken: 'emu_test',
    guiSession: {} as never, // only the router's table is read: no request runs
    openapi: () => ({}),
    rendererDir: null,
  });
  const router = app.middleware.map((m) => (m as { router?: Router }).router).find((r) => r !== undefined);
  expect(router, 'the app mounts a @koa/router').toBeDefined();
  return router!.stack.flatMap((layer) =>
    layer.methods
      .filter((m) => m !== 'HEAD')
      .map((m) => ({ method: m.toLowerCase(), path: String(layer.path).replace(/:(\w+)/g, '{$1}') })),
  );
}

const checkedInPath = join(__dirname, '..', '..', 'docs', 'openapi.json');
const generated = JSON.parse(JSON.stringify(buildOpenApi(undefined, EMULATOR_VERSION))) as Doc;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

/** The document with its shared responses and headers (`#/components/responses|headers/…`) written out where they are used. */
function inlineRefs(doc: Doc): Doc {
  const components = (doc as unknown as { components: Record<string, Record<string, unknown>> }).components;
  const inline = (value: unknown): unknown =>
    JSON.parse(JSON.stringify(value), (_key, v: unknown) => {
      const ref = (v as { $ref?: unknown } | null)?.$ref;
      const m = typeof ref === 'string' ? /^#\/components\/(responses|headers)\/(.+)$/.exec(ref) : null;
      if (!m) return v;
      const target = components[m[1]!]?.[m[2]!];
      if (!target) throw new Error(`dangling reference ${String(ref)}`);
      return inline(target);
    });
  return inline(doc) as Doc;
}
const inlined = inlineRefs(generated);

describe('docs/openapi.json', () => {
  it('is exactly what the code generates (run `npm run openapi` after changing routes or schemas)', () => {
    const checkedIn = JSON.parse(readFileSync(checkedInPath, 'utf8')) as Doc;
    expect(checkedIn, 'docs/openapi.json is out of date with the route definitions: run `npm run openapi` and commit the result').toEqual(
      generated,
    );
  });

  it('is the file `npm run openapi` writes, byte for byte (2-space JSON and a final newline)', () => {
    expect(
      readFileSync(checkedInPath, 'utf8'),
      'docs/openapi.json is not formatted as `npm run openapi` writes it: run `npm run openapi`',
    ).toBe(JSON.stringify(generated, null, 2) + '\n');
  });

  it('carries the emulator version and is OpenAPI 3.1', () => {
    expect(generated.openapi).toBe('3.1.0');
    expect(generated.info.version).toBe(EMULATOR_VERSION);
  });
});

describe('the generated document covers every route', () => {
  it('has no duplicate route definitions', () => {
    const keys = allRoutes.map((r) => `${r.method.toUpperCase()} ${r.path}`);
    expect(keys.filter((k, i) => keys.indexOf(k) !== i)).toEqual([]);
  });

  it.each(allRoutes.map((r) => [`${r.method.toUpperCase()} ${r.path}`, r] as const))('%s is documented', (_name, route) => {
    const op = inlined.paths[route.path]?.[route.method];
    expect(op, `${route.method.toUpperCase()} ${route.path} missing from the document`).toBeDefined();
    expect(op!.tags).toEqual([route.tag]);
    expect(op!.summary).toBe(route.summary);
    for (const status of Object.keys(route.responses)) expect(op!.responses).toHaveProperty(status);
    // Every {param} of the path is a required path parameter.
    for (const [, name] of route.path.matchAll(/\{(\w+)\}/g)) {
      expect(op!.parameters ?? []).toContainEqual(expect.objectContaining({ name, in: 'path', required: true }));
    }
    if (route.body) {
      expect(op!.requestBody?.content).toHaveProperty(['application/json']);
      expect(op!.requestBody?.required).toBe(!route.bodyOptional);
    } else if (route.rawBody) {
      // A body that is not JSON (a state archive): its own content type, required.
      expect(op!.requestBody?.content).toHaveProperty([route.rawBody.contentType]);
      expect(op!.requestBody?.required).toBe(true);
    } else {
      expect(op!.requestBody).toBeUndefined();
    }
  });

  it('documents nothing that is not a route the app mounts', () => {
    const routeKeys = new Set(mountedRoutes().map((r) => `${r.method} ${r.path}`));
    for (const [path, item] of Object.entries(inlined.paths)) {
      for (const method of Object.keys(item).filter((m) => METHODS.includes(m))) {
        expect(routeKeys.has(`${method} ${path}`), `${method.toUpperCase()} ${path} has no route`).toBe(true);
      }
    }
  });
});

describe('the /v1 contract in the document', () => {
  const v1 = Object.entries(inlined.paths)
    .filter(([path]) => path.startsWith('/v1/'))
    .flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([m]) => METHODS.includes(m))
        .map(([method, op]) => ({ path, method, op, route: allRoutes.find((r) => r.path === path && r.method === method) })),
    );

  it('has /v1 operations', () => {
    expect(v1.length).toBeGreaterThan(10);
  });

  it('every /v1 operation is tagged with a contract tag, never the emulator-only one', () => {
    for (const { path, method, op } of v1) {
      expect(op.tags?.length, `${method.toUpperCase()} ${path} has no tag`).toBeGreaterThan(0);
      expect(op.tags, `${method.toUpperCase()} ${path}`).not.toContain('Emulator');
    }
  });

  it('every /v1 operation requires the API key and documents the 401 problem', () => {
    for (const { path, method, op, route } of v1) {
      const where = `${method.toUpperCase()} ${path}`;
      expect(route?.auth, where).toBe('tenant');
      expect(op.security, where).toEqual([{ apiKey: [] }]);
      expect(Object.keys(op.responses), `${where} does not document 401`).toContain('401');
      expect(op.responses['401']!.content, where).toHaveProperty(['application/problem+json']);
    }
  });

  it('every authenticated operation anywhere documents 401, and the security schemes exist', () => {
    const schemes = Object.keys(generated.components?.securitySchemes ?? {});
    expect(schemes).toEqual(expect.arrayContaining(['apiKey', 'adminToken']));
    for (const route of allRoutes) {
      const op = inlined.paths[route.path]![route.method]!;
      const where = `${route.method.toUpperCase()} ${route.path}`;
      if (route.auth === 'none') {
        expect(op.security ?? [], where).toEqual([]);
      } else {
        expect(Object.keys(op.responses), `${where} does not document 401`).toContain('401');
        expect(op.security, where).toEqual([{ [route.auth === 'tenant' ? 'apiKey' : 'adminToken']: [] }]);
      }
    }
  });

  it('emulator-only operations live under /_emu (or are unauthenticated probes) and never use the tenant key', () => {
    for (const route of allRoutes.filter((r) => !r.path.startsWith('/v1/'))) {
      expect(route.auth, `${route.method.toUpperCase()} ${route.path}`).not.toBe('tenant');
      if (route.auth === 'admin') expect(route.path.startsWith('/_emu/')).toBe(true);
    }
  });
});

describe('the contract (contract/index.ts) is the one list of operations', () => {
  const ops = Object.values(operations) as ContractOperation[];

  it('every operation has a unique camelCase operationId (its key in `operations`) and a summary, and the document carries both', () => {
    const ids = ops.map((op) => op.operationId);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
    for (const [key, op] of Object.entries(operations) as [string, ContractOperation][]) {
      expect(op.operationId, key).toBe(key);
      expect(op.operationId).toMatch(/^[a-z][A-Za-z0-9]*$/);
      expect(op.summary.trim().length, op.operationId).toBeGreaterThan(0);
      const documented = inlined.paths[op.path]?.[op.method];
      expect(documented?.operationId, `${op.operationId} in the document`).toBe(op.operationId);
      expect(documented?.summary).toBe(op.summary);
    }
  });

  it('every problem code an operation declares is in contract/problems.ts, registered for that status', () => {
    expect(unregisteredCodes(ops)).toEqual([]);
    for (const op of ops) {
      for (const [status, spec] of Object.entries(op.responses)) {
        for (const code of spec.codes ?? []) {
          expect(PROBLEMS[code as ProblemCode].statuses as readonly number[], `${op.operationId} ${status} ${code}`).toContain(
            Number(status),
          );
        }
      }
    }
  });

  it('every problem response in the document names its codes as an enum, and lists them in its description', () => {
    for (const op of ops) {
      for (const [status, spec] of Object.entries(op.responses)) {
        if (!spec.codes?.length) continue;
        const documented = inlined.paths[op.path]![op.method]!.responses[status]!;
        const schema = (
          documented.content?.['application/problem+json'] as { schema: { allOf: { properties?: { code?: { enum: string[] } } }[] } }
        ).schema;
        expect(schema.allOf[1]!.properties!.code!.enum, `${op.operationId} ${status}`).toEqual([...spec.codes]);
        for (const code of spec.codes) expect(documented.description, `${op.operationId} ${status}`).toContain(`\`${code}\``);
      }
    }
  });

  it('every route the Koa app mounts is an Operation, and every Operation is mounted', () => {
    const mounted = mountedRoutes()
      .map((r) => `${r.method} ${r.path}`)
      .sort();
    const declared = ops.map((op) => `${op.method} ${op.path}`).sort();
    expect(mounted).toEqual(declared);
    // and each route is bound to its Operation object itself, not a copy of its path
    for (const route of allRoutes) {
      expect(ops.some((op) => op.operationId === route.operationId && op.path === route.path && op.method === route.method)).toBe(true);
    }
  });

  it('every status the edge can answer for an operation is declared on it (contract/edge.ts), so the document and the client agree', () => {
    for (const op of ops) {
      const statuses = Object.keys(op.responses).map(Number);
      expect(statuses, op.operationId).toEqual(expect.arrayContaining([403, 421, 500]));
      if (op.auth !== 'none') expect(statuses, op.operationId).toContain(401);
      if (op.body) expect(statuses, op.operationId).toEqual(expect.arrayContaining([400, 413, 415, 422]));
      if (op.query || op.headers) expect(statuses, op.operationId).toContain(400);
    }
  });

  it('the invoke declares its headers, its stream, and every refusal of a run', () => {
    const invoke = inlined.paths['/v1/invoke/{snippet}']!.post!;
    const header = (name: string) => (invoke.parameters ?? []).find((p) => p.in === 'header' && p.name === name);
    expect(header('X-Invoke-Mode')?.schema?.enum).toEqual(['async', 'stream']);
    expect(header('Idempotency-Key')).toBeDefined();
    expect(header('X-Emu-Limits')?.schema?.pattern).toBeDefined();
    expect(header('X-Emu-Admin')).toBeDefined();
    expect(Object.keys(invoke.responses)).toEqual(expect.arrayContaining(['200', '202', '403', '409', '429', '500', '503', '504']));
    expect(Object.keys(invoke.responses['200']!.headers!)).toEqual(
      expect.arrayContaining(['X-Request-Id', 'X-Invocation-Id', 'X-Snippet-Version', 'X-Snippet-Env']),
    );
    expect(Object.keys(invoke.responses['202']!.headers!)).toContain('Location');
    expect(Object.keys(invoke.responses['429']!.headers!)).toContain('Retry-After');
    expect(Object.keys(invoke.responses['401']!.headers!)).toContain('WWW-Authenticate');
    expect(Object.keys(invoke.responses['200']!.content!['text/event-stream']!['x-sse-events'] as object)).toEqual([
      'start',
      'chunk',
      'result',
      'error',
    ]);
  });

  it('every response carries X-Request-Id, and every /_emu JSON answer has a schema', () => {
    for (const [path, item] of Object.entries(inlined.paths)) {
      for (const [method, op] of Object.entries(item)) {
        for (const [status, r] of Object.entries(op.responses) as [
          string,
          { headers?: Record<string, unknown>; content?: Record<string, { schema?: unknown }> },
        ][]) {
          expect(Object.keys(r.headers ?? {}), `${method} ${path} ${status}`).toContain('X-Request-Id');
          for (const [type, media] of Object.entries(r.content ?? {}))
            expect(media.schema, `${method} ${path} ${status} ${type}`).toBeDefined();
        }
        if (path.startsWith('/_emu/') && op.responses['200']) {
          expect(op.responses['200'].content, `${method} ${path} 200`).toBeDefined();
        }
      }
    }
  });
});
