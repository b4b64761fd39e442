import { useApp } from '../context';
import type { TenantCaps } from '../session';
import { PageHeader } from '../ui/kit';

/** What this emulator is: version, data dir, the local tenant's key, tenants and their caps. */
export function Overview(_props: { params: string[] }) {
  const { info } = useApp();
  return (
    <>
      <PageHeader title="Snippet Emulator" />
      <section className="card">
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
      <section className="card">
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
