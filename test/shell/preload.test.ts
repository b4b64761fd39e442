// main/preload.ts exposes exactly the typed bridge, wired to the IPC channels, with electron mocked.
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { SvcEmuBridge } from '../../main/bridge';
import { IPC } from '../../main/ipc';

const exposed = new Map<string, unknown>();
const invoke = vi.fn(async (channel: string, ..._args: unknown[]): Promise<unknown> => (channel === IPC.adminToken ? 'tok-123' : null));

vi.mock('electron', () => ({
  contextBridge: { exposeInMainWorld: (key: string, api: unknown) => exposed.set(key, api) },
  ipcRenderer: { invoke: (channel: string, ...args: unknown[]) => invoke(channel, ...args) },
}));

describe('main/preload', () => {
  beforeEach(() => invoke.mockClear());

  it('exposes window.svcEmu with adminToken, openFolder, reveal and openInEditor over the emu:* channels', async () => {
    await import('../../main/preload');
    expect([...exposed.keys()]).toEqual(['svcEmu']);
    const bridge = exposed.get('svcEmu') as SvcEmuBridge;
    expect(Object.keys(bridge).sort()).toEqual(['adminToken', 'openFolder', 'openInEditor', 'reveal', 'switchWorkspace']);

    await expect(bridge.adminToken).resolves.toBe('tok-123');
    expect(invoke).toHaveBeenLastCalledWith('emu:admin-token');
    await expect(bridge.openFolder()).resolves.toBeNull();
    expect(invoke).toHaveBeenLastCalledWith('emu:open-folder');
    await bridge.reveal('/tmp/x');
    expect(invoke).toHaveBeenLastCalledWith('emu:reveal', '/tmp/x');
    await bridge.openInEditor('/tmp/ws/snippets/a/index.ts');
    expect(invoke).toHaveBeenLastCalledWith('emu:open-in-editor', '/tmp/ws/snippets/a/index.ts');
  });
});
