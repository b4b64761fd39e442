// IPC channels between the preload script and the main process, with their argument and result types.
// No imports on purpose: the sandboxed preload bundles this file and may only require 'electron'.

export const IPC = {
  adminToken: 'emu:admin-token',
  openFolder: 'emu:open-folder',
  reveal: 'emu:reveal',
  openInEditor: 'emu:open-in-editor',
  switchWorkspace: 'emu:switch-workspace',
} as const;

export type IpcChannel = (typeof IPC)[keyof typeof IPC];

/** What each channel takes (after the event) and what its handler resolves to. */
export interface IpcContract {
  'emu:admin-token': { args: []; result: string };
  'emu:open-folder': { args: []; result: string | null };
  'emu:reveal': { args: [path: string]; result: void };
  /** Resolves to '' when opened, else what went wrong (said to the user). */
  'emu:open-in-editor': { args: [path: string]; result: string };
  /** Restarts the app on another workspace folder; resolves to '' when restarting, else the reason. */
  'emu:switch-workspace': { args: [path: string]; result: string };
}

export type IpcArgs<C extends IpcChannel> = IpcContract[C]['args'];
export type IpcResult<C extends IpcChannel> = IpcContract[C]['result'];
