import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, open, chmod } from 'node:fs/promises';
import { DataDirError } from '../errors';

/**
 * Seals secret values at rest with AES-256-GCM. The associated data binds a sealed value to where it
 * belongs (tenant and name), so a value copied into another record fails to open instead of leaking.
 * Format: `v1.<base64url(iv ‖ tag ‖ ciphertext)>`.
 */
export interface SecretBox {
  seal(plaintext: string, context: string): string;
  open(sealed: string, context: string): string;
}

export function aesGcmSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error('secret box key must be 32 bytes');
  return {
    seal(plaintext, context) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return `v1.${Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64url')}`;
    },
    open(sealed, context) {
      if (!sealed.startsWith('v1.')) throw new Error('unknown sealed format');
      const raw = Buffer.from(sealed.slice(3), 'base64url');
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    },
  };
}

/** Where the 32-byte key comes from: a 0600 file headless, Electron `safeStorage` in the desktop app. */
export type SecretKeyProvider = () => Promise<Buffer>;

/**
 * Where the desktop app keeps a data dir's key sealed by the OS keychain (Electron `safeStorage`): beside
 * the key file, which then does not exist. Only that user's desktop app can open it.
 */
export const keychainKeyPath = (keyFile: string): string => `${keyFile}.safe`;

export function keyFileProvider(path: string): SecretKeyProvider {
  return async () => {
    // Making a new key here would orphan every stored secret (they are sealed with the keychain's key).
    if (existsSync(keychainKeyPath(path))) {
      throw new DataDirError(
        keychainKeyPath(path),
        "holds this data dir's secrets key, sealed by the desktop app's OS keychain: only the desktop app can open it",
        'Open this data dir with the desktop app (npm start); while it runs, svc-emu commands talk to it. Or use another --data-dir.',
      );
    }
    try {
      const fh = await open(path, 'wx', 0o600);
      const key = randomBytes(32);
      try {
        await fh.writeFile(key.toString('base64') + '\n');
        await fh.datasync();
      } finally {
        await fh.close();
      }
      return key;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const key = Buffer.from((await readFile(path, 'utf8')).trim(), 'base64');
    if (key.length !== 32) {
      throw new DataDirError(
        path,
        'is not a 32-byte base64 key',
        'Restore it from a backup: without it the stored secrets cannot be read.',
      );
    }
    await chmod(path, 0o600);
    return key;
  };
}
