import { implement } from '../http/route';
import { LOCAL_TENANT } from '../services/tenants';
import { followInvocation } from './v1/stream';
import { coreMemory } from '../memory';
import * as emu from '../../contract/emu/core';

/** The handlers of the emulator's own surface (their specs: contract/emu/core.ts). */
export const emuRoutes = [
  implement(emu.emuWorkspace, ({ services }) => ({
    status: 200,
    body: services.workspace?.status() ?? { workspace: null, watching: false, folders: [], skipped: [] },
  })),
  implement(emu.emuRuntime, async ({ services }) => ({ status: 200, body: await services.facts.runtime() })),
  implement(emu.emuExecutor, ({ services }) => ({ status: 200, body: { ...services.executor.info, pool: services.executor.stats() } })),
  implement(emu.emuMemory, ({ query }) => ({ status: 200, body: coreMemory(query.gc === '1' || query.gc === 'true') })),
  implement(emu.emuGetInvocation, async ({ services, params }) => {
    const rec = services.invocations.byId(params.id);
    return {
      status: 200,
      body: {
        ...(await services.invocations.view(rec)),
        tenant_id: rec.tenant_id,
        overridden: rec.overridden,
        warm: rec.warm,
        error_evidence: rec.error?.evidence ?? null,
        callback_deliveries: rec.callback?.deliveries ?? [],
        queue_wait_ms: rec.queue_wait_ms ?? null,
        logs_truncated: rec.logs_truncated,
        timeline: await services.invocations.timeline(rec),
        ...(await services.invocations.stored(rec)),
        egress: rec.egress ?? null,
        debug: rec.debug ?? null,
      },
    };
  }),
  implement(emu.emuInvocationEvents, async ({ services, params, query, ctx }) => {
    const rec = services.invocations.byId(params.id);
    if (query.follow === '1' || query.follow === 'true') return followInvocation(services, ctx, rec);
    const stored = await services.streams.read(rec);
    const live = rec.status === 'running' && rec.mode === 'stream';
    return { status: 200, body: { invocation_id: rec.id, live, truncated: stored.truncated, data: stored.events } };
  }),
  implement(emu.emuInfo, ({ services }) => ({
    status: 200,
    body: {
      version: services.facts.version,
      url: services.facts.url(),
      data_dir: services.facts.dataDir,
      workspace: services.facts.workspace,
      started_at: services.facts.startedAt,
      pid: process.pid,
      local_api_key: services.tenants.localKey(),
      egress: { profile: services.callbacks.rules.profile, allow: [...services.callbacks.rules.allow] },
      async_queue: services.async.stats(),
      tenants: services.tenants.list().map((t) => services.tenants.view(t)),
    },
  })),
  implement(emu.emuDoctor, async ({ services }) => ({ status: 200, body: await services.facts.doctor() })),
  implement(emu.emuListTenants, ({ services }) => ({
    status: 200,
    body: { data: services.tenants.list().map((t) => services.tenants.view(t)) },
  })),
  implement(emu.emuCreateTenant, async ({ services, body }) => ({
    status: 201,
    body: services.tenants.view(await services.tenants.create(body.name)),
  })),
  implement(emu.emuGetTenant, ({ services, params }) => ({ status: 200, body: services.tenants.view(services.tenants.get(params.name)) })),
  implement(emu.emuSetTenantLimits, async ({ services, params, body }) => ({
    status: 200,
    body: await services.tenants.setCaps(params.name, body),
  })),
  implement(emu.emuCreateTenantKey, async ({ services, params }) => {
    const { record, key } = await services.tenants.createKey(params.name);
    return { status: 201, body: { id: record.id, tenant: params.name, key, prefix: record.prefix, created_at: record.created_at } };
  }),
];

export { LOCAL_TENANT };
