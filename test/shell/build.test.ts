// What setup builds: the Electron bundles and the CLI bundle exist, have the right module formats, and
// the main bundle runs under plain Node with `electron` stubbed (catches bundling regressions, e.g. an
// ESM-only dependency left external in the CJS bundle, without the Electron binary).
import { mkdtempSync, readFileSync, readdirSync, rmSync, existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coreReady, Proc, ROOT, runNode } from './helpers';

const OUTPUTS = ['out/main/index.js', 'out/preload/index.js', 'out/renderer/index.html', 'out/cli/svc-emu.mjs'];

describe.skipIf(!coreReady)('build outputs', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'svc-emu-build-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  beforeAll(async () => {
    const setup = await runNode(['scripts/setup.mjs', '--quiet']);
    if (setup.code !== 0) throw new Error(`setup failed (${setup.code}):\n${setup.stderr}`);
  }, 300_000);

  it('exist after setup', () => {
    for (const file of OUTPUTS) expect(existsSync(join(ROOT, file)), file).toBe(true);
  });

  it('have the module formats Electron and Node need', () => {
    const preload = readFileSync(join(ROOT, 'out/preload/index.js'), 'utf8');
    expect(preload).toMatch(/require\(["']electron["']\)/); // CJS: a sandboxed preload cannot be ESM
    expect(preload).not.toMatch(/^\s*(import|export)\s/m);
    expect(preload).toContain('svcEmu');
    const main = readFileSync(join(ROOT, 'out/main/index.js'), 'utf8');
    // Top-level ESM statements (indented text such as the Lima template's shell script is not code).
    expect(main).not.toMatch(/^(import|export)\s/m);
    for (const esmOnly of ['lowdb', 'chokidar']) expect(main, esmOnly).not.toMatch(new RegExp(`require\\(["']${esmOnly}["']\\)`));
    const html = readFileSync(join(ROOT, 'out/renderer/index.html'), 'utf8');
    expect(html).toMatch(/src="\.\/assets\/[^"]+\.js"/); // base './': works from file:// and from the core
  });

  it('loads xterm.js and CodeMirror only with the pages that need them, not at start', () => {
    const html = readFileSync(join(ROOT, 'out/renderer/index.html'), 'utf8');
    const entry = /src="\.\/assets\/([^"]+\.js)"/.exec(html)![1]!;
    const assets = join(ROOT, 'out/renderer/assets');
    const atStart = readFileSync(join(assets, entry), 'utf8');
    const lazy = readdirSync(assets)
      .filter((f) => f.endsWith('.js') && f !== entry)
      .map((f) => readFileSync(join(assets, f), 'utf8'));
    for (const marker of ['xterm-helper-textarea', 'cm-activeLineGutter']) {
      expect(atStart.includes(marker), `${marker} in the first bundle`).toBe(false);
      expect(
        lazy.some((code) => code.includes(marker)),
        `${marker} in a chunk loaded on demand`,
      ).toBe(true);
    }
  });

  it('the main bundle runs under plain Node with electron stubbed: core up, secure window, clean quit', async () => {
    const workspace = join(tmp, 'ws');
    mkdirSync(workspace);
    const proc = new Proc(
      [
        '--require',
        join(ROOT, 'test/stubs/electron-node.cjs'),
        join(ROOT, 'out/main/index.js'),
        '--data-dir',
        join(tmp, 'data'),
        '--workspace',
        workspace,
      ],
      { cwd: tmp },
    );
    try {
      const event = async (name: string) =>
        JSON.parse((await proc.waitFor(new RegExp(`\\[electron-stub\\] (\\{"event":"${name}".*)`)))[1]!);
      const menu = await event('menu');
      expect(menu.items).toEqual([
        'Open Workspace Folder',
        'Switch Workspace…',
        'Reveal Data Folder',
        'Copy API Key',
        'Open in Browser',
        null,
        'quit',
      ]);
      const tray = await event('tray');
      expect(tray.icon).toBe(join(ROOT, 'resources', process.platform === 'darwin' ? 'trayTemplate.png' : 'tray.png'));
      expect(existsSync(tray.icon)).toBe(true);
      expect((await event('tray-menu')).items).toEqual([
        'Show Snippet Emulator',
        'separator',
        'Open Workspace Folder',
        'Switch Workspace…',
        'Reveal Data Folder',
        'Copy API Key',
        'Open in Browser',
        'separator',
        'quit',
      ]);
      // The secrets key went to the (stand-in) OS keychain, not to a key file.
      expect(existsSync(join(tmp, 'data', 'secret.key.safe'))).toBe(true);
      expect(existsSync(join(tmp, 'data', 'secret.key'))).toBe(false);
      const window = await event('window');
      expect(window.webPreferences).toMatchObject({ contextIsolation: true, sandbox: true, nodeIntegration: false });
      expect(window.webPreferences.preload).toBe(join(ROOT, 'out/preload/index.js'));
      expect(existsSync(window.webPreferences.preload)).toBe(true);

      // Signed in before the first load: the session cookie on the window's session, HttpOnly and Strict.
      const cookie = await event('cookie-set');
      expect(cookie).toMatchObject({ name: 'svc_emu_session', httpOnly: true, sameSite: 'strict' });
      const { url } = await event('loadURL');
      expect(url).toBe(cookie.url);
      expect(url).toMatch(/^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d+\/$/);
      const { token } = await event('admin-token');
      expect(token).toEqual(expect.any(String));
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('<div id="root">'); // the core in the main bundle serves out/renderer

      const exit = await proc.stop('SIGTERM');
      expect(proc.stdout).toContain('"event":"quit-deferred"'); // before-quit held while the core stops
      expect(proc.stdout).toContain('"event":"tray-destroy"');
      expect(exit).toEqual({ code: 0, signal: null });
    } finally {
      await proc.stop('SIGKILL');
    }
  });
});
