/**
 * Finding the running emulator from any folder (issue 17): the per-user list of running emulators
 * (server/storage/running-cores.ts) written by `serve` and removed at stop, stale records ignored and
 * cleaned, the resolution order of server/cli/locate.ts (--data-dir > SVC_EMU_URL > ./.svc-emu > the
 * running one whose workspace holds the current folder > the only one running), and several running
 * cores answered with a list. Real cores on temp data dirs; the CLI in-process with cwd = temp folders
 * outside the checkout.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { runCli, startCli, until } from '../helpers/cli';

const dirs: string[] = [];
const savedEnv = { ...process.env };
let runtime: string;
let outside: string;
const cores: TestCore[] = [];

async function newDir(prefix: string): Promise<string> {
  const d = await tempDir(prefix);
  dirs.push(d);
  return d;
}

/** A core watching its own workspace, recorded in the test's list, with one snippet named after it. */
async function coreWith(snippet: string): Promise<{ core: TestCore; ws: string }> {
  const ws = await newDir('svc-emu-find-ws-');
  const core = await startTestCore({ workspace: ws, config: { coresDir: runtime } });
  cores.push(core);
  expect((await core.call('POST', '/v1/snippets', { name: snippet, runtime: 'bun' })).status).toBe(201);
  const v = await core.call('POST', `/v1/snippets/${snippet}/versions`, { code: `export default async () => ({ from: '${snippet}' })\n` });
  expect(v.status).toBe(201);
  return { core, ws };
}

const names = (stdout: string) => (JSON.parse(stdout) as { data: { name: string }[] }).data.map((s) => s.name);

beforeAll(async () => {
  runtime = join(await newDir('svc-emu-find-rt-'), 'cores'); // created by the first core, 0700
  process.env.SVC_EMU_RUNTIME_DIR = runtime;
  for (const k of ['SVC_EMU_DATA_DIR', 'SVC_EMU_URL', 'SVC_EMU_ADMIN_TOKEN']) delete process.env[k];
  outside = await newDir('svc-emu-elsewhere-');
});

afterAll(async () => {
  for (const c of cores) await c.stop().catch(() => {});
  process.env = savedEnv;
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('one emulator running', () => {
  let a: { core: TestCore; ws: string };
  beforeAll(async () => {
    a = await coreWith('alpha');
  }, 60_000);

  it('its record: 0600 in a 0700 folder, pointing at the data dir, no admin token', async () => {
    const files = await readdir(runtime);
    expect(files).toEqual([`${process.pid}-${a.core.emu.port}.json`]);
    const file = join(runtime, files[0]!);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(runtime)).mode & 0o777).toBe(0o700);
    const text = await readFile(file, 'utf8');
    expect(JSON.parse(text)).toMatchObject({ pid: process.pid, url: a.core.url, data_dir: a.core.dataDir, workspace: a.ws });
    expect(text).not.toContain(a.core.admin);
  });

  it('is found from a folder outside the checkout: list, invoke, invocations, operator commands', async () => {
    const list = await runCli(['list', '--json'], outside);
    expect(list.code, list.stdout).toBe(0);
    expect(names(list.stdout)).toEqual(['alpha']);
    const inv = await runCli(['invoke', 'alpha'], outside);
    expect(inv.code, inv.stderr).toBe(0);
    expect(JSON.parse(inv.stdout)).toEqual({ from: 'alpha' });
    expect((await runCli(['invocations', '--json'], outside)).stdout).toContain('"snippet":"alpha"');
    const tenants = await runCli(['tenant', 'list', '--json'], outside);
    expect(tenants.code).toBe(0);
    expect(JSON.parse(tenants.stdout).data.map((t: { name: string }) => t.name)).toContain('local');
    expect(a.core.logs.join('')).toMatch(/"route":"\/_emu\/tenants"/); // through the core, not its files
  });

  it('a stale record (its process is gone) is ignored and deleted', async () => {
    const stale = join(runtime, '999999-1.json');
    await writeFile(
      stale,
      JSON.stringify({
        pid: 999999,
        pid_start: null,
        url: 'http://127.0.0.1:1',
        data_dir: join(outside, 'gone'),
        workspace: outside,
        started_at: new Date().toISOString(),
        version: '0',
      }),
    );
    const list = await runCli(['list', '--json'], outside); // the stale one holds cwd: it would win if believed
    expect(list.code, list.stdout).toBe(0);
    expect(names(list.stdout)).toEqual(['alpha']);
    expect(existsSync(stale)).toBe(false);
  });

  it('./.svc-emu in the current folder comes first: here it runs nothing, and says so', async () => {
    const project = await newDir('svc-emu-project-');
    await mkdir(join(project, '.svc-emu'));
    const r = await runCli(['list', '--json'], project);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ code: 'no_emulator', data_dir: join(project, '.svc-emu') });
  });

  it('SVC_EMU_URL with SVC_EMU_ADMIN_TOKEN; without the token, or a bad URL: one JSON error', async () => {
    try {
      process.env.SVC_EMU_URL = a.core.url;
      const noToken = await runCli(['list', '--json'], outside);
      expect(noToken.code).toBe(1);
      expect(JSON.parse(noToken.stdout)).toMatchObject({ code: 'no_admin_token', detail: expect.any(String) });
      process.env.SVC_EMU_ADMIN_TOKEN = a.core.admin;
      const list = await runCli(['list', '--json'], outside);
      expect(list.code, list.stdout).toBe(0);
      expect(names(list.stdout)).toEqual(['alpha']);
      const tenants = await runCli(['tenant', 'list', '--json'], outside);
      expect(tenants.code, tenants.stdout).toBe(0);
      // --data-dir still wins over SVC_EMU_URL
      const dd = await runCli(['list', '--json', '--data-dir', join(outside, 'nothing')], outside);
      expect(JSON.parse(dd.stdout)).toMatchObject({ code: 'no_emulator' });
      process.env.SVC_EMU_URL = 'not a url';
      const bad = await runCli(['list', '--json'], outside);
      expect(bad.code).toBe(1);
      expect(JSON.parse(bad.stdout)).toMatchObject({ code: 'bad_url' });
    } finally {
      delete process.env.SVC_EMU_URL;
      delete process.env.SVC_EMU_ADMIN_TOKEN;
    }
  });

  it('two running: from a folder neither serves, a list to choose from; from inside a workspace, that one; stopped, its record goes', async () => {
    // One test (this file's tests run in any order): the second core lives only here.
    const b = await coreWith('beta');
    try {
      const human = await runCli(['list'], outside);
      expect(human.code).toBe(1);
      expect(human.stderr).toContain(`2 emulators are running and none serves ${outside}; choose one with --data-dir DIR`);
      expect(human.stderr).toContain(`--data-dir ${a.core.dataDir}   ${a.core.url}   workspace ${a.ws}`);
      expect(human.stderr).toContain(`--data-dir ${b.core.dataDir}   ${b.core.url}   workspace ${b.ws}`);
      const json = await runCli(['list', '--json'], outside);
      expect(json.stderr).toBe('');
      expect(JSON.parse(json.stdout)).toMatchObject({
        code: 'several_emulators',
        running: expect.arrayContaining([expect.objectContaining({ url: a.core.url }), expect.objectContaining({ url: b.core.url })]),
      });

      const below = join(b.ws, 'snippets', 'deep');
      await mkdir(below, { recursive: true });
      expect(names((await runCli(['list', '--json'], below)).stdout)).toEqual(['beta']);
      expect(names((await runCli(['list', '--json'], a.ws)).stdout)).toEqual(['alpha']);
    } finally {
      await b.core.stop();
    }
    expect(await readdir(runtime)).toEqual([`${process.pid}-${a.core.emu.port}.json`]);
    expect(names((await runCli(['list', '--json'], outside)).stdout)).toEqual(['alpha']);
  }, 60_000);
});

describe('serve records itself', () => {
  it('svc-emu serve writes its record once it listens and removes it when it stops', async () => {
    const data = await newDir('svc-emu-serve-dd-');
    const ws = await newDir('svc-emu-serve-ws-');
    const before = new Set(await readdir(runtime).catch(() => []));
    const serve = startCli(['serve', '--port', '0', '--spares', 'none', '--data-dir', data, '--workspace', ws], outside);
    await until(() => serve.out.stdout.includes('Press Ctrl+C') || serve.out.stderr.includes('svc-emu:'), 'serve to start', 30_000);
    expect(serve.out.stdout, serve.out.stderr).toContain('Press Ctrl+C');
    const added = (await readdir(runtime)).filter((f) => !before.has(f));
    expect(added).toHaveLength(1);
    const record = JSON.parse(await readFile(join(runtime, added[0]!), 'utf8'));
    expect(record).toMatchObject({ data_dir: data, workspace: ws });
    // From its workspace the CLI finds it (another core may be running in this file's list too).
    const info = await runCli(['tenant', 'list', '--json'], ws);
    expect(info.code, info.stdout).toBe(0);
    const stopped = await serve.stop();
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(existsSync(join(runtime, added[0]!))).toBe(false);
  }, 60_000);
});
