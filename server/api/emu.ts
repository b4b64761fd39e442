import { z } from 'zod';
import { defineRoute } from '../http/route';
import { CapsPatch, CreateTenant, CreatedKey, RuntimeLimits, TenantInfo } from './schemas';
import { ok, problems } from './common';
import { LOCAL_TENANT } from '../services/tenants';
import { followInvocation } from './v1/stream';

/**
 * The emulator's own surface: operator powers production exercises out of band. Admin token only;
 * never part of /v1.
 */
const TenantParam = z.object({ name: z.string() });

export const EmuInfo = z
  .object({
    version: z.string(),
    url: z.string(),
    data_dir: z.string(),
    workspace: z.string().nullable(),
    started_at: z.string(),
    pid: z.number().int(),
    local_api_key: z.string().nullable().meta({ description: 'The local tenant’s key, for the GUI and the tour.' }),
    egress: z.object({ profile: z.enum(['local', 'production']), allow: z.array(z.string()) }),
    async_queue: z.object({ queued: z.number().int(), running: z.number().int(), max_workers: z.number().int(), tenants_waiting: z.number().int() }),
    tenants: z.array(TenantInfo),
  })
  .meta({ id: 'EmuInfo' });

export const emuRoutes = [
  defineRoute({
    method: 'get', path: '/_emu/workspace', auth: 'admin', tag: 'Emulator',
    summary: 'The watched workspace: which folder became which version, load errors with file and line',
    responses: { 200: ok('The workspace status (workspace null when none is watched).', z.record(z.string(), z.unknown())), ...problems(401) },
    handler: ({ services }) => ({ status: 200, body: services.workspace?.status() ?? { workspace: null, watching: false, folders: [] } }),
  }),
  defineRoute({
    method: 'get', path: '/_emu/runtime', auth: 'admin', tag: 'Emulator',
    summary: 'The runtime manifest (production’s pinned versions) against what is installed here',
    responses: { 200: ok('Manifest, installed versions and mismatches.', z.record(z.string(), z.unknown())), ...problems(401) },
    handler: async ({ services }) => ({ status: 200, body: await services.facts.runtime() }),
  }),
  defineRoute({
    method: 'get', path: '/_emu/executor', auth: 'admin', tag: 'Emulator',
    summary: 'Limit backend, sandbox, parity and the warm pool',
    responses: { 200: ok('Executor facts.', z.record(z.string(), z.unknown())), ...problems(401) },
    handler: ({ services }) => ({ status: 200, body: { ...services.executor.info, pool: services.executor.stats() } }),
  }),
  defineRoute({
    method: 'get', path: '/_emu/invocations/{id}', auth: 'admin', tag: 'Emulator',
    summary: 'An invocation with its evidence: limits, warm/cold, and the memory/CPU timeline sampled every ~50 ms',
    params: z.object({ id: z.string() }),
    responses: { 200: ok('The invocation and its timeline.', z.record(z.string(), z.unknown())), ...problems(401, 404) },
    handler: async ({ services, params }) => {
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
        },
      };
    },
  }),
  defineRoute({
    method: 'get', path: '/_emu/invocations/{id}/events', auth: 'admin', tag: 'Emulator',
    summary: 'A streamed invocation’s events with their times; `?follow=1` follows it live as SSE',
    description:
      'Every event a stream-mode invocation sent (`start`, `chunk`…, `result` | `error`), each with `at` and `t_ms` since the start. With `follow=1` the answer is `text/event-stream`: the events so far, then each next one as it is sent, ending with the stream (the GUI’s live inspector). Invocations that did not stream have none.',
    params: z.object({ id: z.string() }),
    query: z.object({ follow: z.enum(['0', '1', 'true', 'false']).optional() }),
    responses: {
      200: ok(
        'The events (JSON), or the live stream (SSE).',
        z.object({
          invocation_id: z.string(),
          live: z.boolean(),
          truncated: z.boolean().meta({ description: 'More than 10 000 chunks: the rest were sent but not kept.' }),
          data: z.array(z.object({ id: z.number().int(), event: z.enum(['start', 'chunk', 'result', 'error']), data: z.unknown(), at: z.string(), t_ms: z.number() })),
        }),
      ),
      ...problems(400, 401, 404),
    },
    handler: async ({ services, params, query, ctx }) => {
      const rec = services.invocations.byId(params.id);
      if (query.follow === '1' || query.follow === 'true') return followInvocation(services, ctx, rec);
      const stored = await services.streams.read(rec);
      const live = rec.status === 'running' && rec.mode === 'stream';
      return { status: 200, body: { invocation_id: rec.id, live, truncated: stored.truncated, data: stored.events } };
    },
  }),
  defineRoute({
    method: 'get', path: '/_emu/info', auth: 'admin', tag: 'Emulator', summary: 'About this emulator',
    responses: { 200: ok('Facts and the local key.', EmuInfo), ...problems(401) },
    handler: ({ services }) => ({
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
    }),
  }),
  defineRoute({
    method: 'get', path: '/_emu/doctor', auth: 'admin', tag: 'Emulator', summary: 'What this host can enforce',
    responses: { 200: ok('The doctor report.', z.record(z.string(), z.unknown())), ...problems(401) },
    handler: async ({ services }) => ({ status: 200, body: await services.facts.doctor() }),
  }),
  defineRoute({
    method: 'get', path: '/_emu/tenants', auth: 'admin', tag: 'Emulator', summary: 'List tenants',
    responses: { 200: ok('Every tenant.', z.object({ data: z.array(TenantInfo) })), ...problems(401) },
    handler: ({ services }) => ({ status: 200, body: { data: services.tenants.list().map((t) => services.tenants.view(t)) } }),
  }),
  defineRoute({
    method: 'post', path: '/_emu/tenants', auth: 'admin', tag: 'Emulator', summary: 'Create a tenant (caps at their defaults)',
    body: CreateTenant,
    responses: { 201: ok('The tenant.', TenantInfo), ...problems(400, 401, 409, 415, 422) },
    handler: async ({ services, body }) => ({ status: 201, body: services.tenants.view(await services.tenants.create(body.name)) }),
  }),
  defineRoute({
    method: 'get', path: '/_emu/tenants/{name}', auth: 'admin', tag: 'Emulator', summary: 'Read a tenant',
    params: TenantParam,
    responses: { 200: ok('The tenant.', TenantInfo), ...problems(401, 404) },
    handler: ({ services, params }) => ({ status: 200, body: services.tenants.view(services.tenants.get(params.name)) }),
  }),
  defineRoute({
    method: 'patch', path: '/_emu/tenants/{name}/limits', auth: 'admin', tag: 'Emulator',
    summary: "Change a tenant's caps (what production's operators do out of band)",
    params: TenantParam, body: CapsPatch,
    responses: { 200: ok('The caps now.', RuntimeLimits), ...problems(400, 401, 404, 415, 422) },
    handler: async ({ services, params, body }) => ({ status: 200, body: await services.tenants.setCaps(params.name, body) }),
  }),
  defineRoute({
    method: 'post', path: '/_emu/tenants/{name}/keys', auth: 'admin', tag: 'Emulator',
    summary: 'Issue an API key for a tenant (shown once)',
    params: TenantParam,
    responses: { 201: ok('The key.', CreatedKey), ...problems(401, 404) },
    handler: async ({ services, params }) => {
      const { record, key } = await services.tenants.createKey(params.name);
      return { status: 201, body: { id: record.id, tenant: params.name, key, prefix: record.prefix, created_at: record.created_at } };
    },
  }),
];

export { LOCAL_TENANT };
