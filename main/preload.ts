// Preload script (sandboxed, built to CJS out/preload/index.js): exposes `window.svcEmu`, the minimal
// bridge typed in ./bridge.ts. It may only import 'electron' and ./ipc (which has no imports).
import { contextBridge, ipcRenderer } from 'electron';
import type { SvcEmuBridge } from './bridge';
import { IPC, type IpcResult } from './ipc';

const bridge: SvcEmuBridge = {
  // contextBridge copies plain values when exposing, so this getter runs once, at preload time (the main
  // process registers the handler before it creates the window); the promise is proxied to the page.
  get adminToken(): Promise<string> {
    return ipcRenderer.invoke(IPC.adminToken) as Promise<IpcResult<typeof IPC.adminToken>>;
  },
  openFolder: () => ipcRenderer.invoke(IPC.openFolder) as Promise<IpcResult<typeof IPC.openFolder>>,
  reveal: (path: string) => ipcRenderer.invoke(IPC.reveal, path) as Promise<IpcResult<typeof IPC.reveal>>,
  openInEditor: (path: string) => ipcRenderer.invoke(IPC.openInEditor, path) as Promise<IpcResult<typeof IPC.openInEditor>>,
  switchWorkspace: (path: string) => ipcRenderer.invoke(IPC.switchWorkspace, path) as Promise<IpcResult<typeof IPC.switchWorkspace>>,
};

contextBridge.exposeInMainWorld('svcEmu', bridge);
