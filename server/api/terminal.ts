import { z } from 'zod';
import type { Context } from 'koa';
import { defineRoute, type Reply, type ResponseSpec } from '../http/route';
import { SSE_HEADERS, SseBody } from '../http/sse';
import { ApiError } from '../errors';
import type { Services } from '../services';
import type { TerminalEvent, TerminalSessions } from '../terminal/sessions';
import { TERMINAL_TARGETS } from '../terminal/targets';
import { Problem } from './schemas';
import { noContent, ok, problems } from './common';

/**
 * The GUI's Terminal page: shells on ptys (in the workspace, or in the Lima VM) over HTTP, so it works
 * the same in Electron and in a browser. Admin token only, and only when the core allows terminals
 * (by default when it listens on loopback: a shell over HTTP on a network address is remote code
 * execution for anyone holding the token).
 */
const Size = z.number().int().min(1).max(1000);

const TerminalView = z
  .object({
    id: z.string(),
    target: z.enum(TERMINAL_TARGETS),
    shell: z.string().meta({ description: 'The command on the pty, e.g. `/bin/bash` or `limactl shell svc-emu`.' }),
    cwd: z.string(),
    pid: z.number().int(),
    cols: z.number().int(),
    rows: z.number().int(),
    status: z.enum(['running', 'exited']),
    exit_code: z.number().int().nullable(),
    signal: z.string().nullable().meta({ description: 'The signal that ended it (`SIGHUP`), or null.' }),
    created_at: z.string(),
    exited_at: z.string().nullable(),
  })
  .meta({ id: 'Terminal' });

const Availability = z.object({ available: z.boolean(), reason: z.string().nullable() });

const OpenTerminal = z
  .object({
    target: z.enum(TERMINAL_TARGETS).default('workspace'),
    cols: Size.default(80),
    rows: Size.default(24),
  })
  .strict();

const Input = z.object({ data: z.string().min(1).max(64 * 1024).meta({ description: 'Keystrokes as text (UTF-8), at most 64 Ki characters.' }) }).strict();
const Resize = z.object({ cols: Size, rows: Size }).strict();
const IdParam = z.object({ id: z.string().max(64) });

const problem = (description: string): ResponseSpec => ({ description, schema: Problem, contentType: 'application/problem+json' });
const disabled403 = { 403: problem('Terminals are disabled on this core (`terminal_disabled`): see `svc-emu serve --terminal`.') };

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
  defineRoute({
    method: 'get', path: '/_emu/terminals', auth: 'admin', tag: 'Emulator',
    summary: 'The terminals (running and exited), and which targets can be opened here',
    responses: {
      200: ok(
        'Every terminal, oldest first; `targets` says whether each target can be opened here, and why not.',
        z.object({ data: z.array(TerminalView), targets: z.object({ workspace: Availability, vm: Availability }), max_live: z.number().int() }),
      ),
      ...problems(401),
      ...disabled403,
    },
    handler: ({ services }) => {
      const t = sessions(services);
      return { status: 200, body: { data: t.list(), targets: { workspace: t.availability('workspace'), vm: t.availability('vm') }, max_live: t.maxLive } };
    },
  }),
  defineRoute({
    method: 'post', path: '/_emu/terminals', auth: 'admin', tag: 'Emulator',
    summary: 'Open a terminal: a shell in the workspace, or in the Lima VM',
    description:
      '`workspace`: `$SHELL` (else /bin/bash, else /bin/sh) in the workspace (the data dir when none is watched), with `SVC_EMU_URL` and `SVC_EMU_DATA_DIR` set so `svc-emu` in it talks to this core, and `TERM=xterm-256color`. `vm`: `limactl shell svc-emu`, only where `limactl` is on PATH (409 `terminal_target_unavailable` with the reason otherwise). At most 8 run at once (409 `too_many_terminals`).',
    body: OpenTerminal,
    bodyOptional: true,
    responses: {
      201: ok('The terminal.', TerminalView),
      ...problems(400, 401, 409, 415, 422),
      ...disabled403,
      503: problem('The pty could not be started (`terminal_spawn_failed`), or the emulator is stopping.'),
    },
    handler: async ({ services, body }) => ({ status: 201, body: await sessions(services).open(body) }),
  }),
  defineRoute({
    method: 'get', path: '/_emu/terminals/{id}', auth: 'admin', tag: 'Emulator', summary: 'One terminal',
    params: IdParam,
    responses: { 200: ok('The terminal.', TerminalView), ...problems(401, 404), ...disabled403 },
    handler: ({ services, params }) => ({ status: 200, body: sessions(services).get(params.id) }),
  }),
  defineRoute({
    method: 'get', path: '/_emu/terminals/{id}/output', auth: 'admin', tag: 'Emulator',
    summary: 'A terminal’s output as SSE: its scrollback, then live output, then its exit',
    description:
      '`text/event-stream`. `event: output` `{data}` (UTF-8 text): first the scrollback (the last ~256 KiB), then each piece of output as the pty gives it. `event: exit` `{exit_code, signal}` last, when the process ends (at once for an exited terminal). Any number of readers; `: ping` comments on silence.',
    params: IdParam,
    responses: { 200: { description: 'The SSE stream.', contentType: 'text/event-stream' }, ...problems(401, 404), ...disabled403 },
    handler: ({ services, params, ctx }) => followTerminal(ctx, sessions(services), params.id, services.streams.pingMs),
  }),
  defineRoute({
    method: 'post', path: '/_emu/terminals/{id}/input', auth: 'admin', tag: 'Emulator', summary: 'Type into a terminal',
    params: IdParam,
    body: Input,
    responses: { 204: noContent, ...problems(401, 404, 409, 415, 422), ...disabled403 },
    handler: ({ services, params, body }) => {
      sessions(services).write(params.id, body.data);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'post', path: '/_emu/terminals/{id}/resize', auth: 'admin', tag: 'Emulator', summary: 'Resize a terminal (columns and rows, 1–1000)',
    params: IdParam,
    body: Resize,
    responses: { 204: noContent, ...problems(401, 404, 409, 415, 422), ...disabled403 },
    handler: ({ services, params, body }) => {
      sessions(services).resize(params.id, body.cols, body.rows);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'delete', path: '/_emu/terminals/{id}', auth: 'admin', tag: 'Emulator', summary: 'Close a terminal: kill its process (if it runs) and forget it',
    params: IdParam,
    responses: { 204: noContent, ...problems(401, 404), ...disabled403 },
    handler: async ({ services, params }) => {
      await sessions(services).remove(params.id);
      return { status: 204 };
    },
  }),
];
