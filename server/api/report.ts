import { implement } from '../http/route';
import * as report from '../../contract/emu/report';

/** The run report and import-report (their specs: contract/emu/report.ts; the service: server/report/). */
export const reportRoutes = [
  implement(report.emuGetReport, async ({ services, query }) => {
    const { html, filename } = await services.report.html(query.ids.split(','));
    return {
      status: 200,
      body: html,
      headers: {
        'content-type': 'text/html; charset=utf-8',
        'content-disposition': `attachment; filename="${filename}"`,
        'x-content-type-options': 'nosniff',
      },
    };
  }),
  implement(report.emuImportReport, async ({ services, body }) => ({ status: 201, body: await services.report.import(body) })),
];
