import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import type { RouteDef } from '../http/route';
import { allRoutes } from './routes';

/**
 * The OpenAPI 3.1 document, generated from the same route definitions and zod schemas that validate
 * requests. `docs/openapi.json` is this output, checked in; a test fails when they differ.
 */
export function buildOpenApi(routes: RouteDef[] = allRoutes, version = '0.1.0') {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'apiKey', {
    type: 'http',
    scheme: 'bearer',
    description: 'A tenant API key, `svc_…`.',
  });
  registry.registerComponent('securitySchemes', 'adminToken', {
    type: 'http',
    scheme: 'bearer',
    description: "The emulator's admin token (`emu_…`, from `<data-dir>/emulator.json`).",
  });
  for (const r of routes) {
    const responses = Object.fromEntries(
      Object.entries(r.responses).map(([status, spec]) => [
        status,
        spec.schema
          ? { description: spec.description, content: { [spec.contentType ?? 'application/json']: { schema: spec.schema } } }
          : { description: spec.description },
      ]),
    );
    registry.registerPath({
      method: r.method,
      path: r.path,
      tags: [r.tag],
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      security: r.auth === 'tenant' ? [{ apiKey: [] }] : r.auth === 'admin' ? [{ adminToken: [] }] : [],
      request: {
        ...(r.params ? { params: r.params as never } : {}),
        ...(r.query ? { query: r.query as never } : {}),
        ...(r.body
          ? { body: { required: !r.bodyOptional, content: { 'application/json': { schema: r.body } } } }
          : {}),
      },
      responses,
    });
  }
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Snippet Invocation Service (emulator)',
      version,
      description:
        'The production `/v1` contract as the Snippet Emulator implements it, plus the emulator-only `/_emu` surface. Errors are application/problem+json with a stable `code`.',
    },
    servers: [{ url: 'http://127.0.0.1:7070' }],
  });
}
