import { REPORT_REPRO_ELEMENT_ID, REPORT_REPRO_FORMAT, REPORT_REPRO_VERSION, ReportRepro } from '../../contract/schemas/report';
import { ValidationError } from '../domain/errors';

/**
 * Reads the reproduction payload back: from a report file (its `#svc-emu-repro` block) or as the payload
 * itself. Anything else (a damaged file, another page, another format or version) is a 422
 * `invalid_report` saying what is wrong, before anything is created.
 */

const invalid = (message: string, location = 'body') => new ValidationError([{ location, message }], message, 'invalid_report');

/** The JSON text of the payload block in a report file. */
export function extractReproJson(html: string): string {
  const open = new RegExp(`<script\\s+type="application/json"\\s+id="${REPORT_REPRO_ELEMENT_ID}"\\s*>`, 'g');
  // The last one: the payload is the file's last data block (anything a snippet printed is escaped above it).
  let start = -1;
  for (let m = open.exec(html); m; m = open.exec(html)) start = m.index + m[0].length;
  if (start < 0)
    throw invalid(
      /<html|<!doctype/i.test(html.slice(0, 2000))
        ? `this HTML file is not a svc-emu run report (it has no #${REPORT_REPRO_ELEMENT_ID} block)`
        : 'this is not an HTML run report (make one with `svc-emu report ID… -o FILE.html`)',
      'body.html',
    );
  const end = html.indexOf('</script>', start);
  if (end < 0) throw invalid(`the report is cut short: its #${REPORT_REPRO_ELEMENT_ID} block never ends`, 'body.html');
  return html.slice(start, end);
}

/** Parses and checks the payload (JSON text or a value). */
export function parseRepro(value: unknown, location = 'body.repro'): ReportRepro {
  let data = value;
  if (typeof value === 'string') {
    try {
      data = JSON.parse(value) as unknown;
    } catch (err) {
      throw invalid(`the report’s reproduction payload is damaged: ${(err as Error).message}`, location);
    }
  }
  if (data === null)
    throw invalid('the report has no reproduction payload (the versions of its runs were gone when it was made)', location);
  if (typeof data !== 'object' || Array.isArray(data)) throw invalid('the reproduction payload is not a JSON object', location);
  const head = data as { format?: unknown; version?: unknown };
  if (head.format !== REPORT_REPRO_FORMAT)
    throw invalid(`not a svc-emu report payload (format ${JSON.stringify(head.format ?? null)})`, location);
  if (head.version !== REPORT_REPRO_VERSION)
    throw invalid(
      `the report’s payload is version ${JSON.stringify(head.version ?? null)}; this emulator reads version ${REPORT_REPRO_VERSION} (update the emulator that imports it)`,
      location,
    );
  const parsed = ReportRepro.safeParse(data);
  if (!parsed.success) {
    const first = parsed.error.issues.slice(0, 5).map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
    throw invalid(`the report’s reproduction payload is damaged: ${first.join('; ')}`, location);
  }
  return parsed.data;
}

/** The payload of an import request: `html` (a report file) or `repro` (the payload), exactly one. */
export function reproFromBody(body: { html?: string; repro?: unknown }): ReportRepro {
  if ((body.html === undefined) === (body.repro === undefined)) throw invalid('give either html (the report file) or repro (its payload)');
  return body.html !== undefined ? parseRepro(extractReproJson(body.html), 'body.html') : parseRepro(body.repro);
}
