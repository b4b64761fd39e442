/**
 * The workspace loader (issue 4): folders become versions through the same path as POST …/versions,
 * live within a second of a save; bursts settle into one version; a broken save keeps the old version
 * serving and reports file and line; deletion is reported.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startEmulator, type RunningEmulator } from '../../server';
import { jsonLogger } from '../../server/logger';
import { PROJECT_ROOT, request, tempDir } from '../helpers/core';

let emu: RunningEmulator;
let ws: string;
const call = (m: string, p: string, b?: unknown) => request(emu.url, m, p, b, { defaultKey: emu.localApiKey! });
const admin = (p: string) => request(emu.url, 'GET', p, undefined, { key: emu.adminToken });
const folder = (name: string) => join(ws, 'snippets', name);

async function put(name: string, files: Record<string, string>) {
  await mkdir(folder(name), { recursive: true });
  for (const [path, content] of Object.entries(files)) {
    await mkdir(join(folder(name), path, '..'), { recursive: true });
    await writeFile(join(folder(name), path), content);
  }
}

/** Polls until `check` passes (a save goes live within a second; we allow a few). */
async function eventually<T>(check: () => Promise<T>, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > end) throw err;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

const statusOf = async (name: string) => ((await admin('/_emu/workspace')).json.folders as any[]).find((f) => f.snippet === name);

beforeAll(async () => {
  ws = await tempDir('svc-emu-ws-');
  await put('preloaded', { 'index.ts': 'export default async () => ({ pre: true });\n' });
  // Plain spares only, as test/helpers/core.ts: a framework spare's import is ~1 s of CPU per core start.
  emu = await startEmulator({
    dataDir: await tempDir(),
    port: 0,
    workspace: ws,
    projectRoot: PROJECT_ROOT,
    spares: 'plain',
    logger: jsonLogger(() => {}),
  });
});
afterAll(async () => {
  await emu?.stop();
});

describe('workspace loader', () => {
  it('loads what is there at start, before the first request', async () => {
    const r = await call('POST', '/v1/invoke/preloaded?env=dev', {});
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ pre: true });
    expect((await statusOf('preloaded')).state).toBe('loaded');
  });

  it('a new folder becomes an invocable snippet deployed to dev', async () => {
    await put('fresh', { 'main.py': 'def handler(input):\n    return {"fresh": 1}\n' });
    const r = await eventually(async () => {
      const res = await call('POST', '/v1/invoke/fresh?env=dev', {});
      expect(res.status).toBe(200);
      return res;
    });
    expect(r.json).toEqual({ fresh: 1 });
    expect((await call('GET', '/v1/snippets/fresh')).json).toMatchObject({ runtime: 'python', deployments: { dev: 1 } });
    expect((await call('GET', '/v1/snippets/fresh/versions/1')).json.source).toBe('workspace');
  });

  it('an edit goes live, and the warm sandbox of the replaced version is retired', async () => {
    await put('edit', { 'index.ts': 'export default async () => ({ n: 1 });\n' });
    await eventually(async () => expect((await call('POST', '/v1/invoke/edit?env=dev', {})).json).toEqual({ n: 1 }));
    await put('edit', { 'index.ts': 'export default async () => ({ n: 2 });\n' });
    await eventually(async () => expect((await call('POST', '/v1/invoke/edit?env=dev', {})).json).toEqual({ n: 2 }));
    expect((await call('GET', '/v1/snippets/edit')).json.latest_version).toBe(2);
  });

  it('an editor’s atomic save (write a temp file, rename over) makes one version', async () => {
    await put('atomic', { 'index.ts': 'export default async () => ({ v: 1 });\n' });
    await eventually(async () => expect((await statusOf('atomic'))?.version).toBe(1));
    await writeFile(join(folder('atomic'), '.index.ts.swp'), 'export default async () => ({ v: 2 });\n');
    await rename(join(folder('atomic'), '.index.ts.swp'), join(folder('atomic'), 'index.ts'));
    await eventually(async () => expect((await call('POST', '/v1/invoke/atomic?env=dev', {})).json).toEqual({ v: 2 }));
    expect((await call('GET', '/v1/snippets/atomic')).json.latest_version).toBe(2);
  });

  it('a burst of 20 writes makes one version, and unchanged content makes none', async () => {
    await put('burst', { 'index.ts': 'export default async () => ({ i: 0 });\n' });
    await eventually(async () => expect((await statusOf('burst'))?.version).toBe(1));
    for (let i = 1; i <= 20; i++) await writeFile(join(folder('burst'), 'index.ts'), `export default async () => ({ i: ${i} });\n`);
    await eventually(async () => expect((await call('POST', '/v1/invoke/burst?env=dev', {})).json).toEqual({ i: 20 }));
    // The folder's own status says the load that served i: 20 is done, and that it made version 2 (no fixed
    // wait). A late event for the burst reloads the same content: its status is then `unchanged`, still version 2
    // (a fresh-clone CI run saw exactly that); the touch below checks that such a reload makes no version.
    await eventually(async () => {
      const st = await statusOf('burst');
      expect(['loaded', 'unchanged']).toContain(st.state);
      expect(st.version).toBe(2);
    });
    expect((await call('GET', '/v1/snippets/burst')).json.latest_version).toBe(2);
    // the same content written again (a save without changes, a touch): no version
    await writeFile(join(folder('burst'), 'index.ts'), 'export default async () => ({ i: 20 });\n');
    await eventually(async () => expect((await statusOf('burst')).state).toBe('unchanged'));
    expect((await call('GET', '/v1/snippets/burst')).json.latest_version).toBe(2);
  });

  it('a broken save keeps the previous version serving and reports file and line; fixing it clears the error', async () => {
    await put('broken', { 'main.py': 'def handler(input):\n    return {"ok": 1}\n' });
    await eventually(async () => expect((await call('POST', '/v1/invoke/broken?env=dev', {})).json).toEqual({ ok: 1 }));
    await writeFile(join(folder('broken'), 'main.py'), 'def handler(input):\n    return {"ok": 2\n\n');
    const st = await eventually(async () => {
      const s = await statusOf('broken');
      expect(s.state).toBe('error');
      return s;
    });
    expect(st.error).toMatchObject({ file: 'main.py' });
    expect(st.error.line).toBeGreaterThanOrEqual(2);
    expect(st.version).toBe(1);
    expect((await call('POST', '/v1/invoke/broken?env=dev', {})).json).toEqual({ ok: 1 });
    await writeFile(join(folder('broken'), 'main.py'), 'def handler(input):\n    return {"ok": 3}\n');
    await eventually(async () => expect((await call('POST', '/v1/invoke/broken?env=dev', {})).json).toEqual({ ok: 3 }));
    // A deploy serves from the in-memory state at once; the folder's status follows once the write is durable.
    await eventually(async () => expect(await statusOf('broken')).toMatchObject({ state: 'loaded', version: 2, error: null }));
  });

  it('multi-file bundles: TS relative imports and Python sibling modules; node_modules, __pycache__ and dotfiles are left out', async () => {
    await put('multi-ts', {
      'index.ts': 'import { twice } from "./lib/math.ts";\nexport default async (input) => ({ r: twice(input.n) });\n',
      'lib/math.ts': 'export const twice = (n: number) => n * 2;\n',
      'node_modules/junk/index.js': 'module.exports = 1;\n',
      '.env': 'SECRET=1\n',
    });
    await put('multi-py', {
      'main.py': 'from helper import add\ndef handler(input):\n    return {"r": add(input["n"], 1)}\n',
      'helper.py': 'def add(a, b):\n    return a + b\n',
      '__pycache__/x.pyc': 'junk',
    });
    await eventually(async () => expect((await call('POST', '/v1/invoke/multi-ts?env=dev', { n: 21 })).json).toEqual({ r: 42 }));
    await eventually(async () => expect((await call('POST', '/v1/invoke/multi-py?env=dev', { n: 41 })).json).toEqual({ r: 42 }));
    const manifest = (await call('GET', '/v1/snippets/multi-ts/versions/1')).json.manifest.map((f: { path: string }) => f.path);
    expect(manifest.sort()).toEqual(['index.ts', 'lib/math.ts']);
    expect((await statusOf('multi-ts')).notes.join(' ')).toContain('node_modules');
  });

  it('snippet.json sets limits, description and deploy targets; a bad one is reported with its line', async () => {
    await put('configured', {
      'index.ts': 'export default async () => ({ ok: true });\n',
      'snippet.json': JSON.stringify({ description: 'from json', timeout_ms: 5000, max_memory_mb: 128, deploy: ['staging'] }),
    });
    await eventually(async () => expect((await call('POST', '/v1/invoke/configured?env=staging', {})).status).toBe(200));
    expect((await call('GET', '/v1/snippets/configured/versions/1')).json).toMatchObject({ timeout_ms: 5000, max_memory_mb: 128 });
    expect((await call('GET', '/v1/snippets/configured')).json).toMatchObject({ description: 'from json', deployments: { staging: 1 } });
    await writeFile(join(folder('configured'), 'snippet.json'), '{\n  "timeout_ms": 5000,\n  "max_memory_mb": ,\n}\n');
    const st = await eventually(async () => {
      const s = await statusOf('configured');
      expect(s.state).toBe('error');
      return s;
    });
    expect(st.error).toMatchObject({ file: 'snippet.json', line: 3 });
  });

  it('a deleted folder is reported, not silently dropped; the snippet keeps serving its versions', async () => {
    await put('doomed', { 'index.ts': 'export default async () => ({ alive: true });\n' });
    await eventually(async () => expect((await statusOf('doomed'))?.state).toBe('loaded'));
    await rm(folder('doomed'), { recursive: true });
    await eventually(async () => expect((await statusOf('doomed')).state).toBe('deleted'));
    expect((await call('POST', '/v1/invoke/doomed?env=dev', {})).json).toEqual({ alive: true });
  });
});
