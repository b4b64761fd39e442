import { implement } from '../http/route';
import * as meta from '../../contract/meta';

/** Unauthenticated probes (loopback-only like everything else, via the Host guard); specs in contract/meta.ts. */
export const metaRoutes = [
  implement(meta.getHealth, () => ({ status: 200, body: { status: 'ok' } })),
  implement(meta.getReadiness, ({ services }) => {
    const { ready, reasons } = services.facts.ready();
    return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', reasons } };
  }),
];
