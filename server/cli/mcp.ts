import type { McpTarget } from '../mcp/connection';
import type { Target } from './locate';

/**
 * `svc-emu mcp [--data-dir DIR] [--url URL --key ADMIN_TOKEN]`: the MCP server for coding agents
 * (server/mcp/), over stdio. It finds the running core as every client command does (server/cli/locate.ts),
 * or at --url with the admin token as --key; it starts no core of its own (docs/mcp.md says why). Arguments
 * are checked before anything is served (exit 2); then it serves until the client closes stdin or a signal.
 */

export const MCP_OPTIONS = {
  url: { type: 'string' },
  key: { type: 'string' },
} as const;
export const MCP_ACCEPTS = ['url', 'key'] as const;

export const MCP_USAGE = `  svc-emu mcp [--url URL --key ADMIN_TOKEN]
                                 (an MCP server over stdio for coding agents: list, deploy, invoke, inspect runs;
                                 docs/mcp.md has the tools and the config for Claude, VS Code and Cursor)`;

export interface McpIO {
  stderr: (text: string) => void;
  cwd: string;
  untilSignal: () => Promise<string>;
}

/** Thrown for a bad argument (main.ts reports it as usage, exit 2). */
export class McpUsageError extends Error {}

export async function runMcpCommand(
  args: string[],
  values: Record<string, unknown>,
  target: () => Promise<Target>,
  io: McpIO,
): Promise<number> {
  if (args.length) throw new McpUsageError(`mcp takes no argument (got '${args[0]}')`);
  if (values.json) throw new McpUsageError('mcp takes no --json: it speaks JSON-RPC on stdout already');
  const url = values.url as string | undefined;
  const key = values.key as string | undefined;
  let where: McpTarget;
  if (url !== undefined) {
    if (values['data-dir'] !== undefined) throw new McpUsageError('give --data-dir or --url, not both');
    const base = url.replace(/\/+$/, '');
    if (!/^https?:\/\/[^/]+$/.test(base)) throw new McpUsageError(`--url: '${url}' is not the emulator's base URL (http://HOST:PORT)`);
    if (!key) throw new McpUsageError("--url needs --key: the emulator's admin token (admin_token in its <data-dir>/emulator.json)");
    where = { kind: 'url', url: base, adminToken: key };
  } else {
    if (key !== undefined)
      throw new McpUsageError('--key goes with --url (with a data dir the admin token is read from its emulator.json)');
    const t = await target();
    where = t.kind === 'url' ? { kind: 'url', url: t.url, adminToken: t.adminToken } : { kind: 'dir', dataDir: t.dataDir };
  }
  // Loaded here, not with the CLI: the MCP SDK (and its ajv and zod-to-json-schema) costs the idle core ~8 MB.
  const { runMcpStdio } = await import('../mcp/server');
  await runMcpStdio({ target: where, cwd: io.cwd, log: io.stderr, stop: io.untilSignal() });
  return 0;
}
