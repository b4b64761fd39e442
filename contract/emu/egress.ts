import { z } from 'zod';
import { defineOperation } from '../operation';
import { noContent, ok, problems } from '../responses';
import { EgressEntry, FaultRule, NewFaultRule } from '../schemas/egress';

/**
 * The egress inspector and fault injection (emulator only): every outbound call a snippet made (through
 * the proxy or `integrations.call`), and rules that slow, fail, drop or hang them on purpose.
 */

export const emuListEgress = defineOperation({
  operationId: 'emuListEgress',
  method: 'get',
  path: '/_emu/egress',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Outbound calls, newest first (the last 1000): who, where, status, bytes, time, fault, refusal',
  query: z.object({ invocation: z.string().max(64).optional(), tenant: z.string().max(63).optional() }),
  responses: {
    200: ok(
      'The egress log and the profile.',
      z.object({ profile: z.enum(['local', 'production']), allow: z.array(z.string()), data: z.array(EgressEntry) }),
    ),
    ...problems(400, 401),
  },
});

export const emuClearEgress = defineOperation({
  operationId: 'emuClearEgress',
  method: 'delete',
  path: '/_emu/egress',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Clear the egress log',
  responses: { 204: noContent, ...problems(401) },
});

export const emuListFaults = defineOperation({
  operationId: 'emuListFaults',
  method: 'get',
  path: '/_emu/egress/faults',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'The fault rules',
  responses: { 200: ok('Every rule.', z.object({ data: z.array(FaultRule) })), ...problems(401) },
});

export const emuAddFault = defineOperation({
  operationId: 'emuAddFault',
  method: 'post',
  path: '/_emu/egress/faults',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Add a fault rule: slow, fail, drop or hang calls to a host or an integration',
  description:
    'e.g. `{"host": "api.openai.com", "action": {"type": "latency", "ms": 2000}}`, `{"integration": "weather", "action": {"type": "status", "status": 503}, "times": 2}`, `{"host": "*.example.com", "action": {"type": "drop"}}`, `{"host": "slow.test", "action": {"type": "timeout"}}`. Latencies add up; the first failing rule decides.',
  body: NewFaultRule,
  responses: { 201: ok('The rule.', FaultRule), ...problems(400, 401, 415, 422) },
});

export const emuRemoveFault = defineOperation({
  operationId: 'emuRemoveFault',
  method: 'delete',
  path: '/_emu/egress/faults/{id}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Remove a fault rule',
  params: z.object({ id: z.string() }),
  responses: { 204: noContent, ...problems(401, 404) },
});

export const emuClearFaults = defineOperation({
  operationId: 'emuClearFaults',
  method: 'delete',
  path: '/_emu/egress/faults',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Remove every fault rule',
  responses: { 204: noContent, ...problems(401) },
});
