// main/paths.ts: where the desktop app finds its parts in a checkout and in an installed app.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { appPaths } from '../../main/paths';
import { resolveShellConfig } from '../../main/config';

describe('appPaths', () => {
  it('in a checkout: everything under the project root, runtimes in its .runtimes', () => {
    const p = appPaths({ isPackaged: false, mainDir: '/src/app/out/main', resourcesPath: '/ignored', userData: '/home/u/.config/x' });
    expect(p).toEqual({
      projectRoot: '/src/app',
      preload: '/src/app/out/preload/index.js',
      rendererDir: '/src/app/out/renderer',
      resources: '/src/app/resources',
      runtimesDir: null,
    });
  });

  it('installed: bundles in app.asar, executor and set-up beside it as real files, runtimes in the app-data folder', () => {
    const p = appPaths({
      isPackaged: true,
      mainDir: '/opt/Snippet Emulator/resources/app.asar/out/main',
      resourcesPath: '/opt/Snippet Emulator/resources',
      userData: '/home/u/.config/Snippet Emulator',
    });
    expect(p.projectRoot).toBe('/opt/Snippet Emulator/resources/app-root');
    expect(p.preload).toBe('/opt/Snippet Emulator/resources/app.asar/out/preload/index.js');
    expect(p.resources).toBe('/opt/Snippet Emulator/resources/app.asar/resources');
    expect(p.runtimesDir).toBe(join('/home/u/.config/Snippet Emulator', 'runtimes'));
  });
});

describe('resolveShellConfig defaults', () => {
  it('an installed app passes its own defaults; flags and env still win', () => {
    const defaults = { dataDir: '/home/u/.config/SE/data', workspace: '/home/u/Documents/Snippet Emulator' };
    expect(resolveShellConfig([], {}, '/', defaults)).toMatchObject(defaults);
    expect(resolveShellConfig(['--workspace', '/w'], { SVC_EMU_DATA_DIR: '/d' }, '/', defaults)).toMatchObject({
      workspace: '/w',
      dataDir: '/d',
    });
    expect(resolveShellConfig(['--executor=lima'], {}, '/tmp', defaults).executor).toBe('lima');
  });
});
