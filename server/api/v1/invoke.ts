import { implement } from '../../http/route';
import { ApiError } from '../../errors';
import { secretEquals } from '../../ids';
import * as invocations from '../../../contract/v1/invocations';
import { LIMIT_OVERRIDE_KEYS } from '../../../contract/schemas/invocations';
import { PROBLEMS } from '../../../contract/problems';
import type { Outcome } from '../../../executor';
import { runHeaders, streamInvocation } from './stream';
import type { EgressMode } from '../../../contract/schemas/cassette';
import type { RunEgress } from '../../services/egress-sessions';
import type { DebugRunRequest } from '../../services/debug-run';

/** A sync run's failed outcome → its problem: the status and title its code has in contract/problems.ts (docs/contract.md, "Invoke"). */
const outcomeProblem = (outcome: Exclude<Outcome, 'success'>) => ({
  status: PROBLEMS[outcome].statuses[0],
  title: PROBLEMS[outcome].title,
});

type LimitKey = (typeof LIMIT_OVERRIDE_KEYS)[number];

/**
 * `X-Emu-Limits: timeout_ms=500,max_memory_mb=64` (its form already checked by the operation's header
 * schema, contract/schemas/invocations.ts) → overrides; only with the admin token in X-Emu-Admin.
 */
export function parseLimitOverrides(header: string | undefined, adminHeader: string | undefined, adminToken: string) {
  if (!header) return undefined;
  if (!adminHeader || !secretEquals(adminHeader, adminToken)) {
    throw new ApiError(403, 'forbidden', 'Forbidden', 'X-Emu-Limits is an emulator power: send the admin token as X-Emu-Admin too');
  }
  const out: Partial<Record<LimitKey, number>> = {};
  for (const part of header.split(',')) {
    const [name = '', value = ''] = part.split('=').map((p) => p.trim());
    out[name as LimitKey] = Number(value);
  }
  return out;
}

/**
 * `X-Emu-Egress-Mode` and `X-Emu-Cassette` (their forms checked by the header schema): this run's egress
 * mode and cassette (services/egress-sessions.ts), only with the admin token in X-Emu-Admin.
 */
export function parseRunEgress(
  headers: { 'x-emu-egress-mode'?: EgressMode; 'x-emu-cassette'?: string; 'x-emu-admin'?: string },
  adminToken: string,
): RunEgress | undefined {
  const mode = headers['x-emu-egress-mode'];
  const cassette = headers['x-emu-cassette'];
  if (!mode && !cassette) return undefined;
  const admin = headers['x-emu-admin'];
  if (!admin || !secretEquals(admin, adminToken)) {
    const which = mode ? 'X-Emu-Egress-Mode' : 'X-Emu-Cassette';
    throw new ApiError(403, 'forbidden', 'Forbidden', `${which} is an emulator power: send the admin token as X-Emu-Admin too`);
  }
  return { ...(mode ? { mode } : {}), ...(cassette ? { cassette } : {}) };
}

/**
 * `X-Emu-Debug: 1 | port=N` (its form checked by the header schema): a debug run (services/debug-run.ts), only
 * with the admin token in X-Emu-Admin, and never with an Idempotency-Key (a debug session is not an answer to repeat).
 */
export function parseDebugRun(
  headers: { 'x-emu-debug'?: string; 'x-emu-admin'?: string; 'idempotency-key'?: string },
  adminToken: string,
  requestId: string | null,
): DebugRunRequest | undefined {
  const header = headers['x-emu-debug'];
  if (!header) return undefined;
  const admin = headers['x-emu-admin'];
  if (!admin || !secretEquals(admin, adminToken)) {
    throw new ApiError(403, 'forbidden', 'Forbidden', 'X-Emu-Debug is an emulator power: send the admin token as X-Emu-Admin too');
  }
  if (headers['idempotency-key']) {
    throw new ApiError(
      400,
      'validation_failed',
      'Validation failed',
      'a debug run (X-Emu-Debug) never answers from an Idempotency-Key: send one or the other',
      { errors: [{ location: 'header.idempotency-key', message: 'not allowed with X-Emu-Debug' }] },
    );
  }
  const port = header.startsWith('port=') ? Number(header.slice('port='.length)) : undefined;
  return { ...(port === undefined ? {} : { port }), requestId };
}

/** The handlers of `/v1/invoke` and `/v1/invocations` (their specs: contract/v1/invocations.ts). */
export const invokeRoutes = [
  implement(invocations.invoke, async ({ services, tenant, params, query, body, headers, ctx }) => {
    // X-Invoke-Mode: absent = sync; `async` or `stream`; anything else (`sync` included) is a 400 of the header schema.
    const mode = headers['x-invoke-mode'] ?? 'sync';
    const overrides = parseLimitOverrides(headers['x-emu-limits'], headers['x-emu-admin'], services.facts.adminToken);
    const egress = parseRunEgress(headers, services.facts.adminToken);
    const debug = parseDebugRun(headers, services.facts.adminToken, (ctx.state.requestId as string | undefined) ?? null);
    const idempotencyKey = headers['idempotency-key'] ?? null;
    if (mode === 'stream') {
      return streamInvocation(services, ctx, {
        tenant,
        snippet: params.snippet,
        env: query.env,
        version: query.version,
        input: body,
        overrides,
        egress,
        debug,
        idempotencyKey,
      });
    }
    if (mode === 'async') {
      // docs/contract.md: `callback_url` is taken out of the input in async mode.
      const { callback_url: callbackUrl, ...input } = body;
      const { record, replayed } = await services.async.submit({
        tenant,
        snippet: params.snippet,
        env: query.env,
        version: query.version,
        input,
        overrides,
        egress,
        debug,
        idempotencyKey,
        callbackUrl,
      });
      const statusUrl = `/v1/invocations/${record.id}`;
      return {
        status: 202,
        body: { invocation_id: record.id, status: record.status, status_url: statusUrl },
        headers: { Location: statusUrl, ...runHeaders(record), ...(replayed ? { 'Idempotent-Replayed': 'true' } : {}) },
      };
    }
    const { record, replayed } = await services.invoke.invoke({
      idempotencyKey,
      tenant,
      snippet: params.snippet,
      env: query.env,
      version: query.version,
      input: body,
      mode: 'sync',
      overrides,
      egress,
      debug,
    });
    const view = await services.invocations.view(record);
    const replyHeaders = { ...runHeaders(record), ...(replayed ? { 'Idempotent-Replayed': 'true' } : {}) };
    if (record.outcome === 'success') return { status: 200, body: view.output, headers: replyHeaders };
    const outcome: Exclude<Outcome, 'success'> = record.outcome ?? 'failed';
    throw new ApiError(
      outcomeProblem(outcome).status,
      outcome,
      outcomeProblem(outcome).title,
      view.error?.message ?? outcome,
      { invocation_id: view.id, ...(view.error?.stack ? { stack: view.error.stack } : {}) },
      replyHeaders,
    );
  }),
  implement(invocations.getInvocation, async ({ services, tenant, params }) => ({
    status: 200,
    body: await services.invocations.view(services.invocations.find(tenant, params.id)),
  })),
  implement(invocations.listInvocations, async ({ services, tenant, query }) => ({
    status: 200,
    body: await services.invocations.list(tenant, { snippet: query.snippet, status: query.status }, query),
  })),
  implement(invocations.getInvocationLogs, async ({ services, tenant, params }) => ({
    status: 200,
    body: await services.invocations.logs(services.invocations.find(tenant, params.id)),
  })),
  implement(invocations.cancelInvocation, async ({ services, tenant, params }) => ({
    status: 202,
    body: { id: params.id, status: await services.async.cancel(tenant, params.id) },
  })),
  implement(invocations.redeliverCallback, async ({ services, tenant, params }) => ({
    status: 200,
    body: await services.invocations.view(await services.callbacks.redeliver(tenant, params.id)),
  })),
];
