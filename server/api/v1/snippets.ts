import { z } from 'zod';
import { defineRoute } from '../../http/route';
import { CreateSnippet, CreateVersion, Deploy, Deployment, PageQuery, Snippet, Version, page } from '../schemas';
import { IdParam, noContent, ok, problems } from '../common';

const VersionParams = IdParam.extend({
  version: z
    .string()
    .regex(/^[1-9]\d{0,8}$/, 'must be a version number (1, 2, 3, …)')
    .transform(Number)
    .meta({ description: 'Version number.' }),
});
const EnvParams = IdParam.extend({ env: z.string().meta({ description: 'Environment name.' }) });

export const snippetRoutes = [
  defineRoute({
    method: 'post', path: '/v1/snippets', auth: 'tenant', tag: 'Snippets', summary: 'Create a snippet',
    body: CreateSnippet,
    responses: { 201: ok('The snippet.', Snippet), ...problems(400, 401, 409, 415, 422) },
    handler: async ({ services, tenant, body }) => ({ status: 201, body: await services.snippets.create(tenant, body) }),
  }),
  defineRoute({
    method: 'get', path: '/v1/snippets', auth: 'tenant', tag: 'Snippets', summary: 'List snippets (by name)',
    query: PageQuery,
    responses: { 200: ok('A page of snippets.', page(Snippet, 'SnippetPage')), ...problems(400, 401) },
    handler: ({ services, tenant, query }) => ({ status: 200, body: services.snippets.list(tenant, query) }),
  }),
  defineRoute({
    method: 'get', path: '/v1/snippets/{id}', auth: 'tenant', tag: 'Snippets', summary: 'Read a snippet',
    params: IdParam,
    responses: { 200: ok('The snippet.', Snippet), ...problems(401, 404) },
    handler: ({ services, tenant, params }) => ({
      status: 200,
      body: services.snippets.view(services.snippets.get(tenant, params.id)),
    }),
  }),
  defineRoute({
    method: 'delete', path: '/v1/snippets/{id}', auth: 'tenant', tag: 'Snippets',
    summary: 'Delete a snippet with its versions and deployments',
    params: IdParam,
    responses: { 204: noContent, ...problems(401, 404) },
    handler: async ({ services, tenant, params }) => {
      await services.snippets.delete(tenant, params.id);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'post', path: '/v1/snippets/{id}/versions', auth: 'tenant', tag: 'Versions',
    summary: 'Create a version',
    description:
      'Stores an immutable version with its limits (defaults 60000 ms / 200 MB / 10 %). A limit above the tenant cap → 422 `limit_exceeds_tenant_cap`.',
    params: IdParam, body: CreateVersion,
    responses: { 201: ok('The stored version.', Version), ...problems(400, 401, 404, 413, 415, 422) },
    handler: async ({ services, tenant, params, body }) => ({
      status: 201,
      body: await services.snippets.createVersion(tenant, params.id, body),
    }),
  }),
  defineRoute({
    method: 'get', path: '/v1/snippets/{id}/versions', auth: 'tenant', tag: 'Versions', summary: 'List versions (newest first)',
    params: IdParam, query: PageQuery,
    responses: { 200: ok('A page of versions (without file contents).', page(Version, 'VersionPage')), ...problems(400, 401, 404) },
    handler: ({ services, tenant, params, query }) => ({ status: 200, body: services.snippets.listVersions(tenant, params.id, query) }),
  }),
  defineRoute({
    method: 'get', path: '/v1/snippets/{id}/versions/{version}', auth: 'tenant', tag: 'Versions',
    summary: 'Read a version with its files',
    params: VersionParams,
    responses: { 200: ok('The version, with `files`.', Version), ...problems(401, 404) },
    handler: async ({ services, tenant, params }) => ({
      status: 200,
      body: await services.snippets.getVersion(tenant, params.id, params.version),
    }),
  }),
  defineRoute({
    method: 'get', path: '/v1/snippets/{id}/environments', auth: 'tenant', tag: 'Environments',
    summary: 'What runs where',
    params: IdParam,
    responses: { 200: ok('Every environment with the version it runs (null if none).', z.object({ data: z.array(Deployment) })), ...problems(401, 404) },
    handler: ({ services, tenant, params }) => ({ status: 200, body: { data: services.snippets.listDeployments(tenant, params.id) } }),
  }),
  defineRoute({
    method: 'put', path: '/v1/snippets/{id}/environments/{env}', auth: 'tenant', tag: 'Environments',
    summary: 'Deploy a version to an environment (or roll back to an older one)',
    params: EnvParams, body: Deploy,
    responses: { 200: ok('The deployment.', Deployment), ...problems(400, 401, 404, 415, 422) },
    handler: async ({ services, tenant, params, body }) => ({
      status: 200,
      body: await services.snippets.deploy(tenant, params.id, params.env, body.version),
    }),
  }),
  defineRoute({
    method: 'delete', path: '/v1/snippets/{id}/environments/{env}', auth: 'tenant', tag: 'Environments',
    summary: 'Undeploy: the environment stops running the snippet',
    params: EnvParams,
    responses: { 204: noContent, ...problems(401, 404) },
    handler: async ({ services, tenant, params }) => {
      await services.snippets.undeploy(tenant, params.id, params.env);
      return { status: 204 };
    },
  }),
];
