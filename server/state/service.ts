import { rm, mkdir, writeFile, copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { StateImportReport, StateManifest } from '../../contract/emu/state';
import type { z } from 'zod';
import type { Cassette, EgressModeSetting as EgressModeSettingSchema } from '../../contract/schemas/cassette';
import type { NewFaultRule } from '../../contract/schemas/egress';
import type { CoreDeps } from '../core-deps';
import { ConflictError, ValidationError } from '../domain/errors';
import type { InboxResponse } from '../services/inbox';
import type { DbData, TenantRecord } from '../storage/schema';
import { EMULATOR_VERSION } from '../version';
import { ArchiveError, blobsOf, buildArchive, parseArchive, type ArchivedCassette, type PlainSecrets, type Snapshot } from './archive';
import { pendingImportPath, prepareImport, readPendingImport, stateEmptiness, writeFilesDurably } from './restore';

type EgressModeSetting = z.infer<typeof EgressModeSettingSchema>;

/**
 * Export and import of the whole state while a core runs (`/_emu/state/*`, the GUI's buttons), and the
 * same export on a data dir no core owns (`svc-emu export`: server/cli/state.ts). docs/state.md.
 */

/** The cassettes, wherever the store keeps them (services/egress-sessions.ts). */
export interface CassetteIO {
  list(tenant: TenantRecord, snippet: string): Promise<{ name: string; path: string; cassette: Cassette }[]>;
  put(tenant: TenantRecord, snippet: string, name: string, cassette: Cassette): Promise<void>;
}

/** The parts of a running core the state touches besides the repository and blobs. */
export interface LiveParts {
  inbox: {
    snapshot(): Promise<{ files: Map<string, Buffer>; responses: Record<string, InboxResponse> }>;
    restore(files: Map<string, Buffer> | null, responses: Record<string, InboxResponse>): Promise<void>;
  };
  egress: {
    profile: 'local' | 'production';
    allow: readonly string[];
    faults: { list(): NewFaultRule[]; clear(): void; add(rule: NewFaultRule): unknown };
    mode: (() => EgressModeSetting) | null;
    setMode: ((m: EgressModeSetting) => unknown) | null;
  };
  cassettes: CassetteIO | null;
  /** After the swap: queued jobs run, pending callbacks are planned (the start-up paths: services/async.ts). */
  resume(): Promise<void>;
  dataDir: string;
}

// The contexts the services seal with (services/secrets.ts, services/tenants.ts).
const secretContext = (tenantId: string, name: string) => `secret:${tenantId}:${name}`;

/** Every secret of `db`, opened with the key that sealed it (taken in the same synchronous step as the db). */
export function openSecrets(db: Readonly<DbData>, deps: Pick<CoreDeps, 'secretBox'>): PlainSecrets {
  const box = deps.secretBox;
  return {
    secrets: db.secrets.map((s) => ({
      tenant_id: s.tenant_id,
      name: s.name,
      value: box.open(s.sealed, secretContext(s.tenant_id, s.name)),
    })),
    webhooks: db.tenants.map((t) => ({
      tenant_id: t.id,
      secret: box.open(t.webhook_secret, `webhook_secret:${t.id}`),
      previous: t.previous_webhook_secret ? box.open(t.previous_webhook_secret, `previous_webhook_secret:${t.id}`) : null,
      previous_expires_at: t.previous_webhook_secret_expires_at,
    })),
    keys: db.api_keys.flatMap((k) =>
      k.sealed ? [{ id: k.id, tenant_id: k.tenant_id, key: box.open(k.sealed, `api_key:${k.tenant_id}:${k.id}`) }] : [],
    ),
  };
}

/**
 * The snapshot: the repository's document copied in one synchronous step (nothing else runs meanwhile),
 * with the blobs it names pinned against the blob sweep until they are copied (blobs never change: they
 * are content-addressed), then the inbox (each file read under its chain) and the cassettes.
 */
export async function takeSnapshot(
  deps: CoreDeps,
  parts: { inbox: LiveParts['inbox'] | null; egress: LiveParts['egress'] | null; cassettes: CassetteIO | null; dataDir: string },
  /** Open the secrets (only when they travel: with a passphrase); else none is opened at all. */
  withSecrets: boolean,
): Promise<Snapshot> {
  const none: PlainSecrets = { secrets: [], webhooks: [], keys: [] };
  const { db, secrets, unpin } = deps.repo.read((live) => {
    const copy = structuredClone(live) as DbData;
    return { db: copy, secrets: withSecrets ? openSecrets(copy, deps) : none, unpin: deps.blobs.pin(blobsOf(copy)) };
  });
  try {
    const blobs = new Map<string, Buffer>();
    for (const hash of blobsOf(db)) {
      const data = await blobWhenWritten(deps, hash);
      if (data) blobs.set(hash, data);
      else dropBlob(db, hash);
    }
    const inbox = parts.inbox ? await parts.inbox.snapshot() : { files: new Map<string, Buffer>(), responses: {} };
    const pending = parts.egress ? null : await readPendingImport(parts.dataDir);
    const cassettes: ArchivedCassette[] = [...(pending?.cassettes ?? [])];
    if (parts.cassettes) {
      for (const s of db.snippets) {
        const tenant = db.tenants.find((t) => t.id === s.tenant_id);
        if (!tenant) continue;
        for (const c of await parts.cassettes.list(tenant, s.name).catch(() => [])) {
          cassettes.push({
            tenant: tenant.name,
            snippet: s.name,
            name: c.name,
            where: c.path.startsWith(parts.dataDir) ? 'data_dir' : 'workspace',
            cassette: c.cassette,
          });
        }
      }
    }
    return {
      db,
      blobs,
      inbox: inbox.files,
      secrets,
      cassettes,
      extras: parts.egress
        ? {
            egress: {
              profile: parts.egress.profile,
              allow: [...parts.egress.allow],
              faults: parts.egress.faults.list().map(({ host, integration, action, times }) => ({ host, integration, action, times })),
              mode: parts.egress.mode ? parts.egress.mode() : null,
            },
            inbox_responses: inbox.responses,
          }
        : (pending?.extras ?? { egress: { profile: 'local', allow: [], faults: [], mode: null }, inbox_responses: {} }),
    };
  } finally {
    unpin();
  }
}

/**
 * A blob the snapshot names, once it is on disk. A sync run's record names its stored input before the blob
 * is written (services/invocations.ts `create`: its `finish` waits for the write), so a snapshot taken in that
 * moment waits a little for it; null if it never comes (the write failed).
 */
async function blobWhenWritten(deps: CoreDeps, hash: string, waitMs = 5_000): Promise<Buffer | null> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await deps.blobs.get(hash);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      if (Date.now() > deadline) return null;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/**
 * A blob that never came: the invocations naming it in the copy lose that reference (as a failed write of
 * the stored input reads back: not kept). A version's code or a store value is never written after its
 * record names it, so one missing there is a damaged data dir, and the export says so.
 */
function dropBlob(db: DbData, hash: string): void {
  if (db.versions.some((v) => v.files.some((f) => f.sha256 === hash)) || db.store.some((r) => r.blob === hash)) {
    throw new Error(`blob ${hash} is missing from the data dir (a version's code or a store value names it)`);
  }
  for (const i of db.invocations) {
    for (const k of ['output_blob', 'input_blob', 'events_blob', 'stored_input_blob', 'agent_blob', 'egress_blob'] as const)
      if (i[k] === hash) delete i[k];
    if (i.logs_blob === hash) i.logs_blob = null;
    if (i.timeline_blob === hash) i.timeline_blob = null;
  }
}

/** The domain's refusal for an archive that cannot be used (problem+json 422 with the code the archive earned). */
export function archiveRefusal(err: ArchiveError): ValidationError {
  return new ValidationError([{ location: 'body', message: err.message }], err.message, err.code);
}

export class StateService {
  /** One export or import at a time: an import must not swap the state under an export's copy. */
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly deps: CoreDeps,
    private readonly live: LiveParts,
  ) {}

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => {});
    return run;
  }

  export(opts: { passphrase?: string } = {}): Promise<{ bytes: Buffer; manifest: StateManifest }> {
    return this.serial(async () => {
      const snap = await takeSnapshot(this.deps, this.live, opts.passphrase !== undefined);
      return buildArchive(snap, { passphrase: opts.passphrase, now: this.deps.clock(), emulatorVersion: EMULATOR_VERSION });
    });
  }

  /** Checks the whole archive, then swaps the state in; a refusal leaves everything as it was. */
  import(bytes: Buffer, opts: { passphrase?: string; replace?: boolean }): Promise<StateImportReport> {
    return this.serial(async () => {
      let parsed;
      try {
        parsed = await parseArchive(bytes, opts.passphrase);
      } catch (err) {
        if (err instanceof ArchiveError) throw archiveRefusal(err);
        throw err;
      }
      const current = this.deps.repo.read((db) => db);
      if (!opts.replace) {
        const { empty, why } = stateEmptiness(current);
        if (!empty) {
          throw new ConflictError(
            `this emulator already holds state (${why.join(', ')}): import with replace=true (svc-emu import --replace) to keep it aside in <data-dir>/replaced-<time>/`,
            'state_not_empty',
            { why },
          );
        }
      }
      const busy = current.invocations.filter((i) => i.status === 'queued' || i.status === 'running').length;
      if (busy) throw new ConflictError(`${busy} run(s) are queued or running: wait for them (or cancel them), then import`);
      const now = this.deps.clock();
      const prep = prepareImport(parsed, this.deps.secretBox, now);
      const report = { ...prep.report, notes: [...prep.report.notes] };
      // Nothing worth keeping (only what a first start makes): no folder kept aside, even with replace.
      if (opts.replace && !stateEmptiness(current).empty) report.replaced = await this.keepAside(current, now);
      // Young files are never swept (storage/blobs.ts), so the blobs are safe until the document names them.
      await writeFilesDurably(
        [...parsed.blobs].map(([hash, data]) => [join(this.live.dataDir, 'blobs', hash.slice(0, 2), hash), data] as const),
      );
      await this.deps.repo.replace(prep.db);
      await this.live.inbox.restore(parsed.inbox, parsed.extras.inbox_responses);
      await this.applyExtras(parsed.extras, parsed.cassettes, prep.db, report.notes);
      await this.live.resume();
      if (report.replaced) report.notes.push(`the previous state was kept in ${report.replaced}`);
      return report;
    });
  }

  /** At start: what an import on the files (no core running) left for the core to apply. */
  async applyPending(): Promise<string[]> {
    const pending = await readPendingImport(this.live.dataDir);
    if (!pending) return [];
    const notes: string[] = [];
    await this.live.inbox.restore(null, pending.extras.inbox_responses);
    await this.applyExtras(
      pending.extras,
      pending.cassettes,
      this.deps.repo.read((db) => db),
      notes,
    );
    await rm(pendingImportPath(this.live.dataDir), { force: true });
    return notes;
  }

  private async applyExtras(
    extras: Snapshot['extras'],
    cassettes: ArchivedCassette[],
    db: Readonly<DbData>,
    notes: string[],
  ): Promise<void> {
    this.live.egress.faults.clear();
    for (const rule of extras.egress.faults) this.live.egress.faults.add(rule);
    if (extras.egress.mode && this.live.egress.setMode) this.live.egress.setMode(extras.egress.mode);
    for (const c of cassettes) {
      const tenant = db.tenants.find((t) => t.name === c.tenant);
      const snippet = tenant && db.snippets.some((x) => x.tenant_id === tenant.id && x.name === c.snippet);
      if (!tenant || !snippet || !this.live.cassettes) {
        const why = !tenant
          ? 'its tenant is not in the state'
          : !snippet
            ? 'its snippet is not in the state'
            : 'this core has no cassette store';
        notes.push(`cassette ${c.tenant}/${c.snippet}/${c.name} not written: ${why}`);
        continue;
      }
      await this.live.cassettes.put(tenant, c.snippet, c.name, c.cassette).catch((err: unknown) => {
        notes.push(`cassette ${c.tenant}/${c.snippet}/${c.name} not written: ${(err as Error).message}`);
      });
    }
  }

  /** `replace`: the old state (its db, the blobs it names, the inbox) copied into `<data-dir>/replaced-<time>/`. */
  private async keepAside(current: Readonly<DbData>, now: Date): Promise<string> {
    const aside = join(this.live.dataDir, `replaced-${now.toISOString().replace(/[:.]/g, '-')}`);
    await mkdir(join(aside, 'blobs'), { recursive: true, mode: 0o700 });
    await writeFile(join(aside, 'db.json'), JSON.stringify(current, null, 2), { mode: 0o600 });
    for (const hash of blobsOf(current)) {
      await mkdir(join(aside, 'blobs', hash.slice(0, 2)), { recursive: true, mode: 0o700 });
      await copyFile(join(this.live.dataDir, 'blobs', hash.slice(0, 2), hash), join(aside, 'blobs', hash.slice(0, 2), hash)).catch(
        () => {},
      );
    }
    const inbox = await this.live.inbox.snapshot();
    if (inbox.files.size) {
      await mkdir(join(aside, 'inbox'), { mode: 0o700 });
      for (const [name, data] of inbox.files) await writeFile(join(aside, 'inbox', `${name}.jsonl`), data, { mode: 0o600 });
    }
    return aside;
  }
}
