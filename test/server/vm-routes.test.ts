/**
 * /_emu/vm on a real core: with a fake limactl (config `limactl`), the status, create → start → stop in
 * the background (202, then poll), and every refusal's stable code; with the default here (Linux, no
 * limactl), unavailable with the reason and every action 409 vm_unavailable.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { fakeLimactl, type FakeLimactl } from '../helpers/fake-limactl';

async function settle(core: TestCore, timeoutMs = 10_000) {
  const t0 = Date.now();
  for (;;) {
    const res = await core.call('GET', '/_emu/vm', undefined, { key: core.admin });
    expect(res.status).toBe(200);
    if (res.json.operation?.state !== 'running') return res.json;
    if (Date.now() - t0 > timeoutMs) throw new Error(`the VM operation never ended: ${JSON.stringify(res.json.operation)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// The steps of one VM's life through the routes, in their order (missing, created, started, stopped, a failing
// start, garbage from limactl): each starts where the one before left the fake VM, so they are not shuffled.
describe('/_emu/vm with a limactl', { shuffle: false }, () => {
  let core: TestCore;
  let fake: FakeLimactl;
  const admin = () => ({ key: core.admin });

  beforeAll(async () => {
    fake = await fakeLimactl();
    core = await startTestCore({ config: { limactl: fake.path } });
  });
  afterAll(async () => {
    await core?.stop();
    await fake?.remove();
  });

  it('needs the admin token', async () => {
    expect((await core.call('GET', '/_emu/vm')).status).toBe(401); // the tenant key is not enough
    expect((await core.call('POST', '/_emu/vm/create', undefined, { key: null })).status).toBe(401);
  });

  it('GET: available, the VM missing, no operation', async () => {
    const res = await core.call('GET', '/_emu/vm', undefined, admin());
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      available: true,
      limactl: fake.path,
      limactl_version: '1.0.3',
      vm: { name: 'svc-emu', status: 'missing' },
      operation: null,
    });
  });

  it('start or stop before create: 409 vm_missing', async () => {
    for (const action of ['start', 'stop']) {
      const res = await core.call('POST', `/_emu/vm/${action}`, undefined, admin());
      expect(res.status, res.text).toBe(409);
      expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
      expect(res.json).toMatchObject({ code: 'vm_missing', status: 409 });
    }
  });

  it('create: 202 with the operation, a second action meanwhile 409 vm_operation_running, then Stopped', async () => {
    await fake.patch({ delay_ms: 150 });
    const res = await core.call('POST', '/_emu/vm/create', undefined, admin());
    expect(res.status, res.text).toBe(202);
    expect(res.json).toMatchObject({ kind: 'create', state: 'running', log_total: 1 });
    expect(res.json.command.slice(1, 5)).toEqual(['create', '--tty=false', '--name', 'svc-emu']);

    const busy = await core.call('POST', '/_emu/vm/start', undefined, admin());
    expect(busy.status).toBe(409);
    expect(busy.json).toMatchObject({ code: 'vm_operation_running' });
    expect(busy.json.detail).toMatch(/'create' is still running/);

    const done = await settle(core);
    expect(done.operation).toMatchObject({ kind: 'create', state: 'succeeded', exit_code: 0 });
    expect(done.operation.log.join('\n')).toContain('Run `limactl start svc-emu`');
    expect(done.vm).toMatchObject({ name: 'svc-emu', status: 'Stopped', cpus: 2, memory: 4 * 1024 ** 3 });
    expect((await fake.state()).templates['svc-emu']).toContain('mountPoint:');

    const again = await core.call('POST', '/_emu/vm/create', undefined, admin());
    expect(again.status).toBe(409);
    expect(again.json).toMatchObject({ code: 'vm_exists' });
  });

  it('start → Running (start again: 409 vm_running); stop → Stopped (stop again: 409 vm_not_running)', async () => {
    await fake.patch({ delay_ms: 20 });
    expect((await core.call('POST', '/_emu/vm/start', undefined, admin())).status).toBe(202);
    const started = await settle(core);
    expect(started.operation).toMatchObject({ kind: 'start', state: 'succeeded' });
    expect(started.vm.status).toBe('Running');
    expect((await core.call('POST', '/_emu/vm/start', undefined, admin())).json).toMatchObject({ code: 'vm_running' });

    expect((await core.call('POST', '/_emu/vm/stop', undefined, admin())).status).toBe(202);
    const stopped = await settle(core);
    expect(stopped.operation).toMatchObject({ kind: 'stop', state: 'succeeded' });
    expect(stopped.vm.status).toBe('Stopped');
    expect((await core.call('POST', '/_emu/vm/stop', undefined, admin())).json).toMatchObject({ code: 'vm_not_running' });
  });

  it('a failing start: 202, then the operation failed with its exit code and limactl’s words', async () => {
    await fake.patch({ fail: { start: 'did not receive an event with the "running" status' } });
    expect((await core.call('POST', '/_emu/vm/start', undefined, admin())).status).toBe(202);
    const failed = await settle(core);
    expect(failed.operation).toMatchObject({ kind: 'start', state: 'failed', exit_code: 1, error: 'limactl start exited with code 1' });
    expect(failed.operation.log.join('\n')).toContain('did not receive an event');
    await fake.patch({ fail: {} });
  });

  it('garbage from limactl list: GET says so (200, state unknown); actions 502 limactl_failed', async () => {
    await fake.patch({ garbage: true });
    const res = await core.call('GET', '/_emu/vm', undefined, admin());
    expect(res.status).toBe(200);
    expect(res.json.vm.status).toBe('unknown');
    expect(res.json.error).toMatch(/not JSON/);
    const start = await core.call('POST', '/_emu/vm/start', undefined, admin());
    expect(start.status).toBe(502);
    expect(start.json).toMatchObject({ code: 'limactl_failed' });
    await fake.patch({ garbage: false });
  });
});

describe('/_emu/vm by default on this Linux host', () => {
  let core: TestCore;
  beforeAll(async () => {
    core = await startTestCore();
  });
  afterAll(async () => {
    await core?.stop();
  });

  it('unavailable, the reason naming the host’s own limit backend; every action 409 vm_unavailable', async () => {
    expect(process.platform).toBe('linux'); // what this test is about
    const backend = ((await core.call('GET', '/_emu/executor', undefined, { key: core.admin })).json as { backend: string }).backend;
    const res = await core.call('GET', '/_emu/vm', undefined, { key: core.admin });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ available: false, limactl: null, vm: { name: 'svc-emu', status: 'unknown' }, operation: null });
    expect(res.json.reason).toMatch(/^Lima is only used on macOS: on Linux /);
    if (backend !== 'none')
      expect(res.json.reason).toBe(`Lima is only used on macOS: on Linux limits are enforced on this host by ${backend}`);
    for (const action of ['create', 'start', 'stop']) {
      const r = await core.call('POST', `/_emu/vm/${action}`, undefined, { key: core.admin });
      expect(r.status).toBe(409);
      expect(r.json).toMatchObject({ code: 'vm_unavailable', detail: res.json.reason });
    }
  });
});
