import type { RouteDef } from '../http/route';
import { metaRoutes } from './meta';
import { snippetRoutes } from './v1/snippets';
import { tenantRoutes } from './v1/tenant';
import { emuRoutes } from './emu';
import { invokeRoutes } from './v1/invoke';
import { inboxRoutes } from './inbox';
import { egressRoutes } from './egress';
import { terminalRoutes } from './terminal';
import { vmRoutes } from './vm';
import { guiSessionRoutes } from './gui-session';
import { eventRoutes } from './events';
import { agentRoutes } from './agent';
import { cassetteRoutes } from './cassettes';
import { stateRoutes } from './state';
import { reportRoutes } from './report';
import { debugRoutes } from './debug';

export const allRoutes: RouteDef[] = [
  ...metaRoutes,
  ...snippetRoutes,
  ...invokeRoutes,
  ...tenantRoutes,
  ...emuRoutes,
  ...inboxRoutes,
  ...egressRoutes,
  ...terminalRoutes,
  ...vmRoutes,
  ...guiSessionRoutes,
  ...eventRoutes,
  ...agentRoutes,
  ...cassetteRoutes,
  ...stateRoutes,
  ...reportRoutes,
  ...debugRoutes,
];
