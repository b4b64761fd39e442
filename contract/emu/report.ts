import { z } from 'zod';
import { defineOperation } from '../operation';
import { ok, problem, problems } from '../responses';
import { ImportReportBody, ImportReportResult, ReportQuery } from '../schemas/report';

/** The run report and import-report (emulator only; contract/schemas/report.ts says what the file holds). */

export const emuGetReport = defineOperation({
  operationId: 'emuGetReport',
  method: 'get',
  path: '/_emu/report',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'A run report: one self-contained HTML file for the given invocations (to hand a bug to a colleague)',
  description:
    'Per invocation: snippet, version, env, mode, outcome, limits and tenant caps, input (secrets redacted), output, logs, the memory/CPU timeline against the limits (inline SVG), the outcome’s evidence, outbound calls, stream frames, agent steps and parity. No network request when opened from disk (a CSP meta forbids them). It embeds a reproduction payload (`#svc-emu-repro`) that `POST /_emu/report/import` reads.',
  query: ReportQuery,
  responses: {
    200: {
      description: 'The report (`Content-Disposition: attachment`).',
      contentType: 'text/html',
      schema: z.string().meta({ description: 'A self-contained HTML document.' }),
      headers: z.object({ 'content-disposition': z.string() }),
    },
    ...problems(400, 401, 404),
  },
});

export const emuImportReport = defineOperation({
  operationId: 'emuImportReport',
  method: 'post',
  path: '/_emu/report/import',
  auth: 'admin',
  tag: 'Emulator',
  summary:
    'Import a run report: the snippet (if missing), a version with its files and limits, its cassette, and an imported invocation to rerun',
  description:
    'The body holds the report file (`html`) or its payload (`repro`). Per invocation: the snippet is created if missing, a new version is made through the same path as `POST /v1/snippets/{id}/versions`, the run’s outbound calls are written as cassette `report-<source id>`, and a finished invocation is recorded with the reported outcome, the stored input and `egress` naming that cassette, so `svc-emu invoke --replay <id>` reruns it in replay mode. A damaged or foreign file is a 422 `invalid_report` and nothing is created.',
  body: ImportReportBody,
  responses: {
    201: ok('What was created.', ImportReportResult),
    ...problems(400, 401, 404, 413, 415),
    422: problem(
      422,
      ['validation_failed', 'invalid_report', 'limit_exceeds_tenant_cap'],
      'The report is damaged or foreign (`invalid_report`), or its version does not validate here.',
    ),
  },
});
