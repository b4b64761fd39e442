// `npm start` on this machine: no Electron binary, so it says why in one line and serves headless.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { coreReady, Proc, ROOT } from './helpers';
// @ts-expect-error -- plain ESM script without types
import { electronUnavailableReason } from '../../scripts/start.mjs';

const electronInstalled = existsSync(join(ROOT, 'node_modules/electron/path.txt'));

describe('scripts/start.mjs', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'svc-emu-start-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it.skipIf(!coreReady || electronInstalled)(
    'says why Electron is not used and runs headless, printing the GUI URL',
    { timeout: 300_000 },
    async () => {
      const workspace = join(tmp, 'ws');
      mkdirSync(workspace);
      const env = { ...process.env };
      delete env.DISPLAY;
      delete env.WAYLAND_DISPLAY;
      delete env.CI;
      const proc = new Proc(['scripts/start.mjs', '--port', '0', '--data-dir', join(tmp, 'data'), '--workspace', workspace], { env });
      try {
        await proc.waitFor(/running headless/, 240_000); // setup may build first
        const reasons = proc.stdout.split('\n').filter((l) => l.includes('running headless'));
        expect(reasons).toEqual(['no display (DISPLAY and WAYLAND_DISPLAY are unset) — running headless']);

        const [url] = await proc.waitFor(/http:\/\/(?:127\.0\.0\.1|localhost|\[::1\]):(?!0\b)\d+\/\S*/);
        const res = await fetch(url);
        expect(res.status).toBeLessThan(500);

        // SIGTERM reaches the core through start.mjs; the core stops cleanly and its exit code comes back.
        expect(await proc.stop('SIGTERM')).toEqual({ code: 0, signal: null });
      } finally {
        await proc.stop('SIGKILL');
      }
    },
  );
});

describe('electronUnavailableReason', () => {
  it('gives the reason Electron cannot open a window, or null where a desktop can (the binary is fetched then)', () => {
    expect(electronUnavailableReason({ CI: 'true', DISPLAY: ':0' }, 'linux', ROOT)).toBe('CI is set');
    expect(electronUnavailableReason({}, 'linux', ROOT)).toBe('no display (DISPLAY and WAYLAND_DISPLAY are unset)');
    expect(electronUnavailableReason({ DISPLAY: ':0' }, 'linux', '/nonexistent')).toBe('the electron package is not installed');
    expect(electronUnavailableReason({ WAYLAND_DISPLAY: 'wayland-0' }, 'linux', ROOT)).toBeNull();
    expect(electronUnavailableReason({}, 'darwin', ROOT)).toBeNull();
  });
});
