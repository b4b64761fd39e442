// The desktop app's secrets key (main/secret-key.ts): sealed by the OS keychain (Electron safeStorage,
// here the stub's stand-in keychain), kept as a file where a data dir already has one or the OS offers no
// protection; and the headless core refusing a data dir whose key only the desktop app can open.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as electron from 'electron';
import { keychainKeyProvider, keyStorage } from '../../main/secret-key';
import { keyFileProvider, startEmulator } from '../../server';
import { DataDirError } from '../../server/errors';
import { jsonLogger } from '../../server/logger';

const stub = electron as unknown as typeof import('../stubs/electron');
const log = { info: vi.fn() };
const quiet = jsonLogger(() => undefined);
let dir: string;

beforeEach(async () => {
  stub.resetElectronStub();
  dir = await mkdtemp(join(tmpdir(), 'svc-key-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const provider = (platform: NodeJS.Platform = 'linux') =>
  keychainKeyProvider({ dataDir: dir, safeStorage: stub.safeStorage, platform, log });

describe('keychainKeyProvider', () => {
  it("seals a new data dir's key with the keychain: no key file, nothing readable on disk, the same key next time", async () => {
    const key = await provider()();
    expect(key).toHaveLength(32);
    expect(existsSync(join(dir, 'secret.key'))).toBe(false);
    const sealed = await readFile(join(dir, 'secret.key.safe'));
    expect(sealed.includes(Buffer.from(key.toString('base64')))).toBe(false);
    expect((await stat(join(dir, 'secret.key.safe'))).mode & 0o777).toBe(0o600);
    expect((await provider()()).equals(key)).toBe(true);
    expect(keyStorage(dir, stub.safeStorage, 'linux')).toEqual({ kind: 'keychain', path: join(dir, 'secret.key.safe') });
  });

  it('keeps the key file of a data dir made by svc-emu serve, so the headless core can still open it', async () => {
    const fileKey = await keyFileProvider(join(dir, 'secret.key'))();
    expect((await provider()()).equals(fileKey)).toBe(true);
    expect(existsSync(join(dir, 'secret.key.safe'))).toBe(false);
    expect(log.info).toHaveBeenCalledWith(expect.stringMatching(/key file .*made by svc-emu serve/));
  });

  it('falls back to a 0600 key file, saying why, when the OS offers no real protection', async () => {
    stub.safeStorage.backend = 'basic_text'; // Linux without libsecret or kwallet: a hard-coded password
    expect(keyStorage(dir, stub.safeStorage, 'linux')).toMatchObject({ kind: 'file', reason: expect.stringMatching(/basic_text/) });
    // The same backend name means nothing on macOS, where the Keychain is always there.
    expect(keyStorage(dir, stub.safeStorage, 'darwin')).toMatchObject({ kind: 'keychain' });
    stub.safeStorage.available = false;
    expect(keyStorage(dir, stub.safeStorage, 'darwin')).toMatchObject({ kind: 'file', reason: 'the OS keychain is not available' });
    const key = await provider('darwin')();
    expect(Buffer.from((await readFile(join(dir, 'secret.key'), 'utf8')).trim(), 'base64').equals(key)).toBe(true);
  });

  it("says plainly when another user's keychain sealed the key, instead of making a new one", async () => {
    await provider()();
    stub.safeStorage.failDecrypt = true;
    const err = await provider()().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect(String((err as Error).message)).toMatch(/secret\.key\.safe: cannot be opened with this user's OS keychain/);
    expect(existsSync(join(dir, 'secret.key'))).toBe(false);
  });

  it('refuses a sealed key that is not 32 bytes', async () => {
    await writeFile(join(dir, 'secret.key.safe'), stub.safeStorage.encryptString(Buffer.alloc(16).toString('base64')));
    await expect(provider()()).rejects.toThrow(/does not hold a 32-byte key/);
  });
});

describe('a data dir whose key the desktop app sealed', () => {
  it('keeps secrets across restarts of the desktop core, and the headless core refuses it with what to do', async () => {
    const ws = await mkdtemp(join(tmpdir(), 'svc-key-ws-'));
    try {
      const start = () => startEmulator({ dataDir: dir, port: 0, logger: quiet, secretKeyProvider: provider() });
      let emu = await start();
      const { tenant } = await emu.services.tenants.ensureLocal();
      await emu.services.secrets.put(tenant, 'PROVIDER_API_KEY', 'sk-kept-across-restarts');
      await emu.stop();
      emu = await start();
      expect(emu.services.secrets.reveal(tenant)).toEqual({ PROVIDER_API_KEY: 'sk-kept-across-restarts' });
      // The local tenant's API key (sealed with the same key) is still shown to the GUI.
      expect(emu.localApiKey).toMatch(/^svc_/);
      await emu.stop();
      expect(existsSync(join(dir, 'secret.key'))).toBe(false);

      // `svc-emu serve` (no keychain provider) must not make a new key: that would orphan the secrets.
      await expect(startEmulator({ dataDir: dir, port: 0, workspace: ws, logger: quiet })).rejects.toThrow(
        /secret\.key\.safe: holds this data dir's secrets key, sealed by the desktop app's OS keychain[\s\S]*Open this data dir with the desktop app/,
      );
      expect(existsSync(join(dir, 'secret.key'))).toBe(false);
    } finally {
      await rm(ws, { recursive: true, force: true });
    }
  });
});
