import type { Cassette } from '../../contract/schemas/cassette';
import { REPORT_CASSETTE_PREFIX, type ImportReportResult, type ReportRepro, type ReproInvocation } from '../../contract/schemas/report';
import { type CoreDeps, nowIso } from '../core-deps';
import { ValidationError, limitExceedsTenantCap } from '../domain/errors';
import { newId } from '../ids';
import type { DomainServices } from '../services';
import { invocationSummary } from '../services/invocations';
import type { InvocationRecord, SnippetRecord, TenantRecord } from '../storage/schema';

/**
 * `POST /_emu/report/import` / `svc-emu import-report`: turns a report's payload back into things on this
 * emulator, per invocation — the snippet (if missing), a new version with the report's files and limits
 * (SnippetService.createVersion, the path of `POST …/versions`), the run's calls as cassette
 * `report-<source id>`, and a finished invocation with the reported outcome, the stored input and `egress`
 * naming that cassette, which `svc-emu invoke --replay <id>` reruns in replay mode (server/cli/client.ts).
 */

/** Writes a whole cassette (what `PUT /_emu/snippets/{id}/cassettes/{name}` does); returns its entry count. */
export type CassetteWriter = (
  tenant: TenantRecord,
  snippet: SnippetRecord,
  name: string,
  cassette: Cassette,
) => Promise<{ entries: number }>;

/** Outputs up to this size stay in db.json, larger ones go to a blob (as services/invocations.ts does). */
const INLINE_MAX_BYTES = 8 * 1024;

const invalid = (message: string, location = 'body') => new ValidationError([{ location, message }], message, 'invalid_report');

/** The cassette an imported run replays from: `report-<source id>`, lower-cased (cassette names are). */
export const reportCassetteName = (sourceId: string) =>
  `${REPORT_CASSETTE_PREFIX}${sourceId.toLowerCase().replace(/[^a-z0-9._-]/g, '-')}`.slice(0, 63);

export async function importRepro(
  deps: CoreDeps,
  services: Pick<DomainServices, 'tenants' | 'snippets'>,
  writeCassette: CassetteWriter | null,
  tenantName: string,
  repro: ReportRepro,
): Promise<ImportReportResult> {
  const tenant = services.tenants.get(tenantName);
  // Everything that can be refused without writing is refused first: nothing is created for a report that cannot be imported.
  precheck(deps, tenant, repro.invocations, writeCassette);

  const versions = new Map<string, number>();
  const created = new Set<string>();
  const out: ImportReportResult['invocations'] = [];
  for (const [n, inv] of repro.invocations.entries()) {
    const name = inv.snippet.name;
    let snippetCreated: boolean;
    if (!deps.repo.read((db) => db.snippets.some((sn) => sn.tenant_id === tenant.id && sn.name === name))) {
      await services.snippets.create(tenant, {
        name,
        runtime: inv.runtime,
        ...(inv.snippet.description ? { description: inv.snippet.description } : {}),
      });
      created.add(name);
      snippetCreated = true;
    } else snippetCreated = created.has(name);
    const key = `${name}@${inv.version.version}`;
    let version = versions.get(key);
    if (version === undefined) {
      const v = await services.snippets
        .createVersion(
          tenant,
          name,
          {
            files: inv.version.files,
            entrypoint: inv.version.entrypoint,
            timeout_ms: inv.version.timeout_ms,
            max_memory_mb: inv.version.max_memory_mb,
            max_cpu_percent: inv.version.max_cpu_percent,
          },
          'api',
          // snippet.json's `egress` (mode, cassette, matchers) as the version had it.
          inv.version.egress ? { egress: inv.version.egress } : {},
        )
        .catch((err: unknown) => {
          if (err instanceof ValidationError) err.message = `invocations[${n}] (${inv.invocation_id}): ${err.message}`;
          throw err;
        });
      version = v.version;
      versions.set(key, version);
    }
    const snippet = services.snippets.get(tenant, name);
    let cassette: string | null = null;
    let entries = 0;
    if (inv.cassette && inv.cassette.log.entries.length && writeCassette) {
      cassette = reportCassetteName(inv.invocation_id);
      const body: Cassette = {
        ...inv.cassette,
        log: { ...inv.cassette.log, _svcEmu: { ...inv.cassette.log._svcEmu, tenant: tenant.name, snippet: name } },
      };
      entries = (await writeCassette(tenant, snippet, cassette, body)).entries;
    }
    const rec = await recordInvocation(deps, tenant, snippet.id, name, version, inv, cassette);
    out.push({
      source_id: inv.invocation_id,
      id: rec.id,
      snippet: name,
      snippet_created: snippetCreated,
      version,
      cassette,
      cassette_entries: entries,
      outcome: rec.outcome,
      rerun: `svc-emu invoke --replay ${rec.id}`,
    });
  }
  return { tenant: tenant.name, invocations: out };
}

function precheck(
  deps: CoreDeps,
  tenant: TenantRecord,
  invocations: readonly ReproInvocation[],
  writeCassette: CassetteWriter | null,
): void {
  const caps = deps.repo.read((db) => db.tenants.find((t) => t.id === tenant.id)?.caps) ?? tenant.caps;
  for (const [n, inv] of invocations.entries()) {
    const existing = deps.repo.read((db) => db.snippets.find((s) => s.tenant_id === tenant.id && s.name === inv.snippet.name));
    if (existing && existing.runtime !== inv.runtime)
      throw invalid(
        `snippet '${inv.snippet.name}' exists here as a ${existing.runtime} snippet; the report's is ${inv.runtime} (import into another tenant with --tenant)`,
        `body.invocations.${n}.runtime`,
      );
    for (const f of ['timeout_ms', 'max_memory_mb', 'max_cpu_percent'] as const)
      if (inv.version[f] > caps[f]) throw limitExceedsTenantCap(f, inv.version[f], caps[f]);
    if (!Object.hasOwn(inv.version.files, inv.version.entrypoint))
      throw invalid(
        `invocations[${n}]: the entrypoint '${inv.version.entrypoint}' is not among the files`,
        `body.invocations.${n}.version`,
      );
    if (inv.cassette?.log.entries.length && !writeCassette)
      throw invalid('this emulator cannot write cassettes, and the report’s runs made outbound calls', `body.invocations.${n}.cassette`);
  }
}

async function recordInvocation(
  deps: CoreDeps,
  tenant: TenantRecord,
  snippetId: string,
  snippet: string,
  version: number,
  inv: ReproInvocation,
  cassette: string | null,
): Promise<InvocationRecord> {
  const s = inv.summary;
  const outputJson = s.output === undefined || s.output === null ? undefined : JSON.stringify(s.output);
  const [outputBlob, inputBlob] = await Promise.all([
    outputJson !== undefined && Buffer.byteLength(outputJson) > INLINE_MAX_BYTES ? deps.blobs.put(outputJson) : undefined,
    inv.input ? deps.blobs.put(JSON.stringify(inv.input)) : undefined,
  ]);
  const overrides = inv.overrides ?? {};
  const limits = {
    timeout_ms: overrides.timeout_ms ?? inv.version.timeout_ms,
    max_memory_mb: overrides.max_memory_mb ?? inv.version.max_memory_mb,
    max_cpu_percent: overrides.max_cpu_percent ?? inv.version.max_cpu_percent,
  };
  const calls = inv.cassette?.log.entries.length ?? 0;
  const rec = await deps.repo.mutateRecords(
    (db) => {
      const now = nowIso(deps.clock);
      const r: InvocationRecord = {
        id: newId('inv'),
        tenant_id: tenant.id,
        snippet_id: snippetId,
        snippet,
        version,
        // The report's env may not exist here (or run another version): the rerun names its version.
        env: null,
        mode: inv.mode,
        status: s.outcome === 'success' ? 'succeeded' : 'failed',
        outcome: s.outcome ?? 'failed',
        error: s.error ? { ...s.error } : null,
        usage: s.usage ? { ...s.usage } : null,
        limits,
        overridden: Object.keys(overrides).length > 0,
        parity: { status: 'full', reasons: [] },
        warm: null,
        logs_blob: null,
        logs_truncated: false,
        timeline_blob: null,
        idempotency_key: null,
        attempts: 0,
        callback: null,
        parity_warnings: [
          `imported from a run report: invocation ${inv.invocation_id} of tenant ${inv.tenant}, snippet ${inv.snippet.name} v${inv.version.version}${inv.env ? `, env ${inv.env}` : ''}`,
        ],
        created_at: now,
        started_at: null,
        finished_at: now,
      };
      if (outputBlob) r.output_blob = outputBlob;
      else if (outputJson !== undefined) r.output = JSON.parse(outputJson) as unknown;
      if (inputBlob) r.stored_input_blob = inputBlob;
      else r.input_truncated = true;
      if (Object.keys(overrides).length) r.overrides = { ...overrides };
      if (cassette) r.egress = { mode: 'replay', source: 'run', cassette, calls, recorded: 0, replayed: 0, unmatched: 0, passthrough: 0 };
      db.invocations.push(r);
      return r;
    },
    (r) => [r],
  );
  deps.events.publish('invocation.created', invocationSummary(rec));
  deps.events.publish('invocation.finished', invocationSummary(rec));
  return rec;
}
