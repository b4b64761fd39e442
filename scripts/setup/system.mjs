// Host tools from apt-get that the project can do without (degraded, never fatal): chromium for the GUI tests,
// bubblewrap for the parity sandbox, zsh for the test that parses the zsh completion script.
import { existsSync } from 'node:fs';
import { findOnPath, readJson, writeJson } from './files.mjs';
import { HOST_STAMP } from './paths.mjs';
import { runTool } from './tool.mjs';

const CHROMIUM = '/usr/bin/chromium';
/** After a failed apt-get install (chromium, bubblewrap), wait this long before trying again (apt can be slow when offline). */
const HOST_TOOL_RETRY_MS = 6 * 60 * 60 * 1000;

/**
 * A host tool from apt-get that the project can do without (degraded): installed where apt can, never
 * failing the set-up; a failed install is remembered for a while (retry with --retry-host-tools).
 * @param {{ name: string, pkg: string, find: () => string | null | undefined, timeoutMs: number, without: string, applies?: (ctx: Ctx) => boolean }} tool
 * @returns {Step}
 */
function hostToolStep(tool) {
  const failedKey = `${tool.name}FailedAt`;
  return {
    name: tool.name,
    title: `installing ${tool.pkg} (apt-get)`,
    ...(tool.applies ? { applies: tool.applies } : {}),
    isDone(ctx) {
      if (tool.find()) return true;
      const why = aptUnavailableReason(tool.pkg);
      if (why) {
        ctx.notice(`setup: ${why} — ${tool.without}`);
        return true;
      }
      const failed = readJson(HOST_STAMP)?.[failedKey];
      if (typeof failed === 'number' && Date.now() - failed < HOST_TOOL_RETRY_MS) {
        ctx.notice(`setup: ${tool.pkg} is not installed (apt-get failed recently; retry with --retry-host-tools) — ${tool.without}`);
        return true;
      }
      return false;
    },
    async run(ctx) {
      try {
        await aptGetInstall(ctx, [tool.pkg], tool.timeoutMs);
      } catch (error) {
        writeJson(HOST_STAMP, { ...readJson(HOST_STAMP), [failedKey]: Date.now() });
        ctx.notice(
          `setup: could not install ${tool.pkg} (${error instanceof Error ? error.message.split('\n')[0] : error}) — ${tool.without}`,
        );
        return;
      }
      const bin = tool.find();
      if (!bin) {
        ctx.notice(`setup: apt-get installed ${tool.pkg} but it is not where it should be — ${tool.without}`);
        return;
      }
      return `installed ${tool.pkg} (${bin})`;
    },
  };
}

export const chromiumStep = hostToolStep({
  name: 'chromium',
  pkg: 'chromium',
  applies: (ctx) => ctx.forTest,
  find: () => chromiumPath(),
  timeoutMs: 900_000,
  without: 'the GUI tests will skip',
});

/** @type {Step} */
export const bubblewrapStep = hostToolStep({
  name: 'bubblewrap',
  pkg: 'bubblewrap',
  find: () => findOnPath('bwrap'),
  timeoutMs: 300_000,
  without: 'snippets will run without the parity sandbox (parity degraded)',
});

/** @type {Step} */
export const zshStep = hostToolStep({
  name: 'zsh',
  pkg: 'zsh',
  applies: (ctx) => ctx.forTest,
  find: () => findOnPath('zsh'),
  timeoutMs: 300_000,
  without: 'the zsh completion script is not parsed by zsh in the tests (that test skips)',
});

function chromiumPath() {
  const override = process.env.SVC_EMU_CHROMIUM;
  if (override && existsSync(override)) return override;
  return existsSync(CHROMIUM) ? CHROMIUM : null;
}

/** Why `pkg` cannot be installed here with apt-get, or null when it can. */
function aptUnavailableReason(pkg) {
  if (process.platform !== 'linux') return `${pkg} is not installed (automatic install is for Debian only; this is ${process.platform})`;
  if (!existsSync('/etc/debian_version') || !existsSync('/usr/bin/apt-get'))
    return `${pkg} is not installed (automatic install is for Debian only)`;
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    return `${pkg} is not installed and setup is not root (run: sudo apt-get install --no-install-recommends ${pkg})`;
  }
  return null;
}

/**
 * `apt-get install -y --no-install-recommends PACKAGES`, after one `apt-get update` per set-up run
 * (shared by every step that installs a host tool). Rejects with the output's tail.
 * @param {Ctx} ctx
 * @param {string[]} packages
 * @param {number} timeoutMs
 */
async function aptGetInstall(ctx, packages, timeoutMs) {
  const env = { DEBIAN_FRONTEND: 'noninteractive' };
  if (!ctx.aptUpdated) {
    await runTool(ctx, 'apt-get update', ['apt-get', 'update'], { env, timeoutMs: 180_000 });
    ctx.aptUpdated = true;
  }
  await runTool(ctx, `apt-get install ${packages.join(' ')}`, ['apt-get', 'install', '-y', '--no-install-recommends', ...packages], {
    env,
    timeoutMs,
  });
}
