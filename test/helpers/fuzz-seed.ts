/**
 * The seed of a file's fast-check properties. Fixed, so every run draws the same cases and the coverage a file
 * claims is the coverage it was written and checked against; `SVC_FUZZ_SEED=N` draws other cases to explore
 * (docs/qa-recipes.md). The seed is printed once, so a failure names the draw to replay.
 */
export function fuzzSeed(file: string, fixed: number, env: Record<string, string | undefined>, print: (line: string) => void): number {
  const given = env.SVC_FUZZ_SEED;
  let seed = fixed;
  if (given !== undefined && given !== '') {
    // fast-check takes a 32-bit integer; anything else would silently be another seed than the one printed.
    if (!/^-?\d{1,10}$/.test(given) || Number(given) < -(2 ** 31) || Number(given) >= 2 ** 31) {
      throw new Error(`SVC_FUZZ_SEED must be a 32-bit integer, not ${JSON.stringify(given)}`);
    }
    seed = Number(given);
  }
  print(`${file}: fast-check seed ${seed}${seed === fixed ? ' (fixed)' : ' (from SVC_FUZZ_SEED)'}; explore others with SVC_FUZZ_SEED=N`);
  return seed;
}
