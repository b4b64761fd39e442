import { implement } from '../http/route';
import { SSE_HEADERS, SseBody } from '../http/sse';
import { typeFilter } from '../events/bus';
import type { EmuEvent } from '../../contract/schemas/events';
import * as events from '../../contract/emu/events';

/** A reader this far behind (bytes not yet taken by its socket) is cut off; it reconnects with `Last-Event-ID`. */
export const EVENTS_BACKLOG_BYTES = 4 * 1024 * 1024;

/** The handler of the live event feed (its spec: contract/emu/events.ts; the bus: server/events/bus.ts). */
export const eventRoutes = [
  implement(events.emuEvents, ({ services, query, headers, ctx }) => {
    const keep = typeFilter(query.types);
    const sse = new SseBody(services.streams.pingMs);
    let closed = false;
    let written = false;
    const close = () => {
      if (closed) return;
      closed = true;
      sub.close();
      sse.end();
    };
    const send = (e: EmuEvent) => {
      if (closed || !keep(e.type)) return;
      sse.sendFrame(e.type, e, e.id);
      written = true;
      if (sse.stream.writableLength > EVENTS_BACKLOG_BYTES) close();
    };
    // publish() is synchronous: nothing can be published between subscribing and writing the replay below.
    const sub = services.events.subscribe(send, headers['last-event-id']);
    if (sub.reset) {
      // The reset carries the newest id (or this boot's start), so a reader that reconnects after it resumes from there.
      sse.sendFrame('reset', sub.reset, sub.reset.latest ?? `${services.events.boot}-0`);
      written = true;
    }
    for (const e of sub.replay) send(e);
    // A first comment now: the response's headers go out with the first bytes, so without it a reader of a quiet
    // core waited for the first ping (up to pingMs, 15 s) before its fetch even resolved.
    // (A replay the `types=` filter emptied wrote nothing either.)
    if (!written) sse.stream.write(': open\n\n');
    ctx.res.once('close', close);
    return { status: 200, body: sse.stream, headers: { ...SSE_HEADERS } };
  }),
];
