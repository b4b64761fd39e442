// Small pieces the Snippets list and a snippet's pages share: runtime tag, environment chips, the
// workspace folder tag.
import { envOrder, type Runtime } from './snippet-data';

export function RuntimeTag({ runtime }: { runtime: Runtime }) {
  return <span className={`sn-runtime sn-runtime-${runtime}`}>{runtime === 'bun' ? 'Bun' : 'Python'}</span>;
}

/** Where a snippet runs: `dev v3`, `prod v2`, … in dev / staging / prod order. */
export function EnvChips({ deployments, empty }: { deployments: Record<string, number>; empty: string }) {
  const envs = Object.entries(deployments).sort(([a], [b]) => envOrder(a, b));
  if (envs.length === 0) return <span className="muted">{empty}</span>;
  return (
    <span className="sn-chips">
      {envs.map(([env, v]) => (
        <span key={env} className={`sn-chip sn-env-${env}`}>
          {env} <b>v{v}</b>
        </span>
      ))}
    </span>
  );
}

/** A workspace folder (`snippets/hello`), with a folder glyph. */
export function FolderTag({ children }: { children: string }) {
  return (
    <span className="sn-folder" title="From the watched workspace">
      <svg className="sn-folder-icon" width="14" height="12" viewBox="0 0 14 12" aria-hidden="true" focusable="false">
        <path
          d="M1 2.2C1 1.5 1.5 1 2.2 1h3l1.4 1.5h5.2c.7 0 1.2.5 1.2 1.2v6.1c0 .7-.5 1.2-1.2 1.2H2.2C1.5 11 1 10.5 1 9.8z"
          fill="none"
          stroke="currentColor"
          strokeWidth="1.2"
        />
      </svg>
      {children}
    </span>
  );
}
