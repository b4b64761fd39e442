// The sandbox agent: runs where the sandboxes live (inside the Lima VM on macOS; anywhere a shell
// command reaches) and serves the executor's SandboxHost interface over stdin/stdout (executor/remote.ts).
//
//   bun executor/agent.ts --root <checkout in the VM> --work <scratch dir>
//
// Runs under Bun or Node (node:* modules only, plus our own TypeScript).
import { parseArgs } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalHost } from './index';
import { serveAgent } from './remote';

async function main() {
  const { values } = parseArgs({ options: { root: { type: 'string' }, work: { type: 'string' } } });
  if (!values.root) {
    process.stderr.write('agent: --root <project checkout> is required\n');
    process.exit(2);
  }
  const { host } = await createLocalHost({
    projectRoot: values.root,
    workDir: values.work ?? join(tmpdir(), `svc-emu-agent-${process.pid}`),
    transport: 'agent',
  });
  await serveAgent(host, process.stdin, process.stdout);
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`agent: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
