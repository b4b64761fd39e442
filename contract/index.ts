/**
 * The wire contract of `/v1` and `/_emu`: every operation (keyed by its operationId), the schemas of
 * every request, response and SSE event, and the registry of problem codes. The server implements these
 * operations (server/api/**), the OpenAPI document is generated from them (contract/openapi.ts), and the
 * client calls them. Imports only zod.
 */
import * as meta from './meta';
import * as snippets from './v1/snippets';
import * as invocations from './v1/invocations';
import * as tenant from './v1/tenant';
import * as emu from './emu/core';
import * as inbox from './emu/inbox';
import * as egress from './emu/egress';
import * as terminals from './emu/terminals';
import * as vm from './emu/vm';
import * as events from './emu/events';
import * as guiSession from './emu/gui-session';
import * as cassettes from './emu/cassettes';
import * as state from './emu/state';
import * as report from './emu/report';
import * as debug from './emu/debug';

/** Only the Operations of a module (a module may also export schemas and helpers). */
type OperationsOf<M> = { [K in keyof M as M[K] extends { operationId: string; method: string } ? K : never]: M[K] };

const pick = <M extends object>(m: M): OperationsOf<M> =>
  Object.fromEntries(
    Object.entries(m).filter(([, v]) => typeof v === 'object' && v !== null && 'operationId' in v && 'method' in v),
  ) as OperationsOf<M>;

export const operations = {
  ...pick(meta),
  ...pick(snippets),
  ...pick(invocations),
  ...pick(tenant),
  ...pick(emu),
  ...pick(inbox),
  ...pick(egress),
  ...pick(terminals),
  ...pick(vm),
  ...pick(events),
  ...pick(guiSession),
  ...pick(cassettes),
  ...pick(state),
  ...pick(report),
  ...pick(debug),
};
export type Operations = typeof operations;
export type OperationId = keyof Operations;

export * from './operation';
export * from './problems';
export * from './headers';
export * from './schemas/json';
export * from './schemas/common';
export * from './schemas/snippets';
export * from './schemas/invocations';
export * from './schemas/tenant';
export * from './schemas/emu';
export * from './schemas/workspace';
export * from './schemas/inbox';
export * from './schemas/egress';
export * from './schemas/terminal';
export * from './schemas/vm';
export * from './schemas/events';
export * from './schemas/agent';
export * from './schemas/cassette';
export * from './schemas/report';
export * from './schemas/debug';
export * from './schemas/parity';
