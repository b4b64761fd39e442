import { implement } from '../http/route';
import { notFound } from '../domain/errors';
import * as egress from '../../contract/emu/egress';

/** The handlers of the egress inspector and fault injection (their specs: contract/emu/egress.ts). */
export const egressRoutes = [
  implement(egress.emuListEgress, ({ services, query }) => ({
    status: 200,
    body: {
      profile: services.egress.rules.profile,
      allow: [...services.egress.rules.allow],
      data: services.egress.log.list({ invocation_id: query.invocation, tenant: query.tenant }),
    },
  })),
  implement(egress.emuClearEgress, ({ services }) => {
    services.egress.log.clear();
    services.events.publish('egress.cleared', {});
    return { status: 204 };
  }),
  implement(egress.emuListFaults, ({ services }) => ({ status: 200, body: { data: services.egress.faults.list() } })),
  implement(egress.emuAddFault, ({ services, body }) => {
    const rule = services.egress.faults.add(body);
    services.events.publish('fault.changed', { id: rule.id, state: 'added' });
    return { status: 201, body: rule };
  }),
  implement(egress.emuRemoveFault, ({ services, params }) => {
    if (!services.egress.faults.remove(params.id)) throw notFound('fault rule', params.id);
    services.events.publish('fault.changed', { id: params.id, state: 'removed' });
    return { status: 204 };
  }),
  implement(egress.emuClearFaults, ({ services }) => {
    services.egress.faults.clear();
    services.events.publish('fault.changed', { id: null, state: 'cleared' });
    return { status: 204 };
  }),
];
