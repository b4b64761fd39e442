import { implement } from '../http/route';
import { readRawBody } from '../http/body';
import * as state from '../../contract/emu/state';

const stamp = (d: Date) =>
  d
    .toISOString()
    .replace(/[:]/g, '-')
    .replace(/\.\d+Z$/, 'Z');

/** Export and import of the whole state (their specs: contract/emu/state.ts; how: server/state/service.ts). */
export const stateRoutes = [
  implement(state.emuExportState, async ({ services, body }) => {
    const { bytes, manifest } = await services.state.export({ passphrase: body.passphrase });
    return {
      status: 200,
      body: bytes,
      headers: {
        'Content-Type': state.STATE_ARCHIVE_TYPE,
        'Content-Disposition': `attachment; filename="svc-emu-${stamp(new Date(manifest.created_at))}.svcemu"`,
        'X-Emu-Secrets': manifest.secrets.mode,
        'Cache-Control': 'no-store',
      },
    };
  }),
  implement(state.emuImportState, async ({ services, query, headers, ctx }) => {
    const bytes = await readRawBody(ctx, state.STATE_IMPORT_LIMIT_BYTES);
    // Percent-encoded (a header carries no raw UTF-8); a value that does not decode is taken as it is.
    const raw = headers['x-emu-passphrase'];
    let passphrase: string | undefined;
    try {
      passphrase = raw === undefined ? undefined : decodeURIComponent(raw);
    } catch {
      passphrase = raw;
    }
    const report = await services.state.import(bytes, { passphrase, replace: query.replace });
    return { status: 200, body: report };
  }),
];
