// The data dir's quarantine on the Parity status page: what a start could not load (a record that failed
// validation, a db.json that was not JSON) and kept aside instead of failing, with what to do about each.
// From `quarantine` in GET /_emu/doctor (server/storage/quarantine.ts).
import type { Loaded } from '../ui/kit';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const strs = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

export function Quarantine({ doctor }: { doctor: Loaded<Obj> }) {
  if (doctor.state !== 'ok' || !doctor.data.quarantine) return null;
  const q = obj(doctor.data.quarantine);
  const count = num(q.count) ?? 0;
  const entries = Array.isArray(q.entries) ? q.entries.map(obj) : [];
  const unreadable = strs(q.unreadable);
  const dir = str(q.dir) ?? 'quarantine';
  if (count === 0 && unreadable.length === 0) {
    return (
      <section className="card" aria-labelledby="parity-quarantine-title" data-testid="parity-quarantine" data-count="0">
        <h2 id="parity-quarantine-title">Quarantine</h2>
        <p className="op-hint" style={{ margin: 0 }}>
          Nothing kept aside: every record loaded at the last start.
        </p>
      </section>
    );
  }
  return (
    <section className="card" aria-labelledby="parity-quarantine-title" data-testid="parity-quarantine" data-count={count}>
      <div className="op-card-head">
        <h2 id="parity-quarantine-title">Quarantine</h2>
        <span className="op-pill op-bad">{count} kept aside</span>
      </div>
      <div className="op-warnbox" role="alert">
        {count === 1 ? 'One thing' : `${count} things`} failed validation when the data was loaded. The emulator started without{' '}
        {count === 1 ? 'it' : 'them'}: {count === 1 ? 'it is' : 'they are'} not used, and nothing was deleted. Each is kept in{' '}
        <code>{dir}</code> (a report, and the file as it was). Fix or restore what you need as each row says, then delete the files there.
      </div>
      <div className="op-scroll">
        <table className="op-table" data-testid="quarantine-table">
          <thead>
            <tr>
              <th>What</th>
              <th>Problem</th>
              <th>What to do</th>
            </tr>
          </thead>
          <tbody>
            {entries.map((e, i) => (
              <tr key={`${str(e.report)}/${i}`} data-testid="quarantine-row">
                <td>
                  <strong>{str(e.label)}</strong>
                  <br />
                  <span className="op-hint">
                    {str(e.source)}
                    {num(e.index) !== null ? ` #${num(e.index)}` : ''} · {str(e.at) ? new Date(str(e.at)!).toLocaleString() : ''}
                  </span>
                </td>
                <td>
                  <ul className="op-list">
                    {strs(e.problems).map((p) => (
                      <li key={p}>
                        <code>{p}</code>
                      </li>
                    ))}
                  </ul>
                </td>
                <td>
                  {str(e.action)}
                  <br />
                  <span className="op-hint">
                    <code>{str(e.report)}</code>
                  </span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {entries.length < count && (
        <p className="op-hint">
          The newest {entries.length} are listed; `svc-emu doctor --json` and the reports in the folder have them all.
        </p>
      )}
      {unreadable.length > 0 && <p className="op-hint">Could not be read: {unreadable.join(', ')}</p>}
    </section>
  );
}
