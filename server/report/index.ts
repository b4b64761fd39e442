import { REPORT_MAX_INVOCATIONS, type ImportReportResult } from '../../contract/schemas/report';
import type { CoreDeps } from '../core-deps';
import { validationFailed } from '../domain/errors';
import type { DomainServices } from '../services';
import { collectItem, reproOf, type ReportServices } from './collect';
import { renderReport } from './html';
import { importRepro, type CassetteWriter } from './import';
import { reproFromBody } from './repro';

export { esc, jsonForScript, REPORT_CSP } from './html';
export { extractReproJson, parseRepro } from './repro';
export { reportCassetteName, type CassetteWriter } from './import';

/**
 * The run report (`GET /_emu/report`, `svc-emu report`) and its import (`POST /_emu/report/import`,
 * `svc-emu import-report`). Reads through the domain's services; writes through SnippetService and the
 * repository, and cassettes through the writer it is given (the cassette store's).
 */
export class ReportService {
  constructor(
    private readonly deps: CoreDeps,
    private readonly services: ReportServices & Pick<DomainServices, 'tenants' | 'snippets'>,
    private readonly opts: { emulator: string; writeCassette: () => CassetteWriter | null },
  ) {}

  /** The report file for these invocations (each id once, in the order given). */
  async html(ids: readonly string[]): Promise<{ html: string; filename: string }> {
    const unique = [...new Set(ids)];
    if (unique.length > REPORT_MAX_INVOCATIONS)
      throw validationFailed([{ location: 'query.ids', message: `at most ${REPORT_MAX_INVOCATIONS} invocations in one report` }]);
    const items = [];
    for (const id of unique) items.push(await collectItem(this.deps, this.services, id));
    const now = this.deps.clock();
    const repro = reproOf(items, this.opts.emulator, now);
    const html = renderReport(items, repro, { generatedAt: now, emulator: this.opts.emulator });
    const stamp = now.toISOString().replace(/[:.]/g, '-').slice(0, 19);
    const filename = `svc-emu-report-${unique.length === 1 ? unique[0] : `${unique.length}-runs`}-${stamp}.html`;
    return { html, filename };
  }

  async import(body: { html?: string; repro?: unknown; tenant?: string }): Promise<ImportReportResult> {
    const repro = reproFromBody(body);
    return importRepro(this.deps, this.services, this.opts.writeCassette(), body.tenant ?? 'local', repro);
  }
}

/**
 * How import-report writes a cassette: through the cassette store the egress sessions use (redacted with the
 * tenant's secrets, announced as `cassette.changed`): services/egress-sessions.ts `put`, as `PUT …/cassettes/{name}` does.
 */
export function reportCassetteWriter(domain: DomainServices): CassetteWriter {
  return async (tenant, snippet, name, cassette) => {
    const file = await domain.egressSessions.put(tenant, snippet, name, cassette);
    return { entries: file.cassette.log.entries.length };
  };
}
