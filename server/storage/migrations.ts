import { SCHEMA_VERSION } from './schema';

/**
 * Steps from one schema version to the next, applied in order on load. Version 0 is the unversioned
 * pre-release layout (no `schema_version`, no `integrations`). Add a step here with every schema change.
 */
type Doc = Record<string, unknown>;
const steps: Record<number, (doc: Doc) => Doc> = {
  0: (doc) => ({ ...doc, integrations: doc.integrations ?? [], schema_version: 1 }),
  1: (doc) => ({ ...doc, invocations: doc.invocations ?? [], schema_version: 2 }),
  // Async mode: webhook key rotation on tenants; attempts, callbacks and parity warnings on invocations;
  // the journal of invocation updates.
  2: (doc) => ({
    ...doc,
    journal_seq: 0,
    tenants: each(doc.tenants, (t) => (isDoc(t) ? { previous_webhook_secret: null, previous_webhook_secret_expires_at: null, ...t } : t)),
    invocations: each(
      doc.invocations,
      (i) =>
        isDoc(i)
          ? {
              attempts: i.status === 'queued' ? 0 : 1,
              callback: null,
              parity_warnings: [],
              ...i,
            }
          : i, // not a record: left as found, for the load check to quarantine (storage/db-check.ts)
    ),
    schema_version: 3,
  }),
};

/** Maps a list's items; anything else stays as found (the load check quarantines it, not a migration). */
const each = (v: unknown, fn: (item: unknown) => unknown): unknown => (Array.isArray(v) ? v.map(fn) : (v ?? []));
const isDoc = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);

export type MigrationResult = { doc: Doc; from: number; to: number } | { error: string };

export function migrate(doc: Doc): MigrationResult {
  const raw = doc.schema_version ?? 0;
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 0) {
    return { error: `schema_version must be a non-negative integer, found ${JSON.stringify(raw)}` };
  }
  if (raw > SCHEMA_VERSION) {
    return {
      error: `schema_version ${raw} was written by a newer emulator (this one understands up to ${SCHEMA_VERSION})`,
    };
  }
  let current = doc;
  for (let v = raw; v < SCHEMA_VERSION; v++) {
    const step = steps[v];
    if (!step) return { error: `no migration from schema_version ${v}` };
    current = step(current);
  }
  return { doc: current, from: raw, to: SCHEMA_VERSION };
}
