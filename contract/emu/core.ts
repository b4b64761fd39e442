import { z } from 'zod';
import { defineOperation } from '../operation';
import { ok, problem, problems, sse } from '../responses';
import {
  CapsPatch,
  CoreMemory,
  CreatedKey,
  CreateTenant,
  DoctorReport,
  EmuInfo,
  ExecutorFacts,
  RuntimeReport,
  TenantInfo,
} from '../schemas/emu';
import { EmuInvocation, EmuInvocationEvents, InvocationId, STREAM_EVENTS } from '../schemas/invocations';
import { RuntimeLimits } from '../schemas/tenant';
import { WorkspaceView } from '../schemas/workspace';

/**
 * The emulator's own surface: operator powers production exercises out of band. Admin token only;
 * never part of /v1.
 */
const TenantParam = z.object({ name: z.string() });

export const emuWorkspace = defineOperation({
  operationId: 'emuWorkspace',
  method: 'get',
  path: '/_emu/workspace',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'The watched workspace: which folder became which version, load errors with file and line, entries not read and why',
  description:
    'The loader reads only regular files inside the workspace, within the bundle limits: FIFOs, sockets, devices, symlinks that resolve outside the workspace (or to no regular file), files over the limits and folders too deep are listed in `skipped` (per folder, and workspace-level for entries directly under snippets/) with a stable `code` and a `reason` that says what to change.',
  responses: { 200: ok('The workspace status (workspace null when none is watched).', WorkspaceView), ...problems(401) },
});

export const emuRuntime = defineOperation({
  operationId: 'emuRuntime',
  method: 'get',
  path: '/_emu/runtime',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'The runtime manifest (production’s pinned versions) against what is installed here',
  responses: { 200: ok('Manifest, installed versions and mismatches.', RuntimeReport), ...problems(401) },
});

export const emuExecutor = defineOperation({
  operationId: 'emuExecutor',
  method: 'get',
  path: '/_emu/executor',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Limit backend, sandbox, parity and the warm pool',
  responses: { 200: ok('Executor facts.', ExecutorFacts), ...problems(401) },
});

export const emuMemory = defineOperation({
  operationId: 'emuMemory',
  method: 'get',
  path: '/_emu/memory',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'The core process’s memory; `gc=1` forces a full garbage collection first (core started with node --expose-gc)',
  description:
    'What the soak benchmark (`npm run bench -- soak`) reads after every few thousand invocations: a long-running core must not grow per invocation. `gc=1` on a core started without `--expose-gc` is a 409 `gc_unavailable`.',
  query: z.object({ gc: z.enum(['0', '1', 'true', 'false']).optional() }),
  responses: {
    200: ok('RSS and V8 heap of the core process, in bytes.', CoreMemory),
    ...problems(400, 401),
    409: problem(409, ['gc_unavailable'], '`gc_unavailable`: `gc=1` on a core started without `--expose-gc`.'),
  },
});

export const emuGetInvocation = defineOperation({
  operationId: 'emuGetInvocation',
  method: 'get',
  path: '/_emu/invocations/{id}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'An invocation with its evidence: limits, warm/cold, and the memory/CPU timeline sampled every ~50 ms',
  params: InvocationId,
  responses: { 200: ok('The invocation and its timeline.', EmuInvocation), ...problems(401, 404) },
});

export const emuInvocationEvents = defineOperation({
  operationId: 'emuInvocationEvents',
  method: 'get',
  path: '/_emu/invocations/{id}/events',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'A streamed invocation’s events with their times; `?follow=1` follows it live as SSE',
  description:
    'Every event a stream-mode invocation sent (`start`, `chunk`…, `result` | `error`), each with `at` and `t_ms` since the start. With `follow=1` the answer is `text/event-stream`: the events so far, then each next one as it is sent, ending with the stream (the GUI’s live inspector). Invocations that did not stream have none.',
  params: InvocationId,
  query: z.object({ follow: z.enum(['0', '1', 'true', 'false']).optional() }),
  responses: {
    200: {
      ...ok('The events (JSON).', EmuInvocationEvents),
      alternatives: {
        'text/event-stream': sse('With `follow=1`: the events so far, then each next one live, until the stream ends.', STREAM_EVENTS),
      },
    },
    ...problems(400, 401, 404),
  },
});

export const emuInfo = defineOperation({
  operationId: 'emuInfo',
  method: 'get',
  path: '/_emu/info',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'About this emulator',
  responses: { 200: ok('Facts and the local key.', EmuInfo), ...problems(401) },
});

export const emuDoctor = defineOperation({
  operationId: 'emuDoctor',
  method: 'get',
  path: '/_emu/doctor',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'What this host can enforce',
  responses: { 200: ok('The doctor report.', DoctorReport), ...problems(401) },
});

export const emuListTenants = defineOperation({
  operationId: 'emuListTenants',
  method: 'get',
  path: '/_emu/tenants',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'List tenants',
  responses: { 200: ok('Every tenant.', z.object({ data: z.array(TenantInfo) }).meta({ id: 'TenantList' })), ...problems(401) },
});

export const emuCreateTenant = defineOperation({
  operationId: 'emuCreateTenant',
  method: 'post',
  path: '/_emu/tenants',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Create a tenant (caps at their defaults)',
  body: CreateTenant,
  responses: { 201: ok('The tenant.', TenantInfo), ...problems(400, 401, 409, 415, 422) },
});

export const emuGetTenant = defineOperation({
  operationId: 'emuGetTenant',
  method: 'get',
  path: '/_emu/tenants/{name}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Read a tenant',
  params: TenantParam,
  responses: { 200: ok('The tenant.', TenantInfo), ...problems(401, 404) },
});

export const emuSetTenantLimits = defineOperation({
  operationId: 'emuSetTenantLimits',
  method: 'patch',
  path: '/_emu/tenants/{name}/limits',
  auth: 'admin',
  tag: 'Emulator',
  summary: "Change a tenant's caps (what production's operators do out of band)",
  params: TenantParam,
  body: CapsPatch,
  responses: { 200: ok('The caps now.', RuntimeLimits), ...problems(400, 401, 404, 415, 422) },
});

export const emuCreateTenantKey = defineOperation({
  operationId: 'emuCreateTenantKey',
  method: 'post',
  path: '/_emu/tenants/{name}/keys',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Issue an API key for a tenant (shown once)',
  params: TenantParam,
  responses: { 201: ok('The key.', CreatedKey), ...problems(401, 404) },
});
