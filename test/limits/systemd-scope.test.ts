import { afterEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { SystemdScopeBackend, SystemdScopeGroup, parseControlGroup } from '../../executor/limits/systemd-scope';
import { USER_SERVICE, fakeExec, fakeTree } from './fake-cgroupfs';

// systemd is not PID 1 on the test hosts: the commands the backend generates and the parsing of what
// systemctl prints are tested with a fake command runner and a fake cgroupfs.

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

const SCOPE_CG = `${USER_SERVICE}/app.slice/svc-emu-sb1.scope`;

function setup(table: Parameters<typeof fakeExec>[0] = {}) {
  const t = fakeTree({
    [`sys/fs/cgroup${SCOPE_CG}/memory.current`]: '2097152\n',
    [`sys/fs/cgroup${SCOPE_CG}/memory.peak`]: '4194304\n',
    [`sys/fs/cgroup${SCOPE_CG}/cpu.stat`]: 'usage_usec 20000\nnr_throttled 3\nthrottled_usec 9000\n',
    [`sys/fs/cgroup${SCOPE_CG}/memory.events`]: 'max 2\noom 1\noom_kill 1\n',
    [`sys/fs/cgroup${SCOPE_CG}/cgroup.procs`]: '',
  });
  cleanups.push(t.cleanup);
  const ex = fakeExec({
    'systemctl --user show -p ControlGroup --value svc-emu-sb1.scope': { stdout: `${SCOPE_CG}\n` },
    ...table,
  }, { code: 0 });
  const backend = new SystemdScopeBackend({ exec: ex.exec, cgroupMount: `${t.root}/sys/fs/cgroup` });
  return { t, ex, backend };
}

describe('systemd-scope backend (fake systemd)', () => {
  it('wraps argv in a transient user scope with the memory, swap and tasks limits', async () => {
    const { backend } = setup();
    const g = await backend.create('sb1', { memoryMb: 128, pidsMax: 32 });
    expect(g.wrap(['/opt/bun', 'runner.js', '--x'])).toEqual([
      'systemd-run', '--user', '--scope', '--quiet', '--collect', '--unit=svc-emu-sb1',
      '-p', `MemoryMax=${128 * 1024 * 1024}`, '-p', 'MemorySwapMax=0', '-p', 'TasksMax=32',
      '-p', 'MemoryAccounting=yes', '-p', 'TasksAccounting=yes', '-p', 'CPUAccounting=yes',
      '--', '/opt/bun', 'runner.js', '--x',
    ]);
  });

  it('sets and lifts the CPU quota with set-property --runtime', async () => {
    const { backend, ex } = setup();
    const g = await backend.create('sb1', { memoryMb: 64, pidsMax: 8 });
    await g.setCpuPercent(10);
    await g.setCpuPercent(12.5);
    await g.setCpuPercent(null);
    expect(ex.calls).toEqual([
      ['systemctl', '--user', 'set-property', '--runtime', 'svc-emu-sb1.scope', 'CPUQuota=10%'],
      ['systemctl', '--user', 'set-property', '--runtime', 'svc-emu-sb1.scope', 'CPUQuota=12.5%'],
      ['systemctl', '--user', 'set-property', '--runtime', 'svc-emu-sb1.scope', 'CPUQuota='],
    ]);
  });

  it('a failing set-property is an error with systemctl\'s message', async () => {
    const { backend } = setup({
      'systemctl --user set-property --runtime svc-emu-sb1.scope CPUQuota=10%': { code: 1, stderr: 'Failed to set unit properties on svc-emu-sb1.scope: Unit svc-emu-sb1.scope not loaded.\n' },
    });
    const g = await backend.create('sb1', { memoryMb: 64, pidsMax: 8 });
    await expect(g.setCpuPercent(10)).rejects.toThrow(/not loaded/);
  });

  it('samples the scope\'s cgroup found through ControlGroup (asked once)', async () => {
    const { backend, ex } = setup();
    const g = await backend.create('sb1', { memoryMb: 64, pidsMax: 8 });
    const s = await g.sample();
    expect(s).toMatchObject({ memory_bytes: 2097152, memory_peak_bytes: 4194304, cpu_usage_ns: 20_000_000, cpu_throttled_ns: 9_000_000, oom_kills: 1, limit_hits: 2 });
    await g.sample();
    expect(ex.calls.filter((c) => c.includes('ControlGroup'))).toHaveLength(1);
  });

  it('before systemd made the scope, a sample is zeros (not an error)', async () => {
    const { backend } = setup({ 'systemctl --user show -p ControlGroup --value svc-emu-sb1.scope': { stdout: '\n' } });
    const g = await backend.create('sb1', { memoryMb: 64, pidsMax: 8 });
    expect(await g.sample()).toMatchObject({ memory_bytes: 0, oom_kills: 0, limit_hits: 0 });
  });

  it('killAll sends SIGKILL to the whole unit and waits for cgroup.procs to empty; destroy stops the unit', async () => {
    const { backend, ex, t } = setup();
    writeFileSync(`${t.root}/sys/fs/cgroup${SCOPE_CG}/cgroup.procs`, '');
    const g = (await backend.create('sb1', { memoryMb: 64, pidsMax: 8 })) as SystemdScopeGroup;
    await g.destroy();
    await g.destroy();
    expect(ex.calls.map((c) => c.slice(1).join(' '))).toEqual([
      '--user kill --signal=SIGKILL svc-emu-sb1.scope',
      '--user show -p ControlGroup --value svc-emu-sb1.scope',
      '--user stop svc-emu-sb1.scope',
    ]);
  });

  it('parses ControlGroup in both output forms', () => {
    expect(parseControlGroup('/user.slice/x.scope\n')).toBe('/user.slice/x.scope');
    expect(parseControlGroup('ControlGroup=/user.slice/x.scope\n')).toBe('/user.slice/x.scope');
    expect(parseControlGroup('\n')).toBeNull();
    expect(parseControlGroup('ControlGroup=\n')).toBeNull();
  });

  it('carries the degraded reason detect found', () => {
    const b = new SystemdScopeBackend({ cgroupMount: '/sys/fs/cgroup', degraded: 'cpu not delegated' });
    expect(b.degraded).toBe('cpu not delegated');
    expect(b.name).toBe('systemd-scope');
  });
});
