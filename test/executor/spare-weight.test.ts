/**
 * A spare's CPU weight (executor/local-host.ts SPARE_CPU_WEIGHT, docs/parity.md "Spare runners (cold starts)"): a
 * framework spare starts and warms in a group of low CPU weight, so its framework's import takes only the CPU that
 * live runs, their kills and their answers leave (a plain one's short start keeps the default); a claim gives the group
 * the default weight before the bundle loads, and before it waits for a spare still importing (that spare is on a
 * request's path then); one unclaimed takes the
 * default after a while (SPARE_LOW_WEIGHT_MS), so busy cores never starve it for long. Real runtimes, this host's
 * limit backend (the weight read where the kernel holds it: the runner's cgroup) and bubblewrap. The backends' own
 * writes are held by test/conformance/limit-backend.ts (cgroup v1 real, v2 on a fake tree, the systemd scope).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLocalHost } from '../../executor';
import type { LocalSandboxHost, SpareEvent, SparePlan } from '../../executor/local-host';
import { parseCgroupMounts, pickV2Mount, v1MountFor } from '../../executor/limits/mountinfo';
import type { Runtime } from '../../executor/types';
import { PROJECT_ROOT, tempDir } from '../helpers/core';

const installed = existsSync(join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json'));
const NOT_INSTALLED = 'runtimes not installed (node scripts/setup.mjs --for=test)';
/** What each cgroup interface calls the weights (executor/limits/common.ts CPU_SHARES, CPU_WEIGHT). */
const LOW = { 'cgroup-v1': '2', 'cgroup-v2': '1' } as const;
const DEFAULT = { 'cgroup-v1': '1024', 'cgroup-v2': '100' } as const;

const hosts: LocalSandboxHost[] = [];
const dirs: string[] = [];
/** A host with `spares`; its spares keep their low weight for `lowMs` (long by default: a busy host is slow to start them). */
async function host(spares: SparePlan, events: SpareEvent[] = [], lowMs = 120_000): Promise<LocalSandboxHost> {
  const workDir = await tempDir('svc-emu-spare-weight-');
  dirs.push(workDir);
  const built = await createLocalHost({
    projectRoot: PROJECT_ROOT,
    workDir,
    spares,
    onSpare: (e) => events.push(e),
    spareLowWeightMs: lowMs,
  });
  hosts.push(built.host);
  return built.host;
}
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The backends whose weight this file reads from the kernel; another (systemd scope, none) is a skip, saying why. */
function weighable(h: LocalSandboxHost): h is LocalSandboxHost & { info: { backend: 'cgroup-v1' | 'cgroup-v2' } } {
  return h.info.backend === 'cgroup-v1' || h.info.backend === 'cgroup-v2';
}
const NOT_WEIGHABLE = (backend: string) =>
  `the limit backend here is ${backend}: no cgroup of ours to read a weight from (the systemd scope's CPUWeight is held against a fake systemctl in test/limits/systemd-scope.test.ts)`;

/** The runner of a spare: the process whose command line names its dir (under bubblewrap, the outermost one will do). */
function pidOf(spareId: string): number | null {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      if (cmd.includes(`/spare/${spareId}\0`) || cmd.endsWith(`/spare/${spareId}`)) return Number(name);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

/**
 * The CPU weight of the sandbox group `pid` is in, as the kernel holds it (v1 cpu.shares, v2 cpu.weight). Throws while
 * `pid` is not in a group of ours yet (a wrapper enters its group as its first step).
 */
function weightOf(pid: number, backend: 'cgroup-v1' | 'cgroup-v2'): string {
  const mounts = parseCgroupMounts(readFileSync('/proc/self/mountinfo', 'utf8'));
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n');
  const path =
    backend === 'cgroup-v1'
      ? lines.find((l) => l.split(':')[1]!.split(',').includes('cpu'))!.split(':')[2]!
      : lines.find((l) => l.startsWith('0::'))!.slice(3);
  if (!path.includes('/svc-emu/')) throw new Error(`pid ${pid} is not in a sandbox group (yet): ${path}`);
  if (backend === 'cgroup-v1') return readFileSync(join(v1MountFor(mounts, 'cpu')!.mountPoint, path, 'cpu.shares'), 'utf8').trim();
  return readFileSync(join(pickV2Mount(mounts)!.mountPoint, path, 'cpu.weight'), 'utf8').trim();
}

/** A spare of `runtime` and profile that has a runner (its id and pid), in `state` if given; waited for up to 90 s. */
async function spare(h: LocalSandboxHost, runtime: Runtime, profile: string, state?: string): Promise<{ id: string; pid: number }> {
  return vi.waitFor(
    () => {
      const s = h.spareStats().spares?.find((x) => x.runtime === runtime && x.profile === profile && x.id && (!state || x.state === state));
      const pid = s ? pidOf(s.id) : null;
      if (!s || !pid) throw new Error(`no ${profile} ${runtime} spare ${state ?? ''}: ${JSON.stringify(h.spareStats().spares)}`);
      return { id: s.id, pid };
    },
    { timeout: 90_000, interval: 20 },
  );
}

let seq = 0;
/** A Python bundle (materialised) whose top level runs `top` first, and the spec of a sandbox for it. */
async function pythonSpec(h: LocalSandboxHost, top: string) {
  const code = `${top}\ndef handler(input):\n    return {"ok": True}\n`;
  const sha = createHash('sha256').update(`spare-weight\0${process.pid}\0${++seq}\0${code}`).digest('hex');
  await h.materialize(sha, 'main.py', { 'main.py': code });
  return {
    id: `sbx-weight-${process.pid}-${seq}`,
    runtime: 'python' as const,
    bundleSha: sha,
    entrypoint: 'main.py',
    memoryMb: 512,
    pidsMax: 256,
    tmpSizeMb: 64,
    cpuPercent: 100,
  };
}

// Each test waits up to 120 s: a framework import on a busy 2-core host takes its time (the waits are for events, not timed).
describe('a spare’s CPU weight', () => {
  it('a framework spare’s is low while it waits, the default once a version claims it (set before its bundle has loaded), and low again for its replacement; a plain spare’s is the default', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const h = await host({ plain: 1, framework: 1 });
    if (!weighable(h)) return ctx.skip(NOT_WEIGHABLE(h.info.backend));
    const backend = h.info.backend;
    const plain = await spare(h, 'python', 'plain', 'ready');
    expect(weightOf(plain.pid, backend)).toBe(DEFAULT[backend]); // its start is short, and the next cold start waits for it
    const first = await spare(h, 'python', 'langgraph', 'ready');
    expect(weightOf(first.pid, backend)).toBe(LOW[backend]);

    // The bundle's top level sleeps: the claim is still loading it while the weight is read.
    let loaded = false;
    const creating = h.create(await pythonSpec(h, 'from langgraph.graph import StateGraph\nimport time\ntime.sleep(1.5)')).then((s) => {
      loaded = true;
      return s;
    });
    await vi.waitFor(() => expect(weightOf(first.pid, backend)).toBe(DEFAULT[backend]), { timeout: 10_000, interval: 10 });
    expect(loaded, 'the default weight came before the bundle finished loading').toBe(false);
    const sandbox = await creating;
    try {
      expect(sandbox.ready.t).toBe('ready');
      expect(h.spareStats().claimed_by_profile).toMatchObject({ langgraph: 1 });
      expect(weightOf(first.pid, backend)).toBe(DEFAULT[backend]);
      // Its replacement warms at the low weight again.
      const next = await vi.waitFor(
        async () => {
          const s = await spare(h, 'python', 'langgraph');
          if (s.id === first.id) throw new Error('no replacement yet');
          return s;
        },
        { timeout: 90_000, interval: 20 },
      );
      await vi.waitFor(() => expect(weightOf(next.pid, backend)).toBe(LOW[backend]), { timeout: 10_000, interval: 10 });
    } finally {
      await sandbox.destroy();
    }
  }, 120_000);

  it('goes back to the default as soon as a claim waits for a framework spare still importing', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const events: SpareEvent[] = [];
    const h = await host({ plain: 0, framework: 1 }, events);
    if (!weighable(h)) return ctx.skip(NOT_WEIGHABLE(h.info.backend));
    const backend = h.info.backend;
    // Caught while it imports LangGraph (~1 s of CPU and more on a busy host): low.
    const warming = await spare(h, 'python', 'langgraph', 'preloading');
    await vi.waitFor(() => expect(weightOf(warming.pid, backend)).toBe(LOW[backend]), { timeout: 10_000, interval: 5 });
    let loaded = false;
    const creating = h.create(await pythonSpec(h, 'from langgraph.graph import StateGraph')).then((s) => {
      loaded = true;
      return s;
    });
    // Claimed while still importing: the default weight before its import is done (the request waits on it).
    await vi.waitFor(() => expect(weightOf(warming.pid, backend)).toBe(DEFAULT[backend]), { timeout: 10_000, interval: 5 });
    // Before its import was done (the host tells each framework spare's `preloaded`, claimed or not), so before it was served.
    const preloaded = () => events.some((e) => e.type === 'preloaded' && e.id === warming.id);
    expect(preloaded(), 'the default weight came while it still imported').toBe(false);
    expect(loaded).toBe(false);
    const sandbox = await creating;
    try {
      expect(sandbox.ready.t).toBe('ready');
      expect(h.spareStats().claimed_by_profile).toMatchObject({ langgraph: 1 });
      expect(weightOf(warming.pid, backend)).toBe(DEFAULT[backend]);
      await vi.waitFor(() => expect(preloaded()).toBe(true), { timeout: 10_000, interval: 10 }); // it did import, then
    } finally {
      await sandbox.destroy();
    }
  }, 120_000);

  it('goes to the default once its low phase is over (spareLowWeightMs), claimed or not', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const h = await host({ plain: 0, framework: 1 }, [], 1500);
    if (!weighable(h)) return ctx.skip(NOT_WEIGHABLE(h.info.backend));
    const backend = h.info.backend;
    const s = await spare(h, 'python', 'langgraph');
    const weights = new Set<string>();
    await vi.waitFor(
      () => {
        weights.add(weightOf(s.pid, backend));
        expect(weights.has(DEFAULT[backend])).toBe(true);
      },
      { timeout: 15_000, interval: 20 },
    );
    expect([...weights].every((w) => w === LOW[backend] || w === DEFAULT[backend])).toBe(true);
    expect(h.spareStats().claimed).toBe(0);
  }, 120_000);
});
