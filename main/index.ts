// Electron main process entry (built to out/main/index.js, package.json "main").
import { join } from 'node:path';
import { app, BrowserWindow, clipboard, dialog, ipcMain, Menu, safeStorage, shell, Tray } from 'electron';
import { executorAgentFor, startEmulator } from '../server';
import { runApp } from './app';
import { resolveShellConfig } from './config';
import { keychainKeyProvider } from './secret-key';

const config = resolveShellConfig(process.argv.slice(1), process.env, process.cwd());
const projectRoot = join(__dirname, '../..');
const resources = join(projectRoot, 'resources');

void runApp({
  electron: { app, BrowserWindow, dialog, ipcMain, shell, Menu, clipboard, Tray },
  startEmulator,
  config,
  preloadPath: join(__dirname, '../preload/index.js'),
  rendererDir: join(__dirname, '../renderer'),
  projectRoot,
  platform: process.platform,
  signals: process,
  // macOS draws menu-bar icons from a black template image; elsewhere the coloured icon.
  trayIcon: join(resources, process.platform === 'darwin' ? 'trayTemplate.png' : 'tray.png'),
  secretKeyProvider: keychainKeyProvider({ dataDir: config.dataDir, safeStorage, platform: process.platform, log: console }),
  executorAgent: (choice) => executorAgentFor({ choice, projectRoot, platform: process.platform, path: process.env.PATH }),
});
