import { z } from 'zod';

/**
 * Debug runs (emulator only): `X-Emu-Debug` on `/v1/invoke` (admin only), `svc-emu invoke NAME --debug`, the
 * GUI's Debug button. The run starts in a fresh sandbox with the runtime's debugger listening on loopback:
 * Bun's inspector (`inspector`: WebKit Inspector Protocol over a WebSocket, the protocol VS Code's Bun extension
 * and debug.bun.sh speak; CDP-shaped for Debugger/Runtime) or debugpy (`dap`: the Debug Adapter Protocol over
 * TCP). While a debugger is attached the timeout clock is paused; a debug run has no CPU cap; the memory limit
 * still applies. The record carries `debug` and a parity warning naming what was relaxed.
 */

export const DEBUG_PROTOCOLS = ['inspector', 'dap'] as const;
export type DebugProtocol = (typeof DEBUG_PROTOCOLS)[number];

/** `1` (any free port) or `port=N` (a fixed loopback port, e.g. the one a VS Code launch configuration names). */
export const DEBUG_HEADER_RE =
  /^(?:1|port=(?:102[4-9]|10[3-9]\d|1[1-9]\d\d|[2-9]\d{3}|[1-5]\d{4}|6[0-4]\d{3}|65[0-4]\d\d|655[0-2]\d|6553[0-5]))$/;

/** The limits a debug run relaxes (memory is never relaxed). */
export const DEBUG_RELAXED = ['timeout_ms', 'max_cpu_percent'] as const;

export const DEBUG_SESSION_STATES = ['waiting', 'attached', 'detached', 'ended'] as const;

/** One debug run's session: where to attach, and whether a debugger holds it. */
export const DebugSession = z
  .object({
    invocation_id: z.string(),
    /** The invoke request's X-Request-Id (a client that set its own finds its session by it). */
    request_id: z.string().nullable(),
    tenant_id: z.string(),
    snippet: z.string(),
    version: z.number().int(),
    runtime: z.enum(['bun', 'python']),
    protocol: z.enum(DEBUG_PROTOCOLS),
    host: z.string().meta({ description: 'Always a loopback address.' }),
    port: z.number().int(),
    url: z.string().meta({
      description:
        '`ws://127.0.0.1:PORT/PATH` (inspector: open it in debug.bun.sh or attach VS Code) or `tcp://127.0.0.1:PORT` (dap: a debugpy attach).',
    }),
    /** waiting: listening, no debugger yet · attached: a debugger holds the run · detached: it left, the run goes on under its limits · ended. */
    state: z.enum(DEBUG_SESSION_STATES),
    /** ms a debugger has held the run so far (the timeout clock stood still meanwhile). */
    held_ms: z.number().int(),
    /** Absolute path of the bundle inside the sandbox (VS Code's `remoteRoot` / source path mapping). */
    remote_root: z.string(),
    started_at: z.string(),
  })
  .meta({ id: 'DebugSession' });
export type DebugSession = z.infer<typeof DebugSession>;

/** On an invocation record: it was a debug run (null / absent: it was not). */
export const InvocationDebug = z
  .object({
    protocol: z.enum(DEBUG_PROTOCOLS),
    relaxed: z.array(z.enum(DEBUG_RELAXED)),
    attached: z.boolean().meta({ description: 'A debugger attached at some point.' }),
    held_ms: z.number().int().meta({ description: 'ms a debugger held the run (not counted against timeout_ms).' }),
  })
  .meta({ id: 'InvocationDebug' });
export type InvocationDebug = z.infer<typeof InvocationDebug>;

export const DebugSessionList = z.object({ data: z.array(DebugSession) }).meta({ id: 'DebugSessionList' });
