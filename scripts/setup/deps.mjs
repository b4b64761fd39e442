// The step `deps`: the project's own node_modules (npm ci against package-lock.json), skipped while its stamp matches the lock.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readJson, writeJson } from './files.mjs';
import { INSTALL_STAMP, ROOT } from './paths.mjs';
import { npmCommand, runTool } from './tool.mjs';

/** @type {Step} */
export const installStep = {
  name: 'deps',
  applies: (ctx) => !ctx.forVm,
  title: 'installing dependencies',
  isDone() {
    if (!existsSync(join(ROOT, 'node_modules'))) return false;
    const stamp = readJson(INSTALL_STAMP);
    return stamp !== null && stamp.lockHash === lockHash();
  },
  async run(ctx) {
    const hash = lockHash();
    // node_modules may already match the lockfile (someone ran `npm ci`/`npm install` by hand): then
    // only write the stamp instead of reinstalling everything.
    if (existsSync(join(ROOT, 'package-lock.json')) && installedTreeMatchesLock()) {
      writeJson(INSTALL_STAMP, { lockHash: hash, at: new Date().toISOString(), by: 'check' });
      return;
    }
    const hasLock = existsSync(join(ROOT, 'package-lock.json'));
    // --include=dev: the build needs the dev dependencies even when NODE_ENV=production.
    const args = [hasLock ? 'ci' : 'install', '--include=dev', '--no-audit', '--no-fund'];
    await runTool(ctx, `npm ${args[0]}`, npmCommand(args), {
      env: {
        CI: process.env.CI ?? 'true',
        // Electron fetches its binary lazily since v42; make sure no older path tries to download it.
        ELECTRON_SKIP_BINARY_DOWNLOAD: '1',
        npm_config_update_notifier: 'false',
      },
    });
    writeJson(INSTALL_STAMP, { lockHash: hash, at: new Date().toISOString(), by: `npm ${args[0]}` });
    return `dependencies installed (npm ${args[0]})`;
  },
};

function lockHash() {
  const lock = join(ROOT, 'package-lock.json');
  const file = existsSync(lock) ? lock : join(ROOT, 'package.json');
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/**
 * True when node_modules/.package-lock.json (npm's record of what it installed) has every package of
 * package-lock.json at the locked version; packages npm may skip (optional, other platforms) may be absent.
 */
export function installedTreeMatchesLock(dir = ROOT) {
  const lock = readJson(join(dir, 'package-lock.json'));
  const installed = readJson(join(dir, 'node_modules', '.package-lock.json'));
  if (!lock?.packages || !installed?.packages) return false;
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '' || entry.link) continue;
    const have = installed.packages[path];
    if (!have) {
      if (entry.optional || entry.devOptional || entry.peer) continue;
      return false;
    }
    if (have.version !== entry.version) return false;
    if (!existsSync(join(dir, path))) return false;
  }
  return true;
}
