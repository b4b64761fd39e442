// Where the desktop app finds its parts: in a checkout (npm start) everything is under the project root;
// in an installed app (electron-builder.yml) the bundles are in app.asar, and the executor and set-up,
// which child processes and the Lima VM read as real files, are in <resources>/app-root.
import { join } from 'node:path';

export interface AppPaths {
  /** The root the core calls projectRoot: executor/runtimes (runners), scripts/setup.mjs, .runtimes. */
  projectRoot: string;
  preload: string;
  rendererDir: string;
  resources: string;
  /** Where the pinned runtimes are installed when not in the checkout's .runtimes (installed app); else null. */
  runtimesDir: string | null;
}

export function appPaths(opts: { isPackaged: boolean; mainDir: string; resourcesPath: string; userData: string }): AppPaths {
  const appDir = join(opts.mainDir, '..', '..'); // out/main → the checkout, or app.asar
  return {
    projectRoot: opts.isPackaged ? join(opts.resourcesPath, 'app-root') : appDir,
    preload: join(opts.mainDir, '..', 'preload', 'index.js'),
    rendererDir: join(opts.mainDir, '..', 'renderer'),
    resources: join(appDir, 'resources'),
    runtimesDir: opts.isPackaged ? join(opts.userData, 'runtimes') : null,
  };
}
