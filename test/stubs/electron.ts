// A stand-in for the `electron` module in Node-side tests (vitest.config.mts aliases `electron` here):
// the real package downloads its binary on first import, which fails on these machines (docs/host-facts.md).
// It records what the code under test did; tests needing other behaviour vi.mock('electron', …).
import { EventEmitter } from 'node:events';

type Listener = (event: FakeInvokeEvent, ...args: unknown[]) => unknown;

export interface FakeInvokeEvent {
  senderFrame: { url: string } | null;
}

export class FakeApp extends EventEmitter {
  isPackaged = false;
  quitCalls = 0;
  exitCode: number | null = null;
  private ready = Promise.resolve();
  requestSingleInstanceLock(): boolean {
    return true;
  }
  whenReady(): Promise<void> {
    return this.ready;
  }
  getPath(_name: string): string {
    return process.cwd();
  }
  /** Like Electron: emits before-quit (cancellable), then will-quit and quit. */
  quit(): void {
    this.quitCalls++;
    let prevented = false;
    this.emit('before-quit', { preventDefault: () => (prevented = true) });
    if (prevented) return;
    this.emit('will-quit', { preventDefault: () => undefined });
    this.emit('quit');
  }
  exit(code = 0): void {
    this.exitCode = code;
  }
  relaunched: { args: string[] }[] = [];
  relaunch(options: { args: string[] }): void {
    this.relaunched.push(options);
  }
}

/** A session: records the permission handlers set on it, so a test can ask them as Chromium would. */
export class FakeSession {
  permissionRequestHandler:
    ((webContents: unknown, permission: string, callback: (granted: boolean) => void, details?: unknown) => void) | null = null;
  permissionCheckHandler: ((webContents: unknown, permission: string, requestingOrigin?: string, details?: unknown) => boolean) | null =
    null;
  devicePermissionHandler: ((details: unknown) => boolean) | null = null;
  displayMediaRequestHandler: ((request: unknown, callback: (streams: unknown) => void) => void) | null = null;
  /** What `cookies.set` was given, in order. */
  readonly cookieJar: Record<string, unknown>[] = [];
  readonly cookies = {
    set: async (details: Record<string, unknown>): Promise<void> => {
      this.cookieJar.push(details);
    },
  };
  setPermissionRequestHandler(handler: FakeSession['permissionRequestHandler']): void {
    this.permissionRequestHandler = handler;
  }
  setPermissionCheckHandler(handler: FakeSession['permissionCheckHandler']): void {
    this.permissionCheckHandler = handler;
  }
  setDevicePermissionHandler(handler: FakeSession['devicePermissionHandler']): void {
    this.devicePermissionHandler = handler;
  }
  setDisplayMediaRequestHandler(handler: FakeSession['displayMediaRequestHandler']): void {
    this.displayMediaRequestHandler = handler;
  }
}

export const session = {
  defaultSession: new FakeSession(),
  partitions: new Map<string, FakeSession>(),
  /** Like Electron: a new partition's session is announced with app's `session-created`. */
  fromPartition(partition: string): FakeSession {
    let s = this.partitions.get(partition);
    if (!s) {
      s = new FakeSession();
      this.partitions.set(partition, s);
      app.emit('session-created', s);
    }
    return s;
  },
};

export class FakeWebContents extends EventEmitter {
  windowOpenHandler: ((details: { url: string }) => { action: 'deny' | 'allow' }) | null = null;
  setWindowOpenHandler(handler: (details: { url: string }) => { action: 'deny' | 'allow' }): void {
    this.windowOpenHandler = handler;
  }
}

export class BrowserWindow extends EventEmitter {
  static instances: BrowserWindow[] = [];
  readonly webContents = new FakeWebContents();
  loadedURL: string | null = null;
  visible = false;
  destroyed = false;
  constructor(readonly options: Record<string, unknown>) {
    super();
    BrowserWindow.instances.push(this);
  }
  static getAllWindows(): BrowserWindow[] {
    return BrowserWindow.instances.filter((w) => !w.destroyed);
  }
  loadURL(url: string): Promise<void> {
    this.loadedURL = url;
    return Promise.resolve();
  }
  show(): void {
    this.visible = true;
  }
  focus(): void {}
  restore(): void {}
  isMinimized(): boolean {
    return false;
  }
  isDestroyed(): boolean {
    return this.destroyed;
  }
  close(): void {
    this.destroyed = true;
    this.emit('closed');
  }
}

export const ipcMain = {
  handlers: new Map<string, Listener>(),
  handle(channel: string, listener: Listener): void {
    if (this.handlers.has(channel)) throw new Error(`Attempted to register a second handler for '${channel}'`);
    this.handlers.set(channel, listener);
  },
  removeHandler(channel: string): void {
    this.handlers.delete(channel);
  },
  /** Test helper: calls a handler the way ipcRenderer.invoke would. */
  async invoke(channel: string, event: FakeInvokeEvent, ...args: unknown[]): Promise<unknown> {
    const handler = this.handlers.get(channel);
    if (!handler) throw new Error(`No handler registered for '${channel}'`);
    return handler(event, ...args);
  },
};

export const ipcRenderer = {
  calls: [] as Array<{ channel: string; args: unknown[] }>,
  invoke(channel: string, ...args: unknown[]): Promise<unknown> {
    this.calls.push({ channel, args });
    return Promise.resolve(undefined);
  },
};

export const contextBridge = {
  exposed: {} as Record<string, unknown>,
  exposeInMainWorld(key: string, api: unknown): void {
    this.exposed[key] = api;
  },
};

export const dialog = {
  showOpenDialog(_options: unknown): Promise<{ canceled: boolean; filePaths: string[] }> {
    return Promise.resolve({ canceled: true, filePaths: [] });
  },
  showErrorBox(_title: string, _content: string): void {},
};

export const shell = {
  opened: [] as string[],
  external: [] as string[],
  showItemInFolder(_fullPath: string): void {},
  openExternal(url: string): Promise<void> {
    this.external.push(url);
    return Promise.resolve();
  },
  openPath(path: string): Promise<string> {
    this.opened.push(path);
    return Promise.resolve('');
  },
};

/** Menu: keeps the template the app set. */
export const Menu = {
  current: null as unknown,
  buildFromTemplate(template: unknown): unknown {
    return { template };
  },
  setApplicationMenu(menu: unknown): void {
    this.current = menu;
  },
};

export const clipboard = {
  text: '',
  writeText(text: string): void {
    this.text = text;
  },
};

/** Tray: records the icons made and what was set on them. */
export class Tray extends EventEmitter {
  static instances: Tray[] = [];
  static failWith: Error | null = null;
  tooltip = '';
  menu: unknown = null;
  destroyed = false;
  constructor(readonly icon: string) {
    super();
    if (Tray.failWith) throw Tray.failWith;
    Tray.instances.push(this);
  }
  setToolTip(text: string): void {
    this.tooltip = text;
  }
  setContextMenu(menu: unknown): void {
    this.menu = menu;
  }
  destroy(): void {
    this.destroyed = true;
  }
}

/**
 * safeStorage: a stand-in OS keychain. "Sealing" is reversible on purpose (the real one is the OS's); a
 * sealed value never contains the plaintext, and `failDecrypt` plays another user's keychain.
 */
export const safeStorage = {
  available: true,
  backend: 'gnome_libsecret',
  failDecrypt: false,
  isEncryptionAvailable(): boolean {
    return this.available;
  },
  getSelectedStorageBackend(): string {
    return this.backend;
  },
  encryptString(plainText: string): Buffer {
    return Buffer.concat([Buffer.from('keychain:'), Buffer.from(plainText, 'utf8').map((b) => b ^ 0x5a)]);
  },
  decryptString(encrypted: Buffer): string {
    if (this.failDecrypt || !encrypted.subarray(0, 9).equals(Buffer.from('keychain:')))
      throw new Error('Error while decrypting the ciphertext provided to safeStorage.decryptString.');
    return Buffer.from(encrypted.subarray(9).map((b) => b ^ 0x5a)).toString('utf8');
  },
};

export const app = new FakeApp();

/** Forgets everything recorded (windows, handlers, calls, listeners). */
export function resetElectronStub(): void {
  app.removeAllListeners();
  app.quitCalls = 0;
  app.exitCode = null;
  app.relaunched = [];
  BrowserWindow.instances = [];
  ipcMain.handlers.clear();
  ipcRenderer.calls = [];
  contextBridge.exposed = {};
  shell.opened = [];
  shell.external = [];
  Menu.current = null;
  clipboard.text = '';
  Tray.instances = [];
  Tray.failWith = null;
  safeStorage.available = true;
  safeStorage.backend = 'gnome_libsecret';
  safeStorage.failDecrypt = false;
  session.defaultSession = new FakeSession();
  session.partitions.clear();
}

export default { app, BrowserWindow, ipcMain, ipcRenderer, contextBridge, dialog, shell, Menu, clipboard, Tray, safeStorage, session };
