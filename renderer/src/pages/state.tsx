// Export / import (`#/data`): the whole state as one archive (contract/emu/state.ts, docs/state.md).
// Export: secrets are left out by default, said plainly; or encrypted with a passphrase typed twice.
// Import: pick an archive (its manifest is read here first, when it is one: what it holds, whether its
// secrets need a passphrase), confirm that the current state is replaced and kept aside, upload; the
// import's report shows what came in and every secret that did not. A refusal shows the core's detail
// (a damaged or foreign archive changes nothing).
import { useState, type FormEvent } from 'react';
import { operations, ProblemError } from '../api';
import { useApp } from '../context';
import { saveResponse } from '../download';
import { EmptyState, PageHeader, ProblemNotice, when } from '../ui/kit';
import { Field } from '../ui/controls';
import { STATE_ARCHIVE_TYPE, type StateImportReport, type StateManifest } from '../../../contract/emu/state';
import { readManifest } from './state-manifest';
import { fetchInfo } from '../session';
import './operator.css';

const size = (n: number) =>
  n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;

export function StatePage(_props: { params: string[] }) {
  return (
    <>
      <PageHeader title="Export and import" />
      <p className="op-intro">
        The whole state in one file: tenants, keys (hashed), snippets and versions, environments, limits, the store, invocation history,
        queued jobs and pending callbacks, the inbox, egress rules and cassettes. Hand it to a colleague or seed a demo; the CLI does the
        same (<code>svc-emu export FILE</code>, <code>svc-emu import FILE</code>).
      </p>
      <ExportCard />
      <ImportCard />
    </>
  );
}

function ExportCard() {
  const { api } = useApp();
  const [withSecrets, setWithSecrets] = useState(false);
  const [pass, setPass] = useState('');
  const [again, setAgain] = useState('');
  const [touched, setTouched] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<{ filename: string; bytes: number; secrets: string | null } | null>(null);

  const passProblem = !withSecrets ? null : pass.length < 8 ? 'At least 8 characters.' : null;
  const againProblem = !withSecrets || passProblem ? null : again !== pass ? 'The two passphrases differ: type the same one twice.' : null;

  async function submit(e: FormEvent) {
    e.preventDefault();
    setTouched(true);
    if (passProblem || againProblem) return;
    setBusy(true);
    setError(null);
    setDone(null);
    try {
      const res = await api.client.fetchPath('POST', api.client.path(operations.emuExportState), {
        auth: 'admin',
        body: withSecrets ? { passphrase: pass } : {},
      });
      const secrets = res.headers.get('x-emu-secrets');
      const saved = await saveResponse(
        res,
        `svc-emu-${new Date().toISOString().replace(/[:.]/g, '-')}.svcemu`,
        operations.emuExportState.operationId,
      );
      setDone({ ...saved, secrets });
      setPass('');
      setAgain('');
      setTouched(false);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <section className="card" aria-labelledby="export-title" data-testid="export">
      <div className="op-card-head">
        <h2 id="export-title">Export</h2>
        <span className="op-hint">A consistent snapshot, taken while everything keeps running.</span>
      </div>
      <form onSubmit={(e) => void submit(e)} noValidate aria-label="Export the state">
        <fieldset className="op-radio-group">
          <legend>Secrets</legend>
          <label>
            <input
              type="radio"
              name="export-secrets"
              checked={!withSecrets}
              onChange={() => setWithSecrets(false)}
              data-testid="export-no-secrets"
            />{' '}
            Leave them out (default)
          </label>
          <label>
            <input
              type="radio"
              name="export-secrets"
              checked={withSecrets}
              onChange={() => setWithSecrets(true)}
              data-testid="export-with-secrets"
            />{' '}
            Encrypt them with a passphrase
          </label>
        </fieldset>
        {!withSecrets ? (
          <p className="op-warnbox" role="note" data-testid="export-secrets-warning">
            <strong>No secret values go in the archive.</strong> Their names are listed in it; whoever imports it sets them again (snippets
            that read them fail until then), and each tenant gets a new webhook signing secret.
          </p>
        ) : (
          <div className="op-form">
            <Field
              label="Passphrase"
              error={touched ? passProblem : null}
              hint="At least 8 characters; whoever imports the archive needs it."
            >
              {(p) => (
                <input
                  {...p}
                  type="password"
                  autoComplete="new-password"
                  value={pass}
                  onChange={(e) => setPass(e.target.value)}
                  data-testid="export-passphrase"
                />
              )}
            </Field>
            <Field label="The same passphrase again" error={touched ? againProblem : null}>
              {(p) => (
                <input
                  {...p}
                  type="password"
                  autoComplete="new-password"
                  value={again}
                  onChange={(e) => setAgain(e.target.value)}
                  data-testid="export-passphrase-again"
                />
              )}
            </Field>
          </div>
        )}
        <div className="op-actions" style={{ marginTop: 12 }}>
          <button type="submit" className="op-btn op-primary" disabled={busy} data-testid="export-submit">
            {busy ? 'Exporting…' : 'Export'}
          </button>
          {done && (
            <span role="status" data-testid="export-done">
              Saved <code>{done.filename}</code> ({size(done.bytes)}) —{' '}
              {done.secrets === 'encrypted' ? 'secrets encrypted with your passphrase.' : 'secrets left out.'}
            </span>
          )}
        </div>
      </form>
      {error !== null && (
        <div style={{ marginTop: 12 }}>
          <ProblemNotice error={error} title="Could not export" />
        </div>
      )}
    </section>
  );
}

type Preview = { kind: 'manifest'; manifest: StateManifest } | { kind: 'unreadable'; reason: string };

function ImportCard() {
  const { api } = useApp();
  const [file, setFile] = useState<File | null>(null);
  const [preview, setPreview] = useState<Preview | null>(null);
  const [pass, setPass] = useState('');
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [report, setReport] = useState<StateImportReport | null>(null);
  /** After an import: whether the core can still show a key for tenant `local` (the GUI's /v1 calls need one). */
  const [keyGone, setKeyGone] = useState(false);

  async function pick(f: File | null) {
    setFile(f);
    setPreview(null);
    setError(null);
    setReport(null);
    setAsking(false);
    if (!f) return;
    try {
      setPreview({ kind: 'manifest', manifest: await readManifest(f) });
    } catch (e) {
      setPreview({ kind: 'unreadable', reason: e instanceof Error ? e.message : String(e) });
    }
  }

  const encrypted = preview?.kind === 'manifest' && preview.manifest.secrets.mode === 'encrypted';

  async function upload() {
    if (!file) return;
    setBusy(true);
    setError(null);
    try {
      const raw = new Uint8Array(await file.arrayBuffer());
      const send = (replace: boolean) =>
        api.client.sendPath('POST', api.client.path(operations.emuImportState, { query: { replace: replace ? 'true' : 'false' } }), {
          auth: 'admin',
          raw,
          headers: { 'content-type': STATE_ARCHIVE_TYPE, ...(pass ? { 'x-emu-passphrase': encodeURIComponent(pass) } : {}) },
        });
      // Into an emulator with no state yet (only what a first start makes) it simply goes in; one with state
      // refuses (state_not_empty), and the replacement the user confirmed is asked for then (the old state kept aside).
      let reply = await send(false);
      if (reply.status === 409 && (reply.body as { code?: string } | undefined)?.code === 'state_not_empty') reply = await send(true);
      if (reply.status !== 200) {
        throw new ProblemError(
          operations.emuImportState.operationId,
          reply.status,
          reply.headers,
          reply.body && typeof reply.body === 'object' ? (reply.body as Record<string, unknown>) : {},
          reply.text,
        );
      }
      setReport(reply.body as StateImportReport);
      const info = await fetchInfo();
      setKeyGone(info.kind === 'ok' && info.info.localApiKey === null);
      setFile(null);
      setPreview(null);
      setPass('');
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
      setAsking(false);
    }
  }

  return (
    <section className="card" aria-labelledby="import-title" data-testid="import">
      <div className="op-card-head">
        <h2 id="import-title">Import</h2>
        <span className="op-hint">
          Everything is checked before anything changes: a damaged or foreign archive is refused and changes nothing.
        </span>
      </div>
      <div className="op-form">
        <Field label="Archive (.svcemu)">
          {(p) => (
            <input
              {...p}
              type="file"
              accept=".svcemu,application/gzip,application/vnd.svc-emu.state+gzip"
              onChange={(e) => void pick(e.target.files?.[0] ?? null)}
              data-testid="import-file"
            />
          )}
        </Field>
        {file && (
          <Field
            label={encrypted ? 'Passphrase (its secrets are encrypted)' : 'Passphrase (only if its secrets are encrypted)'}
            hint={encrypted ? 'The one typed when it was exported.' : undefined}
          >
            {(p) => (
              <input
                {...p}
                type="password"
                autoComplete="off"
                value={pass}
                onChange={(e) => setPass(e.target.value)}
                data-testid="import-passphrase"
              />
            )}
          </Field>
        )}
      </div>
      {file && preview && <ArchivePreview file={file} preview={preview} />}
      {file && (
        <div className="op-actions" style={{ marginTop: 12 }}>
          {!asking ? (
            <button type="button" className="op-btn op-primary" onClick={() => setAsking(true)} disabled={busy} data-testid="import-submit">
              Import…
            </button>
          ) : (
            <span className="op-confirm" role="group" aria-label="Confirm the import" data-testid="import-confirm-box">
              <span>
                This replaces the emulator’s current state with the archive’s. The current state is not deleted: it is kept aside in the
                data dir (<code>replaced-&lt;time&gt;/</code>), unless it holds nothing yet.
              </span>
              <button
                type="button"
                className="op-btn op-danger op-solid"
                autoFocus
                disabled={busy}
                onClick={() => void upload()}
                data-testid="import-confirm"
              >
                {busy ? 'Importing…' : 'Replace and import'}
              </button>
              <button type="button" className="op-btn" disabled={busy} onClick={() => setAsking(false)}>
                Cancel
              </button>
            </span>
          )}
        </div>
      )}
      {error !== null && (
        <div style={{ marginTop: 12 }}>
          <ProblemNotice error={error} title="The archive was not imported" />
        </div>
      )}
      {report && <ImportReportView report={report} />}
      {report && keyGone && (
        <p className="op-warnbox" role="alert" data-testid="import-no-local-key">
          <strong>This GUI has no API key for tenant local now.</strong> The archive’s keys came in hashed, and the one this GUI shows was
          left out with the secrets, so the pages that call <code>/v1</code> (snippets, invocations, secrets, store) are refused until a key
          is shown again. Export with a passphrase to carry it, or issue one: <code>svc-emu key create --tenant local</code> (then use it in
          your clients).
        </p>
      )}
    </section>
  );
}

function ArchivePreview({ file, preview }: { file: File; preview: Preview }) {
  if (preview.kind === 'unreadable') {
    return (
      <p className="op-warnbox" data-testid="import-preview-unreadable">
        <strong>{file.name}</strong> ({size(file.size)}) does not read as an archive here ({preview.reason}). Importing it will most likely
        be refused; the emulator says exactly why.
      </p>
    );
  }
  const m = preview.manifest;
  return (
    <div className="op-hint" data-testid="import-preview" style={{ marginTop: 8 }}>
      <strong>{file.name}</strong> ({size(file.size)}): made {when(m.created_at)} by emulator {m.emulator_version}, format{' '}
      {m.format_version} · {m.counts.snippets} snippets, {m.counts.versions} versions, {m.counts.invocations} invocations,{' '}
      {m.counts.queued_jobs} queued jobs, {m.counts.pending_callbacks} pending callbacks, {m.counts.cassettes} cassettes ·{' '}
      {m.secrets.mode === 'encrypted' ? 'secrets encrypted (passphrase needed)' : `secrets left out (${m.secrets.left_out.length})`}
    </div>
  );
}

function ImportReportView({ report: r }: { report: StateImportReport }) {
  const counts = Object.entries(r.counts).filter(([, n]) => n > 0);
  // The place the old state went is said once, above.
  const notes = r.notes.filter((n) => !r.replaced || !n.includes(r.replaced));
  return (
    <div className="op-once" role="status" data-testid="import-report" style={{ marginTop: 12 }}>
      <p>
        <strong>Imported</strong> an archive made {when(r.created_at)} by emulator {r.emulator_version} (format {r.format_version}, database
        schema {r.schema_version.archive}
        {r.schema_version.archive !== r.schema_version.now ? ` migrated to ${r.schema_version.now}` : ''}). Reload this page to see
        everything it brought.
      </p>
      {counts.length === 0 ? (
        <EmptyState title="The archive was empty" />
      ) : (
        <p className="op-chips" data-testid="import-counts">
          {counts.map(([k, n]) => (
            <code key={k}>
              {n} {k.replace(/_/g, ' ')}
            </code>
          ))}
        </p>
      )}
      {r.replaced && (
        <p>
          The previous state is kept in <code>{r.replaced}</code>.
        </p>
      )}
      {r.secrets.left_out.length > 0 && (
        <div className="op-warnbox" data-testid="import-secrets-left-out">
          <strong>Secrets not restored</strong> (the archive left them out): set them again on the Secrets page.
          <ul>
            {r.secrets.left_out.map((s) => (
              <li key={s}>{s}</li>
            ))}
          </ul>
        </div>
      )}
      {r.secrets.new_webhook_secrets.length > 0 && (
        <p>New webhook signing secret made for: {r.secrets.new_webhook_secrets.join(', ')} (receivers must verify with the new one).</p>
      )}
      {notes.length > 0 && (
        <ul>
          {notes.map((n) => (
            <li key={n}>{n}</li>
          ))}
        </ul>
      )}
      <button type="button" className="op-btn op-small" onClick={() => window.location.reload()}>
        Reload
      </button>
    </div>
  );
}
