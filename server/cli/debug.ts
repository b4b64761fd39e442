import { randomBytes } from 'node:crypto';
import type { Client } from '../../contract/client';
import { followEvents } from '../../contract/events-client';
import type { DebugSession } from '../../contract/schemas/debug';

/**
 * `svc-emu invoke NAME --debug [--debug-port N]`: the run starts as a debug run (`X-Emu-Debug`, with the admin
 * token the CLI has from emulator.json), and while it runs the CLI follows its session on the live feed
 * (`debug.session` events, matched by the X-Request-Id the CLI sets) and says on stderr where and how to attach
 * as soon as the debugger listens. The run's result is then printed as usual.
 */

/** The loopback ports the example workspace's VS Code launch configurations name (fixtures/workspace/.vscode/launch.json). */
export const VSCODE_DEBUG_PORTS = { bun: 9229, python: 5678 } as const;

export interface DebugArgs {
  /** A fixed loopback port (absent: any free one). */
  port?: number;
}

/** --debug / --debug-port N → the debug run asked for, or undefined; a message saying what to fix otherwise. */
export function debugArgsFrom(values: Record<string, unknown>): DebugArgs | undefined | string {
  const port = values['debug-port'] as string | undefined;
  if (values.debug !== true) return port === undefined ? undefined : '--debug-port N needs --debug (a debug run)';
  if (port === undefined) return {};
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1024 || Number(port) > 65535) {
    return `--debug-port: a port from 1024 to 65535 (${VSCODE_DEBUG_PORTS.bun} for Bun and ${VSCODE_DEBUG_PORTS.python} for Python are the ones the VS Code launch configurations use), not '${port}'`;
  }
  return { port: Number(port) };
}

/** The request headers of a debug run. */
export function debugHeaders(d: DebugArgs, adminToken: string, requestId: string): Record<string, string> {
  return {
    'x-emu-debug': d.port === undefined ? '1' : `port=${d.port}`,
    'x-emu-admin': adminToken,
    'x-request-id': requestId,
  };
}

/** debug.bun.sh's address for an inspector WebSocket (`ws://127.0.0.1:PORT/PATH` → `https://debug.bun.sh/#127.0.0.1:PORT/PATH`). */
export const bunDebuggerUrl = (wsUrl: string) => `https://debug.bun.sh/#${wsUrl.replace(/^wss?:\/\//, '')}`;

/** What a person does with a session that waits for a debugger: the URL, and how VS Code or a browser attaches. */
export function attachHint(s: DebugSession): string {
  const lines = [`debug run ${s.invocation_id} (${s.snippet} v${s.version}) waits for a debugger at ${s.url}`];
  if (s.protocol === 'inspector') {
    const vscode =
      s.port === VSCODE_DEBUG_PORTS.bun
        ? `attach VS Code with the 'svc-emu: attach Bun' configuration`
        : `attach VS Code with the 'svc-emu: attach Bun' configuration (run with --debug-port ${VSCODE_DEBUG_PORTS.bun}, the port it names)`;
    lines.push(`  ${vscode}, or open ${bunDebuggerUrl(s.url)}`);
  } else {
    const vscode =
      s.port === VSCODE_DEBUG_PORTS.python
        ? `attach VS Code with the 'svc-emu: attach Python' configuration`
        : `attach VS Code with the 'svc-emu: attach Python' configuration (run with --debug-port ${VSCODE_DEBUG_PORTS.python}, the port it names)`;
    lines.push(
      `  ${vscode}, or any debugpy (DAP) client: attach to host ${s.host} port ${s.port}`,
      `  path mapping: local snippets/${s.snippet} → remote ${s.remote_root}`,
    );
  }
  lines.push('  while a debugger holds the run its timeout clock is paused; a debug run has no CPU cap; memory stays enforced');
  return lines.join('\n');
}

function sessionLine(s: DebugSession): string | null {
  switch (s.state) {
    case 'waiting':
      return attachHint(s);
    case 'attached':
      return `debugger attached to ${s.invocation_id}: the run is held (timeout clock paused)`;
    case 'detached':
      return `debugger detached from ${s.invocation_id} after holding it ${s.held_ms} ms: the run goes on under its limits`;
    case 'ended':
      return null;
  }
}

export interface DebugIO {
  stderr: (text: string) => void;
}

/**
 * Runs `run` as a debug run: follows the live feed first (so the session's first event is not missed), hands `run`
 * the headers, prints each change of this run's session on stderr (one JSON line each with `json`). For an async
 * run `run` names the queued invocation (`accepted`), and this waits until it has finished.
 */
export async function debugRun(
  admin: Client,
  io: DebugIO,
  json: boolean,
  d: DebugArgs,
  run: (headers: Record<string, string>, accepted: (invocationId: string) => void) => Promise<number>,
): Promise<number> {
  const token = admin.options.adminToken;
  if (!token) throw new Error('a debug run needs the admin token (in the emulator’s <data-dir>/emulator.json)');
  const requestId = `cli-debug-${randomBytes(8).toString('hex')}`;
  const aborter = new AbortController();
  const finished = new Set<string>();
  const queued: { id: string | null } = { id: null };
  let done!: () => void;
  const asyncDone = new Promise<void>((r) => (done = r));
  let opened!: () => void;
  const open = new Promise<void>((r) => (opened = r));
  const watching = (async () => {
    for await (const e of followEvents(admin, {
      types: ['debug.session', 'invocation.finished'],
      signal: aborter.signal,
      onState: (s) => s.state === 'open' && opened(),
    })) {
      if (e.type === 'invocation.finished') {
        finished.add(e.data.id);
        if (e.data.id === queued.id) done();
        continue;
      }
      if (e.type !== 'debug.session' || e.data.request_id !== requestId) continue;
      if (json) io.stderr(JSON.stringify({ event: 'debug.session', session: e.data }) + '\n');
      else {
        const line = sessionLine(e.data);
        if (line) io.stderr(line + '\n');
      }
    }
  })();
  const following = watching.then(
    () => false,
    (err: unknown) => {
      if (!aborter.signal.aborted)
        io.stderr(`svc-emu: cannot follow the debug session (${(err as Error).message}); GET /_emu/debug/sessions lists where to attach\n`);
      return false;
    },
  );
  try {
    await Promise.race([open, following]);
    const code = await run(debugHeaders(d, token, requestId), (id) => {
      queued.id = id;
      if (finished.has(id)) done();
    });
    if (queued.id) {
      if (!json) io.stderr(`waiting for ${queued.id} to finish (attach a debugger to let it run; Ctrl+C leaves it running)\n`);
      await Promise.race([asyncDone, following]);
    }
    return code;
  } finally {
    aborter.abort();
    await following;
  }
}
