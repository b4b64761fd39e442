import { implement } from '../http/route';
import { readRawBody } from '../http/body';
import { InvalidRequestError } from '../domain/errors';
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
    let passphrase: string | undefined;
    if (headers['x-emu-passphrase'] !== undefined) {
      try {
        passphrase = decodeURIComponent(headers['x-emu-passphrase']);
      } catch {
        throw new InvalidRequestError(
          [{ location: 'header.x-emu-passphrase', message: 'must be percent-encoded UTF-8' }],
          'X-Emu-Passphrase must be percent-encoded UTF-8',
        );
      }
    }
    const report = await services.state.import(bytes, { passphrase, replace: query.replace });
    return { status: 200, body: report };
  }),
];
