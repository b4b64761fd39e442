// The desktop shell's logic (main/app.ts) with Electron replaced by the stub module and the core by a fake.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import * as electron from 'electron';
import { runApp, type ElectronLike, type EmulatorHandle, type ShellDeps } from '../../main/app';
import { IPC } from '../../main/ipc';

const stub = electron as unknown as typeof import('../stubs/electron');

function fakeCore(overrides: Partial<EmulatorHandle> = {}) {
  const handle: EmulatorHandle = {
    url: 'http://127.0.0.1:41234',
    adminToken: 'admin-secret',
    localApiKey: 'svc_local',
    stop: vi.fn(async () => undefined),
    ...overrides,
  };
  return { handle, start: vi.fn(async () => handle) };
}

function deps(core: ReturnType<typeof fakeCore>, extra: Partial<ShellDeps> = {}): ShellDeps {
  return {
    electron: stub as unknown as ElectronLike,
    startEmulator: core.start,
    config: { dataDir: '/tmp/data', workspace: '/tmp/ws', port: 0 },
    preloadPath: '/app/out/preload/index.js',
    rendererDir: '/app/out/renderer',
    platform: 'linux',
    log: { info: vi.fn(), error: vi.fn() },
    ...extra,
  };
}

const trusted = { senderFrame: { url: 'http://127.0.0.1:41234/' } };
const tick = () => new Promise((r) => setTimeout(r, 0));

beforeEach(() => stub.resetElectronStub());
afterEach(() => vi.restoreAllMocks());

describe('main/app runApp', () => {
  it('hands the serve flags to the core as given', async () => {
    const core = fakeCore();
    await runApp(
      deps(core, {
        config: {
          dataDir: '/d',
          workspace: '/w',
          port: 0,
          egressProfile: 'production',
          egressAllow: ['127.0.0.1:1'],
          asyncWorkers: 2,
          callbackRetryScale: 0.01,
        },
      }),
    );
    expect(core.start).toHaveBeenCalledWith(
      expect.objectContaining({ egressProfile: 'production', egressAllow: ['127.0.0.1:1'], asyncWorkers: 2, callbackRetryScale: 0.01 }),
    );
  });

  it('sets a menu that opens the workspace, reveals the data dir, copies the API key and opens the GUI in a browser', async () => {
    const core = fakeCore();
    await runApp(deps(core));
    const menu = stub.Menu.current as {
      template: { label?: string; submenu?: { label?: string; role?: string; enabled?: boolean; click?: () => void }[] }[];
    };
    const items = menu.template[0]!.submenu!;
    const item = (label: string) => items.find((i) => i.label === label)!;
    item('Open Workspace Folder').click!();
    item('Reveal Data Folder').click!();
    expect(stub.shell.opened).toEqual(['/tmp/ws', '/tmp/data']);
    expect(item('Copy API Key').enabled).toBe(true);
    item('Copy API Key').click!();
    expect(stub.clipboard.text).toBe('svc_local');
    item('Open in Browser').click!();
    expect(stub.shell.external).toEqual(['http://127.0.0.1:41234/?token=admin-secret']);
    expect(items.some((i) => i.role === 'quit')).toBe(true);
  });

  it('disables Copy API Key when the key cannot be shown', async () => {
    await runApp(deps(fakeCore({ localApiKey: null })));
    const items = (stub.Menu.current as { template: { submenu?: { label?: string; enabled?: boolean }[] }[] }).template[0]!.submenu!;
    expect(items.find((i) => i.label === 'Copy API Key')!.enabled).toBe(false);
  });

  it('starts the core with the configured dirs on port 0 and opens one secure window on its URL', async () => {
    const core = fakeCore();
    const running = await runApp(deps(core));

    expect(core.start).toHaveBeenCalledWith({ dataDir: '/tmp/data', workspace: '/tmp/ws', port: 0, rendererDir: '/app/out/renderer' });
    expect(stub.BrowserWindow.instances).toHaveLength(1);
    const win = stub.BrowserWindow.instances[0]!;
    expect(win.options.webPreferences).toEqual({
      preload: '/app/out/preload/index.js',
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
    });
    expect(win.options.show).toBe(false);
    expect(win.loadedURL).toBe('http://127.0.0.1:41234/');
    expect(running?.emulator).toBe(core.handle);
    win.emit('ready-to-show');
    expect(win.visible).toBe(true);
  });

  it('opens the window signed in: the core’s session cookie on the window’s session before the GUI loads, no token in the URL', async () => {
    const core = fakeCore({ guiCookie: () => ({ name: 'svc_emu_session', value: 'cookie-value' }) });
    const jar = stub.session.defaultSession;
    const loadedWhenSet: (string | null)[] = [];
    const set = jar.cookies.set;
    jar.cookies.set = async (details) => {
      loadedWhenSet.push(stub.BrowserWindow.instances[0]?.loadedURL ?? null);
      await set(details);
    };
    await runApp(deps(core));
    const win = stub.BrowserWindow.instances[0]!;
    await vi.waitFor(() => expect(win.loadedURL).toBe('http://127.0.0.1:41234/'));
    expect(jar.cookieJar).toEqual([
      { url: 'http://127.0.0.1:41234/', name: 'svc_emu_session', value: 'cookie-value', httpOnly: true, sameSite: 'strict', secure: false },
    ]);
    expect(loadedWhenSet).toEqual([null]); // set before the first request
    expect(win.loadedURL).not.toContain('token');
  });

  it('stops the core before quitting, once, and then lets the quit through', async () => {
    const core = fakeCore();
    await runApp(deps(core));
    const quitted = vi.fn();
    stub.app.on('quit', quitted);

    stub.app.quit();
    expect(quitted).not.toHaveBeenCalled(); // held until the core stopped
    stub.app.quit(); // a second quit while stopping does not stop twice
    await tick();
    await tick();

    expect(core.handle.stop).toHaveBeenCalledTimes(1);
    expect(quitted).toHaveBeenCalledTimes(1);
    expect(stub.ipcMain.handlers.size).toBe(0); // IPC handlers removed
  });

  it('quits even when stopping the core hangs', async () => {
    const core = fakeCore({ stop: vi.fn(() => new Promise<void>(() => undefined)) });
    await runApp(deps(core, { stopTimeoutMs: 20 }));
    const quitted = vi.fn();
    stub.app.on('quit', quitted);
    stub.app.quit();
    // The quit goes through once stopTimeoutMs passed without the core stopping: wait for it, not for a fixed time.
    await vi.waitFor(() => expect(quitted).toHaveBeenCalledTimes(1));
  });

  it('stops a core that finishes starting after the user quit, and opens no window', async () => {
    const core = fakeCore();
    let finishStart: (h: EmulatorHandle) => void = () => undefined;
    core.start.mockImplementationOnce(() => new Promise<EmulatorHandle>((r) => (finishStart = r)));
    const running = runApp(deps(core));
    await vi.waitFor(() => expect(core.start).toHaveBeenCalled());
    stub.app.quit();
    finishStart(core.handle);
    expect(await running).toBeNull();
    await vi.waitFor(() => expect(core.handle.stop).toHaveBeenCalledTimes(1));
    expect(stub.BrowserWindow.instances).toHaveLength(0);
  });

  it('quits on SIGINT/SIGTERM through the same path', async () => {
    const core = fakeCore();
    const signals = new (await import('node:events')).EventEmitter();
    await runApp(deps(core, { signals: signals as unknown as ShellDeps['signals'] }));
    signals.emit('SIGTERM');
    await tick();
    await tick();
    expect(core.handle.stop).toHaveBeenCalledTimes(1);
  });

  it('does nothing but quit when another instance holds the lock', async () => {
    vi.spyOn(stub.app, 'requestSingleInstanceLock').mockReturnValue(false);
    const core = fakeCore();
    expect(await runApp(deps(core))).toBeNull();
    expect(core.start).not.toHaveBeenCalled();
    expect(stub.BrowserWindow.instances).toHaveLength(0);
    expect(stub.app.quitCalls).toBe(1);
  });

  it('shows an error and exits 1 when the core fails to start', async () => {
    const errorBox = vi.spyOn(stub.dialog, 'showErrorBox');
    const core = fakeCore();
    core.start.mockRejectedValueOnce(new Error('data dir is locked by pid 42'));
    expect(await runApp(deps(core))).toBeNull();
    expect(errorBox).toHaveBeenCalledWith('Snippet Emulator could not start', 'data dir is locked by pid 42');
    expect(stub.app.exitCode).toBe(1);
    expect(stub.BrowserWindow.instances).toHaveLength(0);
  });

  it('keeps the window on the core: other origins cannot be navigated to or opened in it', async () => {
    const openExternal = vi.spyOn(stub.shell, 'openExternal');
    await runApp(deps(fakeCore()));
    const win = stub.BrowserWindow.instances[0]!;

    const away = { url: 'https://evil.example/', preventDefault: vi.fn() };
    win.webContents.emit('will-navigate', away);
    expect(away.preventDefault).toHaveBeenCalled();
    const inside = { url: 'http://127.0.0.1:41234/snippets', preventDefault: vi.fn() };
    win.webContents.emit('will-navigate', inside);
    expect(inside.preventDefault).not.toHaveBeenCalled();

    expect(win.webContents.windowOpenHandler?.({ url: 'https://docs.example/' })).toEqual({ action: 'deny' });
    expect(openExternal).toHaveBeenCalledWith('https://docs.example/');
    expect(win.webContents.windowOpenHandler?.({ url: 'file:///etc/passwd' })).toEqual({ action: 'deny' });
    expect(openExternal).toHaveBeenCalledTimes(1);
  });

  it('quits when the last window closes, except on macOS', async () => {
    await runApp(deps(fakeCore()));
    stub.app.emit('window-all-closed');
    expect(stub.app.quitCalls).toBe(1);
    await tick();
    await tick();

    stub.resetElectronStub();
    await runApp(deps(fakeCore(), { platform: 'darwin' }));
    stub.app.emit('window-all-closed');
    expect(stub.app.quitCalls).toBe(0);
  });
});

describe('main/app tray, executor and secrets key', () => {
  type TrayItem = { label?: string; role?: string; type?: string; accelerator?: string; enabled?: boolean; click?: () => void };

  it("puts a tray icon up with the app menu's places, shows the window from it, and removes it on quit", async () => {
    const core = fakeCore();
    await runApp(deps(core, { trayIcon: '/app/resources/tray.png' }));
    expect(stub.Tray.instances).toHaveLength(1);
    const tray = stub.Tray.instances[0]!;
    expect(tray.icon).toBe('/app/resources/tray.png');
    expect(tray.tooltip).toBe('Snippet Emulator: http://127.0.0.1:41234');
    const items = (tray.menu as { template: TrayItem[] }).template;
    expect(items.map((i) => i.label ?? i.role ?? i.type)).toEqual([
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
    expect(items.some((i) => i.accelerator)).toBe(false);
    items.find((i) => i.label === 'Reveal Data Folder')!.click!();
    expect(stub.shell.opened).toEqual(['/tmp/data']);

    // The window was closed (macOS keeps running): the tray brings a new one.
    const first = stub.BrowserWindow.instances[0]!;
    first.destroyed = true;
    items.find((i) => i.label === 'Show Snippet Emulator')!.click!();
    expect(stub.BrowserWindow.instances).toHaveLength(2);
    // Clicking the icon shows the open window instead of making another.
    tray.emit('click');
    expect(stub.BrowserWindow.instances).toHaveLength(2);

    stub.app.quit();
    await tick();
    await tick();
    expect(tray.destroyed).toBe(true);
    expect(core.handle.stop).toHaveBeenCalledTimes(1);
  });

  it('starts without a tray where the desktop has no tray area', async () => {
    stub.Tray.failWith = new Error('no StatusNotifier host');
    const log = { info: vi.fn(), error: vi.fn() };
    const running = await runApp(deps(fakeCore(), { trayIcon: '/app/resources/tray.png', log }));
    expect(running).not.toBeNull();
    expect(stub.BrowserWindow.instances).toHaveLength(1);
    expect(log.error).toHaveBeenCalledWith(expect.stringMatching(/No tray icon/), expect.any(Error));
  });

  it('hands the core the keychain key provider and the agent for --executor', async () => {
    const core = fakeCore();
    const provider = async () => Buffer.alloc(32);
    const executorAgent = vi.fn((choice: 'local' | 'lima' | undefined) => (choice === 'lima' ? ['limactl', 'shell', 'svc-emu'] : null));
    await runApp(
      deps(core, { secretKeyProvider: provider, executorAgent, config: { dataDir: '/d', workspace: '/w', port: 0, executor: 'lima' } }),
    );
    expect(executorAgent).toHaveBeenCalledWith('lima');
    expect(core.start).toHaveBeenCalledWith(
      expect.objectContaining({ secretKeyProvider: provider, executorAgent: ['limactl', 'shell', 'svc-emu'] }),
    );
  });

  it('refuses an unknown --executor with a message, before starting the core', async () => {
    const errorBox = vi.spyOn(stub.dialog, 'showErrorBox');
    const core = fakeCore();
    expect(await runApp(deps(core, { config: { dataDir: '/d', workspace: '/w', port: 0, executor: 'docker' } }))).toBeNull();
    expect(errorBox).toHaveBeenCalledWith('Snippet Emulator could not start', "--executor: local or lima, not 'docker'.");
    expect(stub.app.exitCode).toBe(2);
    expect(core.start).not.toHaveBeenCalled();
  });
});

describe('main/app IPC', () => {
  it('hands the admin token only to the core origin', async () => {
    await runApp(deps(fakeCore()));
    await expect(stub.ipcMain.invoke(IPC.adminToken, trusted)).resolves.toBe('admin-secret');
    await expect(stub.ipcMain.invoke(IPC.adminToken, { senderFrame: { url: 'https://evil.example/' } })).rejects.toThrow(
      /untrusted sender/,
    );
    await expect(stub.ipcMain.invoke(IPC.adminToken, { senderFrame: null })).rejects.toThrow(/untrusted sender/);
  });

  it('opens a folder picker and reveals absolute paths only', async () => {
    const showOpen = vi.spyOn(stub.dialog, 'showOpenDialog').mockResolvedValueOnce({ canceled: false, filePaths: ['/home/me/ws'] });
    const reveal = vi.spyOn(stub.shell, 'showItemInFolder');
    await runApp(deps(fakeCore()));

    await expect(stub.ipcMain.invoke(IPC.openFolder, trusted)).resolves.toBe('/home/me/ws');
    expect(showOpen).toHaveBeenCalledWith(expect.objectContaining({ properties: expect.arrayContaining(['openDirectory']) }));
    await expect(stub.ipcMain.invoke(IPC.openFolder, trusted)).resolves.toBeNull(); // cancelled (stub default)

    await expect(stub.ipcMain.invoke(IPC.reveal, trusted, '/tmp/ws/snippets/hello')).resolves.toBeUndefined();
    expect(reveal).toHaveBeenCalledWith('/tmp/ws/snippets/hello');
    await expect(stub.ipcMain.invoke(IPC.reveal, trusted, 'relative/path')).rejects.toThrow(/invalid arguments/);
    await expect(stub.ipcMain.invoke(IPC.reveal, trusted, 42)).rejects.toThrow(/invalid arguments/);
    await expect(stub.ipcMain.invoke(IPC.reveal, trusted)).rejects.toThrow(/invalid arguments/);
    expect(reveal).toHaveBeenCalledTimes(1);
  });

  it('switches to another workspace by restarting on it with its own data dir, keeping the other flags', async () => {
    const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = await mkdtemp(join(tmpdir(), 'svc-switch-'));
    try {
      const core = fakeCore();
      await runApp(deps(core, { argv: ['.', '--workspace', '/old', '--data-dir=/old/.svc-emu', '--egress-profile', 'production'] }));
      await writeFile(join(dir, 'file.txt'), '');
      await expect(stub.ipcMain.invoke(IPC.switchWorkspace, trusted, join(dir, 'missing'))).resolves.toMatch(/does not exist/);
      await expect(stub.ipcMain.invoke(IPC.switchWorkspace, trusted, join(dir, 'file.txt'))).resolves.toMatch(/is not a folder/);
      await expect(stub.ipcMain.invoke(IPC.switchWorkspace, { senderFrame: { url: 'https://evil.example/' } }, dir)).rejects.toThrow(
        /untrusted sender/,
      );
      expect(stub.app.relaunched).toEqual([]);

      await expect(stub.ipcMain.invoke(IPC.switchWorkspace, trusted, dir)).resolves.toBe('');
      expect(stub.app.relaunched).toEqual([
        { args: ['.', '--egress-profile', 'production', '--workspace', dir, '--data-dir', join(dir, '.svc-emu')] },
      ]);
      await tick();
      await tick();
      expect(core.handle.stop).toHaveBeenCalledTimes(1); // quit went the usual way: the core stopped first
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("the menu's Switch Workspace… picks a folder and restarts on it; cancelling does nothing", async () => {
    vi.spyOn(stub.dialog, 'showOpenDialog')
      .mockResolvedValueOnce({ canceled: true, filePaths: [] })
      .mockResolvedValueOnce({ canceled: false, filePaths: ['/definitely/not/here'] });
    const errorBox = vi.spyOn(stub.dialog, 'showErrorBox');
    await runApp(deps(fakeCore()));
    const items = (stub.Menu.current as { template: { submenu?: { label?: string; click?: () => void }[] }[] }).template[0]!.submenu!;
    const item = items.find((i) => i.label === 'Switch Workspace…')!;
    item.click!();
    await tick();
    expect(errorBox).not.toHaveBeenCalled();
    item.click!();
    await vi.waitFor(() => expect(errorBox).toHaveBeenCalledWith('Cannot switch workspace', '/definitely/not/here does not exist'));
    expect(stub.app.relaunched).toEqual([]);
  });

  it('opens workspace source files in the editor, and nothing else', async () => {
    const { mkdtemp, mkdir, writeFile, symlink, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const root = await mkdtemp(join(tmpdir(), 'svc-edit-'));
    try {
      const ws = join(root, 'ws');
      await mkdir(join(ws, 'snippets', 'hello'), { recursive: true });
      await writeFile(join(ws, 'snippets', 'hello', 'index.ts'), 'export default async () => ({})');
      await writeFile(join(ws, 'snippets', 'hello', 'run.sh'), 'rm -rf ~');
      await writeFile(join(root, 'outside.ts'), '');
      await symlink(join(root, 'outside.ts'), join(ws, 'snippets', 'hello', 'escape.ts'));
      await runApp(deps(fakeCore(), { config: { dataDir: join(root, 'data'), workspace: ws, port: 0 } }));
      const open = (p: string) => stub.ipcMain.invoke(IPC.openInEditor, trusted, p);

      await expect(open(join(ws, 'snippets', 'hello', 'index.ts'))).resolves.toBe('');
      expect(stub.shell.opened).toEqual([join(ws, 'snippets', 'hello', 'index.ts')]);
      await expect(open(join(ws, 'snippets', 'hello', 'run.sh'))).resolves.toMatch(/only source files/);
      await expect(open(join(root, 'outside.ts'))).resolves.toMatch(/is not inside the workspace/);
      await expect(open(join(ws, 'snippets', 'hello', 'escape.ts'))).resolves.toMatch(/is not inside the workspace/);
      await expect(open(join(ws, 'snippets', 'hello', 'gone.ts'))).resolves.toMatch(/does not exist/);
      await expect(open(join(ws, 'snippets', 'hello.ts'))).resolves.toMatch(/does not exist/);
      await expect(stub.ipcMain.invoke(IPC.openInEditor, trusted, 'snippets/hello/index.ts')).rejects.toThrow(/invalid arguments/);
      await expect(
        stub.ipcMain.invoke(IPC.openInEditor, { senderFrame: { url: 'https://evil.example/' } }, join(ws, 'snippets', 'hello', 'index.ts')),
      ).rejects.toThrow(/untrusted sender/);
      expect(stub.shell.opened).toHaveLength(1);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
