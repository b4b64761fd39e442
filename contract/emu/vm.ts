import { z } from 'zod';
import { defineOperation } from '../operation';
import type { ProblemCode } from '../problems';
import { ok, problem, problems } from '../responses';
import { VmOperation, VmStatus } from '../schemas/vm';

/**
 * The executor VM of macOS (Lima), managed from the GUI and `svc-emu lima`: its status from
 * `limactl list`, and create / start / stop, which run in the background (202, then poll GET) one at a
 * time. Where Lima is not used (Linux: limits are enforced on the host itself) every action is refused
 * with the reason.
 */
const REFUSALS =
  '`vm_unavailable` (Lima is not used on this host, or limactl is missing: `detail` says which), `vm_operation_running` (one operation at a time)';

const actionResponses = (...extra: ProblemCode[]) => ({
  202: ok('Started: the operation (poll `GET /_emu/vm` for its log and end).', VmOperation),
  409: problem(409, ['vm_unavailable', 'vm_operation_running', ...extra], `${REFUSALS}, ${extra.map((c) => `\`${c}\``).join(', ')}.`),
  502: problem(
    502,
    ['limactl_failed'],
    '`limactl_failed`: `limactl list` failed or printed something unreadable, so the VM’s state is unknown.',
  ),
  ...problems(401),
});

export const VmConnected = z.object({ transport: z.string(), backend: z.string(), sandbox: z.string() }).meta({ id: 'VmConnected' });

export const emuVmConnect = defineOperation({
  operationId: 'emuVmConnect',
  method: 'post',
  path: '/_emu/vm/connect',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Connect the executor to the VM’s agent now (after a VM was started outside the app)',
  responses: {
    200: ok('Connected: the executor as it is now.', VmConnected),
    409: problem(409, ['executor_local'], '`executor_local`: this core runs snippets on this host, not behind the VM.'),
    502: problem(
      502,
      ['agent_unreachable'],
      '`agent_unreachable`: the agent in the VM did not answer (`detail` says why; is the VM running?).',
    ),
    ...problems(401),
  },
});

export const emuVmStatus = defineOperation({
  operationId: 'emuVmStatus',
  method: 'get',
  path: '/_emu/vm',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'The executor VM (Lima, macOS): whether it can be managed here, its status, and the running or last operation with its log',
  responses: { 200: ok('The VM’s status (`available: false` with a `reason` where Lima is not used).', VmStatus), ...problems(401) },
});

export const emuVmCreate = defineOperation({
  operationId: 'emuVmCreate',
  method: 'post',
  path: '/_emu/vm/create',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Create the VM from the generated template (`limactl create`); runs in the background',
  responses: actionResponses('vm_exists'),
});

export const emuVmStart = defineOperation({
  operationId: 'emuVmStart',
  method: 'post',
  path: '/_emu/vm/start',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Start the VM (`limactl start`; the first start downloads the image and provisions the runtimes); runs in the background',
  responses: actionResponses('vm_missing', 'vm_running'),
});

export const emuVmStop = defineOperation({
  operationId: 'emuVmStop',
  method: 'post',
  path: '/_emu/vm/stop',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Stop the VM (`limactl stop`); runs in the background',
  responses: actionResponses('vm_missing', 'vm_not_running'),
});
