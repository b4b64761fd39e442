// The typed surface the preload script exposes to the renderer as `window.svcEmu`.
// Types only: the renderer imports this file for its types and never pulls Electron code in.

export interface SvcEmuBridge {
  /** The core's admin token (the GUI signs in to `/_emu` with it). Read it with `await`. */
  readonly adminToken: Promise<string>;
  /** Shows a native folder picker; resolves to the chosen folder, or null when cancelled. */
  openFolder(): Promise<string | null>;
  /** Reveals a file or folder in the system's file manager. */
  reveal(path: string): Promise<void>;
  /**
   * Opens a workspace source file with the app the OS uses for it (the user's editor). Only files inside
   * the watched workspace with a source extension; resolves to '' when opened, else the reason.
   */
  openInEditor(path: string): Promise<string>;
  /**
   * Restarts the app on another workspace folder (from `openFolder`), with that folder's own data dir.
   * Resolves to '' when the app is restarting, else the reason it cannot.
   */
  switchWorkspace(path: string): Promise<string>;
}

declare global {
  interface Window {
    /** Present only inside the desktop app (set by main/preload.ts). */
    svcEmu?: SvcEmuBridge;
  }
}
