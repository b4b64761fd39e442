import { z } from 'zod';
import { defineRoute } from '../http/route';
import { ApiError } from '../errors';
import { LimaRefused, VmInfo, VmOperation, VmStatus, type LimaRefusalCode } from '../../executor';
import { ok, problems } from './common';

/**
 * The executor VM of macOS (Lima), managed from the GUI and `svc-emu lima`: its status from
 * `limactl list`, and create / start / stop, which run in the background (202, then poll GET) one at a
 * time. Where Lima is not used (Linux: limits are enforced on the host itself) every action is refused
 * with the reason.
 */
const VmOperationDoc = VmOperation.meta({ id: 'VmOperation' });
const VmStatusDoc = VmStatus.extend({ vm: VmInfo.meta({ id: 'VmInfo' }), operation: z.union([VmOperationDoc, z.null()]) }).meta({ id: 'VmStatus' });

const REFUSAL_STATUS: Record<LimaRefusalCode, number> = {
  vm_unavailable: 409,
  vm_operation_running: 409,
  vm_exists: 409,
  vm_missing: 409,
  vm_running: 409,
  vm_not_running: 409,
  limactl_failed: 502,
};

const REFUSAL_TITLE: Record<LimaRefusalCode, string> = {
  vm_unavailable: 'The VM cannot be managed here',
  vm_operation_running: 'A VM operation is running',
  vm_exists: 'The VM exists already',
  vm_missing: 'The VM does not exist',
  vm_running: 'The VM is running',
  vm_not_running: 'The VM is not running',
  limactl_failed: 'limactl failed',
};

/** Runs an action; a refusal becomes problem+json with its stable code. */
async function action(run: () => Promise<VmOperation>) {
  try {
    return { status: 202, body: await run() };
  } catch (err) {
    if (err instanceof LimaRefused) throw new ApiError(REFUSAL_STATUS[err.code], err.code, REFUSAL_TITLE[err.code], err.message);
    throw err;
  }
}

const REFUSALS =
  '409 `vm_unavailable` (Lima is not used on this host, or limactl is missing: `detail` says which), `vm_operation_running` (one operation at a time)';

const actionResponses = (extra: string) => ({
  202: ok('Started: the operation (poll `GET /_emu/vm` for its log and end).', VmOperationDoc),
  409: { ...problems(409)[409]!, description: `${REFUSALS}, ${extra}.` },
  502: { ...problems(502)[502]!, description: '`limactl_failed`: `limactl list` failed or printed something unreadable, so the VM’s state is unknown.' },
  ...problems(401),
});

export const vmRoutes = [
  defineRoute({
    method: 'post', path: '/_emu/vm/connect', auth: 'admin', tag: 'Emulator',
    summary: 'Connect the executor to the VM’s agent now (after a VM was started outside the app)',
    responses: {
      200: ok('Connected: the executor as it is now.', z.object({ transport: z.string(), backend: z.string(), sandbox: z.string() })),
      409: { ...problems(409)[409]!, description: '`executor_local`: this core runs snippets on this host, not behind the VM.' },
      502: { ...problems(502)[502]!, description: '`agent_unreachable`: the agent in the VM did not answer (`detail` says why; is the VM running?).' },
      ...problems(401),
    },
    handler: async ({ services }) => {
      if (!services.connectAgent) throw new ApiError(409, 'executor_local', 'Snippets run on this host', 'this core runs snippets on this host (--executor local): there is no VM agent to connect to');
      try {
        await services.connectAgent();
      } catch (err) {
        throw new ApiError(502, 'agent_unreachable', 'The VM’s agent did not answer', err instanceof Error ? err.message : String(err));
      }
      const { transport, backend, sandbox } = services.executor.info;
      return { status: 200, body: { transport, backend, sandbox } };
    },
  }),
  defineRoute({
    method: 'get', path: '/_emu/vm', auth: 'admin', tag: 'Emulator',
    summary: 'The executor VM (Lima, macOS): whether it can be managed here, its status, and the running or last operation with its log',
    responses: { 200: ok('The VM’s status (`available: false` with a `reason` where Lima is not used).', VmStatusDoc), ...problems(401) },
    handler: async ({ services }) => ({ status: 200, body: await services.vm.status() }),
  }),
  defineRoute({
    method: 'post', path: '/_emu/vm/create', auth: 'admin', tag: 'Emulator',
    summary: 'Create the VM from the generated template (`limactl create`); runs in the background',
    responses: actionResponses('`vm_exists`'),
    handler: ({ services }) => action(() => services.vm.create()),
  }),
  defineRoute({
    method: 'post', path: '/_emu/vm/start', auth: 'admin', tag: 'Emulator',
    summary: 'Start the VM (`limactl start`; the first start downloads the image and provisions the runtimes); runs in the background',
    responses: actionResponses('`vm_missing`, `vm_running`'),
    handler: ({ services }) => action(() => services.vm.start()),
  }),
  defineRoute({
    method: 'post', path: '/_emu/vm/stop', auth: 'admin', tag: 'Emulator',
    summary: 'Stop the VM (`limactl stop`); runs in the background',
    responses: actionResponses('`vm_missing`, `vm_not_running`'),
    handler: ({ services }) => action(() => services.vm.stop()),
  }),
];
