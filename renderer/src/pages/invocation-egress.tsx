// The invocation page's "Outbound calls" card: how the run's calls were handled (live, recorded, replayed),
// which setting chose that (run, snippet.json, server), the cassette, the counts, and each call that
// found no recorded answer with the message naming the closest recording (from the egress log,
// GET /_emu/egress?invocation=ID, which keeps the last 1000 calls). Read again with the page.
import { operations } from '../api';
import { useApp } from '../context';
import { href } from '../router';
import { useLoad } from '../ui/kit';
import type { InvocationDetail } from './invocation-common';
import './invocation-egress.css';

const SOURCE: Record<string, string> = {
  run: 'chosen by this run (X-Emu-Egress-Mode)',
  snippet: 'from the snippet’s snippet.json',
  server: 'the server’s setting',
};

export function EgressCard({ inv }: { inv: InvocationDetail }) {
  const { api } = useApp();
  const e = inv.egress;
  const failedCalls = (e?.unmatched ?? 0) + (e?.passthrough ?? 0);
  // Only when a call missed (or passed through): the messages are in the egress log's entries for this run.
  const [log] = useLoad(
    async () =>
      failedCalls > 0
        ? (await api.client.call(operations.emuListEgress, { query: { invocation: inv.id } })).data.filter((c) => c.error)
        : [],
    [api, inv.id, failedCalls],
  );
  if (!e) return null;
  const cassetteLink = e.cassette ? (
    <a href={href('snippet', inv.snippet, 'cassettes', e.cassette)} data-testid="egress-cassette">
      <code>{e.cassette}</code>
    </a>
  ) : (
    <span className="muted">—</span>
  );
  return (
    <section className="card inv-card" aria-labelledby="egress-h" data-testid="inv-egress" data-mode={e.mode}>
      <h2 id="egress-h">
        Outbound calls <span className={`inv-chip inv-egress-${e.mode}`}>{e.mode}</span>
      </h2>
      <dl className="inv-dl">
        <dt>Mode</dt>
        <dd>
          {e.mode} <span className="muted">· {SOURCE[e.source] ?? e.source}</span>
        </dd>
        <dt>Cassette</dt>
        <dd>{e.mode === 'live' ? <span className="muted">none (live)</span> : cassetteLink}</dd>
        <dt>Calls</dt>
        <dd data-testid="egress-counts">
          {e.calls} made
          {e.mode === 'record' && <> · {e.recorded} recorded</>}
          {e.mode === 'replay' && <> · {e.replayed} replayed</>}
          {e.unmatched > 0 && <strong className="inv-warn-text"> · {e.unmatched} unmatched</strong>}
          {e.passthrough > 0 && <span className="inv-warn-text"> · {e.passthrough} could not be recorded or replayed</span>}
        </dd>
      </dl>
      {failedCalls > 0 && (
        <div data-testid="egress-unmatched">
          <h3 className="inv-egress-h3">{e.unmatched > 0 ? 'Calls with no recorded answer' : 'Calls not recorded'}</h3>
          {log.state === 'ok' && log.data.length > 0 ? (
            <ul className="inv-egress-misses">
              {log.data.map((c) => (
                <li key={c.id}>
                  <code>
                    {c.method} {c.host}:{c.port}
                    {c.path ?? ''}
                  </code>
                  <pre className="inv-pre">{c.error}</pre>
                </li>
              ))}
            </ul>
          ) : log.state === 'ok' ? (
            <p className="muted">The egress log no longer holds these calls (it keeps the last 1000); the run’s logs say what failed.</p>
          ) : null}
        </div>
      )}
    </section>
  );
}
