/**
 * `svc-emu lima status|create|start|stop` through `main(argv, io)` with the fake limactl: offline (the CLI
 * drives limactl itself, printing its output) and with a core running on the data dir (through /_emu/vm,
 * so the core knows the operation); and the default on this Linux host (no limactl: the reason, actions
 * refused).
 */
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { fakeLimactl, type FakeLimactl } from '../helpers/fake-limactl';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

const cli = (argv: string[]) => runCli(argv);

async function setup(): Promise<{ fake: FakeLimactl; dir: string }> {
  const fake = await fakeLimactl();
  const dir = await tempDir('svc-emu-cli-lima-');
  cleanups.push(
    () => fake.remove(),
    () => rm(dir, { recursive: true, force: true }),
  );
  return { fake, dir };
}

describe('svc-emu lima, no core running', () => {
  it('status --json: Lima’s view of the VM, parsed', async () => {
    const { fake, dir } = await setup();
    const missing = await cli(['lima', 'status', '--json', '--limactl', fake.path, '--data-dir', dir]);
    expect(missing.code, missing.stderr).toBe(0);
    expect(JSON.parse(missing.stdout)).toEqual({
      available: true,
      limactl: fake.path,
      limactl_version: '1.0.3',
      vm: { name: 'svc-emu', status: 'missing' },
      operation: null,
    });

    await fake.patch({ instances: { 'svc-emu': { status: 'Running', cpus: 4, memory: 8 * 1024 ** 3 } } });
    const running = await cli(['lima', 'status', '--json', '--limactl', fake.path, '--data-dir', dir]);
    expect(JSON.parse(running.stdout).vm).toMatchObject({
      name: 'svc-emu',
      status: 'Running',
      cpus: 4,
      memory: 8 * 1024 ** 3,
      arch: 'aarch64',
    });

    const human = await cli(['lima', 'status', '--limactl', fake.path, '--data-dir', dir]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('VM        svc-emu — Running');
    expect(human.stdout).toContain('4 CPUs · memory 8 GiB · disk 100 GiB · aarch64 · vz');
  });

  it('create then start: limactl’s output printed, exit 0; create again refused (exit 1, vm_exists)', async () => {
    const { fake, dir } = await setup();
    const created = await cli(['lima', 'create', '--limactl', fake.path, '--data-dir', dir]);
    expect(created.code, created.stderr).toBe(0);
    const lines = created.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^\$ .*limactl create --tty=false --name svc-emu .*svc-emu\.yaml$/);
    expect(created.stdout).toContain('Terminal is not available');
    expect(created.stderr).toContain('svc-emu lima start');
    expect((await fake.state()).templates['svc-emu']).toContain('mountPoint:');

    const again = await cli(['lima', 'create', '--json', '--limactl', fake.path, '--data-dir', dir]);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stdout)).toMatchObject({ code: 'vm_exists', detail: expect.any(String) });

    const started = await cli(['lima', 'start', '--json', '--limactl', fake.path, '--data-dir', dir]);
    expect(started.code, started.stderr).toBe(0);
    expect(JSON.parse(started.stdout)).toMatchObject({ kind: 'start', state: 'succeeded', exit_code: 0 });
    expect((await fake.state()).instances['svc-emu']?.status).toBe('Running');
  });

  it('a failing limactl: its message printed, exit 1', async () => {
    const { fake, dir } = await setup();
    await fake.patch({ fail: { create: 'no space left on device' } });
    const r = await cli(['lima', 'create', '--limactl', fake.path, '--data-dir', dir]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('no space left on device');
    expect(r.stderr).toContain('limactl create exited with code 1');
    // --json: the failed operation, one object on stdout with code and detail
    const j = await cli(['lima', 'create', '--json', '--limactl', fake.path, '--data-dir', dir]);
    expect(j.code).toBe(1);
    expect(j.stderr).toBe('');
    expect(JSON.parse(j.stdout)).toMatchObject({
      kind: 'create',
      state: 'failed',
      code: 'limactl_failed',
      detail: expect.stringContaining('exited with code 1'),
    });
  });

  it('here on Linux without --limactl: not managed here (the reason), actions exit 1 vm_unavailable', async () => {
    const { dir } = await setup();
    const s = await cli(['lima', 'status', '--data-dir', dir]);
    expect(s.code).toBe(0);
    expect(s.stdout).toMatch(/^VM {8}not managed here: Lima is only used on macOS: on Linux /);
    const c = await cli(['lima', 'start', '--data-dir', dir]);
    expect(c.code).toBe(1);
    expect(c.stderr).toMatch(/Lima is only used on macOS.*\(vm_unavailable\)/);
  });

  it('template: the generated Lima template, as before', async () => {
    const r = await cli(['lima', 'template']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^# Snippet Emulator executor VM/);
    expect(r.stdout).toContain('mountPoint:');
  });

  it('usage: an unknown subcommand exits 2', async () => {
    const r = await cli(['lima', 'delete']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('svc-emu lima create | start | stop');
  });
});

describe('svc-emu lima with a core running on the data dir', () => {
  let core: TestCore;
  let fake: FakeLimactl;

  it('goes through /_emu/vm: the core runs the operation, the CLI prints its log as it comes', async () => {
    fake = await fakeLimactl();
    cleanups.push(() => fake.remove());
    core = await startTestCore({ config: { limactl: fake.path } });
    cleanups.push(() => core.stop());

    // The CLI's own --limactl is not the core's: what runs is the core's fake.
    const created = await cli(['lima', 'create', '--data-dir', core.dataDir, '--limactl', '/nonexistent/limactl']);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain(`$ ${fake.path} create --tty=false --name svc-emu`);
    expect(created.stdout).toContain('Run `limactl start svc-emu`');

    const seen = await core.call('GET', '/_emu/vm', undefined, { key: core.admin });
    expect(seen.json.operation).toMatchObject({ kind: 'create', state: 'succeeded' });

    const status = await cli(['lima', 'status', '--data-dir', core.dataDir]);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain('VM        svc-emu — Stopped');
    expect(status.stdout).toContain(`via       the running emulator at ${core.url}`);
    expect(status.stdout).toMatch(/last {6}create succeeded/);

    const stop = await cli(['lima', 'stop', '--json', '--data-dir', core.dataDir]);
    expect(stop.code).toBe(1);
    expect(JSON.parse(stop.stdout)).toMatchObject({ code: 'vm_not_running', detail: expect.any(String) });
  });
});
