import { z } from 'zod';
import { defineOperation } from '../operation';
import { noContent, ok, problem, problems } from '../responses';
import { PageQuery, VersionNumber, page } from '../schemas/common';
import { CreateSnippet, CreateVersion, Deploy, Deployment, Snippet, Version } from '../schemas/snippets';

export const IdParam = z.object({ id: z.string().meta({ description: 'Snippet id (`snp_…`) or name.' }) });
const VersionParams = IdParam.extend({ version: VersionNumber.meta({ description: 'Version number.' }) });
const EnvParams = IdParam.extend({ env: z.string().meta({ description: 'Environment name.' }) });

export const createSnippet = defineOperation({
  operationId: 'createSnippet',
  method: 'post',
  path: '/v1/snippets',
  auth: 'tenant',
  tag: 'Snippets',
  summary: 'Create a snippet',
  body: CreateSnippet,
  responses: { 201: ok('The snippet.', Snippet), ...problems(400, 401, 409, 415, 422) },
});

export const listSnippets = defineOperation({
  operationId: 'listSnippets',
  method: 'get',
  path: '/v1/snippets',
  auth: 'tenant',
  tag: 'Snippets',
  summary: 'List snippets (by name)',
  query: PageQuery,
  responses: { 200: ok('A page of snippets.', page(Snippet, 'SnippetPage')), ...problems(400, 401) },
});

export const getSnippet = defineOperation({
  operationId: 'getSnippet',
  method: 'get',
  path: '/v1/snippets/{id}',
  auth: 'tenant',
  tag: 'Snippets',
  summary: 'Read a snippet',
  params: IdParam,
  responses: { 200: ok('The snippet.', Snippet), ...problems(401, 404) },
});

export const deleteSnippet = defineOperation({
  operationId: 'deleteSnippet',
  method: 'delete',
  path: '/v1/snippets/{id}',
  auth: 'tenant',
  tag: 'Snippets',
  summary: 'Delete a snippet with its versions and deployments',
  params: IdParam,
  responses: { 204: noContent, ...problems(401, 404) },
});

export const createVersion = defineOperation({
  operationId: 'createVersion',
  method: 'post',
  path: '/v1/snippets/{id}/versions',
  auth: 'tenant',
  tag: 'Versions',
  summary: 'Create a version',
  description:
    'Stores an immutable version with its limits (defaults 60000 ms / 200 MB / 10 %). A limit above the tenant cap → 422 `limit_exceeds_tenant_cap`.',
  params: IdParam,
  body: CreateVersion,
  responses: {
    201: ok('The stored version.', Version),
    ...problems(400, 401, 404, 413, 415),
    422: problem(
      422,
      ['validation_failed', 'limit_exceeds_tenant_cap'],
      'Validation failed (`errors` lists each problem: a field, a file path, a compile error with file and line), or a limit above the tenant cap.',
    ),
  },
});

export const listVersions = defineOperation({
  operationId: 'listVersions',
  method: 'get',
  path: '/v1/snippets/{id}/versions',
  auth: 'tenant',
  tag: 'Versions',
  summary: 'List versions (newest first)',
  params: IdParam,
  query: PageQuery,
  responses: { 200: ok('A page of versions (without file contents).', page(Version, 'VersionPage')), ...problems(400, 401, 404) },
});

export const getVersion = defineOperation({
  operationId: 'getVersion',
  method: 'get',
  path: '/v1/snippets/{id}/versions/{version}',
  auth: 'tenant',
  tag: 'Versions',
  summary: 'Read a version with its files',
  params: VersionParams,
  responses: { 200: ok('The version, with `files`.', Version), ...problems(401, 404) },
});

export const listDeployments = defineOperation({
  operationId: 'listDeployments',
  method: 'get',
  path: '/v1/snippets/{id}/environments',
  auth: 'tenant',
  tag: 'Environments',
  summary: 'What runs where',
  params: IdParam,
  responses: {
    200: ok('Every environment with the version it runs (null if none).', z.object({ data: z.array(Deployment) })),
    ...problems(401, 404),
  },
});

export const deploy = defineOperation({
  operationId: 'deploy',
  method: 'put',
  path: '/v1/snippets/{id}/environments/{env}',
  auth: 'tenant',
  tag: 'Environments',
  summary: 'Deploy a version to an environment (or roll back to an older one)',
  params: EnvParams,
  body: Deploy,
  responses: { 200: ok('The deployment.', Deployment), ...problems(400, 401, 404, 415, 422) },
});

export const undeploy = defineOperation({
  operationId: 'undeploy',
  method: 'delete',
  path: '/v1/snippets/{id}/environments/{env}',
  auth: 'tenant',
  tag: 'Environments',
  summary: 'Undeploy: the environment stops running the snippet',
  params: EnvParams,
  responses: { 204: noContent, ...problems(401, 404) },
});
