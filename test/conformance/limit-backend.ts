// The limit backends' conformance suite: the promises of executor/limits/types.ts (`LimitBackend`, `LimitGroup`),
// declared once and run against every implementation: cgroup v1 on this host's real cgroups
// (test/limits/cgroup-v1.real.test.ts), cgroup v2 on a fake cgroupfs tree (test/limits/cgroup-v2.test.ts), the
// systemd scope against a fake systemctl (test/limits/systemd-scope.test.ts) and none (test/limits/none-and-watchdog.test.ts).
// How a promise is observed differs (a real cgroup file, a fake tree's file, the systemctl calls): each run gives a
// `LimitHarness`. A promise an implementation does not keep is declared in `LimitCaps` with the reason, and in its
// place the suite tests what the implementation does instead, through the same interface (a none group runs a tree
// past its process cap and a workload past its memory limit, unthrottled and unkilled; a backend without sweep() says
// why in the notes doctor shows): an implementation that starts or stops doing a thing without its caps saying so
// fails. Only a host that lacks a capability skips (`hostReason`), naming it.
import { afterAll, describe, expect, it, vi, type TestContext } from 'vitest';
import { spawn } from 'node:child_process';
import type { CpuWeight, GroupLimits, LimitBackend, LimitBackendName, LimitGroup, UsageSample } from '../../executor/limits/types';
import { TREE_ARGV, alive, spawnTree, type Tree } from './processes';

/** true: kept; a string: not kept here, and why (the suite tests the declared lack instead, with the why in its title). */
export type Cap = true | string;

const lacks = (c: Cap): c is string => c !== true;

export interface LimitCaps {
  /** The memory limit is applied to the group (and changed by setMemoryMb). */
  memory: Cap;
  /** The CPU quota is applied (set, changed, lifted). */
  cpu: Cap;
  /** The CPU weight is applied (a group created `low`, setCpuWeight back to `default`): a warming spare's (executor/local-host.ts). */
  weight: Cap;
  /** The process cap is applied. */
  pids: Cap;
  /** wrap() puts the command in the group before it runs, observed by running it here. */
  placement: Cap;
  /** sample() reads the group's memory and CPU use. */
  usage: Cap;
  /** sample() counts the kernel's OOM kills in the group. */
  oom: Cap;
  /** sweep() removes stale groups. Not kept: sweep is absent, and the reason is one of the backend's `notes` (doctor shows them). */
  sweep: Cap;
  /** What `degraded` says: null (full parity) or a pattern of its reason. */
  degraded: null | RegExp;
}

export interface AppliedLimits {
  memoryBytes: number;
  pidsMax: number;
  /** Percent of one CPU; null: uncapped. */
  cpuPercent: number | null;
  /** The CPU weight as the host holds it: `low` or `default` (types.ts CpuWeight), else the value itself (as `other: <value>`). */
  cpuWeight: CpuWeight | `other: ${string}`;
}

export interface LimitHarness {
  backend: LimitBackend;
  /** The limits the host holds for `g` now (read where the implementation writes them). */
  applied(g: LimitGroup): Promise<AppliedLimits>;
  /** An argv that, run through `g.wrap`, prints "in-group" only when it is inside `g` from its first instruction. */
  probeArgv(g: LimitGroup): string[];
  /** Starts a process tree (test/conformance/processes.ts TREE_ARGV) that is in `g`; resolves once all of it runs. */
  populate(g: LimitGroup): Promise<Tree>;
  /** Makes `g` use memory (≥ 8 MiB) and CPU, and resolves while that use is visible; the returned function ends it. */
  work(g: LimitGroup): Promise<() => Promise<void>>;
  /** Drives `g` into one kernel OOM kill (its limits are the suite's 64 MiB). */
  oom(g: LimitGroup): Promise<void>;
  /** Whether anything of group `id` is left on the host (directories, a unit). */
  exists(id: string): Promise<boolean>;
  /** Removes what the harness made (a fake tree); after its groups are destroyed. */
  cleanup?(): void | Promise<void>;
}

/** A weight file's value as AppliedLimits says it: its name in `names` (the backend's low and default), else the value. */
export function weightOf(value: string, names: Record<string, CpuWeight>): AppliedLimits['cpuWeight'] {
  return names[value] ?? `other: ${value}`;
}

const MiB = 1024 * 1024;
const LIMITS: GroupLimits = { memoryMb: 64, pidsMax: 16 };

/** Runs argv to its end; its stdout. */
export function runArgv(argv: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export function limitBackendConformance(
  name: LimitBackendName,
  makeHarness: () => Promise<LimitHarness>,
  caps: LimitCaps,
  hostReason: string | null = null,
): void {
  describe(`${name} limit backend: conformance`, () => {
    let seq = 0;
    const made: Array<{ h: LimitHarness; g: LimitGroup }> = [];
    const harnesses: LimitHarness[] = [];
    const harness = async (): Promise<LimitHarness> => {
      const h = await makeHarness();
      harnesses.push(h);
      return h;
    };
    /** Only the host decides a skip: a promise the backend does not keep has its own test below. */
    const need = (ctx: TestContext): void => {
      if (hostReason) ctx.skip(hostReason);
    };
    const fresh = async (
      limits: GroupLimits = LIMITS,
      id = `conf-${process.pid}-${++seq}`,
      h?: LimitHarness,
    ): Promise<{ h: LimitHarness; g: LimitGroup }> => {
      h ??= await harness();
      const g = await h.backend.create(id, limits);
      made.push({ h, g });
      return { h, g };
    };
    afterAll(async () => {
      for (const { g } of made) await g.destroy().catch((e: unknown) => console.error(e));
      for (const h of harnesses) await h.cleanup?.();
    });

    it('is the backend it says, and says whether parity is degraded', async (ctx) => {
      need(ctx);
      const { backend } = await harness();
      expect(backend.name).toBe(name);
      if (caps.degraded === null) expect(backend.degraded).toBeNull();
      else expect(backend.degraded).toMatch(caps.degraded);
      // A limit it does not enforce degrades parity: executor/index.ts makes `degraded` a parity reason, which server/doctor.ts shows.
      if ([caps.memory, caps.cpu, caps.pids].some(lacks)) expect(backend.degraded, 'a limit it does not enforce').not.toBeNull();
    });

    it('refuses an id that is not a safe name and limits that are not positive', async (ctx) => {
      need(ctx);
      const { backend } = await harness();
      await expect(backend.create('../etc', LIMITS)).rejects.toThrow(/limit group id/);
      await expect(backend.create('a b', LIMITS)).rejects.toThrow(/limit group id/);
      await expect(backend.create(`conf-${process.pid}-bad`, { memoryMb: 0, pidsMax: 8 })).rejects.toThrow(/memoryMb/);
    });

    it('a group has the id it was created with, and its wrap ends with the command unchanged', async (ctx) => {
      need(ctx);
      const { g } = await fresh();
      expect(g.id).toMatch(/^conf-/);
      const argv = g.wrap(['/bin/echo', 'a b', '$HOME']);
      expect(argv.slice(-3)).toEqual(['/bin/echo', 'a b', '$HOME']);
    });

    if (!lacks(caps.memory) && !lacks(caps.pids)) {
      it('creates the group with its memory and process limits', async (ctx) => {
        need(ctx);
        const { h, g } = await fresh({ memoryMb: 96, pidsMax: 12 });
        expect(await h.applied(g)).toMatchObject({ memoryBytes: 96 * MiB, pidsMax: 12 });
      });
    }
    if (lacks(caps.pids)) {
      it(`has no process cap (${caps.pids}): a group created for 2 processes runs a tree of 6`, async (ctx) => {
        need(ctx);
        const { h, g } = await fresh({ memoryMb: 96, pidsMax: 2 });
        if (!lacks(caps.memory)) expect((await h.applied(g)).memoryBytes).toBe(96 * MiB);
        const tree = await h.populate(g); // resolves once all six run: a cap of 2 would stop the third
        expect(tree.pids.filter(alive)).toHaveLength(6);
        await g.destroy();
        await tree.exited;
      });
    }

    if (!lacks(caps.memory)) {
      it('setMemoryMb changes the memory limit of a running group', async (ctx) => {
        need(ctx);
        const { h, g } = await fresh({ memoryMb: 128, pidsMax: 8 });
        await g.setMemoryMb(48);
        expect((await h.applied(g)).memoryBytes).toBe(48 * MiB);
      });
    } else {
      it(`has no memory cap (${caps.memory}): a group created with 8 MiB and set to 4 MiB runs a workload over both, unkilled, with no limit hit`, async (ctx) => {
        need(ctx);
        const { h, g } = await fresh({ memoryMb: 8, pidsMax: 16 });
        if (!lacks(caps.pids)) expect((await h.applied(g)).pidsMax).toBe(16);
        await expect(g.setMemoryMb(4)).resolves.toBeUndefined();
        const stop = await h.work(g); // ≥ 8 MiB in use: resolves only while the workload runs
        try {
          const s = await g.sample();
          expect(s.memory_bytes).toBeGreaterThan(8 * MiB);
          expect(s.limit_hits).toBe(0);
          expect(s.oom_kills).toBe(0);
          if (g.pids) expect((await g.pids()).length).toBeGreaterThan(0);
        } finally {
          await stop();
        }
      });
    }

    if (lacks(caps.cpu)) {
      it(`has no CPU quota (${caps.cpu}): setCpuPercent takes 25, 150 and null, and a workload under 10 % is not throttled`, async (ctx) => {
        need(ctx);
        const { h, g } = await fresh();
        for (const p of [25, 150, null]) await expect(g.setCpuPercent(p)).resolves.toBeUndefined();
        await g.setCpuPercent(10);
        const before = await g.sample();
        const stop = await h.work(g);
        try {
          const s = await g.sample();
          expect(s.cpu_usage_ns).toBeGreaterThan(before.cpu_usage_ns);
          expect(s.cpu_throttled_ns).toBe(0);
        } finally {
          await stop();
        }
      });
    }

    if (!lacks(caps.cpu))
      it('setCpuPercent sets, changes and lifts the CPU quota (init runs uncapped)', async (ctx) => {
        need(ctx);
        const { h, g } = await fresh();
        expect((await h.applied(g)).cpuPercent).toBeNull();
        await g.setCpuPercent(25);
        expect((await h.applied(g)).cpuPercent).toBe(25);
        await g.setCpuPercent(150);
        expect((await h.applied(g)).cpuPercent).toBe(150);
        await g.setCpuPercent(null);
        expect((await h.applied(g)).cpuPercent).toBeNull();
      });

    if (!lacks(caps.weight))
      it('a group created with a low CPU weight has it from its start; setCpuWeight sets the default and low again; the default is the default', async (ctx) => {
        need(ctx);
        const { h, g } = await fresh({ ...LIMITS, cpuWeight: 'low' });
        expect((await h.applied(g)).cpuWeight).toBe('low');
        expect(g.setCpuWeight, 'a backend that weighs groups can change the weight').toBeTypeOf('function');
        await g.setCpuWeight!('default');
        expect((await h.applied(g)).cpuWeight).toBe('default');
        await g.setCpuWeight!('low');
        expect((await h.applied(g)).cpuWeight).toBe('low');
        // A group not asked for a weight has the kernel's default, and so does one asked for it.
        const plain = await fresh(LIMITS, undefined, h);
        expect((await h.applied(plain.g)).cpuWeight).toBe('default');
        const asked = await fresh({ ...LIMITS, cpuWeight: 'default' }, undefined, h);
        expect((await h.applied(asked.g)).cpuWeight).toBe('default');
      });
    else
      it(`weighs no group (${caps.weight}): setCpuWeight is absent, and a group asked for a low weight is made as any other`, async (ctx) => {
        need(ctx);
        const { g } = await fresh({ ...LIMITS, cpuWeight: 'low' });
        expect(g.setCpuWeight).toBeUndefined();
        expect(g.wrap(['/bin/echo', 'x']).slice(-2)).toEqual(['/bin/echo', 'x']);
      });

    it('setCpuPercent refuses a quota that is not above 0', async (ctx) => {
      need(ctx);
      const { g } = await fresh();
      await expect(g.setCpuPercent(0)).rejects.toThrow(/> 0/);
      await expect(g.setCpuPercent(-5)).rejects.toThrow(/> 0/);
    });

    if (lacks(caps.placement)) {
      it(`wrap changes nothing (${caps.placement}): the command runs as given, and the group holds a process group once told (track)`, async (ctx) => {
        need(ctx);
        const { g } = await fresh();
        const argv = ['/bin/echo', 'a b', '$HOME'];
        expect(g.wrap(argv)).toEqual(argv);
        expect(g.track, 'a group that wrap does not enter must be told its processes').toBeTypeOf('function');
        const tree = await spawnTree(g.wrap(TREE_ARGV), { detached: true });
        try {
          if (g.pids) expect(await g.pids()).toEqual([]);
          g.track!(tree.child.pid!);
          if (g.pids) expect((await g.pids()).sort()).toEqual([...tree.pids].sort());
          await g.killAll();
          await tree.exited;
          await vi.waitFor(() => expect(tree.pids.filter(alive)).toEqual([]), { timeout: 2000, interval: 10 });
        } finally {
          try {
            process.kill(-tree.child.pid!, 'SIGKILL');
          } catch {
            // gone, as it should be
          }
        }
      });
    }

    if (!lacks(caps.placement))
      it('wrap puts the command in the group before it runs any code', async (ctx) => {
        need(ctx);
        const { h, g } = await fresh();
        const r = await runArgv(g.wrap(h.probeArgv(g)));
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout.trim()).toBe('in-group');
      });

    if (lacks(caps.usage)) {
      it(`reads no usage (${caps.usage}): sample answers zeros while a workload runs`, async (ctx) => {
        need(ctx);
        const { h, g } = await fresh();
        const stop = await h.work(g);
        try {
          expect(await g.sample()).toMatchObject({ memory_bytes: 0, cpu_usage_ns: 0, cpu_throttled_ns: 0, oom_kills: 0, limit_hits: 0 });
        } finally {
          await stop();
        }
      });
    }

    if (!lacks(caps.usage))
      it("sample reads the group's memory and CPU use", async (ctx) => {
        need(ctx);
        const { h, g } = await fresh();
        const before = await g.sample();
        const stop = await h.work(g);
        try {
          const s = await g.sample();
          expect(s.at_ms).toBeGreaterThanOrEqual(before.at_ms);
          expect(s.memory_bytes).toBeGreaterThanOrEqual(8 * MiB);
          expect(s.memory_peak_bytes ?? s.memory_bytes).toBeGreaterThanOrEqual(s.memory_bytes);
          expect(s.cpu_usage_ns).toBeGreaterThan(before.cpu_usage_ns);
          for (const k of ['memory_bytes', 'cpu_usage_ns', 'cpu_throttled_ns', 'oom_kills', 'limit_hits'] as const) {
            expect(Number.isFinite(s[k]) && s[k] >= 0, `${k} = ${s[k]}`).toBe(true);
          }
        } finally {
          await stop();
        }
      });

    if (lacks(caps.oom)) {
      it(`counts no OOM kill (${caps.oom}): sample says 0 after a workload over the group's memory limit`, async (ctx) => {
        need(ctx);
        const { h, g } = await fresh(lacks(caps.memory) ? { memoryMb: 4, pidsMax: 16 } : LIMITS);
        expect((await g.sample()).oom_kills).toBe(0);
        if (lacks(caps.memory)) {
          const stop = await h.work(g); // ≥ 8 MiB in a 4 MiB group: runs on, as nothing caps it
          try {
            expect((await g.sample()).oom_kills).toBe(0);
          } finally {
            await stop();
          }
        } else {
          await h.oom(g);
        }
        expect((await g.sample()).oom_kills).toBe(0);
      });
    }

    if (!lacks(caps.oom))
      it('sample counts an OOM kill in the group', async (ctx) => {
        need(ctx);
        const { h, g } = await fresh();
        const before: UsageSample = await g.sample();
        await h.oom(g);
        const after = await g.sample();
        expect(after.oom_kills - before.oom_kills).toBe(1);
      });

    it('killAll kills every process in the group (a parent and its children), and then the group has none', async (ctx) => {
      need(ctx);
      const { h, g } = await fresh();
      const tree = await h.populate(g);
      for (const pid of tree.pids) expect(alive(pid), `pid ${pid} runs`).toBe(true);
      if (g.pids) expect((await g.pids()).sort()).toEqual([...tree.pids].sort());
      await g.killAll();
      await tree.exited;
      await vi.waitFor(() => expect(tree.pids.filter(alive)).toEqual([]), { timeout: 2000, interval: 10 });
      if (g.pids) expect(await g.pids()).toEqual([]);
    });

    it('destroy kills what is left and leaves nothing of the group; a second destroy is a no-op', async (ctx) => {
      need(ctx);
      const { h, g } = await fresh();
      const tree = await h.populate(g);
      expect(await h.exists(g.id)).toBe(name !== 'none'); // none keeps nothing on the host
      await g.destroy();
      await tree.exited;
      await vi.waitFor(() => expect(tree.pids.filter(alive)).toEqual([]), { timeout: 2000, interval: 10 });
      expect(await h.exists(g.id)).toBe(false);
      await g.destroy();
      expect(await h.exists(g.id)).toBe(false);
    });

    if (lacks(caps.sweep)) {
      it(`has no sweep, and its notes say why: ${caps.sweep}`, async (ctx) => {
        need(ctx);
        const { backend } = await harness();
        expect(backend.sweep).toBeUndefined();
        expect(backend.notes ?? []).toContain(caps.sweep);
      });
    }

    if (!lacks(caps.sweep))
      it('sweep removes the groups isStale names (with their processes) and keeps the others', async (ctx) => {
        need(ctx);
        const stale = await fresh(LIMITS, `conf-${process.pid}-stale-${++seq}`);
        const live = await fresh(LIMITS, `conf-${process.pid}-live-${++seq}`, stale.h);
        const tree = await stale.h.populate(stale.g);
        const removed = await stale.h.backend.sweep!((id) => id === stale.g.id);
        expect(removed).toBe(1);
        await tree.exited;
        await vi.waitFor(() => expect(tree.pids.filter(alive)).toEqual([]), { timeout: 2000, interval: 10 });
        expect(await stale.h.exists(stale.g.id)).toBe(false);
        expect(await live.h.exists(live.g.id)).toBe(true);
      });
  });
}
