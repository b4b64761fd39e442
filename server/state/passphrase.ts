import { createCipheriv, createDecipheriv, randomBytes, scrypt } from 'node:crypto';

/**
 * The secrets of a state archive, sealed with a passphrase the user gives (docs/state.md, "Secrets"):
 * scrypt turns the passphrase into a 256-bit key, AES-256-GCM seals the JSON of the secrets. The data
 * dir's own key never travels: on import every value is sealed again with the target's key
 * (server/crypto/secret-box.ts).
 */
export interface Kdf {
  name: 'scrypt';
  salt: string;
  N: number;
  r: number;
  p: number;
}

const AAD = Buffer.from('svc-emu-state secrets v1', 'utf8');
/** 2^15 × 8 × 128 B = 32 MiB of memory and ~0.1 s per try here: slow for a guesser, quick for one import. */
const DEFAULT_KDF = { N: 1 << 15, r: 8, p: 1 };

export class PassphraseError extends Error {}

function deriveKey(passphrase: string, kdf: Kdf): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(
      passphrase.normalize('NFC'),
      Buffer.from(kdf.salt, 'base64'),
      32,
      { N: kdf.N, r: kdf.r, p: kdf.p, maxmem: 256 * kdf.N * kdf.r },
      (err, key) => (err ? reject(err) : resolve(key)),
    ),
  );
}

export async function sealWithPassphrase(plaintext: Buffer, passphrase: string): Promise<{ kdf: Kdf; sealed: Buffer }> {
  const kdf: Kdf = { name: 'scrypt', salt: randomBytes(16).toString('base64'), ...DEFAULT_KDF };
  const key = await deriveKey(passphrase, kdf);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(AAD);
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { kdf, sealed: Buffer.concat([iv, cipher.getAuthTag(), ct]) };
}

/** Throws PassphraseError when the passphrase is not the one the archive was sealed with. */
export async function openWithPassphrase(sealed: Buffer, passphrase: string, kdf: Kdf): Promise<Buffer> {
  if (kdf.N > 1 << 20 || kdf.r > 32 || kdf.p > 16)
    throw new PassphraseError('the archive asks for scrypt parameters beyond what this emulator allows');
  if (sealed.length < 28) throw new PassphraseError('the sealed secrets are cut short');
  const key = await deriveKey(passphrase, kdf);
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, 12));
  decipher.setAAD(AAD);
  decipher.setAuthTag(sealed.subarray(12, 28));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]);
  } catch {
    throw new PassphraseError('the passphrase does not open this archive’s secrets (wrong passphrase)');
  }
}
