/**
 * killAllExcept (the end of an invocation) and the freeze-and-kill of a retiring group, on the paths this
 * host cannot run for real: cgroup v2 (cgroup.freeze / cgroup.events / cgroup.kill) on a fake cgroupfs
 * with a small model of the kernel, and the `none` backend's process-group scan on a fake /proc.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { CgroupV2Backend, CgroupV2Group, planCgroupV2 } from '../../executor/limits/cgroup-v2';
import { nodeCgroupFs, type CgroupFs, type KillFn } from '../../executor/limits/cgroupfs';
import { NoLimitGroup } from '../../executor/limits/none';
import { CgroupV1Group } from '../../executor/limits/cgroup-v1';
import { fakeTree, errno } from './fake-cgroupfs';

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

/**
 * The kernel, as far as these operations see it: cgroup.procs lists the live pids; writing cgroup.freeze
 * 1/0 sets `frozen` in cgroup.events; a SIGKILL to a frozen process lands when the group thaws; with
 * `forks`, every read of cgroup.procs while the group is thawed and holds a process besides `keep` adds a
 * new pid (a fork loop racing the reaper); cgroup.kill empties the group.
 */
function kernelModel(procs: number[], opts: { forks?: boolean; keep?: number[]; freezeFile?: boolean; killFile?: boolean } = {}) {
  const t = fakeTree({ 'cg/cgroup.controllers': 'memory pids cpu\n', 'cg/cgroup.subtree_control': '', 'cg/cgroup.procs': '' });
  cleanups.push(t.cleanup);
  const log: string[] = [];
  let live = [...procs];
  let frozen = false;
  let nextPid = 1000;
  const pendingKills = new Set<number>();
  const keep = new Set(opts.keep ?? []);
  const isProcs = (p: string) => p.endsWith('/g/cgroup.procs');
  const fs: CgroupFs = {
    ...nodeCgroupFs,
    async read(path) {
      if (isProcs(path)) {
        if (opts.forks && !frozen && live.some((p) => !keep.has(p))) live.push(nextPid++);
        return live.join('\n') + (live.length ? '\n' : '');
      }
      if (path.endsWith('/g/cgroup.events')) return `populated ${live.length ? 1 : 0}\nfrozen ${frozen ? 1 : 0}\n`;
      return nodeCgroupFs.read(path);
    },
    async exists(path) {
      if (path.endsWith('/g/cgroup.freeze')) return opts.freezeFile ?? true;
      if (path.endsWith('/g/cgroup.kill')) return opts.killFile ?? false;
      return nodeCgroupFs.exists(path);
    },
    async write(path, data) {
      if (path.endsWith('/g/cgroup.freeze')) {
        log.push(`freeze ${data}`);
        frozen = data === '1';
        if (!frozen) {
          live = live.filter((p) => !pendingKills.has(p));
          pendingKills.clear();
        }
        return;
      }
      if (path.endsWith('/g/cgroup.kill')) {
        log.push('cgroup.kill');
        live = [];
        return;
      }
      return nodeCgroupFs.write(path, data);
    },
  };
  const kill: KillFn = (pid, sig) => {
    if (!live.includes(pid)) throw errno('ESRCH');
    log.push(`kill ${pid}${frozen ? ' (frozen)' : ''}`);
    if (sig !== 'SIGKILL') return;
    if (frozen) pendingKills.add(pid);
    else live = live.filter((p) => p !== pid);
  };
  return { t, fs, kill, log, live: () => live };
}

async function v2Group(m: ReturnType<typeof kernelModel>): Promise<CgroupV2Group> {
  const planned = await planCgroupV2(nodeCgroupFs, `${m.t.root}/cg`, 'root');
  if (!('plan' in planned)) throw new Error(planned.reason);
  const backend = await CgroupV2Backend.open({ plan: planned.plan, fs: m.fs, kill: m.kill });
  return (await backend.create('g', { memoryMb: 64, pidsMax: 64 })) as CgroupV2Group;
}

describe('cgroup v2 killAllExcept (fake cgroupfs, modelled kernel)', () => {
  it('only the kept pids there: one read, no freeze, nothing killed', async () => {
    const m = kernelModel([100, 101]);
    const g = await v2Group(m);
    expect(await g.killAllExcept(new Set([100, 101]))).toBe(0);
    expect(m.log).toEqual([]);
  });

  it('freezes, SIGKILLs every pid not kept while frozen, thaws; the kept ones stay', async () => {
    const m = kernelModel([100, 101, 201, 202]);
    const g = await v2Group(m);
    expect(await g.killAllExcept(new Set([100, 101]))).toBe(2);
    expect(m.log).toEqual(['freeze 1', 'kill 201 (frozen)', 'kill 202 (frozen)', 'freeze 0']);
    expect(m.live()).toEqual([100, 101]);
  });

  it('a fork loop racing the reap: frozen, nothing new appears, and all of it is gone after the thaw', async () => {
    const m = kernelModel([100, 201], { forks: true, keep: [100] });
    const g = await v2Group(m);
    const killed = await g.killAllExcept(new Set([100]));
    expect(m.log[0]).toBe('freeze 1');
    expect(m.log.at(-1)).toBe('freeze 0');
    expect(m.log.slice(1, -1).every((l) => l.endsWith('(frozen)'))).toBe(true);
    expect(killed).toBe(m.log.length - 2);
    expect(m.live()).toEqual([100]);
  });

  it('without cgroup.freeze (kernel < 5.2): a SIGKILL loop that catches the forks round by round', async () => {
    const m = kernelModel([100, 201], { forks: true, keep: [100], freezeFile: false });
    const g = await v2Group(m);
    expect(await g.killAllExcept(new Set([100]))).toBeGreaterThanOrEqual(1);
    expect(m.log.some((l) => l.startsWith('freeze'))).toBe(false);
    expect(m.live()).toEqual([100]);
  });

  it('killAll: cgroup.kill when present (kernel ≥ 5.14)', async () => {
    const m = kernelModel([100, 201], { killFile: true });
    const g = await v2Group(m);
    await g.killAll();
    expect(m.log).toEqual(['cgroup.kill']);
    expect(m.live()).toEqual([]);
  });

  it('killAll without cgroup.kill: freeze, kill everything, thaw (a fork cannot race it)', async () => {
    const m = kernelModel([100, 201], { forks: true });
    const g = await v2Group(m);
    await g.killAll();
    expect(m.log[0]).toBe('freeze 1');
    expect(m.log.at(-1)).toBe('freeze 0');
    expect(m.live()).toEqual([]);
  });
});

describe('none backend killAllExcept (fake /proc): the runner’s process group and tree, best effort', () => {
  it('kills the members of the tracked process group not kept; a setsid daemon and zombies are outside it', async () => {
    const root = `${fakeTree({}).root}/proc`;
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    // /proc/<pid>/stat: "pid (comm) state ppid pgrp …"
    const procs: Record<number, string> = {
      10: '10 (python3) S 1 10 10',
      11: '11 (sleep) S 10 10 10',
      12: '12 (sleep) S 1 12 12', // setsid: its own process group
      13: '13 (python3) Z 10 10 10',
    };
    for (const [pid, stat] of Object.entries(procs)) {
      mkdirSync(`${root}/${pid}`, { recursive: true });
      writeFileSync(`${root}/${pid}/stat`, stat);
    }
    const killed: number[] = [];
    const kill: KillFn = (pid) => {
      killed.push(pid);
      rmSync(`${root}/${pid}`, { recursive: true, force: true });
    };
    const g = new NoLimitGroup('n1', kill, root);
    g.track(10);
    expect((await g.pids()).sort()).toEqual([10, 11]);
    expect(await g.killAllExcept(new Set([10]))).toBe(1);
    expect(killed).toEqual([11]);
    expect(await g.pids()).toEqual([10]);
  });

  it('counts the descendants in a session of their own (bubblewrap --new-session) as members, and not a reused tracked pid', async () => {
    const root = `${fakeTree({}).root}/proc`;
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    // "pid (comm) state ppid pgrp session …": 20 is bwrap (tracked), 21 its child in a new session (the runner), 22 the
    // runner's background child; 30 is unrelated. Field 22 (start time) tells a reused pid apart.
    const stat = (pid: number, ppid: number, pgrp: number, start = 100) =>
      `${pid} (x) S ${ppid} ${pgrp} ${pgrp} ${' 0'.repeat(15).trim()} ${start} 0 0`;
    const write = (pid: number, text: string) => {
      mkdirSync(`${root}/${pid}`, { recursive: true });
      writeFileSync(`${root}/${pid}/stat`, text);
    };
    write(20, stat(20, 1, 20));
    write(21, stat(21, 20, 21));
    write(22, stat(22, 21, 21));
    write(30, stat(30, 1, 30));
    const killed: number[] = [];
    const kill: KillFn = (pid) => {
      killed.push(pid);
      rmSync(`${root}/${Math.abs(pid)}`, { recursive: true, force: true });
    };
    const g = new NoLimitGroup('n2', kill, root);
    g.track(20);
    expect((await g.pids()).sort()).toEqual([20, 21, 22]);
    expect(await g.killAllExcept(new Set([20, 21]))).toBe(1);
    expect(killed).toEqual([22]);
    // 20 goes, and its pid comes back as another process with a child: neither is the group's.
    rmSync(`${root}/20`, { recursive: true, force: true });
    rmSync(`${root}/21`, { recursive: true, force: true });
    write(20, stat(20, 1, 1, 999));
    write(23, stat(23, 20, 1, 999));
    expect(await g.pids()).toEqual([]);
  });
});

describe('cgroup v1 without a freezer dir (a leftover group made before the freezer was used)', () => {
  it('killAll and destroy fall back to the kill loop and remove the other dirs', async () => {
    const t = fakeTree({}, ['memory/svc-emu/old', 'cpu/svc-emu/old', 'cpuacct/svc-emu/old', 'pids/svc-emu/old', 'freezer/svc-emu']);
    cleanups.push(t.cleanup);
    const at = (h: string) => `${t.root}/${h}/svc-emu/old`;
    const dirs = { memory: at('memory'), cpu: at('cpu'), cpuacct: at('cpuacct'), pids: at('pids') };
    writeFileSync(`${dirs.memory}/cgroup.procs`, '77\n');
    const killed: number[] = [];
    const kill: KillFn = (pid) => {
      killed.push(pid);
      writeFileSync(`${dirs.memory}/cgroup.procs`, '');
    };
    const g = new CgroupV1Group('old', dirs, nodeCgroupFs, kill, `${t.root}/freezer/svc-emu/old`);
    await g.killAll();
    expect(killed).toEqual([77]);
    rmSync(`${dirs.memory}/cgroup.procs`);
    await g.destroy();
    for (const d of Object.values(dirs)) expect(existsSync(d)).toBe(false);
  });
});

describe('cgroup v1 group removed while it is being killed (its destroy won the race)', () => {
  it('killAll resolves when the freezer answers ENODEV to FROZEN or THAWED: a removed group has nothing left', async () => {
    for (const refuse of ['FROZEN', 'THAWED']) {
      const t = fakeTree({}, ['memory/svc-emu/g', 'cpu/svc-emu/g', 'cpuacct/svc-emu/g', 'pids/svc-emu/g', 'freezer/svc-emu/g']);
      cleanups.push(t.cleanup);
      const at = (h: string) => `${t.root}/${h}/svc-emu/g`;
      const dirs = { memory: at('memory'), cpu: at('cpu'), cpuacct: at('cpuacct'), pids: at('pids') };
      writeFileSync(`${dirs.memory}/cgroup.procs`, '77\n');
      writeFileSync(`${at('freezer')}/freezer.state`, 'THAWED\n');
      const fs: CgroupFs = {
        ...nodeCgroupFs,
        write: async (path, data) => {
          if (path.endsWith('freezer.state') && data === refuse) throw errno('ENODEV', path);
          return nodeCgroupFs.write(path, data);
        },
      };
      const kill: KillFn = () => writeFileSync(`${dirs.memory}/cgroup.procs`, '');
      const g = new CgroupV1Group('g', dirs, fs, kill, at('freezer'));
      await expect(g.killAll(), `ENODEV on ${refuse}`).resolves.toBeUndefined();
    }
  });
});
