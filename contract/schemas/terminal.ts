import { z } from 'zod';

/** The GUI's Terminal page: shells on ptys over HTTP (`/_emu/terminals`). */
export const TERMINAL_TARGETS = ['workspace', 'vm'] as const;
export type TerminalTarget = (typeof TERMINAL_TARGETS)[number];

export const Size = z.number().int().min(1).max(1000);

export const TerminalView = z
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

export const Availability = z.object({ available: z.boolean(), reason: z.string().nullable() });

export const OpenTerminal = z
  .object({
    target: z.enum(TERMINAL_TARGETS).default('workspace'),
    cols: Size.default(80),
    rows: Size.default(24),
  })
  .strict();

export const TerminalInput = z
  .object({
    data: z
      .string()
      .min(1)
      .max(64 * 1024)
      .meta({ description: 'Keystrokes as text (UTF-8), at most 64 Ki characters.' }),
  })
  .strict();
export const TerminalResize = z.object({ cols: Size, rows: Size }).strict();
export const TerminalIdParam = z.object({ id: z.string().max(64) });

/** SSE `output`: a piece of the pty's output (UTF-8 text). */
export const TerminalOutput = z.object({ data: z.string() }).meta({ id: 'TerminalOutput' });
/** SSE `exit`: the process ended (the last event). */
export const TerminalExit = z
  .object({ exit_code: z.number().int().nullable(), signal: z.string().nullable() })
  .meta({ id: 'TerminalExit' });
