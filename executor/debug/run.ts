import type { DebugEvent, DebugRequest, ExecutionResult, ExecutorEvents, RunSignal, Runtime } from '../types';
import { HoldMeter } from './clock';
import { DEBUG_ATTACH_TIMEOUT_MS, type DebugPort, type DebugSpec } from './types';

/**
 * One debug run's session on the executor's side (executor/executor.ts, ExecutorJob.debug): the DebugSpec its
 * sandbox is created with, the onDebug events (`waiting` once the relay listens, `attached` / `detached` as
 * debuggers come and go), how long they held the run, and a cancel while it waits for a debugger (the relay is
 * closed, which ends the sandbox's start at once). stop() unsubscribes all of it; the sandbox's destroy closes
 * the relay.
 */
export class DebugRun {
  readonly protocol: DebugSpec['protocol'];
  readonly attachTimeoutMs: number;
  private port: DebugPort | null = null;
  private meter: HoldMeter | null = null;
  private attached = false;
  private stopped = false;
  private cancelled = false;
  private readonly onAbort = () => this.cancel();

  constructor(
    runtime: Runtime,
    private readonly req: DebugRequest,
    private readonly events: ExecutorEvents,
    private readonly signal?: RunSignal,
  ) {
    this.protocol = runtime === 'bun' ? 'inspector' : 'dap';
    this.attachTimeoutMs = req.attachTimeoutMs ?? DEBUG_ATTACH_TIMEOUT_MS;
    signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  /** What the sandbox is created with (SandboxSpec.debug). */
  spec(): DebugSpec {
    return {
      protocol: this.protocol,
      ...(this.req.port !== undefined ? { port: this.req.port } : {}),
      attachTimeoutMs: this.attachTimeoutMs,
      onListening: (port) => {
        if (this.stopped) return void port.close();
        this.port = port;
        this.meter = new HoldMeter(port, undefined, (held) => {
          if (held) this.attached = true;
          this.emit(held ? 'attached' : 'detached');
        });
        if (port.held) this.attached = true;
        this.emit('waiting');
        if (port.held) this.emit('attached');
        // Cancelled before the relay listened: end it now (the sandbox's start sees the relay closed).
        if (this.signal?.aborted || this.cancelled) void port.close();
      },
    };
  }

  /**
   * Ends a run still waiting for its debugger (a cancel, the executor closing): the relay closes, and the sandbox's
   * start ends at once (executor/debug/wait.ts). A run under way is ended by its own abort, not by this.
   */
  cancel(): void {
    this.cancelled = true;
    void this.port?.close();
  }

  /** ms a debugger has held the run so far. */
  get heldMs(): number {
    return this.meter?.ms ?? 0;
  }

  summary(): NonNullable<ExecutionResult['debug']> {
    return { protocol: this.protocol, attached: this.attached, held_ms: this.heldMs };
  }

  private emit(state: DebugEvent['state']): void {
    const p = this.port;
    if (!p || this.stopped) return;
    this.events.onDebug?.({
      state,
      protocol: p.protocol,
      host: p.host,
      port: p.port,
      url: p.url,
      remoteRoot: p.remoteRoot,
      heldMs: this.heldMs,
    });
  }

  stop(): void {
    if (this.stopped) return;
    this.meter?.stop();
    this.stopped = true;
    this.signal?.removeEventListener('abort', this.onAbort);
  }
}
