import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { aesGcmSecretBox, keyFileProvider } from '../../server/crypto/secret-box';
import { DataDirError } from '../../server/errors';

const box = aesGcmSecretBox(randomBytes(32));

/** Flip one bit of the decoded payload at `index` (mod its length) and re-encode. */
function flipBit(sealed: string, index: number, bit: number): string {
  const raw = Buffer.from(sealed.slice(3), 'base64url');
  raw[index % raw.length]! ^= 1 << bit;
  return `v1.${raw.toString('base64url')}`;
}

describe('aesGcmSecretBox', () => {
  it('refuses a key that is not 32 bytes', () => {
    expect(() => aesGcmSecretBox(randomBytes(16))).toThrow(/32 bytes/);
    expect(() => aesGcmSecretBox(randomBytes(33))).toThrow(/32 bytes/);
  });

  it('round-trips any string (including empty, unicode and NUL) for any context', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string(), (plaintext, context) => {
        const sealed = box.seal(plaintext, context);
        expect(sealed.startsWith('v1.')).toBe(true);
        expect(box.open(sealed, context)).toBe(plaintext);
      }),
    );
  });

  it('does not leak the plaintext and uses a fresh IV each time', () => {
    const a = box.seal('whsec_super_secret_value', 'ctx');
    const b = box.seal('whsec_super_secret_value', 'ctx');
    expect(a).not.toBe(b);
    expect(a).not.toContain('super_secret');
    expect(Buffer.from(a.slice(3), 'base64url').toString('latin1')).not.toContain('super_secret');
  });

  it('a value sealed for one context does not open in another', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), (plaintext, c1, c2) => {
        fc.pre(c1 !== c2);
        const sealed = box.seal(plaintext, c1);
        expect(() => box.open(sealed, c2)).toThrow();
      }),
    );
  });

  it('a value sealed under one key does not open under another', () => {
    const other = aesGcmSecretBox(randomBytes(32));
    const sealed = box.seal('secret', 'ctx');
    expect(() => other.open(sealed, 'ctx')).toThrow();
  });

  it('any flipped bit (IV, tag or ciphertext) makes open fail', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.nat(), fc.integer({ min: 0, max: 7 }), (plaintext, index, bit) => {
        const sealed = box.seal(plaintext, 'secret:ten_1:API_KEY');
        expect(() => box.open(flipBit(sealed, index, bit), 'secret:ten_1:API_KEY')).toThrow();
      }),
    );
  });

  it('truncated, extended or foreign payloads fail to open', () => {
    const sealed = box.seal('hello', 'ctx');
    const raw = Buffer.from(sealed.slice(3), 'base64url');
    expect(() => box.open(`v1.${raw.subarray(0, raw.length - 1).toString('base64url')}`, 'ctx')).toThrow();
    expect(() => box.open(`v1.${Buffer.concat([raw, Buffer.from([0])]).toString('base64url')}`, 'ctx')).toThrow();
    expect(() => box.open(`v1.${raw.subarray(0, 20).toString('base64url')}`, 'ctx')).toThrow();
    expect(() => box.open('v1.', 'ctx')).toThrow();
    expect(() => box.open(`v2.${raw.toString('base64url')}`, 'ctx')).toThrow(/unknown sealed format/);
    expect(() => box.open('hello', 'ctx')).toThrow();
  });
});

describe('keyFileProvider', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-emu-key-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('creates a 0600 key file holding 32 random bytes (base64), and reuses it', async () => {
    const path = join(dir, 'secret.key');
    const first = await keyFileProvider(path)();
    expect(first).toHaveLength(32);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    const text = await readFile(path, 'utf8');
    expect(Buffer.from(text.trim(), 'base64').equals(first)).toBe(true);
    const second = await keyFileProvider(path)();
    expect(second.equals(first)).toBe(true);
    // What one key sealed, the reloaded key opens.
    expect(aesGcmSecretBox(second).open(aesGcmSecretBox(first).seal('v', 'c'), 'c')).toBe('v');
    // A new data dir gets a different key.
    const other = await keyFileProvider(join(dir, 'other.key'))();
    expect(other.equals(first)).toBe(false);
  });

  it('tightens the mode of an existing key file to 0600', async () => {
    const path = join(dir, 'secret.key');
    await writeFile(path, randomBytes(32).toString('base64') + '\n');
    await chmod(path, 0o644);
    await keyFileProvider(path)();
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it.each([
    ['empty', ''],
    ['too short', randomBytes(16).toString('base64')],
    ['too long', randomBytes(48).toString('base64')],
    ['not base64 at all', '!!!! definitely not a key !!!!'],
  ])('a bad key file (%s) is a DataDirError naming the file', async (_what, content) => {
    const path = join(dir, 'secret.key');
    await writeFile(path, content, { mode: 0o600 });
    const err = await keyFileProvider(path)().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirError);
    expect((err as Error).message).toContain(path);
    expect((err as Error).message).toContain('32-byte');
    // The bad file is left as it was (it may be recoverable by hand).
    expect(await readFile(path, 'utf8')).toBe(content);
  });
});
