import { createClient, type Client } from '../../contract/client';
import { operations as ops } from '../../contract';
import { dataDirPaths, liveOwner } from '../storage/data-dir';

/**
 * How `svc-emu mcp` reaches the core: a data dir whose emulator.json names the running core and its admin
 * token (server/storage/data-dir.ts), or a URL with the admin token given to it. Resolved again on every tool
 * call, so an MCP server started before the emulator (or kept across its restart on a new port and token)
 * finds it as soon as it runs; a tool called while none runs fails with `McpToolError` saying how to start one.
 */

/** Where the core is: the same shape as the CLI's locator's answer (server/cli/locate.ts), which the command passes. */
export type McpTarget = { kind: 'dir'; dataDir: string } | { kind: 'url'; url: string; adminToken: string | null };

/** A failure a tool reports as its result (`isError`), in words an agent can act on. */
export class McpToolError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'McpToolError';
  }
}

export interface CoreConnection {
  url: string;
  /** The data dir when the core was found through one (reports default under it). */
  dataDir: string | null;
  /** The admin token: `/_emu` calls and the `X-Emu-Admin` of per-run overrides. */
  adminToken: string;
  /** `/_emu` calls (admin token). */
  admin: Client;
  /** `/v1` calls as the local tenant (its key from `GET /_emu/info`), as any client's would. */
  v1: Client;
  /** The local tenant's id. */
  tenantId: string | null;
}

/** The why of a fetch that never got an answer (refused, reset). */
export const whyUnreachable = (err: unknown) => (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;

export async function connectCore(target: McpTarget): Promise<CoreConnection> {
  let url: string;
  let token: string;
  let dataDir: string | null = null;
  if (target.kind === 'url') {
    if (!target.adminToken)
      throw new McpToolError(
        `svc-emu mcp was started with --url ${target.url} but no --key: give the emulator's admin token (admin_token in its <data-dir>/emulator.json)`,
        'no_admin_token',
      );
    url = target.url;
    token = target.adminToken;
  } else {
    dataDir = target.dataDir;
    const owner = await liveOwner(dataDirPaths(dataDir));
    if (!owner || owner.kind !== 'core')
      throw new McpToolError(
        `no emulator is running on ${dataDir}: start it with \`npx svc-emu serve --data-dir ${dataDir}\` (or \`npm start\` for the desktop app), then call this tool again`,
        'no_emulator',
        { data_dir: dataDir },
      );
    if (!owner.url || !owner.admin_token)
      throw new McpToolError(
        `the emulator (pid ${owner.pid}) on ${dataDir} is still starting: call this tool again in a moment`,
        'starting',
        {
          data_dir: dataDir,
        },
      );
    url = owner.url;
    token = owner.admin_token;
  }
  const admin = createClient({ baseUrl: url, adminToken: token });
  const info = await admin.send(ops.emuInfo, {}).catch((err: unknown) => {
    throw new McpToolError(`the emulator at ${url} did not answer (${whyUnreachable(err)}); is it still running?`, 'unreachable', { url });
  });
  if (info.status === 401)
    throw new McpToolError(
      `the emulator at ${url} refused the admin token (it restarted with another one, or --key is wrong)`,
      'unauthenticated',
      {
        url,
      },
    );
  if (info.status !== 200)
    throw new McpToolError(`the emulator at ${url} answered ${info.status} to GET /_emu/info`, 'unexpected', { url });
  const body = info.body as { local_api_key?: string | null; tenants?: { id: string; name: string }[] };
  if (!body.local_api_key)
    throw new McpToolError(
      `the emulator at ${url} shows no API key for its local tenant (its data dir lost the key file)`,
      'no_local_key',
      {
        url,
      },
    );
  return {
    url,
    dataDir,
    adminToken: token,
    admin,
    v1: createClient({ baseUrl: url, key: body.local_api_key }),
    tenantId: body.tenants?.find((t) => t.name === 'local')?.id ?? null,
  };
}
