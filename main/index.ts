// Electron main process entry (built to out/main/index.js, package.json "main"): the composition root.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { app, BrowserWindow, clipboard, dialog, ipcMain, Menu, safeStorage, session, shell, Tray } from 'electron';
import { coresDir, executorAgentFor, startEmulator, terminalLogging } from '../server';
import { runApp } from './app';
import { resolveShellConfig } from './config';
import { appPaths } from './paths';
import { keychainKeyProvider } from './secret-key';

const paths = appPaths({
  isPackaged: app.isPackaged,
  mainDir: __dirname,
  resourcesPath: process.resourcesPath,
  userData: app.getPath('userData'),
});
// An installed app starts with `/` as its cwd: its data lives in the user's app-data folder and it watches
// a workspace in Documents (created on first start); `--workspace` picks another.
const defaults = app.isPackaged
  ? { dataDir: join(app.getPath('userData'), 'data'), workspace: join(app.getPath('documents'), 'Snippet Emulator') }
  : undefined;
const config = resolveShellConfig(process.argv.slice(1), process.env, process.cwd(), defaults);
if (defaults && config.workspace === defaults.workspace) mkdirSync(join(config.workspace, 'snippets'), { recursive: true });
// The executor reads SVC_EMU_RUNTIMES_DIR; an installed app keeps its runtimes in its app-data folder.
if (paths.runtimesDir && !process.env.SVC_EMU_RUNTIMES_DIR) process.env.SVC_EMU_RUNTIMES_DIR = paths.runtimesDir;

void runApp({
  electron: { app, BrowserWindow, dialog, ipcMain, shell, Menu, clipboard, Tray, session },
  // Recorded in the per-user list of running emulators, so `svc-emu` finds the app's core from any folder.
  // The terminal that ran `npm start` gets the same lines as `svc-emu serve` prints (server/terminal-lines.ts).
  startEmulator: async (c) => {
    const terminal = terminalLogging({
      level: config.logLevel,
      format: config.logFormat,
      env: process.env,
      isTTY: process.stderr.isTTY,
      write: (t) => void process.stderr.write(t),
    });
    const emu = await startEmulator({ ...c, coresDir: coresDir(), logger: terminal.logger });
    const stopLines = terminal.follow(emu.events, c.workspace ?? null);
    return { ...emu, stop: () => (stopLines(), emu.stop()) };
  },
  config,
  preloadPath: paths.preload,
  rendererDir: paths.rendererDir,
  projectRoot: paths.projectRoot,
  platform: process.platform,
  signals: process,
  argv: process.argv.slice(1),
  // macOS draws menu-bar icons from a black template image; elsewhere the coloured icon.
  trayIcon: join(paths.resources, process.platform === 'darwin' ? 'trayTemplate.png' : 'tray.png'),
  secretKeyProvider: keychainKeyProvider({ dataDir: config.dataDir, safeStorage, platform: process.platform, log: console }),
  executorAgent: (choice) =>
    executorAgentFor({ choice, projectRoot: paths.projectRoot, platform: process.platform, path: process.env.PATH }),
});
