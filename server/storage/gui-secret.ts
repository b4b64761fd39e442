import { createHmac, randomBytes } from 'node:crypto';
import { chmod, open, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { DataDirError } from '../errors';
import { writeFileAtomic } from './atomic-file';

/**
 * The GUI's session secret: 32 random bytes in `<data-dir>/gui-session.key` (mode 0600), made on the first
 * start and kept across restarts, so a browser signed in once stays signed in (server/http/gui-session.ts).
 * It lives in its own file, never in db.json, so a state export never carries it. Rotating it
 * (`svc-emu gui-token rotate`) signs every browser out.
 */
export const GUI_SECRET_FILE = 'gui-session.key';
const PREFIX = 'gs1_';

export const guiSecretPath = (dataDir: string) => join(dataDir, GUI_SECRET_FILE);

const encode = (secret: Buffer) => `${PREFIX}${secret.toString('base64url')}\n`;

function decode(text: string): Buffer | null {
  const body = text.trim();
  if (!body.startsWith(PREFIX)) return null;
  const secret = Buffer.from(body.slice(PREFIX.length), 'base64url');
  return secret.length === 32 ? secret : null;
}

/** The secret of the data dir, made (0600, exclusively) when there is none yet or the file is unreadable. */
export async function loadOrCreateGuiSecret(dataDir: string): Promise<Buffer> {
  const path = guiSecretPath(dataDir);
  for (let attempt = 0; attempt < 3; attempt++) {
    const text = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw new DataDirError(path, `cannot be read: ${err.message}`);
    });
    if (text !== null) {
      const secret = decode(text);
      if (secret) {
        // A copy restored with a looser mode: it signs a browser in, so only its owner may read it.
        const info = await stat(path);
        if ((info.mode & 0o077) !== 0) await chmod(path, 0o600);
        return secret;
      }
      return writeNewGuiSecret(dataDir); // damaged: a new one (browsers sign in again)
    }
    const secret = randomBytes(32);
    try {
      const fh = await open(path, 'wx', 0o600);
      try {
        await fh.writeFile(encode(secret));
        await fh.datasync();
      } finally {
        await fh.close();
      }
      return secret;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new DataDirError(path, `cannot be created: ${(err as Error).message}`);
      // Made by someone else in the meantime: read theirs.
    }
  }
  throw new DataDirError(path, 'could not be read or created');
}

/** A new secret, written atomically (0600) over the old one: every session cookie made with the old one stops working. */
export async function writeNewGuiSecret(dataDir: string): Promise<Buffer> {
  const secret = randomBytes(32);
  await writeFileAtomic(guiSecretPath(dataDir), encode(secret), 0o600);
  return secret;
}

/** The session cookie's value for a secret: an HMAC of it, so the cookie never is the file's content. */
export function sessionCookieValue(secret: Buffer): string {
  return createHmac('sha256', secret).update('svc-emu gui session v1').digest('base64url');
}
