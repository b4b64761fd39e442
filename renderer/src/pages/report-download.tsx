// "Download report": one self-contained HTML file for one invocation or a selection (GET /_emu/report,
// contract/emu/report.ts), saved under the name the core gives it. A refusal (an unknown id, too many)
// shows the core's problem beside the button.
import { useState } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { saveResponse } from '../download';
import { ProblemNotice } from '../ui/kit';
import './invocation-egress.css';

/** The most invocations one report holds (contract/schemas/report.ts's REPORT_MAX_INVOCATIONS). */
export const REPORT_MAX = 20;

export function ReportButton({
  ids,
  label = 'Download report',
  className = 'inv-btn',
  testid = 'download-report',
}: {
  ids: string[];
  label?: string;
  className?: string;
  testid?: string;
}) {
  const { api } = useApp();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const tooMany = ids.length > REPORT_MAX;

  async function download() {
    setBusy(true);
    setError(null);
    setSaved(null);
    try {
      const path = api.client.path(operations.emuGetReport, { query: { ids: ids.join(',') } });
      const res = await api.client.fetchPath('GET', path, { auth: 'admin', headers: { accept: 'text/html' } });
      const fallback = ids.length === 1 ? `svc-emu-report-${ids[0]}.html` : `svc-emu-report-${ids.length}-runs.html`;
      const { filename } = await saveResponse(res, fallback, operations.emuGetReport.operationId);
      setSaved(filename);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  }

  return (
    <>
      <button
        type="button"
        className={className}
        onClick={() => void download()}
        disabled={busy || ids.length === 0 || tooMany}
        title={
          tooMany
            ? `A report holds at most ${REPORT_MAX} invocations`
            : 'One HTML file that opens from disk with no network: input, output, logs, timeline, outbound calls, and what reproduces the run (svc-emu import-report)'
        }
        data-testid={testid}
      >
        {busy ? 'Preparing…' : label}
      </button>
      {saved && (
        <span className="muted inv-report-saved" role="status" data-testid={`${testid}-saved`}>
          Saved {saved}
        </span>
      )}
      {error !== null && <ProblemNotice error={error} title="Could not make the report" />}
    </>
  );
}
