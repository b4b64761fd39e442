import { z } from 'zod';
import { defineOperation } from '../operation';
import { noContent, ok, problem, problems, sse } from '../responses';
import {
  Availability,
  OpenTerminal,
  TerminalExit,
  TerminalIdParam,
  TerminalInput,
  TerminalOutput,
  TerminalResize,
  TerminalView,
} from '../schemas/terminal';

/**
 * The GUI's Terminal page: shells on ptys (in the workspace, or in the Lima VM) over HTTP, so it works
 * the same in Electron and in a browser. Admin token only, and only when the core allows terminals
 * (by default when it listens on loopback: a shell over HTTP on a network address is remote code
 * execution for anyone holding the token).
 */
const disabled403 = {
  403: problem(403, ['terminal_disabled'], 'Terminals are disabled on this core (`terminal_disabled`): see `svc-emu serve --terminal`.'),
};

export const emuListTerminals = defineOperation({
  operationId: 'emuListTerminals',
  method: 'get',
  path: '/_emu/terminals',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'The terminals (running and exited), and which targets can be opened here',
  responses: {
    200: ok(
      'Every terminal, oldest first; `targets` says whether each target can be opened here, and why not.',
      z.object({
        data: z.array(TerminalView),
        targets: z.object({ workspace: Availability, vm: Availability }),
        max_live: z.number().int(),
      }),
    ),
    ...problems(401),
    ...disabled403,
  },
});

export const emuOpenTerminal = defineOperation({
  operationId: 'emuOpenTerminal',
  method: 'post',
  path: '/_emu/terminals',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Open a terminal: a shell in the workspace, or in the Lima VM',
  description:
    '`workspace`: `$SHELL` (else /bin/bash, else /bin/sh) in the workspace (the data dir when none is watched), with `SVC_EMU_URL` and `SVC_EMU_DATA_DIR` set so `svc-emu` in it talks to this core, and `TERM=xterm-256color`. `vm`: `limactl shell svc-emu`, only where `limactl` is on PATH (409 `terminal_target_unavailable` with the reason otherwise). At most 8 run at once (409 `too_many_terminals`).',
  body: OpenTerminal,
  bodyOptional: true,
  responses: {
    201: ok('The terminal.', TerminalView),
    ...problems(400, 401, 415, 422),
    409: problem(409, ['too_many_terminals', 'terminal_target_unavailable']),
    ...disabled403,
    503: problem(
      503,
      ['terminal_spawn_failed', 'shutting_down'],
      'The pty could not be started (`terminal_spawn_failed`), or the emulator is stopping (`shutting_down`).',
    ),
  },
});

export const emuGetTerminal = defineOperation({
  operationId: 'emuGetTerminal',
  method: 'get',
  path: '/_emu/terminals/{id}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'One terminal',
  params: TerminalIdParam,
  responses: { 200: ok('The terminal.', TerminalView), ...problems(401, 404), ...disabled403 },
});

export const emuTerminalOutput = defineOperation({
  operationId: 'emuTerminalOutput',
  method: 'get',
  path: '/_emu/terminals/{id}/output',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'A terminal’s output as SSE: its scrollback, then live output, then its exit',
  description:
    '`text/event-stream`. `event: output` `{data}` (UTF-8 text): first the scrollback (the last ~256 KiB), then each piece of output as the pty gives it. `event: exit` `{exit_code, signal}` last, when the process ends (at once for an exited terminal). Any number of readers; `: ping` comments on silence.',
  params: TerminalIdParam,
  responses: {
    200: sse('The SSE stream: `output` events (the scrollback first), then `exit`.', { output: TerminalOutput, exit: TerminalExit }),
    ...problems(401, 404),
    ...disabled403,
  },
});

export const emuTerminalInput = defineOperation({
  operationId: 'emuTerminalInput',
  method: 'post',
  path: '/_emu/terminals/{id}/input',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Type into a terminal',
  params: TerminalIdParam,
  body: TerminalInput,
  responses: {
    204: noContent,
    ...problems(401, 404, 415, 422),
    409: problem(409, ['terminal_exited'], '`terminal_exited`: the terminal has exited; open a new one.'),
    ...disabled403,
  },
});

export const emuResizeTerminal = defineOperation({
  operationId: 'emuResizeTerminal',
  method: 'post',
  path: '/_emu/terminals/{id}/resize',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Resize a terminal (columns and rows, 1–1000)',
  params: TerminalIdParam,
  body: TerminalResize,
  responses: {
    204: noContent,
    ...problems(401, 404, 415, 422),
    409: problem(409, ['terminal_exited'], '`terminal_exited`: the terminal has exited; open a new one.'),
    ...disabled403,
  },
});

export const emuCloseTerminal = defineOperation({
  operationId: 'emuCloseTerminal',
  method: 'delete',
  path: '/_emu/terminals/{id}',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Close a terminal: kill its process (if it runs) and forget it',
  params: TerminalIdParam,
  responses: { 204: noContent, ...problems(401, 404), ...disabled403 },
});
