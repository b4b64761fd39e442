// executor/limits/common.ts keyedInt: one key of a cgroup `key value` file reads as parseKeyedInts reads it.
import { readFileSync, existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { keyedInt, parseKeyedInts } from '../../executor/limits/common';

const STAT = 'cache 4096\nrss 81920\nrss_huge 0\ntotal_cache 4096\ntotal_rss 163840\nanon 12\n';

describe('keyedInt', () => {
  it('reads the key at the start of a line, first line or last, and no key that only ends another', () => {
    expect(keyedInt(STAT, 'cache')).toBe(4096);
    expect(keyedInt(STAT, 'rss')).toBe(81920); // not rss_huge's, not total_rss's
    expect(keyedInt(STAT, 'total_rss')).toBe(163840);
    expect(keyedInt(STAT, 'anon')).toBe(12);
    expect(keyedInt('anon 7', 'anon')).toBe(7);
    expect(keyedInt(STAT, 'huge')).toBeUndefined();
    expect(keyedInt(STAT, 'swap')).toBeUndefined();
    expect(keyedInt('rss x\n', 'rss')).toBeUndefined();
    expect(keyedInt(null, 'rss')).toBeUndefined();
    expect(keyedInt('', 'rss')).toBeUndefined();
  });

  it('agrees with parseKeyedInts on every key of this host’s own cgroup files', (ctx) => {
    const files = [
      '/sys/fs/cgroup/memory/memory.stat',
      '/sys/fs/cgroup/memory.stat',
      '/sys/fs/cgroup/cpu/cpu.stat',
      '/sys/fs/cgroup/cpu.stat',
    ].filter((f) => existsSync(f));
    if (!files.length) return ctx.skip('no cgroup stat files on this host');
    for (const f of files) {
      const text = readFileSync(f, 'utf8');
      const all = parseKeyedInts(text);
      expect(all.size, f).toBeGreaterThan(0);
      for (const [key, value] of all) expect(keyedInt(text, key), `${f}: ${key}`).toBe(value);
    }
  });
});
