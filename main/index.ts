// Electron main process entry (built to out/main/index.js, package.json "main").
import { join } from 'node:path';
import { app, BrowserWindow, clipboard, dialog, ipcMain, Menu, shell } from 'electron';
import { startEmulator } from '../server';
import { runApp } from './app';
import { resolveShellConfig } from './config';

void runApp({
  electron: { app, BrowserWindow, dialog, ipcMain, shell, Menu, clipboard },
  startEmulator,
  config: resolveShellConfig(process.argv.slice(1), process.env, process.cwd()),
  preloadPath: join(__dirname, '../preload/index.js'),
  rendererDir: join(__dirname, '../renderer'),
  projectRoot: join(__dirname, '../..'),
  platform: process.platform,
  signals: process,
});
