// The sandbox agent: runs where the sandboxes live (inside the Lima VM on macOS; anywhere a shell
// command reaches) and serves the executor's SandboxHost interface over stdin/stdout (executor/remote.ts).
//
//   bun executor/agent.ts --root <checkout in the VM> --work <scratch dir> [--spares all|plain|none]
//
// --spares: the runners started ahead (executor/local-host.ts, SPARE_PLANS); default plain, the Lima VM's argv says all.
//
// Runs under Bun or Node (node:* modules only, plus our own TypeScript).
import { parseArgs } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalHost, SPARE_PLANS, type SpareMode } from './index';
import { serveAgent } from './remote';

async function main() {
  const { values } = parseArgs({ options: { root: { type: 'string' }, work: { type: 'string' }, spares: { type: 'string' } } });
  const spares = values.spares ?? 'plain';
  if (!(spares in SPARE_PLANS)) {
    process.stderr.write(`agent: --spares: all, plain or none, not '${spares}'\n`);
    process.exit(2);
  }
  if (!values.root) {
    process.stderr.write('agent: --root <project checkout> is required\n');
    process.exit(2);
  }
  const { host } = await createLocalHost({
    projectRoot: values.root,
    workDir: values.work ?? join(tmpdir(), `svc-emu-agent-${process.pid}`),
    transport: 'agent',
    spares: spares as SpareMode,
  });
  await serveAgent(host, process.stdin, process.stdout);
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`agent: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
