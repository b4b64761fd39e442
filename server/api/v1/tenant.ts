import { implement } from '../../http/route';
import { notFound } from '../../domain/errors';
import * as ops from '../../../contract/v1/tenant';

/** The handlers of the tenant's resources (their specs: contract/v1/tenant.ts). */
export const tenantRoutes = [
  implement(ops.getRuntimeLimits, ({ tenant, services }) => ({
    status: 200,
    body: { ...(services.tenants.byId(tenant.id) ?? tenant).caps },
  })),
  implement(ops.getWebhookSecret, ({ tenant, services }) => ({ status: 200, body: services.tenants.webhookSecret(tenant) })),
  implement(ops.rotateWebhookSecret, async ({ tenant, services }) => ({
    status: 200,
    body: await services.tenants.rotateWebhookSecret(tenant),
  })),

  // ---- environments
  implement(ops.listEnvironments, ({ services, tenant, query }) => ({
    status: 200,
    body: services.snippets.listEnvironments(tenant, query),
  })),
  implement(ops.createEnvironment, async ({ services, tenant, body }) => ({
    status: 201,
    body: await services.snippets.createEnvironment(tenant, body.name),
  })),
  implement(ops.deleteEnvironment, async ({ services, tenant, params }) => {
    await services.snippets.deleteEnvironment(tenant, params.name);
    return { status: 204 };
  }),

  // ---- secrets
  implement(ops.putSecret, async ({ services, tenant, params, body }) => {
    const { created, info } = await services.secrets.put(tenant, params.name, body.value);
    return { status: created ? 201 : 200, body: info };
  }),
  implement(ops.listSecrets, ({ services, tenant, query }) => ({ status: 200, body: services.secrets.list(tenant, query) })),
  implement(ops.deleteSecret, async ({ services, tenant, params }) => {
    await services.secrets.delete(tenant, params.name);
    return { status: 204 };
  }),

  // ---- store
  implement(ops.putStoreValue, async ({ services, tenant, params, body }) => {
    const { created, entry } = await services.store.set(tenant, params.key, body.value, body.ttl_seconds);
    return { status: created ? 201 : 200, body: entry };
  }),
  implement(ops.getStoreValue, async ({ services, tenant, params }) => ({
    status: 200,
    body: await services.store.getOrThrow(tenant, params.key),
  })),
  implement(ops.deleteStoreValue, async ({ services, tenant, params }) => {
    if (!(await services.store.delete(tenant, params.key))) throw notFound('store key', params.key);
    return { status: 204 };
  }),
  implement(ops.listStoreKeys, ({ services, tenant, query }) => ({
    status: 200,
    body: services.store.list(tenant, query.prefix ?? '', query),
  })),

  // ---- integrations
  implement(ops.putIntegration, async ({ services, tenant, params, body }) => {
    const { created, view } = await services.integrations.put(tenant, params.name, body);
    return { status: created ? 201 : 200, body: view };
  }),
  implement(ops.listIntegrations, ({ services, tenant, query }) => ({ status: 200, body: services.integrations.list(tenant, query) })),
  implement(ops.getIntegration, ({ services, tenant, params }) => ({ status: 200, body: services.integrations.get(tenant, params.name) })),
  implement(ops.deleteIntegration, async ({ services, tenant, params }) => {
    await services.integrations.delete(tenant, params.name);
    return { status: 204 };
  }),
];
