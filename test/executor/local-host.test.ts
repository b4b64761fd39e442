// LocalSandboxHost (executor/local-host.ts) against the sandbox host conformance suite (test/conformance/sandbox-host.ts):
// real runtimes and bubblewrap, with this host's limit backend, and again with `none` (executor/limits/none.ts), the
// backend of a desktop without cgroup delegation: pinned through createLocalHost's option, not the environment.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createLocalHost } from '../../executor';
import { sandboxHostConformance } from '../conformance/sandbox-host';
import { PROJECT_ROOT, tempDir } from '../helpers/core';

const installed = existsSync(join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json'));

sandboxHostConformance(
  'local',
  async () => {
    const { host } = await createLocalHost({ projectRoot: PROJECT_ROOT, workDir: await tempDir('svc-emu-local-host-'), spares: 0 });
    return { host };
  },
  { transport: /^local$/ },
  installed ? null : 'runtimes not installed (node scripts/setup.mjs --for=test)',
);

sandboxHostConformance(
  'local (none limit backend)',
  async () => {
    const workDir = await tempDir('svc-emu-local-host-none-');
    const { host } = await createLocalHost({ projectRoot: PROJECT_ROOT, workDir, spares: 0, limitBackend: 'none' });
    if (host.info.backend !== 'none') throw new Error(`the host runs the ${host.info.backend} limit backend, not none`);
    return { host };
  },
  { transport: /^local$/ },
  installed ? null : 'runtimes not installed (node scripts/setup.mjs --for=test)',
);
