/**
 * What the idle headless core loads and how it is started (docs/architecture.md, "What the idle core holds").
 * The built CLI (`bin/svc-emu.mjs serve`, as users, `npm start` headless and the bench start it) runs under a
 * module loader hook that lists every module node resolves; once /readyz answers, the packages only some
 * commands use (`svc-emu mcp`, the client commands' undici) are not among them. And the node flags of a core:
 * bin/svc-emu.mjs's first line and the scripts that start one (scripts/core-node-flags.mjs) agree, and a core
 * started directly runs with them. No RSS threshold here: the footprint is measured by the bench
 * (bench/speed-footprint.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { CORE_NODE_FLAGS } from '../../scripts/core-node-flags.mjs';
// @ts-expect-error -- plain ESM script without types
import { headlessArgv } from '../../scripts/start.mjs';
import { PROJECT_ROOT, request } from '../helpers/core';

const BIN = join(PROJECT_ROOT, 'bin', 'svc-emu.mjs');
const BUILT = join(PROJECT_ROOT, 'out', 'cli', 'svc-emu.mjs');

/** Loaded on demand only: by `svc-emu mcp` (server/cli/mcp.ts) and the client commands (server/cli/patient-fetch.ts). */
const NOT_AT_IDLE = ['undici', '@modelcontextprotocol/sdk', 'ajv', 'ajv-formats', 'zod-to-json-schema', '@asteasolutions/zod-to-openapi'];

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function newDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'svc-emu-idle-'));
  dirs.push(d);
  return d;
}

/** Spawns `serve` on a fresh data dir, waits for its first line and a 200 from /readyz (20 s deadline). */
async function serve(command: string, args: string[], dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(command, [...args, 'serve', '--port', '0', '--json', '--spares', 'none', '--data-dir', dataDir], {
    cwd: PROJECT_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<never>((_, rej) => child.once('exit', (code) => rej(new Error(`serve exited (${code}):\n${err}`))));
  const line = await Promise.race([new Promise<string>((res) => createInterface({ input: child.stdout }).once('line', res)), exited]);
  const { url } = JSON.parse(line) as { url: string };
  const deadline = Date.now() + 20_000;
  while ((await request(url, 'GET', '/readyz').catch(() => ({ status: 0 }))).status !== 200) {
    if (Date.now() > deadline) throw new Error(`/readyz not 200 within 20 s:\n${err}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { child, url };
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((res) => {
    if (child.exitCode !== null || child.signalCode !== null) return res();
    child.once('exit', () => res());
    child.kill('SIGTERM');
  });
}

/** The package of a node_modules URL (`@scope/name` or `name`), or null for anything else. */
function packageOf(url: string): string | null {
  const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  return m ? m[1]! : null;
}

describe('the idle headless core', () => {
  it('has not loaded the packages only mcp and the client commands use', async (ctx) => {
    if (!existsSync(BUILT)) ctx.skip('the CLI is not built (out/cli/svc-emu.mjs): run node scripts/setup.mjs');
    const dir = await newDir();
    const list = join(dir, 'resolved.txt');
    await writeFile(list, '');
    // A resolve hook (node:module register) appending every module's URL to `list`: ESM imports and dynamic
    // import() alike, which is how the CLI bundle loads its runtime dependencies (vite.cli.config.ts).
    await writeFile(
      join(dir, 'hooks.mjs'),
      `import { appendFileSync } from 'node:fs';
let out;
export function initialize(data) { out = data.out; }
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(out, r.url + '\\n');
  return r;
}
`,
    );
    await writeFile(
      join(dir, 'register.mjs'),
      `import { register } from 'node:module';
register(${JSON.stringify(pathToFileURL(join(dir, 'hooks.mjs')).href)}, { data: { out: ${JSON.stringify(list)} } });
`,
    );
    const core = await serve(
      process.execPath,
      [...CORE_NODE_FLAGS, '--import', pathToFileURL(join(dir, 'register.mjs')).href, BIN],
      join(dir, 'data'),
    );
    const loaded = new Set((await readFile(list, 'utf8')).split('\n').flatMap((u) => packageOf(u) ?? []));
    await stop(core.child);
    // The hook saw the core's own dependencies (so an empty list cannot pass for a lean core)…
    expect([...loaded]).toEqual(expect.arrayContaining(['koa', '@koa/router', 'zod', 'lowdb']));
    // …and none of the ones idle does not use.
    expect(NOT_AT_IDLE.filter((p) => loaded.has(p))).toEqual([]);
  });

  it('runs with the core node flags however it is started', async (ctx) => {
    const first = readFileSync(BIN, 'utf8').split('\n')[0];
    expect(first).toBe(`#!/usr/bin/env -S node ${CORE_NODE_FLAGS.join(' ')}`);
    expect(headlessArgv(['--port', '0']).slice(0, CORE_NODE_FLAGS.length)).toEqual(CORE_NODE_FLAGS);
    if (!existsSync(BUILT)) ctx.skip('the CLI is not built (out/cli/svc-emu.mjs): run node scripts/setup.mjs');
    if (!existsSync('/proc/self/cmdline')) ctx.skip('no /proc here to read a process command line from');
    // Executed directly, as `svc-emu serve` from npm's bin link is: the first line's flags reach node.
    const core = await serve(BIN, [], join(await newDir(), 'data'));
    const argv = readFileSync(`/proc/${core.child.pid}/cmdline`, 'utf8').split('\0');
    await stop(core.child);
    expect(argv).toEqual(expect.arrayContaining(CORE_NODE_FLAGS));
  });
});
