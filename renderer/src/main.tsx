// Placeholder GUI: signs in with the admin token and shows what `/_emu/info` reports.
// The full GUI (snippets, runs, streams, …) comes later; keep this small.
import { StrictMode, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { acquireToken, fetchInfo, TOKEN_STORAGE_KEY, type EmulatorInfo, type TenantCaps } from './session';
import './styles.css';

type State =
  | { kind: 'loading' }
  | { kind: 'no-token' }
  | { kind: 'rejected' }
  | { kind: 'error'; message: string }
  | { kind: 'ok'; info: EmulatorInfo };

const HINT = (
  <p>
    Open the URL printed by <code>npm start</code>, which carries <code>?token=…</code>
  </p>
);

function App() {
  const [state, setState] = useState<State>({ kind: 'loading' });

  useEffect(() => {
    let live = true;
    void (async () => {
      const token = await acquireToken({ location: window.location, history: window.history, storage: window.sessionStorage, bridge: window.svcEmu });
      if (!token) {
        if (live) setState({ kind: 'no-token' });
        return;
      }
      const result = await fetchInfo(token);
      if (!live) return;
      if (result.kind === 'rejected') {
        window.sessionStorage.removeItem(TOKEN_STORAGE_KEY);
        setState({ kind: 'rejected' });
      } else setState(result);
    })();
    return () => {
      live = false;
    };
  }, []);

  return (
    <main>
      <header>
        <h1>Snippet Emulator</h1>
      </header>
      {state.kind === 'loading' && <p className="muted">Connecting…</p>}
      {state.kind === 'no-token' && (
        <section className="notice" role="alert">
          <h2>No admin token</h2>
          {HINT}
        </section>
      )}
      {state.kind === 'rejected' && (
        <section className="notice" role="alert">
          <h2>The admin token was rejected</h2>
          {HINT}
        </section>
      )}
      {state.kind === 'error' && (
        <section className="notice" role="alert">
          <h2>Cannot reach the emulator</h2>
          <p>{state.message}</p>
        </section>
      )}
      {state.kind === 'ok' && <InfoView info={state.info} />}
    </main>
  );
}

function InfoView({ info }: { info: EmulatorInfo }) {
  return (
    <>
      <section>
        <dl>
          <dt>Version</dt>
          <dd data-testid="version">{info.version}</dd>
          <dt>Data dir</dt>
          <dd>
            <code data-testid="data-dir">{info.dataDir}</code>
          </dd>
          <dt>API key (tenant local)</dt>
          <dd>{info.localApiKey ? <code data-testid="api-key">{info.localApiKey}</code> : <span className="muted">not available</span>}</dd>
        </dl>
      </section>
      <section>
        <h2>Tenants and caps</h2>
        <TenantTable tenants={info.tenants} />
      </section>
    </>
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

const root = document.getElementById('root');
if (root) {
  createRoot(root).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}
