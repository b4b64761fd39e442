// Main-process side of the IPC contract in ./ipc.ts: validates every message (sender and arguments)
// before it reaches the handlers.
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import { IPC, type IpcArgs, type IpcChannel, type IpcResult } from './ipc';

/** The part of Electron's IpcMainInvokeEvent the handlers look at. */
export interface InvokeEventLike {
  senderFrame?: { url: string } | null;
}

/** The part of Electron's ipcMain the handlers use. */
export interface IpcMainLike {
  handle(channel: string, listener: (event: InvokeEventLike, ...args: unknown[]) => unknown): void;
  removeHandler(channel: string): void;
}

export interface IpcHandlers {
  adminToken(): string;
  openFolder(): Promise<string | null>;
  reveal(path: string): Promise<void>;
  openInEditor(path: string): Promise<string>;
  switchWorkspace(path: string): Promise<string>;
}

const AbsolutePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => isAbsolute(p), { message: 'must be an absolute path' });

const argSchemas: { [C in IpcChannel]: z.ZodType<IpcArgs<C>> } = {
  [IPC.adminToken]: z.tuple([]),
  [IPC.openFolder]: z.tuple([]),
  [IPC.reveal]: z.tuple([AbsolutePath]),
  [IPC.openInEditor]: z.tuple([AbsolutePath]),
  [IPC.switchWorkspace]: z.tuple([AbsolutePath]),
};

export class IpcRejected extends Error {
  override readonly name = 'IpcRejected';
}

/**
 * Registers the handlers on `ipcMain`. Only frames whose URL has `trustedOrigin` (the core's origin)
 * may call them. Returns a function that removes them again.
 */
export function registerIpcHandlers(ipcMain: IpcMainLike, trustedOrigin: string, handlers: IpcHandlers): () => void {
  const on = <C extends IpcChannel>(channel: C, run: (...args: IpcArgs<C>) => IpcResult<C> | Promise<IpcResult<C>>) => {
    ipcMain.handle(channel, async (event, ...raw) => {
      if (!isTrustedSender(event, trustedOrigin)) throw new IpcRejected(`${channel}: untrusted sender`);
      const parsed = argSchemas[channel].safeParse(raw);
      if (!parsed.success) throw new IpcRejected(`${channel}: invalid arguments`);
      return run(...parsed.data);
    });
  };
  on(IPC.adminToken, () => handlers.adminToken());
  on(IPC.openFolder, () => handlers.openFolder());
  on(IPC.reveal, (path) => handlers.reveal(path));
  on(IPC.openInEditor, (path) => handlers.openInEditor(path));
  on(IPC.switchWorkspace, (path) => handlers.switchWorkspace(path));
  return () => {
    for (const channel of Object.values(IPC)) ipcMain.removeHandler(channel);
  };
}

export function isTrustedSender(event: InvokeEventLike, trustedOrigin: string): boolean {
  const url = event.senderFrame?.url;
  if (!url) return false;
  try {
    return new URL(url).origin === trustedOrigin;
  } catch {
    return false;
  }
}
