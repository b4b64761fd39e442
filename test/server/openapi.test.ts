import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildOpenApi } from '../../server/api/openapi';
import { clientTypes } from '../../server/api/client-types';
import { allRoutes } from '../../server/api/routes';
import { EMULATOR_VERSION } from '../../server/version';

type Operation = {
  tags?: string[];
  summary?: string;
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean }[];
  requestBody?: { required?: boolean; content: Record<string, unknown> };
  responses: Record<string, { description: string; content?: Record<string, unknown> }>;
};
type Doc = {
  openapi: string;
  info: { version: string };
  paths: Record<string, Record<string, Operation>>;
  components?: { securitySchemes?: Record<string, unknown> };
};

const checkedInPath = join(__dirname, '..', '..', 'docs', 'openapi.json');
const generated = JSON.parse(JSON.stringify(buildOpenApi(undefined, EMULATOR_VERSION))) as Doc;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

describe('docs/openapi.json', () => {
  it('is exactly what the code generates (run `npm run openapi` after changing routes or schemas)', () => {
    const checkedIn = JSON.parse(readFileSync(checkedInPath, 'utf8')) as Doc;
    expect(
      checkedIn,
      'docs/openapi.json is out of date with the route definitions: run `npm run openapi` and commit the result',
    ).toEqual(generated);
  });

  it('is the file `npm run openapi` writes, byte for byte (2-space JSON and a final newline)', () => {
    expect(
      readFileSync(checkedInPath, 'utf8'),
      'docs/openapi.json is not formatted as `npm run openapi` writes it: run `npm run openapi`',
    ).toBe(JSON.stringify(generated, null, 2) + '\n');
  });

  it('renderer/src/api-types.ts (the GUI types) is what `npm run openapi` generates from it', () => {
    expect(
      readFileSync(join(__dirname, '..', '..', 'renderer', 'src', 'api-types.ts'), 'utf8'),
      'renderer/src/api-types.ts is out of date with the schemas: run `npm run openapi`',
    ).toBe(clientTypes(generated as Parameters<typeof clientTypes>[0]));
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
    const op = generated.paths[route.path]?.[route.method];
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
    } else {
      expect(op!.requestBody).toBeUndefined();
    }
  });

  it('documents nothing that is not a route', () => {
    const routeKeys = new Set(allRoutes.map((r) => `${r.method} ${r.path}`));
    for (const [path, item] of Object.entries(generated.paths)) {
      for (const method of Object.keys(item).filter((m) => METHODS.includes(m))) {
        expect(routeKeys.has(`${method} ${path}`), `${method.toUpperCase()} ${path} has no route`).toBe(true);
      }
    }
  });
});

describe('the /v1 contract in the document', () => {
  const v1 = Object.entries(generated.paths)
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
      const op = generated.paths[route.path]![route.method]!;
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
