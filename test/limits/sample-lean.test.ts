import { afterEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { CgroupV2Backend, planCgroupV2 } from '../../executor/limits/cgroup-v2';
import { nodeCgroupFs, type CgroupFs } from '../../executor/limits/cgroupfs';
import { fakeTree } from './fake-cgroupfs';

// A lean sample (LimitGroup.sample({ anon: false }): the executor's first and last sample of a run) reads every
// counter a run's usage and evidence come from, and leaves out only memory.stat (the anonymous memory the watchdog's
// own polls read). On a fake cgroup v2 tree (plain files): the host is cgroup v1, whose real sample the executor
// tests exercise on every run.

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

describe('a lean sample', () => {
  it('reads the same counters as a full one, without memory.stat', async () => {
    const t = fakeTree({ 'cg/cgroup.controllers': 'cpuset cpu io memory pids\n', 'cg/cgroup.subtree_control': '', 'cg/cgroup.procs': '' });
    cleanups.push(t.cleanup);
    const reads: string[] = [];
    const fs: CgroupFs = {
      ...nodeCgroupFs,
      read: (path) => {
        reads.push(path.split('/').pop()!);
        return nodeCgroupFs.read(path);
      },
    };
    const planned = await planCgroupV2(nodeCgroupFs, `${t.root}/cg`, 'root');
    if (!('plan' in planned)) throw new Error(planned.reason);
    const backend = await CgroupV2Backend.open({ plan: planned.plan, fs });
    const g = await backend.create('lean', { memoryMb: 64, pidsMax: 8 });
    const d = `${t.root}/cg/svc-emu/lean`;
    writeFileSync(`${d}/memory.current`, '1048576\n');
    writeFileSync(`${d}/memory.peak`, '67108864\n');
    writeFileSync(`${d}/cpu.stat`, 'usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 10\nnr_throttled 4\nthrottled_usec 250\n');
    writeFileSync(`${d}/memory.events`, 'low 0\nhigh 0\nmax 17\noom 1\noom_kill 1\noom_group_kill 1\n');
    writeFileSync(`${d}/memory.stat`, 'anon 524288\nfile 4096\n');
    writeFileSync(`${d}/pids.events`, 'max 3\n');

    reads.length = 0;
    const full = await g.sample();
    expect(reads).toContain('memory.stat');
    expect(full.memory_anon_bytes).toBe(524288);

    reads.length = 0;
    const lean = await g.sample({ anon: false });
    expect(reads).not.toContain('memory.stat');
    expect(lean).not.toHaveProperty('memory_anon_bytes');
    const { at_ms: _a, memory_anon_bytes: _anon, ...counters } = full;
    const { at_ms: _b, ...leanCounters } = lean;
    expect(leanCounters).toEqual(counters);
    expect(counters).toMatchObject({
      cpu_usage_ns: 1_500_000,
      cpu_throttled_ns: 250_000,
      oom_kills: 1,
      limit_hits: 17,
      pids_limit_hits: 3,
    });
  });
});
