// A debug run's session in the Run panel (the Debug button, pages/snippet-run.tsx): where to attach (the URL
// with a copy button; for Bun also debug.bun.sh, for Python the debugpy host, port and path mapping), and its
// state as the `debug.session` events say (waiting for a debugger / held by a debugger for N s / detached /
// ended). The session is found by the run's own X-Request-Id (renderer/src/runs.ts); it is read once from
// GET /_emu/debug/sessions on mount (an event may have come before), then kept current by the live feed.
import { useEffect, useState } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { useLiveEvent } from '../live-react';
import { CopyButton } from '../ui/controls';
import type { DebugSession } from '../../../contract/schemas/debug';
import './debug-session.css';

/** debug.bun.sh's address for an inspector WebSocket (the same as the CLI's, server/cli/debug.ts). */
const bunDebuggerUrl = (wsUrl: string) => `https://debug.bun.sh/#${wsUrl.replace(/^wss?:\/\//, '')}`;

const secs = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;

export function DebugSessionPanel({ requestId, snippet, running }: { requestId: string; snippet: string; running: boolean }) {
  const { api } = useApp();
  const [session, setSession] = useState<DebugSession | null>(null);
  // When the last `attached` event came (this tab's clock), to count the hold up while it lasts.
  const [heldSince, setHeldSince] = useState<number | null>(null);
  const [now, setNow] = useState(() => Date.now());

  const apply = (s: DebugSession) => {
    setSession(s);
    setHeldSince(s.state === 'attached' ? Date.now() : null);
  };
  useLiveEvent(['debug.session'], (e) => e.type === 'debug.session' && apply(e.data), {
    filter: (e) => e.type === 'debug.session' && e.data.request_id === requestId,
    onReset: () => void reread(),
  });
  async function reread() {
    try {
      const list = await api.client.call(operations.emuListDebugSessions);
      const s = list.data.find((x) => x.request_id === requestId);
      if (s) apply(s);
    } catch {
      // the feed's next event says it anyway
    }
  }
  useEffect(() => {
    void reread();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [requestId]);
  // The held time counts up while a debugger holds the run (one timer, gone with the hold or the panel).
  useEffect(() => {
    if (heldSince === null) return;
    const t = window.setInterval(() => setNow(Date.now()), 500);
    return () => window.clearInterval(t);
  }, [heldSince]);

  // The run ended before an `ended` event reached this tab (or its debugger never listened): say so.
  const state = session?.state ?? (running ? 'starting' : 'ended');
  const heldMs = session ? session.held_ms + (heldSince !== null ? Math.max(0, now - heldSince) : 0) : 0;
  const stateText =
    state === 'starting'
      ? 'starting the debugger…'
      : state === 'waiting'
        ? 'waiting for a debugger — the run starts when one attaches'
        : state === 'attached'
          ? `held by a debugger for ${secs(heldMs)}`
          : state === 'detached'
            ? `detached after ${secs(session!.held_ms)}: the run goes on under its limits`
            : `ended${session && session.held_ms > 0 ? ` (held ${secs(session.held_ms)})` : ''}`;

  return (
    <section className="card dbg-session" data-testid="debug-session" data-state={state} aria-labelledby="dbg-h">
      <h2 id="dbg-h">
        Debug session <span className={`dbg-state dbg-state-${state}`}>{stateText}</span>
      </h2>
      {session && (
        <dl className="dbg-dl">
          <dt>Protocol</dt>
          <dd data-testid="debug-protocol">
            {session.protocol === 'inspector' ? 'Bun inspector (WebKit Inspector Protocol over a WebSocket)' : 'debugpy (DAP over TCP)'}
          </dd>
          <dt>Attach to</dt>
          <dd className="dbg-url">
            <code data-testid="debug-url">{session.url}</code> <CopyButton text={session.url} label="Copy URL" testid="debug-copy" />
          </dd>
          {session.protocol === 'inspector' ? (
            <>
              <dt>How</dt>
              <dd>
                VS Code: the <code>svc-emu: attach Bun</code> configuration (it names port 9229: run{' '}
                <code>svc-emu invoke {snippet} --debug --debug-port 9229</code>), or open{' '}
                <a href={bunDebuggerUrl(session.url)} target="_blank" rel="noreferrer" data-testid="debug-bun-link">
                  debug.bun.sh
                </a>
                .
              </dd>
            </>
          ) : (
            <>
              <dt>How</dt>
              <dd>
                Any debugpy (DAP) client: attach to host <code>{session.host}</code> port <code>{session.port}</code>, mapping{' '}
                <code>snippets/{snippet}</code> to <code>{session.remote_root}</code>. VS Code: the <code>svc-emu: attach Python</code>{' '}
                configuration (port 5678: <code>svc-emu invoke {snippet} --debug --debug-port 5678</code>).
              </dd>
            </>
          )}
          <dt>Invocation</dt>
          <dd>
            <code>{session.invocation_id}</code> · {snippet} v{session.version}
          </dd>
        </dl>
      )}
      <p className="muted dbg-note" data-testid="debug-note">
        While a debugger holds the run its timeout is paused; a debug run has no CPU cap; memory stays enforced. The record says what was
        relaxed. The debugger listens on loopback only and closes when the run ends.
      </p>
    </section>
  );
}
