// Parity status: what this host enforces (limit backend, sandbox), whether runs are at full parity with
// production or degraded — each reason explained — and the installed runtimes against production's
// manifest (mismatches highlighted). From GET /_emu/executor, /_emu/doctor and /_emu/runtime; the executor VM
// (Lima, macOS) from /_emu/vm, in parity-vm.tsx.
import { useState } from 'react';
import { operations } from '../api';
import { useApp } from '../context';
import { PageHeader, ProblemNotice, type Loaded, useLoad } from '../ui/kit';
import './operator.css';
import { ExecutorVm } from './parity-vm';
import { Quarantine } from './parity-quarantine';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const strs = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** What a parity reason means for someone running snippets here, and what to do about it. */
export function explainReason(reason: string): string {
  const r = reason.toLowerCase();
  if (r.includes('sandbox') || r.includes('bubblewrap') || r.includes('bwrap'))
    return 'Snippets run without the bubblewrap sandbox: they can read host files and reach the network around the egress proxy. Production isolates every run. Install bubblewrap (apt install bubblewrap) and restart.';
  if (r.includes('macos') || r.includes('lima'))
    return 'On macOS snippets need a Linux VM (Lima) for production’s limits and sandbox; without it they run directly on the Mac with only the timeout enforced.';
  if (r.includes('runtime'))
    return 'The installed Bun, Python or framework versions differ from production’s manifest (see the table below): code may behave differently here. Run npm run build to install the pinned versions.';
  if (r.includes('only the timeout') || r.startsWith('none') || r.includes('no cgroup'))
    return 'Memory, CPU and process limits are not enforced: a snippet over max_memory_mb is not OOM-killed and CPU is not throttled as in production — only timeout_ms holds. Run as root, with a delegated cgroup v2 subtree, or with systemd user scopes.';
  if (r.includes('cpu'))
    return 'CPU is not throttled to max_cpu_percent: a busy snippet runs faster here than in production. Delegate the cpu controller (systemd: Delegate=cpu) to restore it.';
  if (r.includes('memory')) return 'Memory is not capped at max_memory_mb: a snippet that production would OOM-kill may succeed here.';
  if (r.includes('pids') || r.includes('tasks'))
    return 'The process-count limit is not enforced: a fork bomb is not contained as in production.';
  return 'This host differs from production here: outcomes may not match.';
}

export function Parity(_props: { params: string[] }) {
  const { api } = useApp();
  const [executor, reloadExecutor] = useLoad(async () => obj(await api.client.call(operations.emuExecutor)), [api]);
  const [doctor, reloadDoctor] = useLoad(async () => obj(await api.client.call(operations.emuDoctor)), [api]);
  const [runtime, reloadRuntime] = useLoad(async () => obj(await api.client.call(operations.emuRuntime)), [api]);
  const [vmCheck, setVmCheck] = useState(0);
  const refresh = () => {
    setVmCheck((n) => n + 1);
    reloadExecutor();
    reloadDoctor();
    reloadRuntime();
  };

  return (
    <>
      <PageHeader title="Parity status">
        <button type="button" className="op-btn" onClick={refresh}>
          Check again
        </button>
      </PageHeader>
      <p className="op-intro">
        What this host enforces compared with production: limits, the sandbox and the runtime versions. When something cannot match, runs
        are marked <em>degraded</em> and every invocation carries the reasons. The same report as <code>svc-emu doctor</code>.
      </p>
      <Banner executor={executor} doctor={doctor} />
      <Quarantine doctor={doctor} />
      <Facts executor={executor} doctor={doctor} />
      <ExecutorVm
        check={vmCheck}
        executorTransport={executor.state === 'ok' ? str(executor.data.transport) : null}
        onExecutorChanged={() => {
          reloadExecutor();
          reloadDoctor();
          reloadRuntime();
        }}
      />
      <Runtimes runtime={runtime} doctor={doctor} />
      {doctor.state === 'ok' && strs(doctor.data.notes).length > 0 && (
        <section className="card" aria-labelledby="parity-notes-title">
          <h2 id="parity-notes-title">Notes from the doctor</h2>
          <ul className="op-list" data-testid="doctor-notes">
            {strs(doctor.data.notes).map((n) => (
              <li key={n}>{n}</li>
            ))}
          </ul>
        </section>
      )}
    </>
  );
}

function Banner({ executor, doctor }: { executor: Loaded<Obj>; doctor: Loaded<Obj> }) {
  if (executor.state === 'loading') return <p className="muted">Checking this host…</p>;
  if (executor.state === 'error') return <ProblemNotice error={executor.error} title="Could not read the executor" />;
  const parity = obj(executor.data.parity);
  const hostParity = doctor.state === 'ok' ? str(doctor.data.parity) : null;
  const reasons = strs(parity.reasons);
  const full = str(parity.status) === 'full' && hostParity !== 'degraded';
  return (
    <div
      className={`op-banner ${full ? '' : 'op-degraded'}`}
      role="status"
      data-testid="parity-banner"
      data-parity={full ? 'full' : 'degraded'}
    >
      <span className="op-banner-icon" aria-hidden="true">
        {full ? '✓' : '⚠'}
      </span>
      <div>
        <h2 data-testid="parity">{full ? 'Full parity' : 'Degraded parity'}</h2>
        <p>
          {full
            ? 'Snippets run here under the same limits, sandbox and runtime versions as in production: timeouts, OOM kills and throttling happen as they would there.'
            : 'Some of what production enforces does not hold on this host, so an outcome here may differ from production’s:'}
        </p>
        {!full && reasons.length === 0 && hostParity === 'degraded' && (
          <p className="op-hint" style={{ marginTop: 6 }}>
            The host check reports a degraded host; see the notes below.
          </p>
        )}
        {reasons.length > 0 && (
          <ul className="op-reasons" data-testid="parity-reasons">
            {reasons.map((r) => (
              <li key={r}>
                <strong>{r}</strong>
                <br />
                <span>{explainReason(r)}</span>
              </li>
            ))}
          </ul>
        )}
      </div>
    </div>
  );
}

/** Who a snippet is, as the host's /proc says (doctor's identity probe: executor/sandbox/profile.ts). */
function SandboxIdentity({ identity, denied }: { identity: Obj; denied: number }) {
  if (str(identity.error))
    return (
      <p className="op-hint" data-testid="sandbox-identity">
        The snippet's identity could not be checked: {str(identity.error)}
      </p>
    );
  const uids = Array.isArray(identity.host_uid) ? (identity.host_uid as unknown[]) : [];
  if (uids.length === 0) return null;
  const problems = strs(identity.problems);
  const capless = /^0+$/.test(str(identity.cap_eff) ?? '1');
  return (
    <>
      <dl data-testid="sandbox-identity">
        <dt>Runs as</dt>
        <dd>
          host uid {String(uids[0])}{' '}
          <span className="op-hint">({identity.mode === 'root-drop' ? 'dropped from root' : 'own user namespace'})</span>
        </dd>
        <dt>Capabilities</dt>
        <dd>{capless ? 'none' : str(identity.cap_eff)}</dd>
        <dt>no_new_privs</dt>
        <dd>{identity.no_new_privs === true ? 'on' : 'off'}</dd>
        <dt>seccomp</dt>
        <dd>{identity.seccomp === 'filter' ? `filter (${denied} system calls refused)` : str(identity.seccomp)}</dd>
      </dl>
      {problems.length > 0 && (
        <ul className="op-list" role="alert">
          {problems.map((p) => (
            <li key={p}>The sandbox does not hold: {p}. Restart the emulator; if it persists, run `svc-emu doctor` and report it.</li>
          ))}
        </ul>
      )}
    </>
  );
}

const BACKEND_LABEL: Record<string, string> = {
  'cgroup-v2': 'cgroup v2',
  'cgroup-v1': 'cgroup v1',
  'systemd-scope': 'systemd user scopes',
  none: 'none (timeout only)',
};

function Facts({ executor, doctor }: { executor: Loaded<Obj>; doctor: Loaded<Obj> }) {
  const ex = executor.state === 'ok' ? executor.data : {};
  const doc = doctor.state === 'ok' ? doctor.data : {};
  const limits = obj(doc.limits);
  const sandbox = obj(doc.sandbox);
  const cgroup = obj(doc.cgroup);
  const pool = obj(ex.pool);
  const spares = obj(obj(pool.spares).ready);
  const spareList = ((obj(pool.spares).spares as unknown[] | undefined) ?? []).map(obj);
  const backend = str(ex.backend) ?? str(limits.backend) ?? 'unknown';
  const sandboxName = str(ex.sandbox);
  const bwrap = sandbox.bubblewrap === true || sandboxName === 'bwrap';
  const limitNotes = strs(limits.notes);
  const checked = strs(limits.checked);
  return (
    <>
      {doctor.state === 'error' && <ProblemNotice error={doctor.error} title="Could not run the host check" />}
      <div className="op-grid">
        <section className="card" aria-labelledby="parity-limits-title" data-testid="parity-limits">
          <h2 id="parity-limits-title">Limits</h2>
          <p className="op-big" style={{ margin: '0 0 4px' }}>
            <span data-testid="limit-backend">{BACKEND_LABEL[backend] ?? backend}</span>{' '}
            <span className={`op-pill ${backend === 'none' || backend === 'unknown' ? 'op-bad' : 'op-ok'}`}>
              {backend === 'none' ? 'not enforced' : 'enforced'}
            </span>
          </p>
          <p className="op-hint" style={{ margin: 0 }}>
            Memory, CPU and process caps for each run. {str(limits.reason) && <>Chosen: {str(limits.reason)}</>}
          </p>
          {limitNotes.length > 0 && (
            <ul className="op-list">
              {limitNotes.map((n) => (
                <li key={n}>{n}</li>
              ))}
            </ul>
          )}
          {checked.length > 0 && (
            <details className="op-more">
              <summary>Backends tried</summary>
              <ul className="op-list">
                {checked.map((c) => (
                  <li key={c}>{c}</li>
                ))}
              </ul>
            </details>
          )}
        </section>

        <section className="card" aria-labelledby="parity-sandbox-title" data-testid="parity-sandbox">
          <h2 id="parity-sandbox-title">Sandbox</h2>
          <p className="op-big" style={{ margin: '0 0 4px' }}>
            <span data-testid="sandbox">{bwrap ? 'bubblewrap' : 'none'}</span>{' '}
            {str(sandbox.version) && <span className="muted">{str(sandbox.version)}</span>}{' '}
            <span className={`op-pill ${bwrap ? 'op-ok' : 'op-bad'}`}>{bwrap ? 'isolated' : 'not isolated'}</span>
          </p>
          <p className="op-hint" style={{ margin: 0 }}>
            {bwrap
              ? 'Each run sees only its code, the runtimes (read-only) and the egress proxy, as in production.'
              : `Snippets see host files and the network directly.${str(sandbox.reason) ? ` ${str(sandbox.reason)}` : ''}`}
          </p>
          {bwrap && <SandboxIdentity identity={obj(sandbox.identity)} denied={strs(sandbox.seccomp_denies).length} />}
        </section>

        <section className="card" aria-labelledby="parity-host-title" data-testid="parity-host">
          <h2 id="parity-host-title">Host</h2>
          {doctor.state === 'loading' && <p className="muted">Checking this host…</p>}
          {doctor.state !== 'loading' && (
            <dl data-testid="host-facts">
              <dt>Runs</dt>
              <dd>{str(ex.transport) === 'local' ? 'on this host' : (str(ex.transport) ?? '—')}</dd>
              <dt>Platform</dt>
              <dd>
                {str(doc.platform) ?? '—'} {str(doc.arch) ?? ''}
                {doc.root === true ? ' · root' : ''}
              </dd>
              <dt>Node</dt>
              <dd>{str(doc.node) ?? '—'}</dd>
              <dt>cgroups</dt>
              <dd>
                {str(cgroup.mode) ?? '—'}
                {strs(cgroup.v2_controllers).length > 0 && <span className="op-hint"> · v2: {strs(cgroup.v2_controllers).join(', ')}</span>}
                {strs(cgroup.v1_controllers).length > 0 && <span className="op-hint"> · v1: {strs(cgroup.v1_controllers).join(', ')}</span>}
              </dd>
              {str(obj(doc.lima).note) === null && Object.keys(obj(doc.lima)).length > 0 && (
                <>
                  <dt>Lima</dt>
                  <dd>{str(obj(doc.lima).limactl) ?? 'not installed'}</dd>
                </>
              )}
            </dl>
          )}
        </section>

        <section className="card" aria-labelledby="parity-pool-title" data-testid="parity-pool">
          <h2 id="parity-pool-title">Warm pool</h2>
          <dl>
            <dt>Spares ready</dt>
            <dd>
              {Object.keys(spares).length === 0
                ? '—'
                : Object.entries(spares)
                    .map(([k, v]) => `${k} ${num(v) ?? 0}`)
                    .join(' · ')}
            </dd>
            {spareList.length > 0 && (
              <>
                <dt>Spares</dt>
                <dd>
                  <ul className="op-list" data-testid="spares">
                    {spareList.map((sp, i) => (
                      <li key={str(sp.id) || `starting-${i}`}>
                        {str(sp.runtime)} {str(sp.profile) === 'plain' ? 'plain' : `with ${str(sp.profile)} imported`} · {str(sp.state)}
                        {num(sp.rss_mb) !== null && <span className="op-hint"> · {num(sp.rss_mb)} MB</span>}
                      </li>
                    ))}
                  </ul>
                </dd>
              </>
            )}
            <dt>Runners</dt>
            <dd>
              {num(pool.busy) ?? 0} busy · {num(pool.idle) ?? 0} idle
            </dd>
            <dt>Since start</dt>
            <dd>
              {num(pool.created) ?? 0} started · {num(pool.reused) ?? 0} reused
            </dd>
          </dl>
        </section>
      </div>
    </>
  );
}

interface RuntimeRow {
  group: string;
  name: string;
  expected: string;
  actual: string | null;
}

/** Manifest against installed, one row per pinned thing (and our own libraries, which must be present). */
function runtimeRows(rt: Obj): RuntimeRow[] {
  const manifest = obj(rt.manifest);
  const installed = obj(rt.installed);
  const mBun = obj(manifest.bun);
  const mPy = obj(manifest.python);
  const iBun = obj(installed.bun);
  const iPy = obj(installed.python);
  const iBunPkgs = obj(iBun.packages);
  const iPyPkgs = obj(iPy.packages);
  const rows: RuntimeRow[] = [];
  rows.push({ group: 'Bun', name: 'bun', expected: str(mBun.version) ?? '—', actual: str(iBun.version) });
  for (const [name, v] of Object.entries(obj(mBun.packages)))
    rows.push({ group: 'Bun', name, expected: String(v), actual: str(iBunPkgs[name]) });
  for (const name of Object.keys(iBunPkgs))
    if (!(name in obj(mBun.packages))) rows.push({ group: 'Bun', name, expected: '*', actual: str(iBunPkgs[name]) });
  rows.push({ group: 'Python', name: 'python', expected: str(mPy.version) ?? '—', actual: str(iPy.version) });
  for (const [name, v] of Object.entries(obj(mPy.packages)))
    rows.push({ group: 'Python', name, expected: String(v), actual: str(iPyPkgs[name]) });
  for (const name of Object.keys(iPyPkgs))
    if (!(name in obj(mPy.packages))) rows.push({ group: 'Python', name, expected: '*', actual: str(iPyPkgs[name]) });
  for (const [name, v] of Object.entries(obj(manifest.tools)))
    rows.push({ group: 'Tools', name, expected: String(v), actual: str(obj(installed[name]).version) });
  return rows;
}

function Runtimes({ runtime, doctor }: { runtime: Loaded<Obj>; doctor: Loaded<Obj> }) {
  if (runtime.state === 'loading') return null;
  if (runtime.state === 'error') return <ProblemNotice error={runtime.error} title="Could not read the runtimes" />;
  const rt = runtime.data;
  const mismatches = Array.isArray(rt.mismatches) ? rt.mismatches.map(obj) : [];
  const mismatched = new Set(mismatches.map((m) => str(m.name)));
  const unavailable = str(rt.error) ?? str(rt.note) ?? (doctor.state === 'ok' ? str(obj(doctor.data.runtime).error) : null);
  const rows = unavailable ? [] : runtimeRows(rt);
  return (
    <section className="card" aria-labelledby="parity-runtimes-title" data-testid="parity-runtimes">
      <div className="op-card-head">
        <h2 id="parity-runtimes-title">Runtimes against production’s manifest</h2>
        {!unavailable &&
          (mismatches.length === 0 ? (
            <span className="op-pill op-ok" data-testid="runtime-summary">
              all {rows.length} as pinned
            </span>
          ) : (
            <span className="op-pill op-bad" data-testid="runtime-summary">
              {mismatches.length} mismatch{mismatches.length === 1 ? '' : 'es'}
            </span>
          ))}
      </div>
      {rt.stale === true && (
        <div className="op-warnbox" role="alert">
          The runtimes were installed for an older manifest: run <code>npm run build</code> to install the pinned versions.
        </div>
      )}
      {unavailable ? (
        <div className="op-warnbox" role="alert">
          Runtime versions unavailable: {unavailable}
        </div>
      ) : (
        <div className="op-scroll">
          <table className="op-table" data-testid="runtime-table">
            <thead>
              <tr>
                <th>Runtime</th>
                <th>Component</th>
                <th>Production</th>
                <th>Installed here</th>
                <th>
                  <span className="op-sr">Match</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r, i) => {
                const bad = mismatched.has(r.name);
                const first = i === 0 || rows[i - 1]!.group !== r.group;
                return (
                  <tr
                    key={`${r.group}/${r.name}`}
                    className={bad ? 'op-mismatch' : undefined}
                    data-testid="runtime-row"
                    data-mismatch={bad ? 'true' : undefined}
                  >
                    <td className="muted">{first ? r.group : ''}</td>
                    <td>
                      <code>{r.name}</code>
                    </td>
                    <td>{r.expected === '*' ? <span className="muted">ours, any version</span> : <code>{r.expected}</code>}</td>
                    <td>{r.actual ? <code>{r.actual}</code> : <span className="muted">missing</span>}</td>
                    <td>{bad ? <span className="op-pill op-bad">mismatch</span> : <span className="op-pill op-ok">✓</span>}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
