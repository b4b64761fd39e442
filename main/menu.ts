// The desktop app's menu and tray menu: the places and the key a user reaches for (open the workspace
// folder, reveal the data dir, copy the API key, quit). Plain data, so it is tested without Electron.
export interface MenuItem {
  label?: string;
  role?: 'quit' | 'reload' | 'toggleDevTools' | 'copy' | 'paste' | 'selectAll' | 'cut' | 'undo' | 'redo';
  type?: 'separator';
  accelerator?: string;
  enabled?: boolean;
  click?: () => void;
  submenu?: MenuItem[];
}

/** Callbacks, handed to the menu items as they are (so declared as properties: none relies on `this`). */
export interface MenuActions {
  openWorkspace: () => void;
  /** Picks another workspace folder and restarts the app on it. */
  switchWorkspace: () => void;
  revealDataDir: () => void;
  /** Null when the local tenant's key cannot be shown (the item is then disabled). */
  copyApiKey: (() => void) | null;
  openInBrowser: () => void;
}

function placeItems(actions: MenuActions): MenuItem[] {
  return [
    { label: 'Open Workspace Folder', accelerator: 'CmdOrCtrl+O', click: actions.openWorkspace },
    { label: 'Switch Workspace…', accelerator: 'CmdOrCtrl+Shift+O', click: actions.switchWorkspace },
    { label: 'Reveal Data Folder', click: actions.revealDataDir },
    {
      label: 'Copy API Key',
      accelerator: 'CmdOrCtrl+Shift+K',
      enabled: actions.copyApiKey !== null,
      click: actions.copyApiKey ?? undefined,
    },
    { label: 'Open in Browser', click: actions.openInBrowser },
  ];
}

export function menuTemplate(actions: MenuActions): MenuItem[] {
  return [
    {
      label: 'Snippet Emulator',
      submenu: [...placeItems(actions), { type: 'separator' }, { role: 'quit', accelerator: 'CmdOrCtrl+Q' }],
    },
    {
      label: 'Edit',
      submenu: [
        { role: 'undo' },
        { role: 'redo' },
        { type: 'separator' },
        { role: 'cut' },
        { role: 'copy' },
        { role: 'paste' },
        { role: 'selectAll' },
      ],
    },
    { label: 'View', submenu: [{ role: 'reload' }, { role: 'toggleDevTools' }] },
  ];
}

/** The tray icon's menu: the window first, then the same places as the app menu, then quit. */
export function trayTemplate(actions: MenuActions & { showWindow: () => void }): MenuItem[] {
  // Accelerators mean nothing in a tray menu; they would only be shown beside the labels.
  const places = placeItems(actions).map(({ accelerator: _accelerator, ...item }) => item);
  return [
    { label: 'Show Snippet Emulator', click: actions.showWindow },
    { type: 'separator' },
    ...places,
    { type: 'separator' },
    { role: 'quit' },
  ];
}
