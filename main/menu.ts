// The desktop app's menu: the places and the key a user reaches for (API.md: open the workspace folder,
// reveal the data dir, copy the API key, quit). Plain data, so it is tested without Electron.
export interface MenuItem {
  label?: string;
  role?: 'quit' | 'reload' | 'toggleDevTools' | 'copy' | 'paste' | 'selectAll' | 'cut' | 'undo' | 'redo';
  type?: 'separator';
  accelerator?: string;
  enabled?: boolean;
  click?: () => void;
  submenu?: MenuItem[];
}

export interface MenuActions {
  openWorkspace(): void;
  revealDataDir(): void;
  /** Null when the local tenant's key cannot be shown (the item is then disabled). */
  copyApiKey: (() => void) | null;
  openInBrowser(): void;
}

export function menuTemplate(actions: MenuActions): MenuItem[] {
  return [
    {
      label: 'Snippet Emulator',
      submenu: [
        { label: 'Open Workspace Folder', accelerator: 'CmdOrCtrl+O', click: actions.openWorkspace },
        { label: 'Reveal Data Folder', click: actions.revealDataDir },
        { label: 'Copy API Key', accelerator: 'CmdOrCtrl+Shift+K', enabled: actions.copyApiKey !== null, click: actions.copyApiKey ?? undefined },
        { label: 'Open in Browser', click: actions.openInBrowser },
        { type: 'separator' },
        { role: 'quit', accelerator: 'CmdOrCtrl+Q' },
      ],
    },
    { label: 'Edit', submenu: [{ role: 'undo' }, { role: 'redo' }, { type: 'separator' }, { role: 'cut' }, { role: 'copy' }, { role: 'paste' }, { role: 'selectAll' }] },
    { label: 'View', submenu: [{ role: 'reload' }, { role: 'toggleDevTools' }] },
  ];
}
