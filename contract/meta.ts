import { z } from 'zod';
import { defineOperation } from './operation';
import { ok } from './responses';

/** Unauthenticated probes (loopback-only like everything else, via the Host guard). */

export const getHealth = defineOperation({
  operationId: 'getHealth',
  method: 'get',
  path: '/healthz',
  auth: 'none',
  tag: 'Meta',
  summary: 'Liveness',
  responses: { 200: ok('Alive.', z.object({ status: z.literal('ok') })) },
});

export const getReadiness = defineOperation({
  operationId: 'getReadiness',
  method: 'get',
  path: '/readyz',
  auth: 'none',
  tag: 'Meta',
  summary: 'Readiness',
  responses: {
    200: ok('Ready to serve.', z.object({ status: z.literal('ready'), reasons: z.array(z.string()) })),
    503: ok('Not ready; `reasons` says why.', z.object({ status: z.literal('not_ready'), reasons: z.array(z.string()) })),
  },
});

export const getOpenApi = defineOperation({
  operationId: 'getOpenApi',
  method: 'get',
  path: '/openapi.json',
  auth: 'none',
  tag: 'Meta',
  summary: 'This document: the OpenAPI 3.1 description of /v1 and /_emu',
  responses: { 200: ok('The document (contract/openapi.ts generates it).', z.record(z.string(), z.unknown())) },
});

export const getMetrics = defineOperation({
  operationId: 'getMetrics',
  method: 'get',
  path: '/metrics',
  auth: 'none',
  tag: 'Meta',
  summary: 'Prometheus metrics of the core',
  responses: {
    200: {
      description: 'The Prometheus text exposition format (version 0.0.4).',
      contentType: 'text/plain',
      schema: z.string().meta({ description: 'Metric families, one sample a line.' }),
    },
  },
});
