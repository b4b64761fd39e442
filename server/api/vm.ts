import type { z } from 'zod';
import { implement } from '../http/route';
import { ApiError } from '../errors';
import { LimaRefused, type VmOperation, type VmStatus } from '../../executor';
import { PROBLEMS } from '../../contract/problems';
import * as vm from '../../contract/emu/vm';
import type * as wire from '../../contract/schemas/vm';

/** The handlers of the executor VM (their specs: contract/emu/vm.ts). */

// The executor declares the VM's shapes itself (it imports nothing of the contract): these fail to
// compile when its shapes and the wire's (contract/schemas/vm.ts) drift apart, either way.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameStatus: Same<VmStatus, z.output<typeof wire.VmStatus>> = true;
const sameOperation: Same<VmOperation, z.output<typeof wire.VmOperation>> = true;
void sameStatus;
void sameOperation;

/** Runs an action; a refusal becomes problem+json with its stable code. */
async function action(run: () => Promise<VmOperation>) {
  try {
    return { status: 202, body: await run() };
  } catch (err) {
    if (err instanceof LimaRefused) {
      // Each refusal's status and title are its code's in contract/problems.ts.
      const { statuses, title } = PROBLEMS[err.code];
      throw new ApiError(statuses[0], err.code, title, err.message);
    }
    throw err;
  }
}

export const vmRoutes = [
  implement(vm.emuVmConnect, async ({ services }) => {
    if (!services.connectAgent)
      throw new ApiError(
        409,
        'executor_local',
        'Snippets run on this host',
        'this core runs snippets on this host (--executor local): there is no VM agent to connect to',
      );
    try {
      await services.connectAgent();
    } catch (err) {
      throw new ApiError(502, 'agent_unreachable', 'The VM’s agent did not answer', err instanceof Error ? err.message : String(err));
    }
    const { transport, backend, sandbox } = services.executor.info;
    return { status: 200, body: { transport, backend, sandbox } };
  }),
  implement(vm.emuVmStatus, async ({ services }) => ({ status: 200, body: await services.vm.status() })),
  implement(vm.emuVmCreate, ({ services }) => action(() => services.vm.create())),
  implement(vm.emuVmStart, ({ services }) => action(() => services.vm.start())),
  implement(vm.emuVmStop, ({ services }) => action(() => services.vm.stop())),
];
