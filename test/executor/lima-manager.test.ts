/**
 * LimaManager (executor/lima/manager.ts) driving a fake `limactl` (test/fixtures/fake-limactl.mjs) through
 * the real process runner: status from `limactl list --json` (missing, created, garbage), create → start →
 * stop with the generated template actually handed to limactl, one operation at a time, failures with
 * their exit code and log, and the reasons when Lima is not used here.
 */
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LimaManager, LimaRefused, parseInstanceList, bytes, detectLimactl, type LimaManagerOptions } from '../../executor/lima/manager';
import { lineSplitter, spawnRunner } from '../../executor/lima/process';
import { fakeLimactl, type FakeLimactl } from '../helpers/fake-limactl';
import { PROJECT_ROOT, tempDir } from '../helpers/core';

const fakes: FakeLimactl[] = [];
afterEach(async () => {
  for (const f of fakes.splice(0)) await f.remove();
});

async function setup(opts: Partial<LimaManagerOptions> = {}) {
  const fake = await fakeLimactl();
  fakes.push(fake);
  const tmp = await tempDir('svc-emu-lima-tmp-');
  const manager = new LimaManager({ limactl: fake.path, projectRoot: PROJECT_ROOT, tmpDir: tmp, ...opts });
  return { fake, manager, tmp };
}

async function refusal(p: Promise<unknown>): Promise<LimaRefused> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, 'expected the action to be refused').toBeInstanceOf(LimaRefused);
  return err as LimaRefused;
}

describe('LimaManager status', () => {
  it('no VM yet: available, limactl and its version, vm missing, no operation', async () => {
    const { manager, fake } = await setup();
    const s = await manager.status();
    expect(s).toEqual({
      available: true,
      limactl: fake.path,
      limactl_version: '1.0.3',
      vm: { name: 'svc-emu', status: 'missing' },
      operation: null,
    });
  });

  it('a created VM: Lima’s fields (sizes in bytes), other instances ignored', async () => {
    const { manager, fake } = await setup();
    await fake.patch({
      instances: {
        default: { status: 'Running', cpus: 4, memory: 4 * 1024 ** 3 },
        'svc-emu': { status: 'Stopped', cpus: 2, memory: 8 * 1024 ** 3 },
      },
    });
    const s = await manager.status();
    expect(s.error).toBeUndefined();
    expect(s.vm).toEqual({
      name: 'svc-emu',
      status: 'Stopped',
      dir: join(fake.dir, 'lima', 'svc-emu'),
      vm_type: 'vz',
      arch: 'aarch64',
      cpus: 2,
      memory: 8 * 1024 ** 3,
      disk: 107374182400,
    });
  });

  it('garbage from limactl: a clear error in the status, the VM unknown, actions refused', async () => {
    const { manager, fake } = await setup();
    await fake.patch({ garbage: true });
    const s = await manager.status();
    expect(s.available).toBe(true);
    expect(s.vm.status).toBe('unknown');
    expect(s.error).toMatch(/limactl list --json` printed something that is not JSON \(line 1: NAME STATUS\)/);
    const err = await refusal(manager.create());
    expect(err.code).toBe('limactl_failed');
    expect(manager.wait()).toBeNull();
  });

  it('parses Lima’s list: one object per line, an array, errors; rejects a wrong shape', () => {
    const two = '{"name":"a","status":"Running","memory":1024}\n\n{"name":"b","status":"","errors":["x"]}\n';
    expect(parseInstanceList(two)).toEqual({
      ok: true,
      instances: [
        { name: 'a', status: 'Running', memory: 1024 },
        { name: 'b', status: '', errors: ['x'] },
      ],
    });
    expect(parseInstanceList('[{"name":"a","status":"Stopped"}]')).toMatchObject({ ok: true, instances: [{ name: 'a' }] });
    expect(parseInstanceList('')).toEqual({ ok: true, instances: [] });
    const bad = parseInstanceList('{"name":"a","status":3}');
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toMatch(/not a Lima instance \(line 1: .*status: /);
    expect(bytes('4GiB')).toBe(4 * 1024 ** 3);
    expect(bytes(2048)).toBe(2048);
    expect(bytes('lots')).toBeUndefined();
  });

  it('a limactl that cannot run: the reason, not a crash', async () => {
    const manager = new LimaManager({ limactl: '/nonexistent/limactl', projectRoot: PROJECT_ROOT });
    const s = await manager.status();
    expect(s.available).toBe(true);
    expect(s.error).toMatch(/could not run \/nonexistent\/limactl: .*ENOENT/);
  });
});

describe('LimaManager operations', () => {
  it('create → start → stop: the template written and handed over, the log kept, the VM’s status following', async () => {
    const { manager, fake, tmp } = await setup();
    const lines: string[] = [];
    manager.onLine((l) => lines.push(l));

    const op = await manager.create();
    expect(op).toMatchObject({
      kind: 'create',
      state: 'running',
      command: [fake.path, 'create', '--tty=false', '--name', 'svc-emu', expect.stringMatching(/svc-emu\.yaml$/)],
    });
    expect((await manager.status()).operation?.state).toBe('running');
    const created = await manager.wait()!;
    expect(created.state, created.log.join('\n')).toBe('succeeded');
    expect(created.exit_code).toBe(0);
    expect(created.finished_at).toBeDefined();
    expect(created.log[0]).toBe(`$ ${created.command.join(' ')}`);
    expect(created.log.join('\n')).toContain('Terminal is not available');
    expect(created.log.at(-1)).toContain('Run `limactl start svc-emu`');
    expect(lines).toEqual(created.log);

    const state = await fake.state();
    const template = state.templates['svc-emu']!;
    expect(template).toContain(`mountPoint: ${JSON.stringify(PROJECT_ROOT)}`);
    expect(template).toContain(`location: ${JSON.stringify(PROJECT_ROOT)}`);
    expect(template).toContain('writable: false');
    expect(await readdir(tmp), 'the temp template is removed once limactl has read it').toEqual([]);
    expect((await manager.status()).vm).toMatchObject({ status: 'Stopped', cpus: 2, memory: 4 * 1024 ** 3 });

    expect((await refusal(manager.create())).code).toBe('vm_exists');

    await manager.start();
    const started = await manager.wait()!;
    expect(started).toMatchObject({ kind: 'start', state: 'succeeded', exit_code: 0 });
    expect(started.command).toEqual([fake.path, 'start', '--tty=false', 'svc-emu']);
    expect(started.log.join('\n')).toContain('READY');
    expect((await manager.status()).vm.status).toBe('Running');
    expect((await refusal(manager.start())).code).toBe('vm_running');

    await manager.stop();
    expect(await manager.wait()).toMatchObject({ kind: 'stop', state: 'succeeded' });
    expect((await manager.status()).vm.status).toBe('Stopped');
    expect((await refusal(manager.stop())).code).toBe('vm_not_running');
    expect((await fake.state()).calls.filter((c) => c[0] !== 'list' && c[0] !== '--version').map((c) => c[0])).toEqual([
      'create',
      'start',
      'stop',
    ]);
  });

  it('one operation at a time: a second one, even while the first is being checked, is refused', async () => {
    const { manager, fake } = await setup();
    await fake.patch({ delay_ms: 100 });
    const [first, second] = await Promise.allSettled([manager.create(), manager.create()]);
    expect(first.status).toBe('fulfilled');
    expect(second.status).toBe('rejected');
    expect(((second as PromiseRejectedResult).reason as LimaRefused).code).toBe('vm_operation_running');
    const third = await refusal(manager.start());
    expect(third.code).toBe('vm_operation_running');
    expect(third.message).toMatch(/'create' is still running/);
    expect((await manager.wait())?.state).toBe('succeeded');
    await manager.start(); // free again
    expect((await manager.wait())?.state).toBe('succeeded');
  });

  it('start of a missing VM and stop of a missing VM are refused with vm_missing', async () => {
    const { manager } = await setup();
    expect((await refusal(manager.start())).code).toBe('vm_missing');
    expect((await refusal(manager.stop())).code).toBe('vm_missing');
  });

  it('a failing limactl: the operation failed, with its exit code, limactl’s message and what it printed before', async () => {
    const { manager, fake } = await setup();
    await fake.patch({ fail: { create: 'failed to download the image: 404 Not Found' } });
    await manager.create();
    const op = await manager.wait()!;
    expect(op.state).toBe('failed');
    expect(op.exit_code).toBe(1);
    expect(op.error).toBe('limactl create exited with code 1');
    const log = op.log.join('\n');
    expect(log).toContain('Attempting to download the nerdctl archive');
    expect(log).toContain('level=fatal msg="failed to download the image: 404 Not Found"');
    expect(op.log.at(-1)).toBe('limactl create exited with code 1');
    expect((await manager.status()).operation).toMatchObject({ kind: 'create', state: 'failed', exit_code: 1 });
    expect((await manager.status()).vm.status).toBe('missing');
  });

  it('keeps the last lines only, counting all of them', async () => {
    const { manager } = await setup({ logLines: 3 });
    await manager.create();
    const op = await manager.wait()!;
    expect(op.log).toHaveLength(3);
    expect(op.log_total).toBe(5); // the command line, three progress lines, the hint
    expect(op.log.at(-1)).toContain('limactl start');
  });

  it('close() stops a running operation (its limactl killed) and says so', async () => {
    const { manager, fake } = await setup();
    await fake.patch({ delay_ms: 2_000 });
    await manager.create();
    const t0 = Date.now();
    await manager.close();
    expect(Date.now() - t0).toBeLessThan(1_500);
    const op = await manager.wait()!;
    expect(op.state).toBe('failed');
    expect(op.error).toMatch(/shut down/);
  });
});

describe('where Lima is not used', () => {
  it('Linux without a limactl: unavailable with the host’s backend named; every action refused', async () => {
    const manager = new LimaManager({ limactl: null, projectRoot: PROJECT_ROOT, platform: 'linux', hostBackend: 'cgroup-v1' });
    const s = await manager.status();
    expect(s).toEqual({
      available: false,
      reason: 'Lima is only used on macOS: on Linux limits are enforced on this host by cgroup-v1',
      limactl: null,
      vm: { name: 'svc-emu', status: 'unknown' },
      operation: null,
    });
    for (const action of [() => manager.create(), () => manager.start(), () => manager.stop()]) {
      const err = await refusal(action());
      expect(err.code).toBe('vm_unavailable');
      expect(err.message).toBe(s.reason);
    }
  });

  it('macOS without limactl: install Lima', async () => {
    const manager = new LimaManager({ limactl: null, projectRoot: PROJECT_ROOT, platform: 'darwin' });
    expect((await manager.status()).reason).toBe('limactl is not on PATH: install Lima (brew install lima)');
  });

  it('create without the checkout is refused (the template mounts it)', async () => {
    const { manager } = await setup({ projectRoot: null });
    expect((await refusal(manager.create())).code).toBe('vm_unavailable');
  });

  it('detectLimactl: only on macOS, only on PATH', async () => {
    const fake = await fakeLimactl();
    fakes.push(fake);
    expect(detectLimactl({ platform: 'linux', path: fake.dir })).toBeNull();
    expect(detectLimactl({ platform: 'darwin', path: `/nonexistent:${fake.dir}` })).toBe(fake.path);
    expect(detectLimactl({ platform: 'darwin', path: tmpdir() + '/nonexistent' })).toBeNull();
  });
});

describe('the process runner', () => {
  it('splits lines as they come, strips colours, keeps what a progress bar last showed', () => {
    const out: string[] = [];
    const s = lineSplitter((l) => out.push(l));
    s.push('one\ntw');
    s.push('o\n\x1b[32mgreen\x1b[0m\n 10%\r 50%\r100%\n\n');
    s.push('tail');
    s.end();
    expect(out).toEqual(['one', 'two', 'green', '100%', 'tail']);
  });

  it('a command that cannot start answers code null with the reason', async () => {
    const res = await spawnRunner(['/nonexistent/cmd', 'x']);
    expect(res.code).toBeNull();
    expect(res.error).toMatch(/ENOENT/);
  });
});
