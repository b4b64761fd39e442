// Plain-Node stand-in for Electron's main-process API, for smoke-testing the BUILT main bundle without
// the Electron binary (docs/host-facts.md):  node --require ./test/stubs/electron-node.cjs out/main/index.js …
// It makes `require('electron')` resolve to this file and prints what the app does as lines of
// `[electron-stub] {json}` on stdout. After the first window loads its URL it calls the admin-token
// IPC handler the way the preload would, and reports the answer.
'use strict';
const Module = require('node:module');
const { EventEmitter } = require('node:events');

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === 'electron') return __filename;
  return resolveFilename.call(this, request, ...rest);
};

const report = (event, data = {}) => process.stdout.write(`[electron-stub] ${JSON.stringify({ event, ...data })}\n`);

// SVC_EMU_STUB_RESOURCES=<dir>: play an installed app (electron-builder's layout), with <dir> as
// process.resourcesPath and SVC_EMU_STUB_HOME as the user's home.
const packaged = process.env.SVC_EMU_STUB_RESOURCES;
if (packaged) process.resourcesPath = packaged;
const home = process.env.SVC_EMU_STUB_HOME || process.cwd();

class App extends EventEmitter {
  isPackaged = Boolean(packaged);
  requestSingleInstanceLock() {
    return true;
  }
  whenReady() {
    return Promise.resolve();
  }
  getPath(name) {
    if (!packaged) return process.cwd();
    return { userData: `${home}/.config/Snippet Emulator`, documents: `${home}/Documents` }[name] || home;
  }
  quit() {
    report('app.quit');
    let prevented = false;
    this.emit('before-quit', { preventDefault: () => (prevented = true) });
    if (prevented) return report('quit-deferred');
    this.emit('will-quit', { preventDefault() {} });
    this.emit('quit');
    report('exit', { code: 0 });
    setImmediate(() => process.exit(0));
  }
  relaunch(options) {
    report('relaunch', options);
  }
  exit(code = 0) {
    report('exit', { code });
    process.exit(code);
  }
}
const app = new App();

const handlers = new Map();
const ipcMain = {
  handle(channel, listener) {
    handlers.set(channel, listener);
  },
  removeHandler(channel) {
    handlers.delete(channel);
  },
};

class BrowserWindow extends EventEmitter {
  constructor(options) {
    super();
    this.webContents = Object.assign(new EventEmitter(), { setWindowOpenHandler() {} });
    report('window', { webPreferences: options.webPreferences });
  }
  async loadURL(url) {
    report('loadURL', { url });
    const handler = handlers.get('emu:admin-token');
    if (handler) {
      try {
        report('admin-token', { token: await handler({ senderFrame: { url } }) });
      } catch (error) {
        report('admin-token-error', { message: String(error && error.message) });
      }
    }
    setImmediate(() => this.emit('ready-to-show'));
  }
  show() {}
  focus() {}
  restore() {}
  isMinimized() {
    return false;
  }
  isDestroyed() {
    return false;
  }
}

module.exports = {
  app,
  BrowserWindow,
  ipcMain,
  ipcRenderer: { invoke: async () => undefined },
  contextBridge: { exposeInMainWorld() {} },
  dialog: {
    showOpenDialog: async () => ({ canceled: true, filePaths: [] }),
    showErrorBox: (title, content) => report('error-box', { title, content }),
  },
  shell: { showItemInFolder() {}, openExternal: async () => undefined, openPath: async () => '' },
  Menu: {
    buildFromTemplate: (template) => ({ template }),
    setApplicationMenu: (menu) => report('menu', { items: menu.template[0].submenu.map((i) => i.label || i.role) }),
  },
  clipboard: { writeText() {} },
  Tray: class {
    constructor(icon) {
      report('tray', { icon });
    }
    setToolTip(tooltip) {
      report('tray-tooltip', { tooltip });
    }
    setContextMenu(menu) {
      report('tray-menu', { items: menu.template.map((i) => i.label || i.role || i.type) });
    }
    on() {}
    destroy() {
      report('tray-destroy');
    }
  },
  // Sessions: report which permission handlers the app set (main/permissions.ts).
  session: {
    defaultSession: {
      setPermissionRequestHandler: (h) => report('permission-request-handler', { set: typeof h === 'function' }),
      setPermissionCheckHandler: (h) => report('permission-check-handler', { set: typeof h === 'function' }),
      setDevicePermissionHandler: () => {},
      setDisplayMediaRequestHandler: () => {},
      // The GUI's session cookie, set before the first load (main/app.ts): reported without its value.
      cookies: {
        set: async (c) => report('cookie-set', { url: c.url, name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite }),
      },
    },
  },
  // A stand-in keychain: reversible (the real one is the OS's), never the plaintext on disk.
  safeStorage: {
    isEncryptionAvailable: () => true,
    getSelectedStorageBackend: () => 'gnome_libsecret',
    encryptString: (text) => Buffer.concat([Buffer.from('keychain:'), Buffer.from(text).map((b) => b ^ 0x5a)]),
    decryptString: (buf) => Buffer.from(buf.subarray(9).map((b) => b ^ 0x5a)).toString(),
  },
};
