import { implement } from '../http/route';
import * as debug from '../../contract/emu/debug';

/** Debug runs in progress (contract/emu/debug.ts). */
export const debugRoutes = [
  implement(debug.emuListDebugSessions, ({ services }) => ({ status: 200, body: { data: services.debugSessions.list() } })),
];
