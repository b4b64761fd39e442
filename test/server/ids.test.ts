// server/ids.ts: ids from a pool of CSPRNG bytes (drawn 4 KiB at a time) stay base62, of their length, uniform and unique.
import { describe, expect, it } from 'vitest';
import { newId, randomBase62 } from '../../server/ids';

describe('random ids', () => {
  it('are base62 of the asked length, across many pool refills', () => {
    for (const length of [1, 20, 40, 300, 5000]) {
      const s = randomBase62(length);
      expect(s).toHaveLength(length);
      expect(s).toMatch(/^[0-9A-Za-z]+$/);
    }
  });

  it('never repeat, and every character is about as frequent as the others (no modulo bias)', () => {
    const ids = Array.from({ length: 20_000 }, () => newId('inv'));
    expect(new Set(ids).size).toBe(ids.length);
    const counts = new Map<string, number>();
    for (const id of ids) for (const c of id.slice(4)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    const expected = (20_000 * 20) / 62; // ~6,452 each
    // 400,000 draws: a character's count has a standard deviation of ~79; 6 of them is far beyond chance.
    for (const [c, n] of counts) expect(Math.abs(n - expected), `character ${c}: ${n}`).toBeLessThan(6 * 79);
  });
});
