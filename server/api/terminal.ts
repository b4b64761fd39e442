import type { Context } from 'koa';
import { implement, type Reply } from '../http/route';
import { SSE_HEADERS, SseBody } from '../http/sse';
import { ApiError } from '../errors';
import type { Services } from '../services';
import type { TerminalEvent, TerminalSessions } from '../terminal/sessions';
import * as terminals from '../../contract/emu/terminals';

/** The handlers of the GUI's terminals (their specs, and why they are guarded: contract/emu/terminals.ts). */

/** The sessions, or 403 `terminal_disabled` naming the flag. */
function sessions(services: Services): TerminalSessions {
  const access = services.terminals;
  if (!access.sessions) throw new ApiError(403, 'terminal_disabled', 'Terminal disabled', access.disabled);
  return access.sessions;
}

/** The scrollback, then live `output` until `exit`; a reader that falls 8 MiB behind is cut off (it can reconnect). */
function followTerminal(ctx: Context, t: TerminalSessions, id: string, pingMs: number): Reply {
  const sse = new SseBody(pingMs);
  const send = (e: TerminalEvent) => {
    sse.sendFrame(e.event, e.data, e.id);
    if (e.event === 'exit' || sse.stream.writableLength > 8 * 1024 * 1024) {
      f.unsubscribe();
      sse.end();
    }
  };
  const f = t.follow(id, send);
  if (f.replay) sse.sendFrame('output', { data: f.replay }, f.seq);
  if (f.exit) {
    sse.sendFrame('exit', f.exit, f.seq + 1);
    sse.end();
  }
  ctx.res.once('close', () => {
    f.unsubscribe();
    sse.end();
  });
  return { status: 200, body: sse.stream, headers: { ...SSE_HEADERS } };
}

export const terminalRoutes = [
  implement(terminals.emuListTerminals, ({ services }) => {
    const t = sessions(services);
    return {
      status: 200,
      body: { data: t.list(), targets: { workspace: t.availability('workspace'), vm: t.availability('vm') }, max_live: t.maxLive },
    };
  }),
  implement(terminals.emuOpenTerminal, async ({ services, body }) => ({ status: 201, body: await sessions(services).open(body) })),
  implement(terminals.emuGetTerminal, ({ services, params }) => ({ status: 200, body: sessions(services).get(params.id) })),
  implement(terminals.emuTerminalOutput, ({ services, params, ctx }) =>
    followTerminal(ctx, sessions(services), params.id, services.streams.pingMs),
  ),
  implement(terminals.emuTerminalInput, ({ services, params, body }) => {
    sessions(services).write(params.id, body.data);
    return { status: 204 };
  }),
  implement(terminals.emuResizeTerminal, ({ services, params, body }) => {
    sessions(services).resize(params.id, body.cols, body.rows);
    return { status: 204 };
  }),
  implement(terminals.emuCloseTerminal, async ({ services, params }) => {
    await sessions(services).remove(params.id);
    return { status: 204 };
  }),
];
