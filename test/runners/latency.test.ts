// Cold start (spawn → ready) and warm round trip (invoke → result over fd 3) of both runners, measured
// with a hello bundle. Printed for the record; the bounds asserted are loose (shared CI machines).
import { describe, expect, it } from 'vitest';
import { percentile, runtimeBinary, skipNote, startRunner, type Runtime } from './helpers';

const BUNDLES: Record<Runtime, Record<string, string>> = {
  bun: { 'main.ts': 'export default async function handler(input: { n: number }) {\n  return { hello: "world", n: input.n };\n}\n' },
  python: { 'main.py': 'def handler(input):\n    return {"hello": "world", "n": input["n"]}\n' },
};

for (const runtime of ['bun', 'python'] as const) {
  const available = runtimeBinary(runtime) !== null;
  if (!available) skipNote(runtime);

  describe.skipIf(!available)(`${runtime} runner latency`, () => {
    it('cold start (spawn → ready) and warm invoke round trip (p50 over 1000)', async () => {
      const colds: number[] = [];
      for (let i = 0; i < 7; i++) {
        const r = await startRunner(runtime, BUNDLES[runtime]);
        expect(r.ready.t).toBe('ready');
        colds.push(r.coldMs);
        await r.stop();
      }
      colds.sort((a, b) => a - b);

      const r = await startRunner(runtime, BUNDLES[runtime]);
      try {
        const onCall = async () => null;
        for (let i = 0; i < 100; i++) await r.channel.invoke(`w${i}`, { n: i }, { SECRET: 's' }, { onCall });
        const rtts: number[] = [];
        for (let i = 0; i < 1000; i++) {
          const t0 = performance.now();
          const out = await r.channel.invoke(`m${i}`, { n: i }, { SECRET: 's' }, { onCall });
          rtts.push(performance.now() - t0);
          if (out.kind !== 'result') throw new Error(JSON.stringify(out));
        }
        rtts.sort((a, b) => a - b);
        const fmt = (n: number) => n.toFixed(3);
        console.log(
          `[runner latency] ${runtime}: cold spawn→ready p50 ${fmt(percentile(colds, 50))} ms (min ${fmt(colds[0]!)}, max ${fmt(colds.at(-1)!)}, n=${colds.length}, init_ms ${(r.ready as { init_ms: number }).init_ms}); ` +
            `warm invoke round trip p50 ${fmt(percentile(rtts, 50))} ms, p99 ${fmt(percentile(rtts, 99))} ms (n=1000)`,
        );
        expect(percentile(rtts, 50)).toBeLessThan(5);
        expect(percentile(colds, 50)).toBeLessThan(2000);
      } finally {
        await r.stop();
      }
    });
  });
}
