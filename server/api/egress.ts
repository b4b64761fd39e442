import { z } from 'zod';
import { defineRoute } from '../http/route';
import { notFound } from '../errors';
import { NewFaultRule } from '../egress/faults';
import { noContent, ok, problems } from './common';

/**
 * The egress inspector and fault injection (emulator only): every outbound call a snippet made (through
 * the proxy or `integrations.call`), and rules that slow, fail, drop or hang them on purpose.
 */
const EgressEntry = z
  .object({
    id: z.number().int(),
    at: z.string(),
    source: z.enum(['snippet', 'integration']),
    tenant: z.string().nullable(),
    invocation_id: z.string().nullable(),
    integration: z.string().nullable(),
    method: z.string(),
    host: z.string(),
    port: z.number().int(),
    path: z.string().nullable(),
    status: z.number().int().nullable(),
    bytes_out: z.number().int(),
    bytes_in: z.number().int(),
    duration_ms: z.number(),
    fault: z.string().nullable(),
    refused: z.string().nullable(),
    error: z.string().nullable(),
  })
  .meta({ id: 'EgressEntry' });

const FaultRule = z
  .object({
    id: z.string(),
    host: z.string().optional(),
    integration: z.string().optional(),
    action: z.record(z.string(), z.unknown()),
    times: z.number().int().nullable(),
    hits: z.number().int(),
    created_at: z.string(),
  })
  .meta({ id: 'FaultRule' });

export const egressRoutes = [
  defineRoute({
    method: 'get', path: '/_emu/egress', auth: 'admin', tag: 'Emulator',
    summary: 'Outbound calls, newest first (the last 1000): who, where, status, bytes, time, fault, refusal',
    query: z.object({ invocation: z.string().max(64).optional(), tenant: z.string().max(63).optional() }),
    responses: {
      200: ok('The egress log and the profile.', z.object({ profile: z.enum(['local', 'production']), allow: z.array(z.string()), data: z.array(EgressEntry) })),
      ...problems(400, 401),
    },
    handler: ({ services, query }) => ({
      status: 200,
      body: {
        profile: services.egress.rules.profile,
        allow: [...services.egress.rules.allow],
        data: services.egress.log.list({ invocation_id: query.invocation, tenant: query.tenant }),
      },
    }),
  }),
  defineRoute({
    method: 'delete', path: '/_emu/egress', auth: 'admin', tag: 'Emulator', summary: 'Clear the egress log',
    responses: { 204: noContent, ...problems(401) },
    handler: ({ services }) => {
      services.egress.log.clear();
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'get', path: '/_emu/egress/faults', auth: 'admin', tag: 'Emulator', summary: 'The fault rules',
    responses: { 200: ok('Every rule.', z.object({ data: z.array(FaultRule) })), ...problems(401) },
    handler: ({ services }) => ({ status: 200, body: { data: services.egress.faults.list() } }),
  }),
  defineRoute({
    method: 'post', path: '/_emu/egress/faults', auth: 'admin', tag: 'Emulator',
    summary: 'Add a fault rule: slow, fail, drop or hang calls to a host or an integration',
    description:
      'e.g. `{"host": "api.openai.com", "action": {"type": "latency", "ms": 2000}}`, `{"integration": "weather", "action": {"type": "status", "status": 503}, "times": 2}`, `{"host": "*.example.com", "action": {"type": "drop"}}`, `{"host": "slow.test", "action": {"type": "timeout"}}`. Latencies add up; the first failing rule decides.',
    body: NewFaultRule,
    responses: { 201: ok('The rule.', FaultRule), ...problems(400, 401, 415, 422) },
    handler: ({ services, body }) => ({ status: 201, body: services.egress.faults.add(body) }),
  }),
  defineRoute({
    method: 'delete', path: '/_emu/egress/faults/{id}', auth: 'admin', tag: 'Emulator', summary: 'Remove a fault rule',
    params: z.object({ id: z.string() }),
    responses: { 204: noContent, ...problems(401, 404) },
    handler: ({ services, params }) => {
      if (!services.egress.faults.remove(params.id)) throw notFound('fault rule', params.id);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'delete', path: '/_emu/egress/faults', auth: 'admin', tag: 'Emulator', summary: 'Remove every fault rule',
    responses: { 204: noContent, ...problems(401) },
    handler: ({ services }) => {
      services.egress.faults.clear();
      return { status: 204 };
    },
  }),
];
