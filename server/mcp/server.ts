import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { EMULATOR_VERSION } from '../version';
import { connectCore, McpToolError, type McpTarget } from './connection';
import { MCP_TOOLS, type McpSession, type ToolContext } from './tools';

/**
 * `svc-emu mcp`: an MCP server (the official TypeScript SDK) over stdio for coding agents. It holds no
 * state of the emulator's: every tool is a call to the running core through the one client (contract/client.ts),
 * as the local tenant over /v1 and with the admin token over /_emu (server/mcp/connection.ts). Stdout carries
 * JSON-RPC only; anything else goes to stderr. The tools are server/mcp/tools.ts (`MCP_TOOLS`).
 */

export const MCP_INSTRUCTIONS = `The Snippet Emulator runs snippets (Bun or Python handlers) locally with production parity: the same API, limits (timeout, memory, CPU), outcomes and callbacks as the production service.
Typical loop: list_snippets → deploy (code or files, limits, env) → invoke (sync, async or stream) → get_invocation (logs and evidence: outcome, error, usage, timeline, parity warnings, outbound calls).
Reproduce a limit with invoke's limits (or set_run_limits), e.g. {"timeout_ms": 500}. Async runs can call back into the emulator's inbox (invoke's callback_inbox, then read_inbox). read_egress_log shows outbound calls; export_run_report writes an HTML report to hand to a person.`;

export interface McpServerOptions {
  target: McpTarget;
  /** Where relative paths (a report's `path`) resolve. */
  cwd: string;
  /** Where diagnostics go (never stdout). */
  log?: (line: string) => void;
}

/** The MCP server with every tool registered, not yet connected to a transport. */
export function createMcpServer(opts: McpServerOptions): McpServer {
  const server = new McpServer(
    { name: 'svc-emu', title: 'Snippet Emulator', version: EMULATOR_VERSION },
    { instructions: MCP_INSTRUCTIONS },
  );
  const session: McpSession = { runLimits: new Map() };
  const ctx: ToolContext = { connect: () => connectCore(opts.target), session, cwd: opts.cwd };
  for (const t of MCP_TOOLS) {
    const handler = async (args: unknown): Promise<CallToolResult> => {
      try {
        const out = await t.run(args as never, ctx);
        return {
          content: [{ type: 'text', text: `${out.summary}\n\n${JSON.stringify(out.data, null, 2)}` }, ...(out.extra ?? [])],
          structuredContent: out.data,
        };
      } catch (err) {
        if (err instanceof McpToolError) return { isError: true, content: [{ type: 'text', text: err.message }] };
        opts.log?.(`svc-emu mcp: ${t.name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
        return {
          isError: true,
          content: [{ type: 'text', text: `${t.name} failed unexpectedly: ${err instanceof Error ? err.message : String(err)}` }],
        };
      }
    };
    server.registerTool(
      t.name,
      {
        title: t.title,
        description: t.description,
        inputSchema: t.input,
        // Nothing here deletes: a deploy makes a new version (an environment can be pointed back), overrides last one session.
        annotations: { title: t.title, readOnlyHint: t.readOnly, destructiveHint: false, openWorldHint: false },
      },
      handler,
    );
  }
  return server;
}

/**
 * Serves MCP on this process's stdin/stdout until stdin ends (the client went away) or `stop` resolves
 * (a signal). Anything printed with console.log meanwhile goes to stderr: stdout is the protocol's.
 */
export async function runMcpStdio(opts: McpServerOptions & { stop: Promise<unknown> }): Promise<void> {
  const log = opts.log ?? ((line: string) => process.stderr.write(line));
  const restore = { log: console.log, info: console.info, debug: console.debug };
  console.log = console.info = console.debug = (...args: unknown[]) => console.error(...args);
  const server = createMcpServer({ ...opts, log });
  const transport = new StdioServerTransport();
  let ended!: () => void;
  const closed = new Promise<void>((res) => (ended = res));
  transport.onclose = () => ended();
  const onEnd = () => ended();
  process.stdin.once('end', onEnd);
  process.stdin.once('close', onEnd);
  try {
    await server.connect(transport);
    log(`svc-emu mcp: serving ${MCP_TOOLS.length} tools over stdio (${describeTarget(opts.target)})\n`);
    await Promise.race([closed, opts.stop]);
  } finally {
    process.stdin.off('end', onEnd);
    process.stdin.off('close', onEnd);
    await server.close().catch(() => {});
    process.stdin.pause(); // the transport stopped reading: nothing keeps the process up
    Object.assign(console, restore);
  }
}

const describeTarget = (t: McpTarget) =>
  t.kind === 'url' ? `the emulator at ${t.url}` : `the emulator of data dir ${t.dataDir}, found through its emulator.json on each call`;
