import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Make the data write of chosen files fail (as a full disk would), leaving everything else real.
const faults = vi.hoisted(() => ({ failWritesUnder: null as string | null }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const orig = await importOriginal<typeof import('node:fs/promises')>();
  const open = async (...args: Parameters<typeof orig.open>) => {
    const fh = await orig.open(...args);
    if (!faults.failWritesUnder || !String(args[0]).startsWith(faults.failWritesUnder)) return fh;
    return new Proxy(fh, {
      get(target, prop) {
        if (prop === 'writeFile' || prop === 'write') {
          return async () => {
            throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
          };
        }
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  };
  return { ...orig, open, default: { ...orig, open } };
});

import { describeJsonError, readFileIfExists, writeFileAtomic } from '../../server/storage/atomic-file';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-emu-atomic-'));
  faults.failWritesUnder = null;
});
afterEach(async () => {
  faults.failWritesUnder = null;
  await rm(dir, { recursive: true, force: true });
});

describe('writeFileAtomic', () => {
  it('writes the content with the given mode (0600 by default), creating parent dirs', async () => {
    const path = join(dir, 'a', 'b', 'file.json');
    await writeFileAtomic(path, '{"x":1}');
    expect(await readFile(path, 'utf8')).toBe('{"x":1}');
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    await writeFileAtomic(join(dir, 'bin'), new Uint8Array([1, 2, 3]), 0o640);
    expect([...(await readFile(join(dir, 'bin')))]).toEqual([1, 2, 3]);
    expect((await stat(join(dir, 'bin'))).mode & 0o777).toBe(0o640);
  });

  it('replaces the whole file and leaves no temp file behind', async () => {
    const path = join(dir, 'db.json');
    await writeFile(path, 'x'.repeat(10_000));
    await Promise.all(Array.from({ length: 20 }, (_, i) => writeFileAtomic(path, `{"i":${i}}`)));
    expect(await readFile(path, 'utf8')).toMatch(/^\{"i":\d+\}$/);
    expect(await readdir(dir)).toEqual(['db.json']);
  });

  it('when the data write fails (disk full), rejects, keeps the old file intact and leaves no temp file', async () => {
    const path = join(dir, 'db.json');
    await writeFileAtomic(path, '{"old":true}');
    faults.failWritesUnder = join(dir, '.db.json.');
    await expect(writeFileAtomic(path, '{"new":true}')).rejects.toThrow(/ENOSPC/);
    faults.failWritesUnder = null;
    expect(await readFile(path, 'utf8')).toBe('{"old":true}');
    expect(await readdir(dir)).toEqual(['db.json']);
  });
});

describe('readFileIfExists', () => {
  it('is null for a missing file and the text otherwise', async () => {
    expect(await readFileIfExists(join(dir, 'missing'))).toBeNull();
    await writeFile(join(dir, 'f'), 'hi');
    expect(await readFileIfExists(join(dir, 'f'))).toBe('hi');
  });

  it('rethrows other errors (a directory is not a missing file)', async () => {
    await expect(readFileIfExists(dir)).rejects.toMatchObject({ code: 'EISDIR' });
  });
});

describe('describeJsonError', () => {
  const describeText = (text: string) => {
    try {
      JSON.parse(text);
    } catch (err) {
      return describeJsonError(text, err);
    }
    throw new Error(`${JSON.stringify(text)} parsed`);
  };

  it.each([
    // [text, line, column of the offending character]
    ['{"a": 1,\n "b": x}', 2, 7],
    ['{"a":1}x', 1, 8],
    ['{\n "a": 1,\n x}', 3, 2],
    ['{"schema_version": 1, "tenants": [}', 1, 35],
    ['[1,]', 1, 4],
  ])('%j → line %i, column %i', (text, line, column) => {
    expect(describeText(text)).toContain(`line ${line}, column ${column}`);
  });

  it.each([
    ['{\n  "a": [1, 2'], // V8: "Expected ',' or ']' after array element … at position 14"
    ['{\n  "a": '], // V8: "Unexpected end of JSON input", without a position
  ])('says where a truncated document ends: %j', (text) => {
    expect(describeText(text)).toMatch(/line 2, column \d+/);
  });
});
