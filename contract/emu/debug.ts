import { defineOperation } from '../operation';
import { ok, problems } from '../responses';
import { DebugSessionList } from '../schemas/debug';

/** Debug runs in progress (emulator only; contract/schemas/debug.ts). */
export const emuListDebugSessions = defineOperation({
  operationId: 'emuListDebugSessions',
  method: 'get',
  path: '/_emu/debug/sessions',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Debug runs in progress: where to attach each, and whether a debugger holds it',
  description:
    'A debug run is started with `X-Emu-Debug` on `POST /v1/invoke/{snippet}` (with the admin token as `X-Emu-Admin`). Its session appears here (and as `debug.session` events) from the moment its debugger listens until the run ends.',
  responses: {
    200: ok('The sessions, oldest first.', DebugSessionList),
    ...problems(401),
  },
});
