/**
 * The end of an invocation on real cgroup v1 groups (root): killAllExcept(keep) kills what the "runner"
 * started — a background child, a double-forked daemon, a fork loop racing the kill — and spares the runner;
 * killAll (a retiring sandbox) takes a racing fork loop down too. With the freezer hierarchy and without it
 * (the SIGKILL loop), so both paths are covered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { CgroupV1Backend, CgroupV1Group } from '../../executor/limits/cgroup-v1';
import { parseCgroupMounts, v1MountFor } from '../../executor/limits/mountinfo';
import { cgroupV1Status, mountinfo, pythonPath, uniqueId } from './host';

const status = cgroupV1Status();
const PY = pythonPath();
const hasFreezer = status.ok && !!v1MountFor(parseCgroupMounts(mountinfo()), 'freezer');

/** A process that is running (not gone, not a zombie waiting for its parent). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Stands in for a runner: starts, says "ready", and on each line "go" starts a background `sleep`, a
 * double-forked daemon (setsid, the middle process exits) and, on "bomb", a fork loop; it prints the pids.
 */
const RUNNER = String.raw`
import os, subprocess, sys, time
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "go":
        child = subprocess.Popen(["sleep", "1000"])
        r, w = os.pipe()
        middle = os.fork()
        if middle == 0:
            os.setsid()
            if os.fork() == 0:
                os.write(w, str(os.getpid()).encode())
                time.sleep(1000)
            os._exit(0)
        daemon = int(os.read(r, 32))
        os.waitpid(middle, 0)
        print("pids", child.pid, daemon, flush=True)
    elif cmd == "bomb":
        if os.fork() == 0:
            os.setsid()
            while True:
                try:
                    if os.fork() == 0:
                        time.sleep(1000)
                        os._exit(0)
                except OSError:
                    time.sleep(0.001)
        print("bombing", flush=True)
`;

interface Runner {
  proc: ChildProcess;
  lines: AsyncIterator<string>;
  send(line: string): void;
  next(): Promise<string>;
}

function startRunner(g: CgroupV1Group): Runner {
  const argv = g.wrap([PY!, '-u', '-c', RUNNER]);
  const proc = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  return {
    proc,
    lines,
    send: (l) => proc.stdin.write(`${l}\n`),
    next: async () => {
      const r = await lines.next();
      if (r.done) throw new Error('the runner ended');
      return r.value;
    },
  };
}

describe.each([
  { freezer: true, label: 'freezer' },
  { freezer: false, label: 'SIGKILL loop (no freezer)' },
])('killAllExcept on real cgroup v1 ($label)', ({ freezer }) => {
  let backend: CgroupV1Backend;
  const groups: CgroupV1Group[] = [];
  const runners: Runner[] = [];

  beforeAll(async () => {
    if (!status.ok || !PY) return;
    backend = await CgroupV1Backend.open({ mounts: parseCgroupMounts(mountinfo()), freezer });
  });
  afterAll(async () => {
    for (const r of runners) r.proc.kill('SIGKILL');
    for (const g of groups) await g.destroy().catch((e) => console.error(e));
  });

  async function group(pidsMax = 64): Promise<CgroupV1Group> {
    const g = (await backend.create(uniqueId('reap'), { memoryMb: 128, pidsMax })) as CgroupV1Group;
    groups.push(g);
    return g;
  }

  function skipUnlessUsable(ctx: { skip: (reason: string) => void }) {
    if (!status.ok) ctx.skip(`cgroup v1: ${status.reason}`);
    if (!PY) ctx.skip('no python3');
    if (freezer && !hasFreezer) ctx.skip('no freezer hierarchy mounted on this host');
  }

  it('kills a background child and a double-forked daemon, spares the runner, and the runner serves again', async (ctx) => {
    skipUnlessUsable(ctx);
    const g = await group();
    expect(g.freezerDir !== null).toBe(freezer);
    const r = startRunner(g);
    runners.push(r);
    expect(await r.next()).toBe('ready');
    const keep = new Set(await g.pids());
    expect(keep.has(r.proc.pid!), 'the runner is in its group').toBe(true);
    // nothing but the runner: the cheap path kills nothing
    expect(await g.killAllExcept(keep)).toBe(0);

    for (let round = 0; round < 2; round++) {
      r.send('go');
      const [, child, daemon] = (await r.next()).split(' ').map(Number);
      expect(running(child!) && running(daemon!), 'precondition: both started').toBe(true);
      expect((await g.pids()).sort()).toEqual([...keep, child!, daemon!].sort());
      const killed = await g.killAllExcept(keep);
      expect(killed).toBe(2);
      expect(await g.pids(), 'only the runner is left in the group').toEqual([...keep]);
      expect(running(child!), `background child ${child} is gone`).toBe(false);
      expect(running(daemon!), `daemon ${daemon} is gone`).toBe(false);
      expect(running(r.proc.pid!), 'the runner survives').toBe(true);
    }
  });

  it('a fork loop racing the reap is gone too, and the runner stays', async (ctx) => {
    skipUnlessUsable(ctx);
    const g = await group(64);
    const r = startRunner(g);
    runners.push(r);
    expect(await r.next()).toBe('ready');
    const keep = new Set(await g.pids());
    r.send('bomb');
    expect(await r.next()).toBe('bombing');
    // wait until the loop is really racing (several generations in the group)
    // Bounded by time, not by a count of turns: on a loaded machine 2,000 turns passed before the loop had 10.
    for (const t0 = Date.now(); (await g.pids()).length < 10;) {
      if (Date.now() - t0 > 10_000) throw new Error('the fork loop did not start within 10 s');
      await new Promise((res) => setImmediate(res));
    }
    const killed = await g.killAllExcept(keep);
    expect(killed).toBeGreaterThanOrEqual(9);
    expect(await g.pids()).toEqual([...keep]);
    expect(running(r.proc.pid!)).toBe(true);
  });

  it('killAll (a retiring sandbox) takes a racing fork loop and the runner down; destroy removes every dir', async (ctx) => {
    skipUnlessUsable(ctx);
    const g = await group(64);
    const r = startRunner(g);
    runners.push(r);
    expect(await r.next()).toBe('ready');
    r.send('bomb');
    expect(await r.next()).toBe('bombing');
    // Bounded by time, not by a count of turns: on a loaded machine 2,000 turns passed before the loop had 10.
    for (const t0 = Date.now(); (await g.pids()).length < 10;) {
      if (Date.now() - t0 > 10_000) throw new Error('the fork loop did not start within 10 s');
      await new Promise((res) => setImmediate(res));
    }
    const exited = new Promise((res) => r.proc.once('exit', res));
    await g.killAll();
    expect(await g.pids()).toEqual([]);
    await exited;
    await g.destroy();
    for (const dir of g.uniqueDirs) expect(() => readFileSync(`${dir}/cgroup.procs`)).toThrow();
    if (freezer) expect(g.uniqueDirs).toContain(g.freezerDir);
  });
});
