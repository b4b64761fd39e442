/**
 * The smallest POSIX ustar writer and reader the state archive needs (docs/state.md): regular files only,
 * names up to 100 bytes (the archive's part names are short by construction), 512-byte blocks. Written
 * so `tar tzf FILE.svcemu` lists an archive and `tar xzf` unpacks it for a look; read strictly, so a
 * damaged header is an error naming where, never a guess.
 */

export interface TarEntry {
  name: string;
  data: Buffer;
}

const BLOCK = 512;

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, size: number, mtime: number): Buffer {
  const nameBytes = Buffer.from(name, 'utf8');
  if (nameBytes.length > 100) throw new Error(`tar: part name over 100 bytes: ${name}`);
  const h = Buffer.alloc(BLOCK, 0);
  nameBytes.copy(h, 0);
  h.write(octal(0o600, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii'); // uid
  h.write(octal(0, 8), 116, 'ascii'); // gid
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(Math.floor(mtime / 1000), 12), 136, 'ascii');
  h.write('        ', 148, 'ascii'); // checksum placeholder: spaces while summing
  h.write('0', 156, 'ascii'); // regular file
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'ascii');
  return h;
}

/** The tar stream of `entries` in order, with the two zero blocks that end it. */
export function writeTar(entries: readonly TarEntry[], mtime = Date.now()): Buffer {
  const out: Buffer[] = [];
  for (const e of entries) {
    out.push(header(e.name, e.data.length, mtime), e.data);
    const pad = (BLOCK - (e.data.length % BLOCK)) % BLOCK;
    if (pad) out.push(Buffer.alloc(pad));
  }
  out.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(out);
}

export class TarError extends Error {}

const field = (h: Buffer, at: number, len: number) =>
  h
    .subarray(at, at + len)
    .toString('ascii')
    .replace(/\0.*$/s, '')
    .trim();

/** Every regular file of a tar stream, in order; anything else, or a header that does not add up, is a TarError. */
export function readTar(buf: Buffer): TarEntry[] {
  const out: TarEntry[] = [];
  let at = 0;
  for (;;) {
    if (at + BLOCK > buf.length) throw new TarError(`the tar stream ends inside a header (at byte ${at})`);
    const h = buf.subarray(at, at + BLOCK);
    if (h.every((b) => b === 0)) return out; // the end marker
    const stored = parseInt(field(h, 148, 8), 8);
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : h[i]!;
    if (!Number.isFinite(stored) || stored !== sum) throw new TarError(`the tar header at byte ${at} is damaged (checksum)`);
    const name = h.subarray(0, 100).toString('utf8').replace(/\0.*$/s, '');
    const type = String.fromCharCode(h[156]!);
    if (type !== '0' && type !== '\0') throw new TarError(`the tar entry ${JSON.stringify(name)} is not a regular file`);
    const size = parseInt(field(h, 124, 12), 8);
    if (!Number.isSafeInteger(size) || size < 0) throw new TarError(`the tar entry ${JSON.stringify(name)} has no valid size`);
    const start = at + BLOCK;
    if (start + size > buf.length) throw new TarError(`the tar entry ${JSON.stringify(name)} is cut short`);
    out.push({ name, data: buf.subarray(start, start + size) });
    at = start + Math.ceil(size / BLOCK) * BLOCK;
  }
}
