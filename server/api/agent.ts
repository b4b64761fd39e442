import { implement } from '../http/route';
import * as events from '../../contract/emu/events';

/** The agent run view's data (its spec: contract/emu/events.ts `emuInvocationAgent`; the service: services/agent-steps.ts). */
export const agentRoutes = [
  implement(events.emuInvocationAgent, async ({ services, params }) => {
    const rec = services.invocations.byId(params.id);
    return { status: 200, body: await services.agentSteps.run(rec) };
  }),
];
