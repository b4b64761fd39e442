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
    return { status: 204 };
  }),
  implement(egress.emuListFaults, ({ services }) => ({ status: 200, body: { data: services.egress.faults.list() } })),
  implement(egress.emuAddFault, ({ services, body }) => ({ status: 201, body: services.egress.faults.add(body) })),
  implement(egress.emuRemoveFault, ({ services, params }) => {
    if (!services.egress.faults.remove(params.id)) throw notFound('fault rule', params.id);
    return { status: 204 };
  }),
  implement(egress.emuClearFaults, ({ services }) => {
    services.egress.faults.clear();
    return { status: 204 };
  }),
];
