// The desktop shell's life cycle: single instance, start the core, one secure window on the core's URL,
// IPC for the preload bridge, menu and tray, and stopping the core before the app quits. Electron and the
// core come in as arguments, so this runs under plain Node in tests.
import type { SecretKeyProvider } from '../server';
import { registerIpcHandlers, type IpcMainLike } from './ipc-handlers';
import type { ShellConfig } from './config';
import { menuTemplate, trayTemplate, type MenuItem } from './menu';
import { editableWorkspaceFile } from './open-in-editor';
import { checkWorkspaceDir, relaunchArgs } from './workspace-switch';
import { denyAllPermissions, refuseWebviews, type SessionLike, type WebContentsLike } from './permissions';

export interface EmulatorHandle {
  url: string;
  adminToken: string;
  localApiKey: string | null;
  /** The GUI's session cookie (server/http/gui-session.ts), set on the window's session so it opens signed in. */
  guiCookie?(): { name: string; value: string };
  stop(): Promise<void>;
}

/** The part of Electron's `Cookies` the window's sign-in uses. */
export interface CookiesLike {
  set(details: { url: string; name: string; value: string; httpOnly: boolean; sameSite: 'strict'; secure: boolean }): Promise<void>;
}

export interface EmulatorStartConfig {
  dataDir: string;
  workspace?: string;
  port?: number;
  host?: string;
  /** The built GUI (out/renderer) the core serves at `/`. */
  rendererDir?: string;
  /** The checkout (runners in executor/runtimes, installed runtimes in .runtimes). */
  projectRoot?: string;
  egressProfile?: 'local' | 'production';
  egressAllow?: string[];
  egressMode?: 'live' | 'record' | 'replay';
  replaySpeed?: number;
  asyncWorkers?: number;
  callbackRetryScale?: number;
  /** The desktop app's secrets key (sealed by the OS keychain); absent: the core's 0600 key file. */
  secretKeyProvider?: SecretKeyProvider;
  /** Run sandboxes behind this agent (the Lima VM on macOS); null: on this host. */
  executorAgent?: string[] | null;
}

export type StartEmulator = (config: EmulatorStartConfig) => Promise<EmulatorHandle>;

export interface PreventableEvent {
  preventDefault(): void;
}

export interface AppLike {
  requestSingleInstanceLock(): boolean;
  whenReady(): Promise<unknown>;
  on(event: 'before-quit', listener: (event: PreventableEvent) => void): unknown;
  on(event: 'second-instance' | 'window-all-closed' | 'activate', listener: () => void): unknown;
  on(event: 'session-created', listener: (session: SessionLike) => void): unknown;
  on(event: 'web-contents-created', listener: (event: unknown, contents: WebContentsLike) => void): unknown;
  quit(): void;
  exit(exitCode?: number): void;
  relaunch(options: { args: string[] }): void;
}

export interface WebPreferences {
  preload: string;
  contextIsolation: true;
  sandbox: true;
  nodeIntegration: false;
  webSecurity: true;
  allowRunningInsecureContent: false;
}

export interface WindowOptions {
  width: number;
  height: number;
  minWidth: number;
  minHeight: number;
  show: boolean;
  title: string;
  backgroundColor: string;
  webPreferences: WebPreferences;
}

export interface WindowLike {
  loadURL(url: string): Promise<void>;
  show(): void;
  focus(): void;
  restore(): void;
  isMinimized(): boolean;
  isDestroyed(): boolean;
  once(event: 'ready-to-show', listener: () => void): unknown;
  on(event: 'closed', listener: () => void): unknown;
  webContents: {
    setWindowOpenHandler(handler: (details: { url: string }) => { action: 'deny' }): void;
    on(event: 'will-navigate', listener: (event: PreventableEvent & { url: string }) => void): unknown;
  };
}

export interface TrayLike {
  setToolTip(text: string): void;
  setContextMenu(menu: unknown): void;
  on(event: 'click', listener: () => void): unknown;
  destroy(): void;
}

export interface ElectronLike {
  app: AppLike;
  BrowserWindow: new (options: WindowOptions) => WindowLike;
  ipcMain: IpcMainLike;
  dialog: {
    showOpenDialog(options: {
      title: string;
      properties: Array<'openDirectory' | 'createDirectory'>;
    }): Promise<{ canceled: boolean; filePaths: string[] }>;
    showErrorBox(title: string, content: string): void;
  };
  shell: {
    showItemInFolder(fullPath: string): void;
    openExternal(url: string): Promise<void>;
    openPath(path: string): Promise<string>;
  };
  Menu: {
    buildFromTemplate(template: MenuItem[]): unknown;
    setApplicationMenu(menu: unknown): void;
  };
  clipboard: { writeText(text: string): void };
  Tray: new (iconPath: string) => TrayLike;
  session: { defaultSession: SessionLike & { cookies: CookiesLike } };
}

export interface Logger {
  info(...args: unknown[]): void;
  error(...args: unknown[]): void;
}

export interface ShellDeps {
  electron: ElectronLike;
  startEmulator: StartEmulator;
  config: ShellConfig;
  /** Absolute path of the built preload script (out/preload/index.js). */
  preloadPath: string;
  /** Absolute path of the built GUI (out/renderer), served by the core at `/`. */
  rendererDir?: string;
  /** The checkout root (runners and installed runtimes). */
  projectRoot?: string;
  platform: NodeJS.Platform;
  /** Where SIGINT/SIGTERM arrive (process); they quit the app cleanly so the core is stopped. */
  signals?: { on(signal: 'SIGINT' | 'SIGTERM', listener: () => void): unknown };
  log?: Logger;
  /** How long quitting waits for the core to stop (ms). */
  stopTimeoutMs?: number;
  /** The tray icon's image (resources/tray.png; trayTemplate.png on macOS). Absent: no tray icon. */
  trayIcon?: string;
  /** The desktop app's secrets key (main/secret-key.ts), handed to the core. */
  secretKeyProvider?: SecretKeyProvider;
  /** The app's own arguments (process.argv after the executable), kept when it restarts on another workspace. */
  argv?: readonly string[];
  /** The agent argv for `--executor local|lima` (or the platform's default when absent). */
  executorAgent?: (choice: 'local' | 'lima' | undefined) => string[] | null;
}

export interface RunningShell {
  emulator: EmulatorHandle;
  window(): WindowLike | null;
}

export function secureWebPreferences(preloadPath: string): WebPreferences {
  return {
    preload: preloadPath,
    contextIsolation: true,
    sandbox: true,
    nodeIntegration: false,
    webSecurity: true,
    allowRunningInsecureContent: false,
  };
}

/**
 * Runs the desktop shell. Resolves to the running shell once the window is loading, or to null when
 * another instance already runs, the user quit during start-up, or the core failed to start.
 */
export async function runApp(deps: ShellDeps): Promise<RunningShell | null> {
  const { app, BrowserWindow, ipcMain, dialog, shell } = deps.electron;
  const log = deps.log ?? console;

  if (!app.requestSingleInstanceLock()) {
    log.info('Snippet Emulator is already running; focusing it.');
    app.quit();
    return null;
  }

  let emulator: EmulatorHandle | null = null;
  let starting: Promise<EmulatorHandle | null> | null = null;
  let window: WindowLike | null = null;
  let disposeIpc: (() => void) | null = null;
  let tray: TrayLike | null = null;
  let quitState: 'running' | 'stopping' | 'stopped' = 'running';

  const stopCore = async () => {
    disposeIpc?.();
    disposeIpc = null;
    tray?.destroy();
    tray = null;
    const handle = emulator ?? (await starting?.catch(() => null)) ?? null;
    emulator = null;
    if (!handle) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        log.error('The emulator core did not stop in time; quitting anyway.');
        resolve();
      }, deps.stopTimeoutMs ?? 5000);
    });
    try {
      await Promise.race([handle.stop(), timeout]);
    } catch (error) {
      log.error('Stopping the emulator core failed:', error);
    } finally {
      clearTimeout(timer);
    }
  };

  // Quitting waits for the core to stop: the first before-quit is held, the core stopped, then quit again.
  app.on('before-quit', (event) => {
    if (quitState === 'stopped') return;
    event.preventDefault();
    if (quitState === 'stopping') return;
    quitState = 'stopping';
    void stopCore().finally(() => {
      quitState = 'stopped';
      app.quit();
    });
  });
  app.on('second-instance', () => {
    if (!window || window.isDestroyed()) return;
    if (window.isMinimized()) window.restore();
    window.focus();
  });
  app.on('window-all-closed', () => {
    if (deps.platform !== 'darwin') app.quit();
  });
  app.on('activate', () => {
    if (emulator && quitState === 'running' && (!window || window.isDestroyed())) window = openWindow(emulator);
  });
  deps.signals?.on('SIGINT', () => app.quit());
  deps.signals?.on('SIGTERM', () => app.quit());
  // Every session (the default one, and any partition a page or a future window gets) refuses every
  // permission, and no page gets a <webview> (main/permissions.ts).
  app.on('session-created', (session) => denyAllPermissions(session));
  app.on('web-contents-created', (_event, contents) => refuseWebviews(contents));

  const openWindow = (handle: EmulatorHandle): WindowLike => {
    const origin = new URL(handle.url).origin;
    const win = new BrowserWindow({
      width: 1280,
      height: 840,
      minWidth: 720,
      minHeight: 480,
      show: false,
      title: 'Snippet Emulator',
      backgroundColor: '#f6f7f9',
      webPreferences: secureWebPreferences(deps.preloadPath),
    });
    // The window only ever shows the core's GUI: links elsewhere open in the user's browser.
    win.webContents.setWindowOpenHandler(({ url }) => {
      if (/^https?:\/\//.test(url)) void shell.openExternal(url);
      return { action: 'deny' };
    });
    win.webContents.on('will-navigate', (event) => {
      if (!sameOrigin(event.url, origin)) event.preventDefault();
    });
    win.once('ready-to-show', () => win.show());
    win.on('closed', () => {
      if (window === win) window = null;
    });
    // Signed in before the first request: the core's session cookie on the window's session (no token in any
    // URL; a session cookie, set again at every start, so none is left on disk between runs).
    const gui = `${handle.url.replace(/\/+$/, '')}/`;
    const cookie = handle.guiCookie?.();
    const loading = cookie
      ? deps.electron.session.defaultSession.cookies
          .set({
            url: gui,
            name: cookie.name,
            value: cookie.value,
            httpOnly: true,
            sameSite: 'strict',
            secure: origin.startsWith('https:'),
          })
          .then(() => win.loadURL(gui))
      : win.loadURL(gui);
    loading.catch((error: unknown) => log.error('Loading the GUI failed:', error));
    return win;
  };

  await app.whenReady();
  denyAllPermissions(deps.electron.session.defaultSession); // before any window, whether or not session-created fired for it
  if (quitState !== 'running') return null;

  const executor = deps.config.executor;
  if (executor !== undefined && executor !== 'local' && executor !== 'lima') {
    dialog.showErrorBox('Snippet Emulator could not start', `--executor: local or lima, not '${executor}'.`);
    quitState = 'stopped';
    app.exit(2);
    return null;
  }
  const executorAgent = deps.executorAgent?.(executor);

  const start = deps.startEmulator({
    dataDir: deps.config.dataDir,
    workspace: deps.config.workspace,
    port: deps.config.port,
    ...(deps.config.host ? { host: deps.config.host } : {}),
    ...(deps.rendererDir ? { rendererDir: deps.rendererDir } : {}),
    ...(deps.projectRoot ? { projectRoot: deps.projectRoot } : {}),
    // The serve flags, as given: the core validates them and says what is wrong (shown in a dialog).
    ...(deps.config.egressProfile !== undefined ? { egressProfile: deps.config.egressProfile as 'local' | 'production' } : {}),
    ...(deps.config.egressAllow ? { egressAllow: deps.config.egressAllow } : {}),
    ...(deps.config.egressMode !== undefined ? { egressMode: deps.config.egressMode as 'live' | 'record' | 'replay' } : {}),
    ...(deps.config.replaySpeed !== undefined ? { replaySpeed: deps.config.replaySpeed } : {}),
    ...(deps.config.asyncWorkers !== undefined ? { asyncWorkers: deps.config.asyncWorkers } : {}),
    ...(deps.config.callbackRetryScale !== undefined ? { callbackRetryScale: deps.config.callbackRetryScale } : {}),
    ...(deps.secretKeyProvider ? { secretKeyProvider: deps.secretKeyProvider } : {}),
    ...(executorAgent ? { executorAgent } : {}),
  });
  starting = start;
  let handle: EmulatorHandle;
  try {
    handle = await start;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    log.error('The emulator core failed to start:', error);
    dialog.showErrorBox('Snippet Emulator could not start', message);
    quitState = 'stopped';
    app.exit(1);
    return null;
  }
  emulator = handle;
  if (quitState !== 'running') return null; // quitting already: before-quit stops the core
  log.info(`Snippet Emulator core listening on ${handle.url}`);

  const pickFolder = async () => {
    const result = await dialog.showOpenDialog({ title: 'Open a workspace folder', properties: ['openDirectory', 'createDirectory'] });
    return result.canceled ? null : (result.filePaths[0] ?? null);
  };
  // The core watches one workspace for its life: another one means starting again (quit stops the core).
  const switchWorkspace = async (dir: string): Promise<string> => {
    try {
      await checkWorkspaceDir(dir);
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
    log.info(`Restarting on the workspace ${dir}`);
    app.relaunch({ args: relaunchArgs(deps.argv ?? [], dir) });
    app.quit();
    return '';
  };
  disposeIpc = registerIpcHandlers(ipcMain, new URL(handle.url).origin, {
    adminToken: () => handle.adminToken,
    openFolder: pickFolder,
    switchWorkspace,
    reveal: async (path) => shell.showItemInFolder(path),
    openInEditor: async (path) => {
      try {
        return await shell.openPath(await editableWorkspaceFile(path, deps.config.workspace));
      } catch (error) {
        return error instanceof Error ? error.message : String(error);
      }
    },
  });
  const { Menu, clipboard } = deps.electron;
  const actions = {
    openWorkspace: () => void shell.openPath(deps.config.workspace),
    switchWorkspace: () =>
      void pickFolder().then(async (dir) => {
        const why = dir ? await switchWorkspace(dir) : '';
        if (why) dialog.showErrorBox('Cannot switch workspace', why);
      }),
    revealDataDir: () => void shell.openPath(deps.config.dataDir),
    copyApiKey: handle.localApiKey ? () => clipboard.writeText(handle.localApiKey!) : null,
    // The GUI in the user's browser: the same app, signed in with the admin token once.
    openInBrowser: () => void shell.openExternal(`${handle.url.replace(/\/+$/, '')}/?token=${handle.adminToken}`),
  };
  const showWindow = () => {
    if (quitState !== 'running') return;
    if (!window || window.isDestroyed()) window = openWindow(handle);
    else {
      if (window.isMinimized()) window.restore();
      window.show();
      window.focus();
    }
  };
  Menu.setApplicationMenu(Menu.buildFromTemplate(menuTemplate(actions)));
  if (deps.trayIcon)
    tray = createTray(
      deps.electron,
      deps.trayIcon,
      `Snippet Emulator: ${handle.url}`,
      Menu.buildFromTemplate(trayTemplate({ ...actions, showWindow })),
      showWindow,
      log,
    );
  window = openWindow(handle);
  return { emulator: handle, window: () => window };
}

/** A tray icon is a convenience: a desktop without a tray area (some Linux ones) still gets the app. */
function createTray(
  electron: ElectronLike,
  icon: string,
  tooltip: string,
  menu: unknown,
  onClick: () => void,
  log: Logger,
): TrayLike | null {
  try {
    const tray = new electron.Tray(icon);
    tray.setToolTip(tooltip);
    tray.setContextMenu(menu);
    tray.on('click', onClick);
    return tray;
  } catch (error) {
    log.error('No tray icon (the app menu has the same items):', error);
    return null;
  }
}

function sameOrigin(url: string, origin: string): boolean {
  try {
    return new URL(url).origin === origin;
  } catch {
    return false;
  }
}
