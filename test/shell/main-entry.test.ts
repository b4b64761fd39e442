// main/index.ts wires Electron, the core and main/app together: electron and ../server mocked.
import { afterAll, describe, expect, it, vi } from 'vitest';

const handle = { url: 'http://127.0.0.1:45678', adminToken: 'tok', localApiKey: null, stop: vi.fn(async () => undefined) };
const startEmulator = vi.fn(async (_config: unknown) => handle);
const executorAgentFor = vi.fn((_opts: unknown) => null);
// The terminal lines of `npm start` (server/terminal-lines.ts): followed once the core runs, let go at its stop.
const stopLines = vi.fn();
const follow = vi.fn((_bus: unknown, _workspace: unknown) => stopLines);
const logger = { log: vi.fn(), child: () => logger };
const terminalLogging = vi.fn((_opts: unknown) => ({ logger, follow }));
vi.mock('../../server', () => ({
  startEmulator,
  executorAgentFor,
  terminalLogging,
  coresDir: () => '/nonexistent/svc-emu-cores',
  dataDirPaths: (d: string) => ({ secretKey: `${d}/secret.key` }),
  keychainKeyPath: (p: string) => `${p}.safe`,
  keyFileProvider: vi.fn(),
  DataDirError: Error,
}));

const trays: string[] = [];
const windows: Array<{ options: { webPreferences: Record<string, unknown> }; url?: string }> = [];
const appEvents = new (await import('node:events')).EventEmitter();
const defaultSession = {
  setPermissionRequestHandler: vi.fn(),
  setPermissionCheckHandler: vi.fn(),
  setDevicePermissionHandler: vi.fn(),
  setDisplayMediaRequestHandler: vi.fn(),
};
const quit = vi.fn(() => {
  let prevented = false;
  appEvents.emit('before-quit', { preventDefault: () => (prevented = true) });
  if (!prevented) appEvents.emit('quit');
});
vi.mock('electron', () => ({
  app: {
    isPackaged: false,
    getPath: () => process.cwd(),
    requestSingleInstanceLock: () => true,
    whenReady: () => Promise.resolve(),
    on: (event: string, listener: (...args: unknown[]) => void) => appEvents.on(event, listener),
    quit,
    exit: vi.fn(),
  },
  BrowserWindow: class {
    webContents = { setWindowOpenHandler: vi.fn(), on: vi.fn() };
    constructor(readonly options: { webPreferences: Record<string, unknown> }) {
      windows.push(this);
    }
    loadURL(url: string) {
      (this as { url?: string }).url = url;
      return Promise.resolve();
    }
    once() {}
    on() {}
    show() {}
  },
  ipcMain: { handle: vi.fn(), removeHandler: vi.fn() },
  dialog: { showOpenDialog: vi.fn(), showErrorBox: vi.fn() },
  shell: { showItemInFolder: vi.fn(), openExternal: vi.fn(), openPath: vi.fn() },
  Menu: { buildFromTemplate: vi.fn((t: unknown) => t), setApplicationMenu: vi.fn() },
  clipboard: { writeText: vi.fn() },
  Tray: class {
    constructor(readonly icon: string) {
      trays.push(icon);
    }
    setToolTip() {}
    setContextMenu() {}
    on() {}
    destroy() {}
  },
  safeStorage: { isEncryptionAvailable: () => false, encryptString: vi.fn(), decryptString: vi.fn() },
  session: { defaultSession },
}));

// main/index.ts hooks SIGINT/SIGTERM on `process`: take those listeners off the test worker afterwards.
const before = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM') };
afterAll(() => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    for (const l of process.listeners(signal)) if (!before[signal].includes(l)) process.off(signal, l);
  }
});

describe('main/index (the Electron entry)', () => {
  it('starts the core on port 0, opens a sandboxed window with the built preload, stops the core on quit', async () => {
    await import('../../main/index');
    await vi.waitFor(() => expect(windows).toHaveLength(1));

    expect(startEmulator).toHaveBeenCalledWith(
      expect.objectContaining({ port: 0, dataDir: expect.any(String), workspace: expect.any(String) }),
    );
    const config = startEmulator.mock.calls[0]![0] as { rendererDir?: string };
    expect(String(config.rendererDir).replace(/\\/g, '/')).toMatch(/\/renderer$/);
    const prefs = windows[0]!.options.webPreferences;
    expect(prefs).toMatchObject({ contextIsolation: true, sandbox: true, nodeIntegration: false });
    expect(String(prefs.preload).replace(/\\/g, '/')).toMatch(/\/preload\/index\.js$/);
    expect(windows[0]!.url).toBe('http://127.0.0.1:45678/');
    // Electron's real session gets the deny-all permission handlers (test/shell/permissions.test.ts asks them).
    expect(defaultSession.setPermissionRequestHandler).toHaveBeenCalledWith(expect.any(Function));
    expect(defaultSession.setPermissionCheckHandler).toHaveBeenCalledWith(expect.any(Function));
    // The desktop app brings its keychain-backed secrets key, the executor choice and a tray icon.
    expect(config).toMatchObject({ secretKeyProvider: expect.any(Function) });
    expect(executorAgentFor).toHaveBeenCalledWith(expect.objectContaining({ choice: undefined, platform: process.platform }));
    expect(trays).toHaveLength(1);
    expect(trays[0]!.replace(/\\/g, '/')).toMatch(/\/resources\/(tray|trayTemplate)\.png$/);

    // The core logs through the terminal's logger, and its events become the terminal's lines.
    expect(config).toMatchObject({ logger });
    expect(terminalLogging).toHaveBeenCalledWith(expect.objectContaining({ env: process.env }));
    expect(follow).toHaveBeenCalledTimes(1);

    quit();
    await vi.waitFor(() => expect(handle.stop).toHaveBeenCalledTimes(1));
    expect(stopLines).toHaveBeenCalledTimes(1);
    await vi.waitFor(() => expect(quit).toHaveBeenCalledTimes(2));
  });
});
