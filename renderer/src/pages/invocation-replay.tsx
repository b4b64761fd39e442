// Replay: the same snippet and version, in the same mode, with an input the user gives (inputs are not
// exposed over the API, so they cannot be copied). Sync and async open the new invocation; stream starts
// the run, keeps reading it in the background (a client that disconnects cancels a stream) and opens the
// live inspector on it.
import { useState } from 'react';
import { operations, ProblemError } from '../api';
import { useApp } from '../context';
import { navigate } from '../router';
import { ProblemNotice } from '../ui/kit';
import { type InvocationDetail } from './invocation-common';

/** The input to prefill: `{}`, plus the original callback_url for an async run that had one. */
function initialInput(inv: InvocationDetail): string {
  return inv.mode === 'async' && inv.callback ? JSON.stringify({ callback_url: inv.callback.url }, null, 2) : '{}';
}

/** Reads a stream to its end without keeping it (the stream's own page follows it through /_emu). */
function drain(events: AsyncIterable<unknown>): void {
  void (async () => {
    for await (const _ of events);
  })().catch(() => {});
}

/** An answer that names no invocation, as the error the GUI shows (its problem's code and detail when it has one). */
const problemOf = (r: { status: number; headers: Headers; body?: unknown; text: string }) =>
  new ProblemError(
    operations.invoke.operationId,
    r.status,
    r.headers,
    r.body && typeof r.body === 'object' ? (r.body as Record<string, unknown>) : {},
    r.text,
  );

export function Replay({ inv }: { inv: InvocationDetail }) {
  const { api } = useApp();
  const [input, setInput] = useState(() => initialInput(inv));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [inputError, setInputError] = useState<string | null>(null);

  const run = async () => {
    let body: unknown;
    try {
      body = JSON.parse(input);
    } catch (e) {
      setInputError(`Not JSON: ${(e as Error).message}`);
      return;
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      setInputError('The input must be a JSON object, e.g. {}');
      return;
    }
    setInputError(null);
    setError(null);
    setBusy(true);
    try {
      const input = {
        params: { snippet: inv.snippet },
        query: { version: String(inv.version) },
        body: body as Record<string, unknown>,
        headers: inv.mode === 'sync' ? {} : { 'x-invoke-mode': inv.mode },
      };
      if (inv.mode === 'stream') {
        const events = await api.client.stream(operations.invoke, input).catch((e: unknown) => {
          // A refusal that still names its invocation opens it, as a sync failure does below.
          const refused = e instanceof ProblemError ? e.headers.get('X-Invocation-Id') : null;
          if (refused) return refused;
          throw e;
        });
        if (typeof events === 'string') return navigate('invocation', events);
        const id = events.headers.get('X-Invocation-Id');
        if (!id) throw problemOf({ status: events.status, headers: events.headers, text: '' });
        drain(events);
        navigate('stream', id);
        return;
      }
      // Sync answers when the run has ended, success or not; a failure still names its invocation.
      const res = await api.client.send(operations.invoke, input);
      const id = res.headers.get('X-Invocation-Id');
      if (id) {
        navigate('invocation', id);
        return;
      }
      throw problemOf(res);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="card inv-card" aria-labelledby="replay-h">
      <h2 id="replay-h">Replay</h2>
      <p className="muted inv-hint">
        Runs <strong>{inv.snippet}</strong> version <strong>{inv.version}</strong> again in <strong>{inv.mode}</strong> mode. Inputs are not
        stored, so give the input here.
        {inv.overridden && ' The per-run limit overrides of this run are not replayed: the version’s limits apply.'}
      </p>
      <label className="inv-label" htmlFor="replay-input">
        Input (JSON object)
      </label>
      <textarea
        id="replay-input"
        className="inv-textarea"
        data-testid="replay-input"
        value={input}
        spellCheck={false}
        rows={Math.min(10, Math.max(3, input.split('\n').length))}
        onChange={(e) => setInput(e.target.value)}
        aria-invalid={inputError ? true : undefined}
        aria-describedby={inputError ? 'replay-input-error' : undefined}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) void run();
        }}
      />
      {inputError && (
        <p id="replay-input-error" className="inv-field-error" role="alert">
          {inputError}
        </p>
      )}
      <div className="inv-actions">
        <button type="button" className="inv-btn inv-btn-primary" data-testid="replay" onClick={() => void run()} disabled={busy}>
          {busy ? (inv.mode === 'sync' ? 'Running…' : 'Starting…') : `Replay v${inv.version} (${inv.mode})`}
        </button>
        <span className="muted inv-kbd-hint">Ctrl+Enter</span>
      </div>
      {error !== null && <ProblemNotice error={error} title="The replay was refused" />}
    </section>
  );
}
