/**
 * Behind the Lima VM the executor's agent can only connect while the VM runs. A core started before the
 * VM fails every run with the reason; Start from the app connects it (the next run works); Stop
 * disconnects it (runs fail saying the VM was stopped); Connect connects to a VM started elsewhere.
 * limactl is the fake (test/fixtures/fake-limactl.mjs); the agent is the real one (real Bun, real
 * runners) behind a shell command that refuses to start while the fake VM is not Running, as
 * `limactl shell` does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT, startTestCore, tempDir, type TestCore } from '../helpers/core';
import { agentInFakeVm, fakeLimactl, type FakeLimactl } from '../helpers/fake-limactl';

const lock = join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json');
const installed = existsSync(lock);
if (!installed) console.warn('SKIPPING VM reconnect tests: runtimes not installed (run npm run build)');

// The steps of one VM's life, in their order (each starts where the one before left the VM): not shuffled.
describe.skipIf(!installed)('the executor behind the VM follows the VM', { shuffle: false }, () => {
  let core: TestCore;
  let fake: FakeLimactl;
  const admin = () => ({ key: core.admin });

  async function settle() {
    for (let i = 0; i < 400; i++) {
      const res = await core.call('GET', '/_emu/vm', undefined, admin());
      if (res.json.operation?.state !== 'running') return res.json.operation as { state: string; log: string[] };
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the VM operation never ended');
  }
  const invoke = () => core.call('POST', '/v1/invoke/vm-hello', { name: 'vm' });

  beforeAll(async () => {
    fake = await fakeLimactl();
    const bun = JSON.parse(readFileSync(lock, 'utf8')).bun.bin as string;
    const work = await tempDir('svc-emu-agent-');
    core = await startTestCore({
      config: {
        limactl: fake.path,
        projectRoot: PROJECT_ROOT,
        executorAgent: agentInFakeVm(fake, { projectRoot: PROJECT_ROOT, bunBin: bun, workDir: work }),
      },
    });
    expect((await core.call('POST', '/v1/snippets', { name: 'vm-hello', runtime: 'bun' })).status).toBe(201);
    const v = await core.call('POST', '/v1/snippets/vm-hello/versions', {
      code: 'export default async function handler(input) { return { hello: input.name } }\n',
      max_cpu_percent: 100,
    });
    expect(v.status, v.text).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await core?.stop();
    await fake?.remove();
  });

  it('before the VM runs: every run fails, saying why', async () => {
    const res = await invoke();
    expect(res.status).toBe(503);
    expect(res.json.code).toBe('failed');
    expect(res.json.detail).toMatch(/not running/);
    expect((await core.call('GET', '/_emu/executor', undefined, admin())).json.transport).toBe('none');
  });

  it('Create and Start from the app: the core connects to the agent, and the next run works', async () => {
    expect((await core.call('POST', '/_emu/vm/create', undefined, admin())).status).toBe(202);
    expect((await settle()).state).toBe('succeeded');
    expect((await core.call('POST', '/_emu/vm/start', undefined, admin())).status).toBe(202);
    expect((await settle()).state).toBe('succeeded'); // the operation ends once the core is connected
    expect((await core.call('GET', '/_emu/executor', undefined, admin())).json.transport).toMatch(/^agent: /);
    const res = await invoke();
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ hello: 'vm' });
  }, 60_000);

  it('Stop: runs fail saying the VM was stopped', async () => {
    expect((await core.call('POST', '/_emu/vm/stop', undefined, admin())).status).toBe(202);
    expect((await settle()).state).toBe('succeeded');
    const res = await invoke();
    expect(res.status).toBe(503);
    expect(res.json.detail).toMatch(/the executor VM was stopped: start it on the Parity status page/);
  }, 30_000);

  it('a VM started outside the app: Connect, or 502 agent_unreachable while it is down', async () => {
    const down = await core.call('POST', '/_emu/vm/connect', undefined, admin());
    expect(down.status).toBe(502);
    expect(down.json.code).toBe('agent_unreachable');
    expect(down.json.detail).toMatch(/not running/);
    await fake.patch({ instances: { 'svc-emu': { status: 'Running', cpus: 2, memory: 4 * 1024 ** 3 } } }); // `limactl start` in a terminal
    const up = await core.call('POST', '/_emu/vm/connect', undefined, admin());
    expect(up.status, up.text).toBe(200);
    expect(up.json.transport).toMatch(/^agent: /);
    expect((await invoke()).json).toEqual({ hello: 'vm' });
  }, 60_000);

  it('a core that runs snippets on this host has no agent to connect: 409 executor_local', async () => {
    const local = await startTestCore({ config: { limactl: fake.path } });
    try {
      const res = await local.call('POST', '/_emu/vm/connect', undefined, { key: local.admin });
      expect(res.status).toBe(409);
      expect(res.json.code).toBe('executor_local');
    } finally {
      await local.stop();
    }
  });
});
