import { implement } from '../http/route';
import { readRawBody } from '../http/body';
import * as inbox from '../../contract/emu/inbox';

/** The handlers of the callback inbox (their specs: contract/emu/inbox.ts). */
export const inboxRoutes = [
  implement(inbox.inboxReceive, async ({ services, params, query, ctx }) => {
    const body = await readRawBody(ctx);
    const { status, retryAfter, delivery } = await services.inbox.receive(params.name, {
      method: ctx.method,
      query: ctx.querystring,
      statusParam: query.status,
      headers: ctx.headers,
      body,
    });
    return {
      status,
      body: { received: true, id: delivery.id },
      headers: retryAfter !== null ? { 'Retry-After': String(retryAfter) } : undefined,
    };
  }),
  implement(inbox.emuListInboxes, async ({ services }) => ({ status: 200, body: { data: await services.inbox.list() } })),
  implement(inbox.emuGetInbox, async ({ services, params }) => ({
    status: 200,
    body: { name: params.name, response: services.inbox.response(params.name), data: await services.inbox.deliveries(params.name) },
  })),
  implement(inbox.emuClearInbox, async ({ services, params }) => {
    await services.inbox.clear(params.name);
    return { status: 204 };
  }),
  implement(inbox.emuSetInboxResponse, ({ services, params, body }) => ({
    status: 200,
    body: services.inbox.setResponse(params.name, body),
  })),
];
