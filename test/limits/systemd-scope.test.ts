import { afterEach, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { errnoOf } from '../../executor/limits/cgroupfs';
import type { ExecFn, KillFn } from '../../executor/limits/cgroupfs';
import { SCOPE_NO_SWEEP, SystemdScopeBackend, SystemdScopeGroup, parseControlGroup } from '../../executor/limits/systemd-scope';
import { limitBackendConformance, weightOf, type LimitHarness } from '../conformance/limit-backend';
import { TREE_ARGV, spawnTree } from '../conformance/processes';
import { USER_SERVICE, fakeExec, fakeTree } from './fake-cgroupfs';

// systemd is not PID 1 on the test hosts: the commands the backend generates and the parsing of what
// systemctl prints are tested with a fake command runner and a fake cgroupfs. The promises every limit backend
// keeps are test/conformance/limit-backend.ts's, run (below) against a fake systemd-run and systemctl over such a tree.

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
  const ex = fakeExec(
    {
      'systemctl --user show -p ControlGroup --value svc-emu-sb1.scope': { stdout: `${SCOPE_CG}\n` },
      ...table,
    },
    { code: 0 },
  );
  const backend = new SystemdScopeBackend({ exec: ex.exec, cgroupMount: `${t.root}/sys/fs/cgroup` });
  return { t, ex, backend };
}

describe('systemd-scope backend (fake systemd)', () => {
  it('wraps argv in a transient user scope with the memory, swap and tasks limits', async () => {
    const { backend } = setup();
    const g = await backend.create('sb1', { memoryMb: 128, pidsMax: 32 });
    expect(g.wrap(['/opt/bun', 'runner.js', '--x'])).toEqual([
      'systemd-run',
      '--user',
      '--scope',
      '--quiet',
      '--collect',
      '--unit=svc-emu-sb1',
      '-p',
      `MemoryMax=${128 * 1024 * 1024}`,
      '-p',
      'MemorySwapMax=0',
      '-p',
      'TasksMax=32',
      '-p',
      'MemoryAccounting=yes',
      '-p',
      'TasksAccounting=yes',
      '-p',
      'CPUAccounting=yes',
      '--',
      '/opt/bun',
      'runner.js',
      '--x',
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

  it('a low CPU weight is a CPUWeight=1 property of the scope from its start; setCpuWeight changes it with set-property --runtime', async () => {
    const { backend, ex } = setup();
    const low = await backend.create('sb1', { memoryMb: 64, pidsMax: 8, cpuWeight: 'low' });
    const argv = low.wrap(['/opt/bun', 'runner.js']);
    expect(argv.slice(argv.indexOf('CPUWeight=1') - 1, argv.indexOf('--'))).toEqual(['-p', 'CPUWeight=1']);
    const plain = await backend.create('sb2', { memoryMb: 64, pidsMax: 8 });
    expect(plain.wrap(['/opt/bun']).some((a) => a.startsWith('CPUWeight='))).toBe(false); // systemd's default
    await low.setCpuWeight!('default');
    await low.setCpuWeight!('low');
    expect(ex.calls).toEqual([
      ['systemctl', '--user', 'set-property', '--runtime', 'svc-emu-sb1.scope', 'CPUWeight=100'],
      ['systemctl', '--user', 'set-property', '--runtime', 'svc-emu-sb1.scope', 'CPUWeight=1'],
    ]);
  });

  it("a failing set-property is an error with systemctl's message", async () => {
    const { backend } = setup({
      'systemctl --user set-property --runtime svc-emu-sb1.scope CPUQuota=10%': {
        code: 1,
        stderr: 'Failed to set unit properties on svc-emu-sb1.scope: Unit svc-emu-sb1.scope not loaded.\n',
      },
    });
    const g = await backend.create('sb1', { memoryMb: 64, pidsMax: 8 });
    await expect(g.setCpuPercent(10)).rejects.toThrow(/not loaded/);
  });

  it("samples the scope's cgroup found through ControlGroup (asked once)", async () => {
    const { backend, ex } = setup();
    const g = await backend.create('sb1', { memoryMb: 64, pidsMax: 8 });
    const s = await g.sample();
    expect(s).toMatchObject({
      memory_bytes: 2097152,
      memory_peak_bytes: 4194304,
      cpu_usage_ns: 20_000_000,
      cpu_throttled_ns: 9_000_000,
      oom_kills: 1,
      limit_hits: 2,
    });
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

/**
 * The limit backend suite against a fake systemd: a `systemd-run` script that makes the scope's cgroup directory,
 * enters it (its pid into cgroup.procs) and execs the command, as systemd does before the command runs; a systemctl
 * (an ExecFn) that answers ControlGroup, records set-property, and kills or stops a scope (its processes SIGKILLed,
 * its directory gone). A process the harness puts in a scope is listed in its cgroup.procs with its descendants.
 */
async function fakeSystemdHarness(): Promise<LimitHarness> {
  const t = fakeTree({}, ['sys/fs/cgroup', 'bin']);
  const mount = `${t.root}/sys/fs/cgroup`;
  const slice = `${USER_SERVICE}/app.slice`;
  const dirOf = (scope: string) => `${mount}${slice}/${scope}`;
  const procsOf = (scope: string) => `${dirOf(scope)}/cgroup.procs`;
  const listed = (scope: string) =>
    existsSync(procsOf(scope)) ? readFileSync(procsOf(scope), 'utf8').split(/\s+/).filter(Boolean).map(Number) : [];
  const systemdRun = `${t.root}/bin/systemd-run`;
  writeFileSync(
    systemdRun,
    `#!/bin/sh
unit=""
while [ "$1" != "--" ]; do case "$1" in --unit=*) unit="\${1#--unit=}";; esac; shift; done
shift
dir='${mount}${slice}/'"$unit.scope"
mkdir -p "$dir" && echo $$ >> "$dir/cgroup.procs" && exec "$@"
`,
  );
  chmodSync(systemdRun, 0o755);
  const scopes = new Set<string>();
  const props = new Map<string, Record<string, string>>();
  const sigkill = (scope: string, pid: number) => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (err) {
      if (errnoOf(err) !== 'ESRCH') throw err;
    }
    writeFileSync(
      procsOf(scope),
      listed(scope)
        .filter((p) => p !== pid)
        .join('\n'),
    );
  };
  const kill: KillFn = (pid, sig) => {
    if (sig !== 'SIGKILL') return process.kill(pid, sig);
    for (const scope of scopes) if (listed(scope).includes(pid)) sigkill(scope, pid);
  };
  const exec: ExecFn = async (file, args) => {
    const ok = { code: 0, stdout: '', stderr: '' };
    const [user, verb, ...rest] = args;
    if (file !== 'systemctl' || user !== '--user') return { code: 1, stdout: '', stderr: `unexpected: ${file} ${args.join(' ')}` };
    // set-property --runtime SCOPE KEY=VALUE; every other verb ends with the scope.
    const scope = verb === 'set-property' ? rest[1]! : rest.at(-1)!;
    if (existsSync(dirOf(scope))) scopes.add(scope);
    switch (verb) {
      case 'show':
        return { ...ok, stdout: existsSync(dirOf(scope)) ? `${slice}/${scope}\n` : '\n' };
      case 'set-property': {
        const [key, value] = rest[2]!.split('=') as [string, string];
        props.set(scope, { ...props.get(scope), [key]: value });
        return ok;
      }
      case 'kill':
        for (const pid of listed(scope)) sigkill(scope, pid);
        return ok;
      case 'stop':
        for (const pid of listed(scope)) sigkill(scope, pid);
        rmSync(dirOf(scope), { recursive: true, force: true });
        scopes.delete(scope);
        return ok;
      default:
        return { code: 1, stdout: '', stderr: `unknown verb ${verb}` };
    }
  };
  const backend = new SystemdScopeBackend({ exec, kill, cgroupMount: mount, systemdRun });
  const scopeOf = (g: { id: string }) => (g as SystemdScopeGroup).scope;
  const inScope = (g: { id: string }) => {
    mkdirSync(dirOf(scopeOf(g)), { recursive: true });
    scopes.add(scopeOf(g));
    return dirOf(scopeOf(g));
  };
  return {
    backend,
    async applied(g) {
      const argv = g.wrap(['x']);
      const prop = (k: string) => props.get(scopeOf(g))?.[k] ?? argv.find((a) => a.startsWith(`${k}=`))?.slice(k.length + 1);
      const cpu = prop('CPUQuota');
      return {
        memoryBytes: Number(prop('MemoryMax')),
        pidsMax: Number(prop('TasksMax')),
        cpuPercent: cpu ? Number.parseFloat(cpu) : null,
        // Unset: systemd's default (CPUWeight=100).
        cpuWeight: weightOf(prop('CPUWeight') ?? '100', { '1': 'low', '100': 'default' }),
      };
    },
    probeArgv: (g) => ['/bin/sh', '-c', `grep -qx "$$" '${procsOf(scopeOf(g))}' && echo in-group`],
    async populate(g) {
      const tree = await spawnTree(g.wrap(TREE_ARGV));
      writeFileSync(`${inScope(g)}/cgroup.procs`, tree.pids.join('\n'));
      return tree;
    },
    async work(g) {
      const dir = inScope(g);
      writeFileSync(`${dir}/memory.current`, String(16 * 1024 * 1024));
      writeFileSync(`${dir}/memory.peak`, String(20 * 1024 * 1024));
      writeFileSync(`${dir}/cpu.stat`, 'usage_usec 5000\nnr_throttled 0\nthrottled_usec 0\n');
      return async () => {};
    },
    async oom(g) {
      writeFileSync(`${inScope(g)}/memory.events`, 'max 3\noom 1\noom_kill 1\n');
    },
    exists: async (id) => existsSync(dirOf(`svc-emu-${id}.scope`)),
    cleanup: t.cleanup,
  };
}

limitBackendConformance('systemd-scope', fakeSystemdHarness, {
  memory: true,
  cpu: true,
  weight: true,
  pids: true,
  placement: true,
  usage: true,
  oom: true,
  sweep: SCOPE_NO_SWEEP,
  degraded: null,
});
