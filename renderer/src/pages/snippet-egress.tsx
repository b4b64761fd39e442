// The Settings tab's "Outbound calls" card: the snippet's own egress settings (`egress` in its
// snippet.json: mode, cassette, matchers, contract/schemas/cassette.ts), and what its runs get when it
// sets none (the server's mode, following `egress.mode`). Only workspace snippets have a snippet.json.
import { href } from '../router';
import type { FolderStatus } from './snippet-data';
import { MODE_TEXT, useEgressMode } from './egress-mode';

export function SnippetEgressCard({ snippet, folder }: { snippet: string; folder: FolderStatus | null }) {
  const [server] = useEgressMode();
  const own = folder?.egress ?? null;
  const serverMode = server.state === 'ok' ? server.data.mode : null;
  const match = own?.match ? Object.entries(own.match).filter(([, v]) => (Array.isArray(v) ? v.length > 0 : v !== undefined)) : [];
  return (
    <section className="card" aria-labelledby="sn-egress-h" data-testid="snippet-egress">
      <h2 id="sn-egress-h">Outbound calls</h2>
      {own?.mode ? (
        <p data-testid="snippet-egress-mode" data-mode={own.mode}>
          <strong>{MODE_TEXT[own.mode].label}</strong>, from <code>egress.mode</code> in {folder?.folder ?? snippet}/snippet.json: it wins
          over the server&apos;s mode{serverMode ? ` (${serverMode})` : ''}; a run&apos;s own choice (the Run tab) wins over both.{' '}
          <span className="muted">{MODE_TEXT[own.mode].help}</span>
        </p>
      ) : (
        <p data-testid="snippet-egress-mode" data-mode="">
          {folder ? (
            <>
              Its <code>snippet.json</code> sets no <code>egress.mode</code>
            </>
          ) : (
            <>An API snippet has no snippet.json</>
          )}
          : runs use the server&apos;s mode{serverMode ? <strong> ({serverMode})</strong> : ''}, switched on the{' '}
          <a href={href('egress')}>Egress</a> page, unless a run chooses its own.
        </p>
      )}
      <dl className="sn-meta">
        <dt>Cassette</dt>
        <dd data-testid="snippet-egress-cassette">
          <a href={href('snippet', snippet, 'cassettes', own?.cassette ?? 'default')}>
            <code>{own?.cassette ?? 'default'}</code>
          </a>
          {!own?.cassette && <span className="muted"> (none named)</span>}
        </dd>
        <dt>Matching</dt>
        <dd>
          {match.length === 0 ? (
            <span className="muted">method, URL and body (the defaults)</span>
          ) : (
            match.map(([k, v]) => (
              <span key={k}>
                <code>{k}</code>: {JSON.stringify(v)}{' '}
              </span>
            ))
          )}
        </dd>
      </dl>
    </section>
  );
}
