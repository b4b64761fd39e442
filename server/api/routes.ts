import type { RouteDef } from '../http/route';
import { metaRoutes } from './meta';
import { snippetRoutes } from './v1/snippets';
import { tenantRoutes } from './v1/tenant';
import { emuRoutes } from './emu';

export const allRoutes: RouteDef[] = [...metaRoutes, ...snippetRoutes, ...tenantRoutes, ...emuRoutes];
