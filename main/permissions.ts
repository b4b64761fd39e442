// Permissions the GUI's pages may ask Electron for: none. Without handlers Electron grants every request
// (camera, microphone, geolocation, notifications, clipboard, HID/USB/serial, …); the GUI needs none of them,
// so every session the app uses refuses them all, and no page may attach a <webview>.
// Electron comes in as arguments (main/app.ts), so this runs under plain Node in tests.

export interface PreventableEventLike {
  preventDefault(): void;
}

/** The part of Electron's `Session` that decides permissions. */
export interface SessionLike {
  setPermissionRequestHandler(
    handler: (webContents: unknown, permission: string, callback: (granted: boolean) => void, details?: unknown) => void,
  ): void;
  setPermissionCheckHandler(
    handler: (webContents: unknown, permission: string, requestingOrigin?: string, details?: unknown) => boolean,
  ): void;
  /** HID, USB and serial devices (Electron ≥ 17). */
  setDevicePermissionHandler?(handler: (details: unknown) => boolean): void;
  /** getDisplayMedia (Electron ≥ 22): answering null refuses. */
  setDisplayMediaRequestHandler?(handler: (request: unknown, callback: (streams: null) => void) => void): void;
}

export interface WebContentsLike {
  on(event: 'will-attach-webview', listener: (event: PreventableEventLike) => void): unknown;
}

/** Refuses every permission request and check on a session, whatever the page or the permission. */
export function denyAllPermissions(session: SessionLike): void {
  session.setPermissionRequestHandler((_webContents, _permission, callback) => callback(false));
  session.setPermissionCheckHandler(() => false);
  session.setDevicePermissionHandler?.(() => false);
  session.setDisplayMediaRequestHandler?.((_request, callback) => callback(null));
}

/** No <webview> in any page: the GUI has none, so one attaching would be an injected page's doing. */
export function refuseWebviews(contents: WebContentsLike): void {
  contents.on('will-attach-webview', (event) => event.preventDefault());
}
