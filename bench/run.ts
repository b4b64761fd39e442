// npm run bench [-- --only NAME] [-- --iterations N]: runs the benchmarks, prints JSON, and keeps a
// copy under bench/results/. Ratios within one run are what to compare: these machines are noisy.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import { controlPlane } from './control-plane';
import { executorBench } from './executor';
import { workspaceBench } from './workspace';
import { asyncBench } from './async';
import { streamBench } from './stream';
import { egressBench } from './egress';
import { agentsBench } from './agents';
import { guiBench } from './gui';
import { ROOT } from './lib';

const suites: Record<string, (o: { iterations: number }) => Promise<unknown>> = {
  control_plane: controlPlane,
  executor: (o) => executorBench({ iterations: Math.min(o.iterations, 1000) }),
  workspace: () => workspaceBench({ edits: 20 }),
  async: () => asyncBench({ jobs: 1000 }),
  stream: (o) => streamBench({ iterations: Math.min(o.iterations, 500) }),
  egress: (o) => egressBench({ iterations: Math.min(o.iterations, 1000) }),
  agents: () => agentsBench({ warm: 30 }),
  gui: () => guiBench({ loads: 20, keystrokes: 300 }),
};

async function main() {
  const { values } = parseArgs({ options: { only: { type: 'string' }, iterations: { type: 'string' } } });
  const iterations = Number(values.iterations ?? 2000);
  const results: Record<string, unknown> = {};
  for (const [name, run] of Object.entries(suites)) {
    if (values.only && values.only !== name) continue;
    process.stderr.write(`bench: ${name}…\n`);
    results[name] = await run({ iterations });
  }
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
