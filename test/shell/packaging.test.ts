// electron-builder.yml: electron-builder itself validates it against its schema and assembles the
// unpacked Linux app from a stand-in Electron (the real one is downloaded from GitHub, unreachable here).
// Then the installed app's main bundle runs under plain Node with `electron` stubbed, as an installed
// app: its data in the app-data folder, its workspace in Documents, the executor found in app-root.
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coreReady, Proc, ROOT, runNode } from './helpers';

const asar = createRequire(import.meta.url)('@electron/asar') as {
  listPackage(p: string): string[];
  extractAll(archive: string, dest: string): void;
};
const builderCli = join(ROOT, 'node_modules', 'electron-builder', 'cli.js');

describe.skipIf(!coreReady || !existsSync(builderCli))('packaging (electron-builder.yml)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'svc-emu-pack-'));
  const unpacked = join(tmp, 'dist', 'linux-unpacked');
  const resources = join(unpacked, 'resources');
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  const build = (extra: string[] = []) =>
    runNode(
      [
        builderCli,
        '--linux',
        'dir',
        '--config',
        'electron-builder.yml',
        `-c.electronDist=${join(tmp, 'electron')}`,
        '-c.electronVersion=45.4.1',
        `-c.directories.output=${join(tmp, 'dist')}`,
        ...extra,
      ],
      {
        env: { ...process.env, CI: 'true', ELECTRON_BUILDER_CACHE: join(tmp, 'cache') },
        timeoutMs: 120_000,
      },
    );

  beforeAll(async () => {
    const setup = await runNode(['scripts/setup.mjs', '--quiet']);
    if (setup.code !== 0) throw new Error(`setup failed (${setup.code}):\n${setup.stderr}`);
    // The stand-in Electron: electron-builder copies the distribution and renames its `electron` binary.
    mkdirSync(join(tmp, 'electron'));
    copyFileSync('/bin/true', join(tmp, 'electron', 'electron'));
    chmodSync(join(tmp, 'electron', 'electron'), 0o755);
    writeFileSync(join(tmp, 'electron', 'version'), '45.4.1');
    const built = await build();
    if (built.code !== 0) throw new Error(`electron-builder failed (${built.code}):\n${built.stdout}\n${built.stderr}`);
  }, 300_000);

  it('refuses a configuration its schema does not allow (so the real file was validated)', async () => {
    const bad = await build(['-c.linux.notAnOption=1', `-c.directories.output=${join(tmp, 'bad')}`]);
    expect(bad.code).not.toBe(0);
    expect(bad.stdout + bad.stderr).toMatch(/does not match the API schema[\s\S]*configuration\.linux/);
  });

  it('ships the three bundles, the tray icons and every runtime dependency in app.asar, the pty unpacked', () => {
    expect(existsSync(join(unpacked, 'snippet-emulator'))).toBe(true);
    const files = new Set(asar.listPackage(join(resources, 'app.asar')).map((p) => p.replace(/\\/g, '/')));
    for (const f of [
      '/out/main/index.js',
      '/out/preload/index.js',
      '/out/renderer/index.html',
      '/resources/tray.png',
      '/resources/trayTemplate.png',
      '/package.json',
    ]) {
      expect(files.has(f), f).toBe(true);
    }
    expect([...files].filter((f) => f.endsWith('.map'))).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    for (const dep of Object.keys(pkg.dependencies)) expect(files.has(`/node_modules/${dep}/package.json`), dep).toBe(true);
    for (const dev of ['electron', 'vitest', 'react', 'playwright-core'])
      expect(files.has(`/node_modules/${dev}/package.json`), dev).toBe(false);
    const pty = join(resources, 'app.asar.unpacked', 'node_modules', '@lydell');
    expect(existsSync(pty)).toBe(true);
  });

  it('puts the executor and the set-up beside the app as real files, without caches', () => {
    for (const f of [
      'executor/runtimes/manifest.json',
      'executor/runtimes/bun/runner.ts',
      'executor/runtimes/python/svc_runner.py',
      'executor/agent.ts',
      'scripts/setup.mjs',
      'scripts/setup/run.mjs',
      'scripts/setup/bun.mjs',
    ]) {
      expect(existsSync(join(resources, 'app-root', f)), f).toBe(true);
    }
    expect(existsSync(join(resources, 'app-root', 'executor', 'runtimes', 'python', '__pycache__'))).toBe(false);
  });

  it('the installed app starts: data in the app-data folder, a workspace in Documents, the key in the keychain, the GUI served', async () => {
    const app = join(tmp, 'app');
    asar.extractAll(join(resources, 'app.asar'), app);
    const home = join(tmp, 'home');
    mkdirSync(home);
    const proc = new Proc(['--require', join(ROOT, 'test/stubs/electron-node.cjs'), join(app, 'out/main/index.js')], {
      cwd: '/',
      env: { ...process.env, SVC_EMU_STUB_RESOURCES: resources, SVC_EMU_STUB_HOME: home, SVC_EMU_RUNTIMES_DIR: '' },
    });
    try {
      const event = async (name: string) =>
        JSON.parse((await proc.waitFor(new RegExp(`\\[electron-stub\\] (\\{"event":"${name}".*)`), 60_000))[1]!);
      const { url } = await event('loadURL');
      const res = await fetch(url);
      expect(await res.text()).toContain('<div id="root">');
      const data = join(home, '.config', 'Snippet Emulator', 'data');
      expect(existsSync(join(data, 'emulator.json'))).toBe(true);
      expect(existsSync(join(data, 'secret.key.safe'))).toBe(true);
      expect(existsSync(join(home, 'Documents', 'Snippet Emulator', 'snippets'))).toBe(true);
      const { admin_token } = JSON.parse(readFileSync(join(data, 'emulator.json'), 'utf8')) as { admin_token: string };
      const info = (await (await fetch(`${url}_emu/info`, { headers: { authorization: `Bearer ${admin_token}` } })).json()) as {
        workspace: string | null;
      };
      expect(info.workspace).toBe(join(home, 'Documents', 'Snippet Emulator'));
      const exit = await proc.stop('SIGTERM');
      expect(exit).toEqual({ code: 0, signal: null });
    } finally {
      await proc.stop('SIGKILL');
    }
  }, 90_000);
});
