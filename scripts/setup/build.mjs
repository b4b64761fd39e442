// The step `build`: electron-vite (main, preload, renderer) and the CLI bundle, side by side; redone when a source's
// path, size or mtime changes or an output is missing.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { readJson, writeJson } from './files.mjs';
import { BUILD_STAMP, ROOT, SKIP_DIRS } from './paths.mjs';
import { runTool, SetupError } from './tool.mjs';

/** Sources whose change means a rebuild (directories are walked; missing entries are fine). */
const BUILD_INPUTS = [
  'main',
  'renderer',
  'server',
  'executor',
  'contract',
  'electron.vite.config.ts',
  'vite.cli.config.ts',
  'tsconfig.json',
  'package.json',
  'package-lock.json',
];
/** What a finished build leaves behind; a missing one means a rebuild even when sources did not change. */
export const BUILD_OUTPUTS = ['out/main/index.js', 'out/preload/index.js', 'out/renderer/index.html', 'out/cli/svc-emu.mjs'];

/** @type {Step} */
export const buildStep = {
  name: 'build',
  title: 'building (electron-vite + CLI bundle)',
  applies: (ctx) => ctx.build && !ctx.forVm,
  isDone() {
    if (!BUILD_OUTPUTS.every((p) => existsSync(join(ROOT, p)))) return false;
    const stamp = readJson(BUILD_STAMP);
    return stamp !== null && stamp.hash === sourceHash();
  },
  async run(ctx) {
    const hash = sourceHash();
    rmSync(BUILD_STAMP, { force: true });
    const bin = (pkg, file) => join(ROOT, 'node_modules', pkg, 'bin', file);
    const env = { NODE_ENV: 'production' };
    // The two builds are independent: run them side by side.
    const results = await Promise.allSettled([
      runTool(ctx, 'electron-vite build', [process.execPath, bin('electron-vite', 'electron-vite.js'), 'build'], { env }),
      runTool(
        ctx,
        'CLI bundle (vite build -c vite.cli.config.ts)',
        [process.execPath, bin('vite', 'vite.js'), 'build', '-c', 'vite.cli.config.ts'],
        { env },
      ),
    ]);
    const failures = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
    if (failures.length > 0) throw new SetupError(failures.map((e) => (e instanceof Error ? e.message : String(e))).join('\n\n'));
    const missing = BUILD_OUTPUTS.filter((p) => !existsSync(join(ROOT, p)));
    if (missing.length > 0) throw new SetupError(`the build finished but did not produce ${missing.join(', ')}`);
    writeJson(BUILD_STAMP, { hash, at: new Date().toISOString() });
    return 'built out/main, out/preload, out/renderer and out/cli/svc-emu.mjs';
  },
};

/** A hash of the path, size and mtime of every build input: cheap (stat only) and catches any edit. */
export function sourceHash() {
  const hash = createHash('sha256');
  const visit = (abs) => {
    let st;
    try {
      st = statSync(abs);
    } catch {
      return;
    }
    if (st.isDirectory()) {
      for (const name of readdirSync(abs).sort()) {
        if (name.startsWith('.') || SKIP_DIRS.has(name)) continue;
        visit(join(abs, name));
      }
    } else if (st.isFile()) {
      hash.update(`${relative(ROOT, abs).split(sep).join('/')}\0${st.size}\0${st.mtimeMs}\n`);
    }
  };
  for (const input of BUILD_INPUTS) visit(join(ROOT, input));
  return hash.digest('hex');
}
