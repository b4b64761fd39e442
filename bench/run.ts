// npm run bench [-- NAME… | --only NAME] [-- --quick] [-- --iterations N]: runs the benchmarks, prints the
// speed table (issue 16) to stderr and the JSON to stdout, and keeps a copy under bench/results/. Ratios
// within one run are what to compare: these machines are noisy. With no name it runs the speed suite
// (every part: bench/speed.ts); a part runs alone by its name (warm, throughput, cold, agents, fidelity,
// durability, footprint, live); `executor`, `agents` and `workspace` name the parts that replaced those
// suites; `all` adds control_plane, async, stream, egress, gui and state (export/import of 1,000 runs). `--quick` runs every part with few
// iterations: to check the bench works, not to measure.
// `npm run bench -- soak [--hello N] [--logs N] [--baseline N]` runs the soak (only when named: it takes
// minutes); the defaults are 100,000 hellos, 2,000 1 MB-log calls and the baseline after 5,000.
// `npm run bench -- profile [--invokes N]` profiles the warm path (bench/profile.ts).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import { controlPlane } from './control-plane';
import { asyncBench } from './async';
import { streamBench } from './stream';
import { egressBench } from './egress';
import { guiBench } from './gui';
import { soakBench } from './soak';
import { profileBench } from './profile';
import { stateBench } from './state';
import { SPEED_PARTS, speedBench } from './speed';
import { ROOT } from './lib';

interface SuiteOptions {
  iterations: number;
  quick: boolean;
  soak: { hello: number; logs: number; baseline: number };
  invokes: number;
}

const log = (line: string) => process.stderr.write(`${line}\n`);
const suites: Record<string, (o: SuiteOptions) => Promise<unknown>> = {
  control_plane: (o) => controlPlane({ iterations: o.quick ? 200 : o.iterations }),
  async: (o) => asyncBench({ jobs: o.quick ? 100 : 1000 }),
  stream: (o) => streamBench({ iterations: Math.min(o.quick ? 50 : o.iterations, 500) }),
  egress: (o) => egressBench({ iterations: Math.min(o.quick ? 100 : o.iterations, 1000) }),
  gui: (o) => guiBench({ loads: o.quick ? 3 : 20, keystrokes: o.quick ? 50 : 300 }),
  state: (o) => stateBench({ invocations: o.quick ? 100 : 1000 }),
  soak: (o) => soakBench(o.soak),
  profile: (o) => profileBench({ invokes: o.invokes, log }),
};
/** The speed suite's parts by the names of the suites they replaced. */
const ALIASES: Record<string, string[]> = {
  speed: Object.keys(SPEED_PARTS),
  executor: ['warm', 'throughput', 'cold', 'fidelity', 'footprint'],
  workspace: ['live'],
};
/** `all`: the speed suite and these. */
const ALL = ['control_plane', 'async', 'stream', 'egress', 'gui', 'state'];

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      only: { type: 'string' },
      iterations: { type: 'string' },
      hello: { type: 'string' },
      logs: { type: 'string' },
      baseline: { type: 'string' },
      quick: { type: 'boolean' },
      invokes: { type: 'string' },
    },
  });
  const named = new Set([...positionals, ...(values.only ? [values.only] : [])]);
  const known = new Set([...Object.keys(suites), ...Object.keys(SPEED_PARTS), ...Object.keys(ALIASES), 'all']);
  const unknown = [...named].filter((n) => !known.has(n));
  if (unknown.length) throw new Error(`no such suite: ${unknown.join(', ')} (suites and parts: ${[...known].join(', ')})`);
  const count = (v: string | undefined, dflt: number) => {
    const n = Number(v ?? dflt);
    if (!Number.isInteger(n) || n < 0) throw new Error(`not a count: ${v}`);
    return n;
  };
  const opts: SuiteOptions = {
    iterations: count(values.iterations, 2000),
    quick: values.quick ?? false,
    soak: { hello: count(values.hello, 100_000), logs: count(values.logs, 2000), baseline: count(values.baseline, 5000) },
    invokes: count(values.invokes, 5000),
  };
  const want = named.size ? named : new Set(['speed']);
  if (want.has('all')) [...ALL, 'speed'].forEach((n) => want.add(n));
  const parts = Object.keys(SPEED_PARTS).filter((p) => want.has(p) || [...want].some((n) => ALIASES[n]?.includes(p)));
  const results: Record<string, unknown> = {};
  const started = performance.now();
  if (parts.length) results.speed = await speedBench({ parts, quick: opts.quick, log });
  for (const [name, run] of Object.entries(suites)) {
    if (!want.has(name)) continue;
    log(`bench: ${name}…`);
    results[name] = await run(opts);
  }
  log(`bench: done in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  const report = {
    at: new Date().toISOString(),
    host: { node: process.version, cpus: cpus().length, cpu_model: cpus()[0]?.model, mem_gb: Math.round(totalmem() / 2 ** 30) },
    results,
  };
  const text = JSON.stringify(report, null, 2);
  process.stdout.write(text + '\n');
  const dir = join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${report.at.replace(/[:.]/g, '-')}.json`), text + '\n');
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
