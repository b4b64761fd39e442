/**
 * Debug runs (ExecutorJob.debug), the contract between the host side (executor/local-host.ts, the relay) and
 * the runners (executor/runtimes/bun/runner.ts, executor/runtimes/python/svc_runner.py).
 *
 * The sandbox has its own network namespace (loopback only), so a debugger on the host cannot reach a port
 * inside it. Instead the host binds a private directory of its own, writable by the sandbox's user, at
 * DEBUG_DIR_IN_SANDBOX; the runtime's debugger listens on a unix socket there (DEBUG_SOCKET_NAME), and the host
 * relays a TCP listener on 127.0.0.1 to that socket. The relay sees each debugger connect and leave: that is
 * when the run is held (the timeout clock stops) and released.
 *
 * - Bun: the runner is started with `--inspect-wait=ws+unix://<DEBUG_DIR_IN_SANDBOX>/<DEBUG_SOCKET_NAME>`: it
 *   runs nothing until a debugger attaches (Bun's inspector then speaks the WebKit Inspector Protocol over that
 *   WebSocket).
 * - Python: the runner sees SVC_DEBUG=dap and SVC_DEBUG_SOCKET (the socket's path inside the sandbox), starts
 *   debugpy listening on 127.0.0.1 inside the sandbox, relays that socket to it, and waits for a client before
 *   it loads the bundle.
 */
export const DEBUG_DIR_IN_SANDBOX = '/run/svc-debug';
export const DEBUG_SOCKET_NAME = 'debug.sock';
/** Environment of a debug runner: which protocol (`inspector` | `dap`), and the socket path inside the sandbox. */
export const DEBUG_ENV = { protocol: 'SVC_DEBUG', socket: 'SVC_DEBUG_SOCKET' } as const;
/** A debug run that no debugger attaches to within this long ends `cancelled`. */
export const DEBUG_ATTACH_TIMEOUT_MS = 10 * 60_000;

/** What a debug sandbox is asked for (SandboxSpec.debug). */
export interface DebugSpec {
  protocol: 'inspector' | 'dap';
  /** Loopback port for the relay (absent: any free one). */
  port?: number;
  /** The runner waits this long for a debugger (it starts nothing before one attaches). */
  attachTimeoutMs: number;
  /** Called once the relay listens, before the runner is ready (it waits for a debugger): where to attach. */
  onListening(port: DebugPort): void;
}

/** A debug sandbox's relay: a TCP listener on loopback, piped to the debugger's socket inside the sandbox. */
export interface DebugPort {
  readonly protocol: 'inspector' | 'dap';
  readonly host: string;
  readonly port: number;
  /** ws://HOST:PORT/PATH (inspector) or tcp://HOST:PORT (dap). */
  readonly url: string;
  /** The bundle's path inside the sandbox. */
  readonly remoteRoot: string;
  /** Whether a debugger is connected now (the run is held: its timeout clock stands still). */
  readonly held: boolean;
  /** Calls `listener` on every change of `held`; returns the unsubscribe. */
  onHeldChange(listener: (held: boolean) => void): () => void;
  /** Stops listening and cuts every connection (the sandbox's destroy does it too). */
  close(): Promise<void>;
}
