import { implement } from '../../http/route';
import * as snippets from '../../../contract/v1/snippets';

/** The handlers of `/v1/snippets` (their specs: contract/v1/snippets.ts). */
export const snippetRoutes = [
  implement(snippets.createSnippet, async ({ services, tenant, body }) => ({
    status: 201,
    body: await services.snippets.create(tenant, body),
  })),
  implement(snippets.listSnippets, ({ services, tenant, query }) => ({ status: 200, body: services.snippets.list(tenant, query) })),
  implement(snippets.getSnippet, ({ services, tenant, params }) => ({
    status: 200,
    body: services.snippets.view(services.snippets.get(tenant, params.id)),
  })),
  implement(snippets.deleteSnippet, async ({ services, tenant, params }) => {
    await services.snippets.delete(tenant, params.id);
    return { status: 204 };
  }),
  implement(snippets.createVersion, async ({ services, tenant, params, body }) => ({
    status: 201,
    body: await services.snippets.createVersion(tenant, params.id, body),
  })),
  implement(snippets.listVersions, ({ services, tenant, params, query }) => ({
    status: 200,
    body: services.snippets.listVersions(tenant, params.id, query),
  })),
  implement(snippets.getVersion, async ({ services, tenant, params }) => ({
    status: 200,
    body: await services.snippets.getVersion(tenant, params.id, params.version),
  })),
  implement(snippets.listDeployments, ({ services, tenant, params }) => ({
    status: 200,
    body: { data: services.snippets.listDeployments(tenant, params.id) },
  })),
  implement(snippets.deploy, async ({ services, tenant, params, body }) => ({
    status: 200,
    body: await services.snippets.deploy(tenant, params.id, params.env, body.version),
  })),
  implement(snippets.undeploy, async ({ services, tenant, params }) => {
    await services.snippets.undeploy(tenant, params.id, params.env);
    return { status: 204 };
  }),
];
