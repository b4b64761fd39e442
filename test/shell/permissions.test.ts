// The desktop shell refuses every permission a page asks for, in every session, and lets no page attach a
// <webview> (main/permissions.ts, wired by main/app.ts). Electron is the stub module; the handlers the app
// set are asked the way Chromium would ask them.
import { EventEmitter } from 'node:events';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import * as electron from 'electron';
import { runApp, type ElectronLike, type ShellDeps } from '../../main/app';
import { denyAllPermissions } from '../../main/permissions';

const stub = electron as unknown as typeof import('../stubs/electron');

// Every permission name Electron 45 passes to these handlers (electron.d.ts), and a made-up one.
const PERMISSIONS = [
  'ar',
  'automatic-fullscreen',
  'background-fetch',
  'background-sync',
  'captured-surface-control',
  'clipboard-read',
  'clipboard-sanitized-write',
  'deprecated-sync-clipboard-read',
  'display-capture',
  'fileSystem',
  'fullscreen',
  'geolocation',
  'geolocation-approximate',
  'hand-tracking',
  'hid',
  'idle-detection',
  'keyboardLock',
  'local-fonts',
  'local-network',
  'local-network-access',
  'loopback-network',
  'media',
  'mediaKeySystem',
  'midi',
  'midiSysex',
  'nfc',
  'notifications',
  'openExternal',
  'payment-handler',
  'periodic-background-sync',
  'persistent-storage',
  'pointerLock',
  'screen-wake-lock',
  'sensors',
  'serial',
  'smart-card',
  'speaker-selection',
  'storage-access',
  'system-wake-lock',
  'top-level-storage-access',
  'usb',
  'vr',
  'web-app-installation',
  'web-printing',
  'window-management',
  'unknown',
  'something-new',
];
const ORIGIN = 'http://127.0.0.1:41234';

function deps(): ShellDeps {
  const handle = { url: ORIGIN, adminToken: 'admin-secret', localApiKey: 'svc_local', stop: vi.fn(async () => undefined) };
  return {
    electron: stub as unknown as ElectronLike,
    startEmulator: vi.fn(async () => handle),
    config: { dataDir: '/tmp/data', workspace: '/tmp/ws', port: 0 },
    preloadPath: '/app/out/preload/index.js',
    platform: 'linux',
    log: { info: vi.fn(), error: vi.fn() },
  };
}

/** Asks every handler of a session about every permission; returns what was granted (should be nothing). */
async function granted(session: InstanceType<typeof stub.FakeSession>): Promise<string[]> {
  expect(session.permissionRequestHandler, 'a permission request handler is set').toBeTypeOf('function');
  expect(session.permissionCheckHandler, 'a permission check handler is set').toBeTypeOf('function');
  expect(session.devicePermissionHandler, 'a device permission handler is set').toBeTypeOf('function');
  expect(session.displayMediaRequestHandler, 'a display media handler is set').toBeTypeOf('function');
  const out: string[] = [];
  for (const permission of PERMISSIONS) {
    const answer = await new Promise<boolean>((resolve) =>
      session.permissionRequestHandler!({}, permission, resolve, { requestingUrl: `${ORIGIN}/`, isMainFrame: true }),
    );
    if (answer !== false) out.push(`request ${permission}: ${String(answer)}`);
    for (const origin of [ORIGIN, 'https://example.com']) {
      const check = session.permissionCheckHandler!({}, permission, origin, { isMainFrame: true });
      if (check !== false) out.push(`check ${permission} from ${origin}: ${String(check)}`);
    }
  }
  for (const deviceType of ['hid', 'serial', 'usb']) {
    if (session.devicePermissionHandler!({ deviceType, origin: ORIGIN, device: {} }) !== false) out.push(`device ${deviceType}`);
  }
  const streams = await new Promise((resolve) => session.displayMediaRequestHandler!({ securityOrigin: ORIGIN }, resolve));
  if (streams !== null) out.push(`display media: ${JSON.stringify(streams)}`);
  return out;
}

beforeEach(() => stub.resetElectronStub());

describe('the shell denies every permission', () => {
  it('on the default session, before the window opens', async () => {
    let handlersWhenWindowOpened = false;
    const real = stub.BrowserWindow;
    const spy = vi.spyOn(stub.BrowserWindow.instances, 'push').mockImplementation(function (this: unknown[], ...items) {
      handlersWhenWindowOpened = stub.session.defaultSession.permissionRequestHandler !== null;
      return Array.prototype.push.apply(this, items);
    });
    const running = await runApp(deps());
    spy.mockRestore();
    expect(running).not.toBeNull();
    expect(real.instances).toHaveLength(1);
    expect(handlersWhenWindowOpened).toBe(true);
    expect(await granted(stub.session.defaultSession)).toEqual([]);
  });

  it('on every session created later (a partition, a webview’s, a future window’s)', async () => {
    await runApp(deps());
    const later = stub.session.fromPartition('persist:other');
    expect(await granted(later)).toEqual([]);
  });

  it('and no page may attach a <webview>', async () => {
    await runApp(deps());
    const contents = new EventEmitter();
    stub.app.emit('web-contents-created', {}, contents);
    const event = { preventDefault: vi.fn() };
    contents.emit('will-attach-webview', event, {}, { src: 'https://example.com' });
    expect(event.preventDefault).toHaveBeenCalledTimes(1);
  });

  it('denyAllPermissions alone sets all four handlers', async () => {
    const session = new stub.FakeSession();
    denyAllPermissions(session);
    expect(await granted(session)).toEqual([]);
  });
});
