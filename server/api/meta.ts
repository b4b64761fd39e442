import { z } from 'zod';
import { defineRoute } from '../http/route';
import { ok } from './common';

/** Unauthenticated probes (loopback-only like everything else, via the Host guard). */
export const metaRoutes = [
  defineRoute({
    method: 'get', path: '/healthz', auth: 'none', tag: 'Meta', summary: 'Liveness',
    responses: { 200: ok('Alive.', z.object({ status: z.literal('ok') })) },
    handler: () => ({ status: 200, body: { status: 'ok' } }),
  }),
  defineRoute({
    method: 'get', path: '/readyz', auth: 'none', tag: 'Meta', summary: 'Readiness',
    responses: {
      200: ok('Ready to serve.', z.object({ status: z.literal('ready'), reasons: z.array(z.string()) })),
      503: ok('Not ready; `reasons` says why.', z.object({ status: z.literal('not_ready'), reasons: z.array(z.string()) })),
    },
    handler: ({ services }) => {
      const { ready, reasons } = services.facts.ready();
      return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', reasons } };
    },
  }),
];
