import { z } from 'zod';
import { defineRoute } from '../../http/route';
import {
  CreateEnvironment, Environment, PageQuery, PutIntegration, PutSecret, PutStoreValue, RuntimeLimits,
  SecretInfo, SecretName, StoreEntry, StoreKey, StoreKeyInfo, WebhookSecret, Integration, ResourceName, page,
} from '../schemas';
import { noContent, ok, problems } from '../common';
import { notFound } from '../../errors';

const NameParam = z.object({ name: z.string() });

export const tenantRoutes = [
  defineRoute({
    method: 'get', path: '/v1/tenant/runtime-limits', auth: 'tenant', tag: 'Tenant',
    summary: "Read the tenant's runtime caps (read-only)",
    responses: { 200: ok('The caps.', RuntimeLimits), ...problems(401) },
    handler: ({ tenant, services }) => ({ status: 200, body: { ...(services.tenants.byId(tenant.id) ?? tenant).caps } }),
  }),
  defineRoute({
    method: 'get', path: '/v1/tenant/webhook-secret', auth: 'tenant', tag: 'Tenant',
    summary: 'Read the webhook signing secret (Standard Webhooks)',
    responses: { 200: ok('The secret.', WebhookSecret), ...problems(401) },
    handler: ({ tenant, services }) => ({ status: 200, body: services.tenants.webhookSecret(tenant) }),
  }),
  defineRoute({
    method: 'post', path: '/v1/tenant/webhook-secret', auth: 'tenant', tag: 'Tenant',
    summary: 'Rotate the webhook signing secret',
    responses: { 200: ok('The new secret.', WebhookSecret), ...problems(401) },
    handler: async ({ tenant, services }) => ({ status: 200, body: await services.tenants.rotateWebhookSecret(tenant) }),
  }),

  // ---- environments
  defineRoute({
    method: 'get', path: '/v1/environments', auth: 'tenant', tag: 'Environments', summary: 'List environments',
    query: PageQuery,
    responses: { 200: ok('A page of environments.', page(Environment, 'EnvironmentPage')), ...problems(400, 401) },
    handler: ({ services, tenant, query }) => ({ status: 200, body: services.snippets.listEnvironments(tenant, query) }),
  }),
  defineRoute({
    method: 'post', path: '/v1/environments', auth: 'tenant', tag: 'Environments', summary: 'Create an environment',
    body: CreateEnvironment,
    responses: { 201: ok('The environment.', Environment), ...problems(400, 401, 409, 415, 422) },
    handler: async ({ services, tenant, body }) => ({ status: 201, body: await services.snippets.createEnvironment(tenant, body.name) }),
  }),
  defineRoute({
    method: 'delete', path: '/v1/environments/{name}', auth: 'tenant', tag: 'Environments',
    summary: 'Delete an environment you created (not dev, staging or prod; nothing may be deployed to it)',
    params: NameParam,
    responses: { 204: noContent, ...problems(401, 404, 409) },
    handler: async ({ services, tenant, params }) => {
      await services.snippets.deleteEnvironment(tenant, params.name);
      return { status: 204 };
    },
  }),

  // ---- secrets
  defineRoute({
    method: 'put', path: '/v1/secrets/{name}', auth: 'tenant', tag: 'Secrets',
    summary: 'Create or replace a secret (injected as an environment variable at invoke time)',
    params: z.object({ name: SecretName }), body: PutSecret,
    responses: { 201: ok('Created.', SecretInfo), 200: ok('Replaced.', SecretInfo), ...problems(400, 401, 415, 422) },
    handler: async ({ services, tenant, params, body }) => {
      const { created, info } = await services.secrets.put(tenant, params.name, body.value);
      return { status: created ? 201 : 200, body: info };
    },
  }),
  defineRoute({
    method: 'get', path: '/v1/secrets', auth: 'tenant', tag: 'Secrets', summary: 'List secrets (names only, never values)',
    query: PageQuery,
    responses: { 200: ok('A page of secrets.', page(SecretInfo, 'SecretPage')), ...problems(400, 401) },
    handler: ({ services, tenant, query }) => ({ status: 200, body: services.secrets.list(tenant, query) }),
  }),
  defineRoute({
    method: 'delete', path: '/v1/secrets/{name}', auth: 'tenant', tag: 'Secrets', summary: 'Delete a secret',
    params: NameParam,
    responses: { 204: noContent, ...problems(401, 404) },
    handler: async ({ services, tenant, params }) => {
      await services.secrets.delete(tenant, params.name);
      return { status: 204 };
    },
  }),

  // ---- store
  defineRoute({
    method: 'put', path: '/v1/store/{key}', auth: 'tenant', tag: 'Store',
    summary: 'Set a value (any JSON, at most 1 MiB), optionally expiring after ttl_seconds',
    params: z.object({ key: StoreKey }), body: PutStoreValue,
    responses: { 201: ok('Created.', StoreEntry), 200: ok('Replaced.', StoreEntry), ...problems(400, 401, 413, 415, 422) },
    handler: async ({ services, tenant, params, body }) => {
      const { created, entry } = await services.store.set(tenant, params.key, body.value, body.ttl_seconds);
      return { status: created ? 201 : 200, body: entry };
    },
  }),
  defineRoute({
    method: 'get', path: '/v1/store/{key}', auth: 'tenant', tag: 'Store', summary: 'Read a value',
    params: z.object({ key: z.string() }),
    responses: { 200: ok('The entry.', StoreEntry), ...problems(401, 404) },
    handler: async ({ services, tenant, params }) => ({ status: 200, body: await services.store.getOrThrow(tenant, params.key) }),
  }),
  defineRoute({
    method: 'delete', path: '/v1/store/{key}', auth: 'tenant', tag: 'Store', summary: 'Delete a value',
    params: z.object({ key: z.string() }),
    responses: { 204: noContent, ...problems(401, 404) },
    handler: async ({ services, tenant, params }) => {
      if (!(await services.store.delete(tenant, params.key))) throw notFound('store key', params.key);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'get', path: '/v1/store', auth: 'tenant', tag: 'Store', summary: 'List keys (by key, without values)',
    query: PageQuery.extend({ prefix: z.string().max(512).optional().meta({ description: 'Only keys starting with this.' }) }),
    responses: { 200: ok('A page of keys.', page(StoreKeyInfo, 'StoreKeyPage')), ...problems(400, 401) },
    handler: ({ services, tenant, query }) => ({ status: 200, body: services.store.list(tenant, query.prefix ?? '', query) }),
  }),

  // ---- integrations
  defineRoute({
    method: 'put', path: '/v1/integrations/{name}', auth: 'tenant', tag: 'Integrations',
    summary: 'Create or replace an integration (its credential is a tenant secret, named here)',
    params: z.object({ name: ResourceName }), body: PutIntegration,
    responses: { 201: ok('Created.', Integration), 200: ok('Replaced.', Integration), ...problems(400, 401, 415, 422) },
    handler: async ({ services, tenant, params, body }) => {
      const { created, view } = await services.integrations.put(tenant, params.name, body);
      return { status: created ? 201 : 200, body: view };
    },
  }),
  defineRoute({
    method: 'get', path: '/v1/integrations', auth: 'tenant', tag: 'Integrations', summary: 'List integrations',
    query: PageQuery,
    responses: { 200: ok('A page of integrations.', page(Integration, 'IntegrationPage')), ...problems(400, 401) },
    handler: ({ services, tenant, query }) => ({ status: 200, body: services.integrations.list(tenant, query) }),
  }),
  defineRoute({
    method: 'get', path: '/v1/integrations/{name}', auth: 'tenant', tag: 'Integrations', summary: 'Read an integration',
    params: NameParam,
    responses: { 200: ok('The integration.', Integration), ...problems(401, 404) },
    handler: ({ services, tenant, params }) => ({ status: 200, body: services.integrations.get(tenant, params.name) }),
  }),
  defineRoute({
    method: 'delete', path: '/v1/integrations/{name}', auth: 'tenant', tag: 'Integrations', summary: 'Delete an integration',
    params: NameParam,
    responses: { 204: noContent, ...problems(401, 404) },
    handler: async ({ services, tenant, params }) => {
      await services.integrations.delete(tenant, params.name);
      return { status: 204 };
    },
  }),
];
