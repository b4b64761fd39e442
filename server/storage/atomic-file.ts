import { open, rename, readFile, unlink, mkdir } from 'node:fs/promises';
import { dirname, basename, join } from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * Write a file so that readers see the old content or the new, never a mix: write a temp file beside
 * it, fsync, rename over the target, fsync the directory. A crash at any point leaves one whole file.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    const fh = await open(tmp, 'w', mode);
    try {
      await fh.writeFile(data);
      await fh.datasync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => {}); // a full disk must not fill up further with our half-written copies
    throw err;
  }
  await syncDir(dir);
}

export async function syncDir(dir: string): Promise<void> {
  // Directory fsync makes the rename itself durable; not supported everywhere (Windows), so best effort.
  try {
    const fh = await open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {
    /* best effort */
  }
}

export async function readFileIfExists(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** "at line 3, column 14: unexpected '}'" for text that does not parse as JSON. */
export function describeJsonError(text: string, err: unknown): string {
  const offset = jsonErrorOffset(text);
  if (offset === null) return err instanceof Error ? err.message : String(err);
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  const what = offset >= text.length ? 'unexpected end of input' : `unexpected ${JSON.stringify(text[offset])}`;
  return `${what} at line ${line}, column ${column}`;
}

/**
 * Offset of the first syntax error in `text`, or null if it is valid JSON. Engines differ in whether
 * their JSON.parse messages say where (Node 20 often does not), so we find it ourselves.
 */
export function jsonErrorOffset(text: string): number | null {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const fail = (): never => {
    throw i;
  };
  const literal = (word: string) => {
    for (const ch of word) if (text[i++] !== ch) (i--, fail());
  };
  const string = () => {
    i++; // opening quote
    for (;;) {
      if (i >= text.length) fail();
      const ch = text[i]!;
      if (ch === '"') return void i++;
      if (ch.charCodeAt(0) < 0x20) fail();
      if (ch === '\\') {
        i++;
        const esc = text[i];
        if (esc === 'u') {
          for (let k = 1; k <= 4; k++) if (!/[0-9a-fA-F]/.test(text[i + k] ?? '')) ((i += k), fail());
          i += 5;
        } else if (esc !== undefined && '"\\/bfnrt'.includes(esc)) i++;
        else fail();
      } else i++;
    }
  };
  const number = () => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m || m[0] === '-' || m[0] === '') fail();
    i += m![0].length;
  };
  const value = (): void => {
    ws();
    const ch = text[i];
    if (ch === '{') {
      i++;
      ws();
      if (text[i] === '}') return void i++;
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        string();
        ws();
        if (text[i] !== ':') fail();
        i++;
        value();
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') return void i++;
        else fail();
      }
    } else if (ch === '[') {
      i++;
      ws();
      if (text[i] === ']') return void i++;
      for (;;) {
        value();
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') return void i++;
        else fail();
      }
    } else if (ch === '"') string();
    else if (ch === 't') literal('true');
    else if (ch === 'f') literal('false');
    else if (ch === 'n') literal('null');
    else if (ch === '-' || (ch !== undefined && ch >= '0' && ch <= '9')) number();
    else fail();
  };
  try {
    value();
    ws();
    return i < text.length ? i : null;
  } catch (at) {
    if (typeof at === 'number') return Math.min(at, text.length);
    throw at;
  }
}
