import { DEBUG_RELAXED, type DebugProtocol, type InvocationDebug } from '../../contract/schemas/debug';
import type { ExecutionResult, RunLimits } from '../../executor';

/**
 * A debug run (X-Emu-Debug, admin only; contract/schemas/debug.ts): what the invoke route asks for, what the
 * record says before and after it ran, and the parity warning naming what was relaxed.
 */
export interface DebugRunRequest {
  /** The loopback port the debugger is reached on (absent: any free one). */
  port?: number;
  /** The invoke request's X-Request-Id (a client that set its own finds its session by it). */
  requestId: string | null;
}

/** Which debugger a runtime's debug run speaks. */
export const debugProtocolOf = (runtime: 'bun' | 'python'): DebugProtocol => (runtime === 'bun' ? 'inspector' : 'dap');

/** The record's `debug` from the moment it is created (the run has not been held yet). */
export const pendingDebug = (runtime: 'bun' | 'python'): InvocationDebug => ({
  protocol: debugProtocolOf(runtime),
  relaxed: [...DEBUG_RELAXED],
  attached: false,
  held_ms: 0,
});

/** The record's `debug` once the run has ended, from what the executor measured. */
export function finishedDebug(before: InvocationDebug, ran: ExecutionResult['debug']): InvocationDebug {
  if (!ran) return before;
  return { ...before, protocol: ran.protocol, attached: ran.attached, held_ms: Math.max(0, Math.round(ran.held_ms)) };
}

const ms = (n: number) => `${n.toLocaleString('en-US')} ms`;

/**
 * The parity warning of a debug run: production never pauses a run's clock or lifts its CPU cap, so the record
 * says exactly what this one relaxed, and for how long (memory is always enforced).
 */
export function debugParityWarning(debug: InvocationDebug, limits: RunLimits): string {
  if (!debug.attached) {
    return `debug run: no debugger attached, so the snippet never ran (a debug runner waits for one before it loads the code); memory enforced (${limits.max_memory_mb} MB)`;
  }
  return `debug run: timeout_ms paused for ${ms(debug.held_ms)} while a debugger held it, CPU cap (${limits.max_cpu_percent}%) lifted for the whole run; memory enforced (${limits.max_memory_mb} MB)`;
}
