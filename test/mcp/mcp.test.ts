/**
 * `svc-emu mcp` (issue 19): an MCP client from the official SDK (Client + StdioClientTransport) spawns the
 * built CLI (`node bin/svc-emu.mjs mcp --data-dir DIR`) against a real core on port 0 with a temp data dir,
 * and drives every tool: the list of tools and their input schemas, deploy → invoke end to end (real Bun), a
 * stream summarised, get_invocation with logs and evidence, errors as isError results that say what is
 * wrong, per-run limits producing a timeout, the callback inbox after an async run, the egress log, and a run
 * report written to a file. A raw JSON-RPC exchange checks that stdout carries the protocol and nothing else.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MCP_TOOL_NAMES } from '../../server/mcp/tools';
import { PROJECT_ROOT, startTestCore, tempDir, type TestCore } from '../helpers/core';

const BIN = join(PROJECT_ROOT, 'bin', 'svc-emu.mjs');

const LOGGER = `export default async function handler(input) {
  console.log("mcp-log-line " + input.name);
  console.error("mcp-err-line");
  return { hello: input.name };
}`;
const TICKER = `export default async function* handler(input) {
  for (let i = 0; i < input.n; i++) yield { i };
  return { n: input.n };
}`;
const SLEEPY = `export default async function handler(input) {
  await new Promise((r) => setTimeout(r, input.ms));
  return { slept: input.ms };
}`;
const CALLER = `export default async function handler(input) {
  const out = [];
  for (const path of ["/ok", "/missing"]) {
    const r = await fetch(input.base + path, { signal: AbortSignal.timeout(5000) });
    out.push(r.status);
  }
  return out;
}`;

let core: TestCore;
let dir: string;
let work: string;
let client: Client;
let stderr = '';
const transportErrors: Error[] = [];
let upstream: Server;
let upstreamUrl: string;

async function connectMcp(args: string[]): Promise<{ client: Client; transport: StdioClientTransport; errors: Error[] }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', ...args],
    cwd: work,
    stderr: 'pipe',
    env: { ...(process.env as Record<string, string>), NO_COLOR: '1' },
  });
  const errors: Error[] = [];
  // A line on stdout that is not JSON-RPC reaches the transport's onerror: collected, and asserted empty.
  transport.onerror = (e) => errors.push(e);
  transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const c = new Client({ name: 'svc-emu-test', version: '1.0.0' });
  await c.connect(transport);
  return { client: c, transport, errors };
}

const call = async (name: string, args: Record<string, unknown> = {}) =>
  (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as CallToolResult;
const text = (r: CallToolResult) =>
  r.content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');
/** The structured answer of a call that must have succeeded. */
async function ok(name: string, args: Record<string, unknown> = {}): Promise<any> {
  const r = await call(name, args);
  expect(r.isError ?? false, text(r)).toBe(false);
  expect(r.structuredContent).toBeTypeOf('object');
  return r.structuredContent;
}

beforeAll(async () => {
  dir = await tempDir('svc-emu-mcp-');
  work = await tempDir('svc-emu-mcp-cwd-');
  core = await startTestCore({ dataDir: dir });
  for (const [name, code] of [
    ['logger', LOGGER],
    ['ticker', TICKER],
    ['sleepy', SLEEPY],
    ['caller', CALLER],
  ] as const) {
    expect((await core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
    const v = await core.call('POST', `/v1/snippets/${name}/versions`, { code, max_memory_mb: 128 });
    expect(v.status, v.text).toBe(201);
  }
  upstream = createServer((req, res) => {
    res.writeHead(req.url === '/ok' ? 200 : 404, { 'content-type': 'text/plain' });
    res.end(req.url === '/ok' ? 'fine' : 'nothing here');
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const c = await connectMcp(['--data-dir', dir]);
  client = c.client;
  transportErrors.push(...c.errors);
  c.transport.onerror = (e) => transportErrors.push(e);
}, 60_000);

afterAll(async () => {
  await client?.close();
  await core?.stop();
  await new Promise((r) => upstream?.close(r));
  await rm(dir, { recursive: true, force: true });
  await rm(work, { recursive: true, force: true });
  // Nothing but JSON-RPC came on stdout over the whole session.
  expect(transportErrors).toEqual([]);
});

describe('svc-emu mcp', () => {
  it('lists every tool, each with a description and an object input schema', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...MCP_TOOL_NAMES].sort());
    expect(MCP_TOOL_NAMES).toEqual(
      expect.arrayContaining([
        'list_snippets',
        'list_versions',
        'deploy',
        'invoke',
        'list_invocations',
        'get_invocation',
        'set_run_limits',
        'read_inbox',
        'read_egress_log',
        'export_run_report',
      ]),
    );
    for (const t of tools) {
      expect(t.description?.length, t.name).toBeGreaterThan(80);
      expect(t.inputSchema.type, t.name).toBe('object');
    }
    const invoke = tools.find((t) => t.name === 'invoke')!;
    expect(Object.keys(invoke.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(['snippet', 'input', 'mode', 'limits']));
    expect(invoke.inputSchema.required).toEqual(['snippet']);
    const deploy = tools.find((t) => t.name === 'deploy')!;
    expect(Object.keys(deploy.inputSchema.properties ?? {})).toEqual(
      expect.arrayContaining(['snippet', 'code', 'files', 'timeout_ms', 'max_memory_mb', 'max_cpu_percent', 'env']),
    );
  });

  it('deploys a new snippet to an environment and invokes it end to end', async () => {
    const d = await ok('deploy', {
      snippet: 'greeter',
      code: 'export default async function handler(input) { return { greeting: "hi " + input.name, bun: typeof Bun }; }',
      max_memory_mb: 128,
      env: 'dev',
    });
    expect(d.snippet_created).toBe(true);
    expect(d.version).toMatchObject({ snippet: 'greeter', version: 1, runtime: 'bun', max_memory_mb: 128, timeout_ms: 60000 });
    expect(d.deployment).toMatchObject({ env: 'dev', version: 1 });

    const listed = await ok('list_snippets');
    expect(listed.snippets.find((s: { name: string }) => s.name === 'greeter')).toMatchObject({ runtime: 'bun', deployments: { dev: 1 } });
    const versions = await ok('list_versions', { snippet: 'greeter' });
    expect(versions.versions).toEqual([expect.objectContaining({ version: 1, environments: ['dev'], files: ['index.ts'] })]);
    const one = await ok('list_versions', { snippet: 'greeter', version: 1 });
    expect(Object.values(one.version.files as Record<string, string>)[0]).toContain('hi ');

    const r = await call('invoke', { snippet: 'greeter', env: 'dev', input: { name: 'Ada' } });
    expect(r.isError ?? false, text(r)).toBe(false);
    expect(text(r)).toMatch(/greeter \(env dev\) → success/);
    expect(r.structuredContent).toMatchObject({
      outcome: 'success',
      output: { greeting: 'hi Ada', bun: 'object' },
      version: 1,
      env: 'dev',
      http_status: 200,
    });
    expect((r.structuredContent as any).invocation_id).toMatch(/^inv_/);
  });

  it('refuses a version that does not compile, naming the line', async () => {
    const r = await call('deploy', {
      snippet: 'broken',
      runtime: 'bun',
      code: 'export default async function handler(input) {\n  return {;\n}',
    });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/creating a version of broken/);
    expect(text(r)).toMatch(/422/);
  });

  it('summarises a stream: chunk count, first and last chunks, result and timing', async () => {
    const s = await ok('invoke', { snippet: 'ticker', mode: 'stream', input: { n: 10 }, chunks: 2 });
    expect(s).toMatchObject({
      mode: 'stream',
      chunks: 10,
      first_chunks: [{ i: 0 }, { i: 1 }],
      last_chunks: [{ i: 8 }, { i: 9 }],
      omitted_chunks: 6,
      outcome: 'success',
      result: { output: { n: 10 } },
      error: null,
    });
    expect(s.invocation_id).toMatch(/^inv_/);
    expect(s.timing.first_chunk_ms).toBeGreaterThanOrEqual(0);
    expect(s.timing.total_ms).toBeGreaterThanOrEqual(s.timing.first_chunk_ms);
  });

  it('reads an invocation with its logs and evidence', async () => {
    const run = await ok('invoke', { snippet: 'logger', input: { name: 'Grace' } });
    const g = await ok('get_invocation', { id: run.invocation_id });
    expect(g).toMatchObject({ invocation_id: run.invocation_id, snippet: 'logger', outcome: 'success', output: { hello: 'Grace' } });
    expect(g.logs.text).toContain('mcp-log-line Grace');
    expect(g.logs.text).toContain('mcp-err-line');
    expect(g.usage.duration_ms).toBeGreaterThan(0);
    expect(g.limits).toMatchObject({ max_memory_mb: 128 });
    expect(g.parity.status).toMatch(/full|degraded/);
    expect(Array.isArray(g.parity_warnings)).toBe(true);
    expect(g.egress).toMatchObject({ calls: 0, failed: 0 });
    expect(g.timeline).toHaveProperty('samples');
    const r = await call('get_invocation', { id: run.invocation_id, logs: false });
    expect((r.structuredContent as any).logs).toBeNull();
  });

  it('answers errors as isError results that say what is wrong', async () => {
    const unknown = await call('invoke', { snippet: 'no-such-snippet' });
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toMatch(/no-such-snippet/);
    expect(text(unknown)).toMatch(/404 not_found/);

    const missing = await call('get_invocation', { id: 'inv_doesnotexist0' });
    expect(missing.isError).toBe(true);
    expect(text(missing)).toMatch(/inv_doesnotexist0 is unknown/);

    // Arguments are checked against the tool's schema (from the contract's): a bad one is an isError result too.
    const bad = await call('invoke', { snippet: 'logger', limits: { timeout_ms: 0 } });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toMatch(/timeout_ms/);
  });

  it('says so in each tool’s error when no emulator runs on the data dir', async () => {
    const empty = await tempDir('svc-emu-mcp-none-');
    const c = await connectMcp(['--data-dir', empty]);
    try {
      const r = (await c.client.callTool({ name: 'list_snippets', arguments: {} })) as CallToolResult;
      expect(r.isError).toBe(true);
      expect(text(r)).toContain(`no emulator is running on ${empty}`);
      expect(text(r)).toContain('svc-emu serve --data-dir');
      expect(c.errors).toEqual([]);
    } finally {
      await c.client.close();
      await rm(empty, { recursive: true, force: true });
    }
  });

  it('overrides a run’s limits (admin) and the run times out', async () => {
    const once = await call('invoke', { snippet: 'sleepy', input: { ms: 3000 }, limits: { timeout_ms: 300 } });
    expect(once.isError ?? false, text(once)).toBe(false);
    expect(once.structuredContent).toMatchObject({ outcome: 'timeout', overrides: { timeout_ms: 300 }, http_status: 504 });
    const rec = await ok('get_invocation', { id: (once.structuredContent as any).invocation_id, logs: false });
    expect(rec).toMatchObject({ overridden: true, limits: { timeout_ms: 300 } });
    const listed = await ok('list_invocations', { snippet: 'sleepy', outcome: 'timeout' });
    expect(listed.invocations).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: rec.invocation_id, outcome: 'timeout', error: expect.objectContaining({ code: 'timeout' }) }),
      ]),
    );
    expect(listed.invocations.every((r: { snippet: string; outcome: string }) => r.snippet === 'sleepy' && r.outcome === 'timeout')).toBe(
      true,
    );

    // set_run_limits: every following invoke of this session (of this snippet) sends them, until cleared.
    const set = await ok('set_run_limits', { snippet: 'sleepy', timeout_ms: 250 });
    expect(set.overrides).toEqual({ sleepy: { timeout_ms: 250 } });
    try {
      const r = await ok('invoke', { snippet: 'sleepy', input: { ms: 3000 } });
      expect(r).toMatchObject({ outcome: 'timeout', overrides: { timeout_ms: 250 } });
    } finally {
      expect((await ok('set_run_limits', { clear: true })).overrides).toEqual({});
    }
    const fine = await ok('invoke', { snippet: 'sleepy', input: { ms: 10 } });
    expect(fine).toMatchObject({ outcome: 'success', overrides: null });
  });

  it('reads the callback inbox after an async run that called back into it', async () => {
    const q = await ok('invoke', { snippet: 'logger', mode: 'async', input: { name: 'Inbox' }, callback_inbox: 'mcp-test' });
    expect(q).toMatchObject({ status: 'queued', callback_url: `${core.url}/_emu/inbox/mcp-test` });
    const inbox = await ok('read_inbox', { name: 'mcp-test', invocation_id: q.invocation_id, wait_ms: 30_000 });
    expect(inbox.deliveries).toHaveLength(1);
    expect(inbox.deliveries[0]).toMatchObject({
      signature: { verified: true },
      answered: 200,
      record: { id: q.invocation_id, outcome: 'success', output: { hello: 'Inbox' } },
    });
    expect(inbox.deliveries[0].webhook_id).toMatch(/\S/);
    const list = await ok('read_inbox');
    expect(list.inboxes).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'mcp-test' })]));
    const g = await ok('get_invocation', { id: q.invocation_id, wait_ms: 30_000, logs: false });
    expect(g.callback).toMatchObject({ status: 'delivered' });
  });

  it('reads the egress log, filtered by invocation and to problems', async () => {
    const run = await ok('invoke', { snippet: 'caller', input: { base: upstreamUrl } });
    expect(run).toMatchObject({ outcome: 'success', output: [200, 404] });
    const all = await ok('read_egress_log', { invocation_id: run.invocation_id });
    expect(all.entries).toHaveLength(2);
    expect(all.counts).toMatchObject({ calls: 2, failed: 1 });
    expect(all.entries.map((e: { path: string; status: number }) => [e.path, e.status]).sort()).toEqual([
      ['/missing', 404],
      ['/ok', 200],
    ]);
    const problems = await ok('read_egress_log', { invocation_id: run.invocation_id, only_problems: true });
    expect(problems.entries).toEqual([expect.objectContaining({ path: '/missing', status: 404, host: '127.0.0.1' })]);
    const g = await ok('get_invocation', { id: run.invocation_id, logs: false });
    expect(g.egress).toMatchObject({ calls: 2, failed: 1 });
  });

  it('exports a run report to a file and returns its path', async () => {
    const run = await ok('invoke', { snippet: 'logger', input: { name: 'Report' } });
    const r = await call('export_run_report', { invocation_ids: [run.invocation_id], path: 'reports/run.html' });
    expect(r.isError ?? false, text(r)).toBe(false);
    const out = r.structuredContent as { path: string; bytes: number };
    expect(out.path).toBe(join(work, 'reports', 'run.html'));
    const html = await readFile(out.path, 'utf8');
    expect(html.slice(0, 200).toLowerCase()).toContain('<!doctype html');
    expect(html).toContain(run.invocation_id);
    expect(out.bytes).toBe(Buffer.byteLength(html));
    expect(r.content.some((c) => c.type === 'resource_link' && c.uri === `file://${out.path}`)).toBe(true);
  });
});

describe('svc-emu mcp on stdio', () => {
  it('writes JSON-RPC and nothing else on stdout; its messages go to stderr', async () => {
    const child = spawn(process.execPath, [BIN, 'mcp', '--data-dir', dir], { cwd: work, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const send = (m: unknown) => child.stdin.write(JSON.stringify(m) + '\n');
    const lines = () => out.split('\n').filter(Boolean);
    const waitLines = async (n: number) => {
      const deadline = Date.now() + 30_000;
      while (lines().length < n) {
        if (Date.now() > deadline) throw new Error(`waited for ${n} lines on stdout, got: ${out}\nstderr: ${err}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
    });
    await waitLines(1);
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'invoke', arguments: { snippet: 'logger', input: { name: 'Raw' } } },
    });
    await waitLines(2);
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    child.stdin.end(); // the client went away: the server ends
    expect(await exited).toBe(0);
    for (const l of lines()) expect(JSON.parse(l)).toMatchObject({ jsonrpc: '2.0' });
    const [init, result] = lines().map((l) => JSON.parse(l));
    expect(init.result.serverInfo).toMatchObject({ name: 'svc-emu' });
    expect(init.result.instructions).toMatch(/deploy/);
    expect(result.result.structuredContent).toMatchObject({ outcome: 'success', output: { hello: 'Raw' } });
    // The snippet's own stdout never reaches the MCP server's stdout (it is in the logs); its notice is on stderr.
    expect(out).not.toContain('mcp-log-line');
    expect(err).toContain(`svc-emu mcp: serving ${MCP_TOOL_NAMES.length} tools over stdio`);
  });

  it('refuses bad arguments before serving (exit 2)', async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; out: string; err: string }>((res) => {
        const c = spawn(process.execPath, [BIN, 'mcp', ...args], { cwd: work });
        let out = '';
        let err = '';
        c.stdout.on('data', (d: Buffer) => (out += d.toString()));
        c.stderr.on('data', (d: Buffer) => (err += d.toString()));
        c.on('exit', (code) => res({ code, out, err }));
      });
    const noKey = await run(['--url', core.url]);
    expect(noKey.code).toBe(2);
    expect(noKey.err).toMatch(/--url needs --key/);
    expect(noKey.out).toBe('');
    const extra = await run(['now']);
    expect(extra.code).toBe(2);
    expect(extra.err).toMatch(/mcp takes no argument/);
  });

  it('reaches a core by --url with its admin token as --key', async () => {
    const c = await connectMcp(['--url', core.url, '--key', core.admin]);
    try {
      const r = (await c.client.callTool({ name: 'list_snippets', arguments: {} })) as CallToolResult;
      expect(r.isError ?? false, text(r)).toBe(false);
      expect((r.structuredContent as any).url).toBe(core.url);
      const wrong = await connectMcp(['--url', core.url, '--key', 'not-the-token']);
      try {
        const w = (await wrong.client.callTool({ name: 'list_snippets', arguments: {} })) as CallToolResult;
        expect(w.isError).toBe(true);
        expect(text(w)).toMatch(/refused the admin token/);
      } finally {
        await wrong.client.close();
      }
    } finally {
      await c.client.close();
    }
  });
});

describe('docs/mcp.md', () => {
  it('describes every tool MCP_TOOLS holds, and no other', async () => {
    const doc = await readFile(join(PROJECT_ROOT, 'docs', 'mcp.md'), 'utf8');
    const rows = [...doc.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    expect(rows).toEqual([...MCP_TOOL_NAMES]);
  });
});
