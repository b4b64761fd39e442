import { z } from 'zod';
import { defineOperation } from '../operation';
import { noContent, ok, problems } from '../responses';
import { PageQuery, ResourceName, SecretName, StoreKey, page } from '../schemas/common';
import { Environment, CreateEnvironment } from '../schemas/snippets';
import {
  Integration,
  PutIntegration,
  PutSecret,
  PutStoreValue,
  RuntimeLimits,
  SecretInfo,
  StoreEntry,
  StoreKeyInfo,
  StorePrefix,
  WebhookSecret,
} from '../schemas/tenant';

/** The tenant's caps and webhook secret, environments, secrets, the store and integrations. */
const NameParam = z.object({ name: z.string() });

export const getRuntimeLimits = defineOperation({
  operationId: 'getRuntimeLimits',
  method: 'get',
  path: '/v1/tenant/runtime-limits',
  auth: 'tenant',
  tag: 'Tenant',
  summary: "Read the tenant's runtime caps (read-only)",
  responses: { 200: ok('The caps.', RuntimeLimits), ...problems(401) },
});

export const getWebhookSecret = defineOperation({
  operationId: 'getWebhookSecret',
  method: 'get',
  path: '/v1/tenant/webhook-secret',
  auth: 'tenant',
  tag: 'Tenant',
  summary: 'Read the webhook signing secret (Standard Webhooks)',
  responses: { 200: ok('The secret.', WebhookSecret), ...problems(401) },
});

export const rotateWebhookSecret = defineOperation({
  operationId: 'rotateWebhookSecret',
  method: 'post',
  path: '/v1/tenant/webhook-secret',
  auth: 'tenant',
  tag: 'Tenant',
  summary: 'Rotate the webhook signing secret',
  responses: { 200: ok('The new secret.', WebhookSecret), ...problems(401) },
});

export const listEnvironments = defineOperation({
  operationId: 'listEnvironments',
  method: 'get',
  path: '/v1/environments',
  auth: 'tenant',
  tag: 'Environments',
  summary: 'List environments',
  query: PageQuery,
  responses: { 200: ok('A page of environments.', page(Environment, 'EnvironmentPage')), ...problems(400, 401) },
});

export const createEnvironment = defineOperation({
  operationId: 'createEnvironment',
  method: 'post',
  path: '/v1/environments',
  auth: 'tenant',
  tag: 'Environments',
  summary: 'Create an environment',
  body: CreateEnvironment,
  responses: { 201: ok('The environment.', Environment), ...problems(400, 401, 409, 415, 422) },
});

export const deleteEnvironment = defineOperation({
  operationId: 'deleteEnvironment',
  method: 'delete',
  path: '/v1/environments/{name}',
  auth: 'tenant',
  tag: 'Environments',
  summary: 'Delete an environment you created (not dev, staging or prod; nothing may be deployed to it)',
  params: NameParam,
  responses: { 204: noContent, ...problems(401, 404, 409) },
});

export const putSecret = defineOperation({
  operationId: 'putSecret',
  method: 'put',
  path: '/v1/secrets/{name}',
  auth: 'tenant',
  tag: 'Secrets',
  summary: 'Create or replace a secret (injected as an environment variable at invoke time)',
  params: z.object({ name: SecretName }),
  body: PutSecret,
  responses: { 201: ok('Created.', SecretInfo), 200: ok('Replaced.', SecretInfo), ...problems(400, 401, 415, 422) },
});

export const listSecrets = defineOperation({
  operationId: 'listSecrets',
  method: 'get',
  path: '/v1/secrets',
  auth: 'tenant',
  tag: 'Secrets',
  summary: 'List secrets (names only, never values)',
  query: PageQuery,
  responses: { 200: ok('A page of secrets.', page(SecretInfo, 'SecretPage')), ...problems(400, 401) },
});

export const deleteSecret = defineOperation({
  operationId: 'deleteSecret',
  method: 'delete',
  path: '/v1/secrets/{name}',
  auth: 'tenant',
  tag: 'Secrets',
  summary: 'Delete a secret',
  params: NameParam,
  responses: { 204: noContent, ...problems(401, 404) },
});

export const putStoreValue = defineOperation({
  operationId: 'putStoreValue',
  method: 'put',
  path: '/v1/store/{key}',
  auth: 'tenant',
  tag: 'Store',
  summary: 'Set a value (any JSON, at most 1 MiB), optionally expiring after ttl_seconds',
  params: z.object({ key: StoreKey }),
  body: PutStoreValue,
  responses: { 201: ok('Created.', StoreEntry), 200: ok('Replaced.', StoreEntry), ...problems(400, 401, 413, 415, 422) },
});

export const getStoreValue = defineOperation({
  operationId: 'getStoreValue',
  method: 'get',
  path: '/v1/store/{key}',
  auth: 'tenant',
  tag: 'Store',
  summary: 'Read a value',
  params: z.object({ key: z.string() }),
  responses: { 200: ok('The entry.', StoreEntry), ...problems(401, 404) },
});

export const deleteStoreValue = defineOperation({
  operationId: 'deleteStoreValue',
  method: 'delete',
  path: '/v1/store/{key}',
  auth: 'tenant',
  tag: 'Store',
  summary: 'Delete a value',
  params: z.object({ key: z.string() }),
  responses: { 204: noContent, ...problems(401, 404) },
});

export const listStoreKeys = defineOperation({
  operationId: 'listStoreKeys',
  method: 'get',
  path: '/v1/store',
  auth: 'tenant',
  tag: 'Store',
  summary: 'List keys (by key, without values)',
  query: PageQuery.extend({ prefix: StorePrefix.optional().meta({ description: 'Only keys starting with this.' }) }),
  responses: { 200: ok('A page of keys.', page(StoreKeyInfo, 'StoreKeyPage')), ...problems(400, 401) },
});

export const putIntegration = defineOperation({
  operationId: 'putIntegration',
  method: 'put',
  path: '/v1/integrations/{name}',
  auth: 'tenant',
  tag: 'Integrations',
  summary: 'Create or replace an integration (its credential is a tenant secret, named here)',
  params: z.object({ name: ResourceName }),
  body: PutIntegration,
  responses: { 201: ok('Created.', Integration), 200: ok('Replaced.', Integration), ...problems(400, 401, 415, 422) },
});

export const listIntegrations = defineOperation({
  operationId: 'listIntegrations',
  method: 'get',
  path: '/v1/integrations',
  auth: 'tenant',
  tag: 'Integrations',
  summary: 'List integrations',
  query: PageQuery,
  responses: { 200: ok('A page of integrations.', page(Integration, 'IntegrationPage')), ...problems(400, 401) },
});

export const getIntegration = defineOperation({
  operationId: 'getIntegration',
  method: 'get',
  path: '/v1/integrations/{name}',
  auth: 'tenant',
  tag: 'Integrations',
  summary: 'Read an integration',
  params: NameParam,
  responses: { 200: ok('The integration.', Integration), ...problems(401, 404) },
});

export const deleteIntegration = defineOperation({
  operationId: 'deleteIntegration',
  method: 'delete',
  path: '/v1/integrations/{name}',
  auth: 'tenant',
  tag: 'Integrations',
  summary: 'Delete an integration',
  params: NameParam,
  responses: { 204: noContent, ...problems(401, 404) },
});
