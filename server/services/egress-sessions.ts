import { statSync } from 'node:fs';
import { join } from 'node:path';
import { CassetteMatch, DEFAULT_CASSETTE, type EgressMode, type InvocationEgress } from '../../contract/schemas/cassette';
import type { CoreDeps } from '../core-deps';
import type { Logger } from '../logger';
import type { InvocationRecord, SnippetRecord, TenantRecord, VersionRecord } from '../storage/schema';
import {
  CassetteError,
  checkCassette,
  createPlayer,
  createRedactor,
  createTape,
  redactCassette,
  type Cassette,
  type CassetteFile,
  type CassetteRef,
  type CassetteStore,
  type EgressSession,
  type ByteRedactor,
  type HarEntry,
} from '../egress/cassette';
import type { EgressService } from './egress';
import type { InvocationService } from './invocations';
import { LOCAL_TENANT } from './tenants';

/** The server's egress setting (`serve --egress-mode`, `--replay-speed`; `GET|PUT /_emu/egress/mode`). */
export interface EgressModeSetting {
  mode: EgressMode;
  replay_speed: number;
}

/** A run's own choice (`X-Emu-Egress-Mode`, `X-Emu-Cassette`; admin only). */
export interface RunEgress {
  mode?: EgressMode;
  cassette?: string;
}

export interface EgressSessionsOptions {
  deps: CoreDeps;
  /** Where the open sessions are looked up by the proxy and `integrations.call` (EgressService.sessionFor). */
  egress: EgressService;
  invocations: InvocationService;
  /** The tenant's secrets, name → value (services/secrets.ts `reveal`): what the redactor takes out. */
  secrets: (tenant: TenantRecord) => Record<string, string>;
  /** The cassette files (server/egress/cassette/store.ts); `write` replaces a whole one (PUT, state import). */
  store: CassetteStore;
  setting: EgressModeSetting;
  logger: Logger;
}

const DEFAULT_MATCH: CassetteMatch = CassetteMatch.parse({});

/**
 * Where a snippet's cassettes live (docs/cassettes.md): beside a workspace snippet, in
 * `<workspace>/snippets/<name>/cassettes/` (reviewable, committed with it; the loader ignores that folder);
 * otherwise `<data-dir>/cassettes/<tenant>/<snippet>/`.
 */
export function cassetteFolder(where: { workspace: string | null; dataDir: string }): (tenant: string, snippet: string) => string {
  return (tenant, snippet) => {
    const folder = where.workspace ? join(where.workspace, 'snippets', snippet) : null;
    if (tenant === LOCAL_TENANT && folder && isDirectory(folder)) return join(folder, 'cassettes');
    return join(where.dataDir, 'cassettes', tenant, snippet);
  };
}

const isDirectory = (path: string) => {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
};

/**
 * One egress session per run (server/egress/cassette/types.ts EgressSession): opened when the run starts
 * (sync, stream, async), closed in a `finally` when it ends, so nothing of it outlives the run. The mode
 * is the run's (`X-Emu-Egress-Mode`), else the version's (`egress.mode` in snippet.json), else the
 * server's; decided when the invocation is recorded, so an async job keeps the mode it was submitted with.
 * Every run gets a tape: its entries become the run's `egress_blob`; a record run's are merged into the
 * cassette; a replay run's calls are answered by a player (server/egress/proxy.ts, services/egress.ts).
 */
export class EgressSessions {
  private setting: EgressModeSetting;

  /** The cassette files: read, list, merge, write, remove. */
  readonly store: EgressSessionsOptions['store'];

  constructor(private readonly o: EgressSessionsOptions) {
    this.setting = { ...o.setting };
    this.store = o.store;
  }

  /**
   * Writes a whole cassette sent over the API (import-report, state import): checked like a file read from
   * disk (a CassetteError names what is wrong), then redacted again with this tenant's secrets, so a
   * cassette from elsewhere cannot bring this tenant's credentials into a file. Announced as `cassette.changed`.
   */
  async put(tenant: TenantRecord, snippet: Pick<SnippetRecord, 'name'>, name: string, doc: unknown): Promise<CassetteFile> {
    const ref = this.refOf(tenant, snippet.name, name);
    const checked = checkCassette(doc, this.store.pathOf(ref), ref);
    const redacted = redactCassette(checked, createRedactor(this.o.secrets(tenant)));
    const cassette: Cassette = {
      ...redacted,
      log: { ...redacted.log, _svcEmu: { ...redacted.log._svcEmu, tenant: ref.tenant, snippet: ref.snippet } },
    };
    const file = await this.store.write(ref, cassette);
    this.o.deps.events.publish('cassette.changed', {
      tenant_id: tenant.id,
      snippet: ref.snippet,
      name,
      state: 'written',
      entries: cassette.log.entries.length,
    });
    return file;
  }

  mode(): EgressModeSetting {
    return { ...this.setting };
  }

  /** Switches the server's mode or speed; runs already started keep theirs. Announced as `egress.mode`. */
  setMode(next: Partial<EgressModeSetting>): EgressModeSetting {
    this.setting = { mode: next.mode ?? this.setting.mode, replay_speed: next.replay_speed ?? this.setting.replay_speed };
    this.o.deps.events.publish('egress.mode', { ...this.setting });
    return this.mode();
  }

  /** What a new invocation records (`egress` on its record, counts at zero): which mode, decided by whom, which cassette. */
  decide(version: Pick<VersionRecord, 'egress'>, run: RunEgress | undefined): InvocationEgress {
    const mode = run?.mode ?? version.egress?.mode ?? this.setting.mode;
    const source = run?.mode ? 'run' : version.egress?.mode ? 'snippet' : 'server';
    const cassette = run?.cassette ?? version.egress?.cassette ?? DEFAULT_CASSETTE;
    return { mode, source, cassette, calls: 0, recorded: 0, replayed: 0, unmatched: 0, passthrough: 0 };
  }

  /** The cassette a run of this snippet uses (tenant by name: the files are for people to find). */
  refOf(tenant: TenantRecord, snippet: string, name: string): CassetteRef {
    return { tenant: tenant.name, snippet, name };
  }

  /** The run's session: its tape, and in `replay` its player. Registered where the proxy finds it (EgressService.sessionFor). */
  async open(tenant: TenantRecord, record: InvocationRecord, version: VersionRecord | undefined): Promise<EgressSession> {
    const decided = record.egress ?? this.decide(version ?? {}, undefined);
    const cassette = decided.mode === 'live' ? null : this.refOf(tenant, record.snippet, decided.cassette ?? DEFAULT_CASSETTE);
    // Built at the run's first call: most runs make none, and opening every secret costs on the warm path.
    let built: ByteRedactor | null = null;
    const now = () => (built ??= createRedactor(this.o.secrets(tenant)));
    const redactor: ByteRedactor = {
      text: (t) => now().text(t),
      headers: (h, added) => now().headers(h, added),
      spans: (buf) => now().spans(buf),
      bytes: (buf) => now().bytes(buf),
    };
    const session: EgressSession = {
      invocationId: record.id,
      mode: decided.mode,
      source: decided.source,
      cassette,
      tape: createTape({ redactor, invocationId: record.id }),
      player: null,
      speed: this.setting.replay_speed,
      counts: { calls: 0, recorded: 0, replayed: 0, unmatched: 0, passthrough: 0 },
    };
    if (decided.mode === 'replay' && cassette) {
      try {
        const file = await this.o.store.read(cassette);
        if (file) {
          const match = { ...DEFAULT_MATCH, ...file.cassette.log._svcEmu.match, ...version?.egress?.match };
          session.player = createPlayer({ cassette: file.cassette, match, speed: session.speed, redactor, name: cassette.name });
        }
      } catch (err) {
        // A damaged cassette: every call misses (saying there is none to play), and the run says why.
        const why = err instanceof CassetteError ? err.message : String(err);
        this.o.invocations.addParityWarning(record.id, `egress: cassette ${cassette.name} could not be read: ${why}`);
      }
    }
    this.o.egress.sessions.set(record.id, session);
    return session;
  }

  /**
   * The run has ended: its calls go to a blob (`egress_blob`), the counts to its record (`egress`); a record
   * run's calls are merged into the cassette (and `cassette.changed` announced). Never throws: a cassette
   * that could not be written is said on the run (parity_warnings) and in the log.
   */
  async close(invocationId: string, tenant: TenantRecord): Promise<void> {
    const session = this.o.egress.sessions.get(invocationId);
    if (!session) return;
    this.o.egress.sessions.delete(invocationId);
    const warnings: string[] = [];
    let blob: string | undefined;
    try {
      const entries = session.tape.entries();
      session.counts.calls = entries.length + session.counts.passthrough;
      if (entries.length) blob = await this.o.deps.blobs.put(JSON.stringify(entries));
      if (session.mode === 'record' && session.cassette && entries.length) {
        try {
          const version = this.versionOf(invocationId);
          const match = { ...DEFAULT_MATCH, ...version?.egress?.match };
          const file = await this.o.store.merge(session.cassette, entries, match);
          session.counts.recorded = entries.length;
          this.o.deps.events.publish('cassette.changed', {
            tenant_id: tenant.id,
            snippet: session.cassette.snippet,
            name: session.cassette.name,
            state: 'written',
            entries: file.cassette.log.entries.length,
          });
        } catch (err) {
          const why = err instanceof Error ? err.message : String(err);
          warnings.push(`egress: the run's ${entries.length} call(s) could not be written to cassette ${session.cassette.name}: ${why}`);
          this.o.logger.log('warn', 'cassette not written', { invocation_id: invocationId, error: why });
        }
        const cut = entries.filter((e) => e._svcEmu.error).map((e) => `${e.request.method} ${e.request.url}`);
        if (cut.length) warnings.push(`egress: recorded without an answer (replay fails them the same way): ${cut.join(', ')}`);
      }
      if (session.mode === 'record' && session.counts.passthrough) {
        const tunnels = this.o.egress.log
          .list({ invocation_id: invocationId })
          .filter((e) => e.method === 'CONNECT')
          .map((e) => `${e.host}:${e.port}`);
        warnings.push(
          `egress: ${session.counts.passthrough} call(s) could not be recorded (HTTPS tunnels the core did not decrypt${tunnels.length ? `: ${[...new Set(tunnels)].join(', ')}` : ''})`,
        );
      }
      if (session.mode === 'replay')
        warnings.push(`egress: outbound calls replayed from cassette ${session.cassette?.name ?? DEFAULT_CASSETTE} (nothing went out)`);
      if (session.counts.unmatched)
        warnings.push(
          `egress: ${session.counts.unmatched} call(s) found no recording (each answered 502 egress_replay_no_match): ${(session.misses ?? []).join(' | ')}`,
        );
    } catch (err) {
      this.o.logger.log('warn', 'egress session not closed cleanly', { invocation_id: invocationId, error: String(err) });
    }
    const egress: InvocationEgress = {
      mode: session.mode,
      source: session.source,
      cassette: session.cassette?.name ?? null,
      ...session.counts,
    };
    this.o.deps.repo.mutateRecordsLazy(
      (db) => {
        const rec = db.invocations.findLast((i) => i.id === invocationId);
        if (!rec) return null;
        rec.egress = egress;
        if (blob) rec.egress_blob = blob;
        return rec;
      },
      (rec) => (rec ? [rec] : []),
    );
    for (const w of warnings) this.o.invocations.addParityWarning(invocationId, w);
  }

  /** A finished run's outbound calls (its `egress_blob`: HAR entries, redacted), in the order they began; [] when it made none. */
  async calls(rec: Pick<InvocationRecord, 'egress_blob'>): Promise<HarEntry[]> {
    if (!rec.egress_blob) return [];
    return JSON.parse(await this.o.deps.blobs.getText(rec.egress_blob)) as HarEntry[];
  }

  /** How many runs have a session open (nothing of a run outlives it). */
  openCount(): number {
    return this.o.egress.sessions.size;
  }

  private versionOf(invocationId: string): VersionRecord | undefined {
    return this.o.deps.repo.read((db) => {
      const rec = db.invocations.findLast((i) => i.id === invocationId);
      return rec ? db.versions.find((v) => v.snippet_id === rec.snippet_id && v.version === rec.version) : undefined;
    });
  }
}
