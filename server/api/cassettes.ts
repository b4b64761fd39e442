import { implement } from '../http/route';
import { notFound, ValidationError } from '../domain/errors';
import { LOCAL_TENANT } from '../services/tenants';
import { summarize } from '../egress/cassette/store';
import { CassetteError } from '../egress/cassette/types';
import type { Services } from '../services';
import * as cassettes from '../../contract/emu/cassettes';

/** The snippet a cassette route names (by id or name), in the tenant `?tenant=` names (default `local`). */
function snippetOf(services: Services, id: string, tenantName: string | undefined) {
  const tenant = services.tenants.get(tenantName ?? LOCAL_TENANT);
  const snippet = services.snippets.get(tenant, id);
  return { tenant, snippet, ref: (name: string) => services.egressSessions.refOf(tenant, snippet.name, name) };
}

/** A cassette file that is not one: a 422 naming the file and what is wrong. */
const damaged = (err: unknown): never => {
  if (err instanceof CassetteError) throw new ValidationError([], err.message, 'validation_failed');
  throw err;
};

/** The handlers of the egress mode and a snippet's cassettes (their specs: contract/emu/cassettes.ts). */
export const cassetteRoutes = [
  implement(cassettes.emuGetEgressMode, ({ services }) => ({ status: 200, body: services.egressSessions.mode() })),
  implement(cassettes.emuSetEgressMode, ({ services, body }) => ({ status: 200, body: services.egressSessions.setMode(body) })),
  implement(cassettes.emuListCassettes, async ({ services, params, query }) => {
    const { tenant, snippet } = snippetOf(services, params.id, query.tenant);
    const files = await services.egressSessions.store.list(tenant.name, snippet.name).catch(damaged);
    return { status: 200, body: { data: files.map((f) => summarize(f.path.replace(/^.*\//, '').replace(/\.har$/, ''), f)) } };
  }),
  implement(cassettes.emuGetCassette, async ({ services, params, query }) => {
    const { ref } = snippetOf(services, params.id, query.tenant);
    const file = await services.egressSessions.store.read(ref(params.name)).catch(damaged);
    if (!file) throw notFound('cassette', params.name);
    return { status: 200, body: file.cassette };
  }),
  implement(cassettes.emuPutCassette, async ({ services, params, query, body }) => {
    const { tenant, snippet } = snippetOf(services, params.id, query.tenant);
    const file = await services.egressSessions.put(tenant, snippet, params.name, body).catch(damaged);
    return { status: 200, body: summarize(params.name, file) };
  }),
  implement(cassettes.emuDeleteCassette, async ({ services, params, query }) => {
    const { tenant, ref } = snippetOf(services, params.id, query.tenant);
    if (!(await services.egressSessions.store.remove(ref(params.name)))) throw notFound('cassette', params.name);
    services.events.publish('cassette.changed', {
      tenant_id: tenant.id,
      snippet: ref(params.name).snippet,
      name: params.name,
      state: 'deleted',
      entries: 0,
    });
    return { status: 204 };
  }),
];
