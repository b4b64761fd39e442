import { useState } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { parseInfo, type TenantCaps } from '../session';
import { CopyButton } from '../ui/controls';
import { PageHeader } from '../ui/kit';
import { useLiveLoad } from '../live-react';
import { href } from '../router';

/** What this emulator is: version, URL, workspace, data dir, the local tenant's key, a first call, tenants and caps. */
export function Overview(_props: { params: string[] }) {
  const { api, info } = useApp();
  const base = info.url ?? window.location.origin;
  // The first call names a real snippet when there is one.
  const [snippets] = useLiveLoad(
    () => api.client.call(operations.listSnippets, { query: { limit: '1' } }).then((r) => r.data),
    [api],
    ['snippet.*'],
  );
  // Tenants and caps as the operator changes them (`svc-emu tenant create|limits`, the Tenants page).
  const [fresh] = useLiveLoad(() => api.client.call(operations.emuInfo).then((r) => parseInfo(r).tenants), [api], ['tenant.changed']);
  const tenants = fresh.state === 'ok' ? fresh.data : info.tenants;
  const name = snippets.state === 'ok' && snippets.data[0] ? snippets.data[0].name : 'hello';
  const curl = `curl -s -X POST ${base}/v1/invoke/${name} \\\n  -H "Authorization: Bearer ${info.localApiKey ?? '<API_KEY>'}" \\\n  -H "Content-Type: application/json" -d '{"name": "you"}'`;
  return (
    <>
      <PageHeader title="Snippet Emulator" />
      <section className="card">
        <dl>
          <dt>Version</dt>
          <dd data-testid="version">{info.version}</dd>
          <dt>API</dt>
          <dd>
            <code data-testid="core-url">{base}/v1</code>
          </dd>
          <dt>Workspace</dt>
          <dd>
            {info.workspace ? (
              <code data-testid="workspace">{info.workspace}</code>
            ) : (
              <span className="muted" data-testid="workspace">
                none: start with <code>--workspace DIR</code> to load <code>snippets/&lt;name&gt;/</code> folders
              </span>
            )}
            <SwitchWorkspace />
          </dd>
          <dt>Data dir</dt>
          <dd>
            <code data-testid="data-dir">{info.dataDir}</code>
          </dd>
          <dt>API key (tenant local)</dt>
          <dd>
            {info.localApiKey ? (
              <>
                <code data-testid="api-key">{info.localApiKey}</code> <CopyButton text={info.localApiKey} label="Copy key" />
              </>
            ) : (
              <span className="muted">
                not available (make one with <code>svc-emu key create --tenant local</code>)
              </span>
            )}
          </dd>
        </dl>
      </section>
      <section className="card">
        <h2>First call</h2>
        <p className="muted">
          Any HTTP client works against the <code>/v1</code> API exactly as against production. Or use the{' '}
          <a href={href('snippets')}>Run tab</a> of a snippet.
        </p>
        <pre className="json" data-testid="first-call">
          {curl}
        </pre>
        <CopyButton text={curl.replace(/\\\n\s+/g, '')} label="Copy command" />
      </section>
      <section className="card">
        <h2>Tenants and caps</h2>
        <TenantTable tenants={tenants} />
      </section>
    </>
  );
}

/** Desktop app only: pick another folder; the app starts again on it with that folder's own data dir. */
function SwitchWorkspace() {
  const bridge = window.svcEmu;
  const [state, setState] = useState<{ kind: 'idle' } | { kind: 'restarting'; dir: string } | { kind: 'refused'; why: string }>({
    kind: 'idle',
  });
  if (!bridge) return null;
  const pick = async () => {
    const dir = await bridge.openFolder();
    if (!dir) return;
    const why = await bridge.switchWorkspace(dir);
    setState(why ? { kind: 'refused', why } : { kind: 'restarting', dir });
  };
  return (
    <div style={{ display: 'flex', gap: 8, alignItems: 'center', flexWrap: 'wrap', marginTop: 6 }}>
      <button type="button" onClick={() => void pick()} disabled={state.kind === 'restarting'} data-testid="switch-workspace">
        Switch workspace…
      </button>
      {state.kind === 'restarting' && (
        <span role="status">
          Restarting on <code>{state.dir}</code>…
        </span>
      )}
      {state.kind === 'refused' && <span role="alert">Cannot switch: {state.why}</span>}
    </div>
  );
}

function TenantTable({ tenants }: { tenants: TenantCaps[] }) {
  if (tenants.length === 0) return <p className="muted">No tenants.</p>;
  const cell = (value: number | null, unit: string) => (value === null ? '—' : `${value.toLocaleString()}${unit}`);
  return (
    <table data-testid="tenants">
      <thead>
        <tr>
          <th>Tenant</th>
          <th>Timeout</th>
          <th>Memory</th>
          <th>CPU</th>
          <th>Concurrency</th>
        </tr>
      </thead>
      <tbody>
        {tenants.map((t) => (
          <tr key={t.name}>
            <td>{t.name}</td>
            <td>{cell(t.caps.timeout_ms, ' ms')}</td>
            <td>{cell(t.caps.max_memory_mb, ' MB')}</td>
            <td>{cell(t.caps.max_cpu_percent, ' %')}</td>
            <td>{cell(t.caps.max_concurrency, '')}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
