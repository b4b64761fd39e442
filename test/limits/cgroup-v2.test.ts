import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { CgroupV2Backend, CgroupV2Group, planCgroupV2 } from '../../executor/limits/cgroup-v2';
import { errnoOf, nodeCgroupFs } from '../../executor/limits/cgroupfs';
import type { CgroupFs, KillFn } from '../../executor/limits/cgroupfs';
import { limitBackendConformance, weightOf, type LimitHarness } from '../conformance/limit-backend';
import { TREE_ARGV, spawnTree } from '../conformance/processes';
import { fakeTree, hookedFs } from './fake-cgroupfs';

// cgroup v2 has no usable controllers on the test hosts (cgroup v1 machines), so the file-writing logic is
// tested against a fake cgroupfs tree: plain files in a temp directory. The promises every limit backend keeps are
// test/conformance/limit-backend.ts's, run on such a tree with real processes (below); v2's own file formats follow.

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

async function openFake(controllers = 'cpuset cpu io memory pids', extra: Record<string, string> = {}, kill?: KillFn) {
  const t = fakeTree({
    'cg/cgroup.controllers': `${controllers}\n`,
    'cg/cgroup.subtree_control': '',
    'cg/cgroup.procs': '',
    ...extra,
  });
  cleanups.push(t.cleanup);
  const planned = await planCgroupV2(nodeCgroupFs, `${t.root}/cg`, 'root');
  if (!('plan' in planned)) throw new Error(planned.reason);
  const backend = await CgroupV2Backend.open({ plan: planned.plan, ...(kill ? { kill } : {}) });
  return { t, backend };
}

describe('cgroup-v2 backend (fake cgroupfs)', () => {
  it('writes memory.max, memory.swap.max 0, memory.oom.group, pids.max and an uncapped cpu.max', async () => {
    const { t, backend } = await openFake();
    expect(backend.degraded).toBeNull();
    const g = (await backend.create('sb1', { memoryMb: 256, pidsMax: 64 })) as CgroupV2Group;
    expect(g.dir).toBe(`${t.root}/cg/svc-emu/sb1`);
    expect(t.read('cg/svc-emu/sb1/memory.max')).toBe(String(256 * 1024 * 1024));
    expect(t.read('cg/svc-emu/sb1/memory.swap.max')).toBe('0');
    expect(t.read('cg/svc-emu/sb1/memory.oom.group')).toBe('1');
    expect(t.read('cg/svc-emu/sb1/pids.max')).toBe('64');
    expect(t.read('cg/svc-emu/sb1/cpu.max')).toBe('max 100000');
    await g.setCpuPercent(10);
    expect(t.read('cg/svc-emu/sb1/cpu.max')).toBe('10000 100000');
    await g.setCpuPercent(250);
    expect(t.read('cg/svc-emu/sb1/cpu.max')).toBe('250000 100000');
    await g.setCpuPercent(0.5); // below the kernel's 1 ms minimum
    expect(t.read('cg/svc-emu/sb1/cpu.max')).toBe('1000 100000');
    await g.setCpuPercent(null);
    expect(t.read('cg/svc-emu/sb1/cpu.max')).toBe('max 100000');
    await expect(g.setCpuPercent(0)).rejects.toThrow(/> 0/);
  });

  it('wraps argv so the runner enters its group before exec', async () => {
    const { t, backend } = await openFake();
    const g = await backend.create('sb2', { memoryMb: 64, pidsMax: 8 });
    expect(g.wrap(['bun', 'runner.js'])).toEqual([
      '/bin/sh',
      '-c',
      `echo $$ > '${t.root}/cg/svc-emu/sb2/cgroup.procs' && exec "$@"`,
      'sh',
      'bun',
      'runner.js',
    ]);
  });

  it('samples memory.current/peak, cpu.stat and memory.events', async () => {
    const { t, backend } = await openFake();
    const g = await backend.create('sb3', { memoryMb: 64, pidsMax: 8 });
    const d = `${t.root}/cg/svc-emu/sb3`;
    writeFileSync(`${d}/memory.current`, '1048576\n');
    writeFileSync(`${d}/memory.peak`, '67108864\n');
    writeFileSync(`${d}/cpu.stat`, 'usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 10\nnr_throttled 4\nthrottled_usec 250\n');
    writeFileSync(`${d}/memory.events`, 'low 0\nhigh 0\nmax 17\noom 1\noom_kill 1\noom_group_kill 1\n');
    writeFileSync(`${d}/memory.stat`, 'anon 524288\nfile 4096\n');
    const s = await g.sample();
    expect(s).toMatchObject({
      memory_bytes: 1048576,
      memory_peak_bytes: 67108864,
      cpu_usage_ns: 1_500_000,
      cpu_throttled_ns: 250_000,
      oom_kills: 1,
      limit_hits: 17,
      memory_anon_bytes: 524288,
    });
  });

  it('without memory.peak (kernel < 5.19) the peak is the max of samples', async () => {
    const { t, backend } = await openFake();
    const g = await backend.create('sb4', { memoryMb: 64, pidsMax: 8 });
    const d = `${t.root}/cg/svc-emu/sb4`;
    writeFileSync(`${d}/memory.current`, '5000');
    expect((await g.sample()).memory_peak_bytes).toBe(5000);
    writeFileSync(`${d}/memory.current`, '3000');
    const s = await g.sample();
    expect(s.memory_peak_bytes).toBe(5000);
    expect(s.oom_kills).toBe(0); // no memory.events → 0
  });

  it('without the cpu controller: degraded, no cpu.max nor cpu.weight written, setCpuPercent and setCpuWeight are no-ops', async () => {
    const { t, backend } = await openFake('memory pids');
    expect(backend.degraded).toMatch(/CPU cap is not enforced/);
    expect(t.read('cg/svc-emu/cgroup.subtree_control')).toBe('+memory +pids');
    const g = await backend.create('sb5', { memoryMb: 64, pidsMax: 8, cpuWeight: 'low' });
    await g.setCpuPercent(10);
    await g.setCpuWeight!('default');
    expect(existsSync(`${t.root}/cg/svc-emu/sb5/cpu.max`)).toBe(false);
    expect(existsSync(`${t.root}/cg/svc-emu/sb5/cpu.weight`)).toBe(false);
  });

  it('plan refuses a cgroup without memory/pids or one we cannot write', async () => {
    const t = fakeTree({
      'a/cgroup.controllers': 'cpu\n',
      'b/cgroup.controllers': 'memory pids cpu\n',
      'b/cgroup.subtree_control': '',
      'b/cgroup.procs': '',
    });
    cleanups.push(t.cleanup);
    const a = await planCgroupV2(nodeCgroupFs, `${t.root}/a`, 'delegated');
    expect('reason' in a && a.reason).toMatch(/memory, pids not available/);
    const ro = hookedFs({ writable: (p) => (p.endsWith('cgroup.subtree_control') ? false : undefined) });
    const b = await planCgroupV2(ro, `${t.root}/b`, 'delegated');
    expect('reason' in b && b.reason).toMatch(/subtree_control is not writable/);
  });

  it('killAll uses cgroup.kill when present and waits for cgroup.procs to empty', async () => {
    const { t, backend } = await openFake();
    const g = await backend.create('sb6', { memoryMb: 64, pidsMax: 8 });
    const d = `${t.root}/cg/svc-emu/sb6`;
    writeFileSync(`${d}/cgroup.kill`, '');
    writeFileSync(`${d}/cgroup.procs`, '');
    await g.killAll();
    expect(t.read('cg/svc-emu/sb6/cgroup.kill')).toBe('1');
  });

  it('killAll falls back to a SIGKILL loop over cgroup.procs (kernel < 5.14), and destroy removes the dir', async () => {
    const kills: Array<[number, string | 0]> = [];
    let dir = '';
    const kill: KillFn = (pid, sig) => {
      kills.push([pid, sig]);
      // the "kernel": a killed pid leaves cgroup.procs
      const left = t
        .read('cg/svc-emu/sb7/cgroup.procs')
        .split('\n')
        .filter((l) => l && Number(l) !== pid);
      writeFileSync(`${dir}/cgroup.procs`, left.join('\n'));
    };
    const { t, backend } = await openFake(undefined, {}, kill);
    const g = (await backend.create('sb7', { memoryMb: 64, pidsMax: 8 })) as CgroupV2Group;
    dir = g.dir;
    writeFileSync(`${dir}/cgroup.procs`, '101\n102\n');
    await g.killAll();
    expect(kills).toEqual([
      [101, 'SIGKILL'],
      [102, 'SIGKILL'],
    ]);
    // a real cgroup dir has only kernel files; the fake one has the files we wrote: clear them for rmdir
    for (const f of ['memory.max', 'memory.swap.max', 'memory.oom.group', 'pids.max', 'cpu.max', 'cpu.weight', 'cgroup.procs']) {
      await import('node:fs/promises').then((m) => m.rm(`${dir}/${f}`, { force: true }));
    }
    await g.destroy();
    expect(existsSync(dir)).toBe(false);
    await g.destroy(); // idempotent
  });

  it('a leftover group of the same id is emptied and reused', async () => {
    const kills: number[] = [];
    const { t, backend } = await openFake(undefined, { 'cg/svc-emu/old/cgroup.procs': '' }, (pid) => {
      kills.push(pid);
      writeFileSync(`${t.root}/cg/svc-emu/old/cgroup.procs`, '');
    });
    writeFileSync(`${t.root}/cg/svc-emu/old/cgroup.procs`, '555\n');
    await backend.create('old', { memoryMb: 32, pidsMax: 4 });
    expect(kills).toEqual([555]);
    expect(t.read('cg/svc-emu/old/memory.max')).toBe(String(32 * 1024 * 1024));
  });
});

/**
 * The limit backend suite on a fake v2 tree, the fake playing the kernel's part: a process the harness puts in a group
 * is listed in its cgroup.procs (with its descendants, as fork would), a kill removes it from there, and rmdir takes a
 * group's files with it but refuses while it has processes (EBUSY).
 */
async function fakeV2Harness(): Promise<LimitHarness> {
  const t = fakeTree({ 'cg/cgroup.controllers': 'cpuset cpu io memory pids\n', 'cg/cgroup.subtree_control': '', 'cg/cgroup.procs': '' });
  const base = `${t.root}/cg/svc-emu`;
  const procsFiles = () => (existsSync(base) ? readdirSync(base).map((id) => `${base}/${id}/cgroup.procs`) : []).filter(existsSync);
  const listed = (file: string) => readFileSync(file, 'utf8').split(/\s+/).filter(Boolean).map(Number);
  const kill: KillFn = (pid, sig) => {
    try {
      process.kill(pid, sig);
    } catch (err) {
      if (errnoOf(err) !== 'ESRCH') throw err;
    }
    if (sig === 'SIGKILL')
      for (const f of procsFiles())
        writeFileSync(
          f,
          listed(f)
            .filter((p) => p !== pid)
            .join('\n'),
        );
  };
  const fs: CgroupFs = {
    ...nodeCgroupFs,
    async rmdir(path) {
      if (existsSync(`${path}/cgroup.procs`) && listed(`${path}/cgroup.procs`).length > 0) {
        throw Object.assign(new Error(`rmdir ${path}: EBUSY`), { code: 'EBUSY' });
      }
      rmSync(path, { recursive: true, force: true });
    },
  };
  const planned = await planCgroupV2(fs, `${t.root}/cg`, 'root');
  if (!('plan' in planned)) throw new Error(planned.reason);
  const backend = await CgroupV2Backend.open({ plan: planned.plan, fs, kill });
  const dirOf = (g: { id: string }) => `${base}/${g.id}`;
  return {
    backend,
    async applied(g) {
      const [quota, period] = t.read(`cg/svc-emu/${g.id}/cpu.max`).trim().split(' ');
      return {
        memoryBytes: Number(t.read(`cg/svc-emu/${g.id}/memory.max`)),
        pidsMax: Number(t.read(`cg/svc-emu/${g.id}/pids.max`)),
        cpuPercent: quota === 'max' ? null : (Number(quota) / Number(period)) * 100,
        cpuWeight: weightOf(t.read(`cg/svc-emu/${g.id}/cpu.weight`).trim(), { '1': 'low', '100': 'default' }),
      };
    },
    probeArgv: (g) => ['/bin/sh', '-c', `grep -qx "$$" '${dirOf(g)}/cgroup.procs' && echo in-group`],
    async populate(g) {
      const tree = await spawnTree(g.wrap(TREE_ARGV));
      writeFileSync(`${dirOf(g)}/cgroup.procs`, tree.pids.join('\n'));
      return tree;
    },
    async work(g) {
      writeFileSync(`${dirOf(g)}/memory.current`, String(16 * 1024 * 1024));
      writeFileSync(`${dirOf(g)}/memory.peak`, String(20 * 1024 * 1024));
      writeFileSync(`${dirOf(g)}/cpu.stat`, 'usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\n');
      return async () => {};
    },
    async oom(g) {
      writeFileSync(`${dirOf(g)}/memory.events`, 'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n');
    },
    exists: async (id) => existsSync(`${base}/${id}`),
    cleanup: t.cleanup,
  };
}

limitBackendConformance('cgroup-v2', fakeV2Harness, {
  memory: true,
  cpu: true,
  weight: true,
  pids: true,
  placement: true,
  usage: true,
  oom: true,
  sweep: true,
  degraded: null,
});
