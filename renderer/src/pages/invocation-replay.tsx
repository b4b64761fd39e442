// Run again / Edit and run, on an invocation's page. The invocation kept its input (secrets' values
// redacted, up to 64 KiB of JSON: server/services/stored-input.ts) and its X-Emu-Limits overrides, so "Run
// again" sends the same snippet, version, env, mode, input and overrides; "Edit and run" opens the
// snippet's Run panel prefilled with them (`#/snippet/NAME/run/from/ID`). The run is held by the tab
// (renderer/src/runs.ts), so a stream goes on while its live inspector, which opens next, is watched.
import { useState } from 'react';
import { useApp } from '../context';
import { href, navigate } from '../router';
import { runs, type RunRequest } from '../runs';
import { Json, ProblemNotice } from '../ui/kit';
import { adminToken } from './snippet-data';
import { type InvocationDetail } from './invocation-common';

/** What "Run again" sends, or why it cannot (the input was not kept). */
export function runAgainRequest(inv: InvocationDetail): RunRequest | { missing: string } {
  if (inv.input === null) {
    return {
      missing: inv.input_truncated
        ? 'Its input was over 64 KiB of JSON, so it was not kept: use Edit and run to give one.'
        : 'Its input was not kept (it ran before inputs were stored): use Edit and run to give one.',
    };
  }
  const body: Record<string, unknown> = { ...inv.input };
  // An async run's callback_url was taken out of its input: it goes back in.
  if (inv.mode === 'async' && inv.callback && !('callback_url' in body)) body.callback_url = inv.callback.url;
  const limits = Object.entries(inv.overrides ?? {})
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return {
    snippet: inv.snippet,
    mode: inv.mode,
    query: { version: String(inv.version), ...(inv.env ? { env: inv.env } : {}) },
    body,
    limits,
    egress: egressAgain(inv),
  };
}

/**
 * The egress a rerun gets: an imported report's run (its cassette `report-<id>`, written by import-report)
 * replays from that cassette; a run that chose its own mode gets it again; any other run the default.
 */
function egressAgain(inv: InvocationDetail): RunRequest['egress'] {
  const e = inv.egress;
  if (!e) return undefined;
  if (e.cassette?.startsWith('report-')) return { mode: 'replay', cassette: e.cassette };
  return e.source === 'run' ? { mode: e.mode, cassette: e.cassette ?? '' } : undefined;
}

export function RunAgain({ inv }: { inv: InvocationDetail }) {
  const { api } = useApp();
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<{ status: number; body: unknown } | { error: unknown } | null>(null);
  const req = runAgainRequest(inv);
  const redacted = inv.input !== null && JSON.stringify(inv.input).includes('[secret ');

  const runAgain = async () => {
    if ('missing' in req) return;
    setBusy(true);
    setFailure(null);
    const id = await runs.start(api, req, adminToken);
    setBusy(false);
    if (id) {
      // A stream opens in the live inspector (this tab keeps reading it); the others on their new page.
      navigate(inv.mode === 'stream' ? 'stream' : 'invocation', id);
      return;
    }
    const r = runs.get(inv.snippet)?.result;
    if (r?.mode === 'refused') setFailure({ status: r.status, body: r.body });
    else if (r?.mode === 'error') setFailure({ error: r.error });
    else setFailure({ error: new Error('The core answered without naming an invocation.') });
  };

  const where = `${inv.snippet} v${inv.version}${inv.env ? ` in ${inv.env}` : ''}`;
  return (
    <section className="card inv-card" aria-labelledby="again-h" data-testid="run-again-card">
      <h2 id="again-h">Run again</h2>
      <p className="muted inv-hint">
        Runs <strong>{where}</strong> again in <strong>{inv.mode}</strong> mode with the same input
        {inv.overrides ? ' and the same limit overrides' : ''}, or opens it in the Run panel to edit first.
        {redacted && ' Secret values in the input were stored as "[secret NAME]" and are sent as such.'}
      </p>
      {inv.input !== null ? (
        <details className="inv-stored-input" data-testid="stored-input">
          <summary>Input ({JSON.stringify(inv.input).length.toLocaleString()} characters of JSON)</summary>
          <Json value={inv.input} />
        </details>
      ) : (
        <p className="inv-hint" data-testid="stored-input-missing">
          {'missing' in req ? req.missing : ''}
        </p>
      )}
      {inv.overrides && (
        <p className="muted inv-hint" data-testid="stored-overrides">
          Overrides (X-Emu-Limits):{' '}
          <code>
            {Object.entries(inv.overrides)
              .map(([k, v]) => `${k}=${v}`)
              .join(',')}
          </code>
        </p>
      )}
      <div className="inv-actions">
        <button
          type="button"
          className="inv-btn inv-btn-primary"
          data-testid="run-again"
          onClick={() => void runAgain()}
          disabled={busy || 'missing' in req}
        >
          {busy ? (inv.mode === 'sync' ? 'Running…' : 'Starting…') : 'Run again'}
        </button>
        <a className="inv-btn" href={href('snippet', inv.snippet, 'run', 'from', inv.id)} data-testid="edit-and-run">
          Edit and run
        </a>
      </div>
      {failure && 'error' in failure && <ProblemNotice error={failure.error} title="The run could not start" />}
      {failure && 'status' in failure && (
        <div className="inv-card-error" data-testid="run-again-refused">
          <strong>Refused (HTTP {failure.status})</strong>
          <Json value={failure.body} />
        </div>
      )}
    </section>
  );
}
