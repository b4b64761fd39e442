// The desktop app's secrets key: 32 random bytes sealed by the OS keychain through Electron's
// `safeStorage` (Keychain on macOS, DPAPI on Windows, libsecret/kwallet on Linux) instead of a 0600
// file, so a copied data dir or a backup does not carry the key to its secrets in the clear.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { DataDirError, dataDirPaths, keyFileProvider, keychainKeyPath, type SecretKeyProvider } from '../server';

/** The part of Electron's `safeStorage` used here. */
export interface SafeStorageLike {
  isEncryptionAvailable(): boolean;
  encryptString(plainText: string): Buffer;
  decryptString(encrypted: Buffer): string;
  /** Linux only: which store seals the data (`basic_text` means a hard-coded password, i.e. none). */
  getSelectedStorageBackend?(): string;
}

/** Where a data dir's key is kept, and why. */
export type KeyStorage = { kind: 'keychain'; path: string } | { kind: 'file'; path: string; reason: string };

/**
 * Decides where the key of `dataDir` lives. A data dir that already has a key file (made by
 * `svc-emu serve`) keeps it, so the headless core can still open it; a new one gets a keychain-sealed
 * key when the OS offers real protection, and a 0600 file otherwise (said in the log).
 */
export function keyStorage(dataDir: string, safeStorage: SafeStorageLike, platform: NodeJS.Platform): KeyStorage {
  const file = dataDirPaths(dataDir).secretKey;
  const sealed = keychainKeyPath(file);
  if (existsSync(sealed)) return { kind: 'keychain', path: sealed };
  if (existsSync(file))
    return {
      kind: 'file',
      path: file,
      reason: 'this data dir already has a key file (made by svc-emu serve), kept so the headless core can open it',
    };
  const unusable = keychainUnusable(safeStorage, platform);
  if (unusable) return { kind: 'file', path: file, reason: unusable };
  return { kind: 'keychain', path: sealed };
}

function keychainUnusable(safeStorage: SafeStorageLike, platform: NodeJS.Platform): string | null {
  if (!safeStorage.isEncryptionAvailable()) return 'the OS keychain is not available';
  if (platform === 'linux') {
    const backend = safeStorage.getSelectedStorageBackend?.() ?? 'unknown';
    if (backend === 'basic_text' || backend === 'unknown')
      return `no secret service (libsecret or kwallet) is running (safeStorage backend: ${backend})`;
  }
  return null;
}

export function keychainKeyProvider(opts: {
  dataDir: string;
  safeStorage: SafeStorageLike;
  platform: NodeJS.Platform;
  log: { info(...args: unknown[]): void };
}): SecretKeyProvider {
  return async () => {
    const storage = keyStorage(opts.dataDir, opts.safeStorage, opts.platform);
    if (storage.kind === 'file') {
      opts.log.info(`Secrets key: a 0600 key file (${storage.path}): ${storage.reason}.`);
      return keyFileProvider(storage.path)();
    }
    opts.log.info(`Secrets key: sealed by the OS keychain (${storage.path}).`);
    return (await readSealed(storage.path, opts.safeStorage)) ?? (await createSealed(storage.path, opts.safeStorage));
  };
}

async function readSealed(path: string, safeStorage: SafeStorageLike): Promise<Buffer | null> {
  let sealed: Buffer;
  try {
    sealed = await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  let key: Buffer;
  try {
    key = Buffer.from(safeStorage.decryptString(sealed), 'base64');
  } catch {
    throw new DataDirError(
      path,
      "cannot be opened with this user's OS keychain (it was sealed by another user or machine)",
      'The stored secrets cannot be read without it: open the data dir as the user who made it, or use another --data-dir.',
    );
  }
  if (key.length !== 32)
    throw new DataDirError(path, 'does not hold a 32-byte key', 'Restore it from a backup: without it the stored secrets cannot be read.');
  return key;
}

async function createSealed(path: string, safeStorage: SafeStorageLike): Promise<Buffer> {
  const key = randomBytes(32);
  let fh;
  try {
    fh = await open(path, 'wx', 0o600);
  } catch (err) {
    // Another start won the race: use its key.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return (await readSealed(path, safeStorage))!;
    throw err;
  }
  try {
    await fh.writeFile(safeStorage.encryptString(key.toString('base64')));
    await fh.datasync();
  } finally {
    await fh.close();
  }
  return key;
}
