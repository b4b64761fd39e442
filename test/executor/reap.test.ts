/**
 * Nothing an invocation starts outlives it (issue 14, "Clean up everything"): a Python and a Bun snippet
 * each start a background child, a double-forked daemon (setsid) and a fork chase (a process that forks
 * and exits, forever: its pid changes faster than a kill loop reads it). While the handler waits, the
 * test sees them from the host (/proc); once the invocation has answered, none of them is left (/proc) and
 * the sandbox's group holds exactly the processes it held besides them (cgroup.procs), and the next call
 * runs warm on the same runner (same module id).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { startTestCore, type TestCore } from '../helpers/core';
import { emuInvocation, executorInfo, invocationId, invoke, snippet, waitFor, type Code, type Runtime } from './_helpers';

let core: TestCore;
let backend = 'unknown';
const marks: string[] = [];

beforeAll(async () => {
  core = await startTestCore();
  backend = (await executorInfo(core)).backend;
}, 60_000);

afterAll(async () => {
  // a failing run must not leave its processes behind
  for (const p of processes()) if (marks.some((m) => p.cmdline.includes(m) || p.comm === commMark(m))) kill(p.pid);
  await core?.stop();
});

function kill(pid: number) {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    /* gone */
  }
}

function read(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

interface Proc {
  pid: number;
  comm: string;
  cmdline: string;
  cgroup: string;
}

/** Every running process (zombies left out: dead, waiting only to be reaped by their parent). */
function processes(): Proc[] {
  const out: Proc[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const stat = read(`/proc/${d}/stat`);
    if (!stat) continue;
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    if (state === 'Z' || state === 'X') continue;
    out.push({
      pid: Number(d),
      comm: (read(`/proc/${d}/comm`) ?? '').trim(),
      cmdline: (read(`/proc/${d}/cmdline`) ?? '').replace(/\0/g, ' ').trim(),
      cgroup: read(`/proc/${d}/cgroup`) ?? '',
    });
  }
  return out;
}

/** The comm a Python process of mark `m` gives itself (15 characters at most). */
const commMark = (m: string) => `rp${m.replace(/\D/g, '').slice(-12)}`;

/**
 * input.mark: a number like 86400.12345678; the child sleeps `<mark>1`, the daemon `<mark>2`; the chase's
 * processes carry `<mark>3` (Bun: in their sh script; Python: its comm is commMark). The handler then waits
 * until the store key input.go exists, and returns its module's id.
 */
const CODE: Code = {
  python: `import os, subprocess, time, uuid
from svc import store
MODULE_ID = uuid.uuid4().hex


def handler(input):
    mark = input["mark"]
    child = subprocess.Popen(["sleep", mark + "1"])
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", mark + "2"])
        os._exit(0)
    os.waitpid(middle, 0)
    if os.fork() == 0:
        os.setsid()
        with open("/proc/self/comm", "w") as f:
            f.write(input["comm"])
        while True:
            try:
                if os.fork() != 0:
                    os._exit(0)
            except OSError:
                pass
    for _ in range(1000):
        if store.get(input["go"]) is not None:
            return {"module": MODULE_ID, "child": child.pid}
        time.sleep(0.02)
    raise RuntimeError("no go")
`,
  bun: `import { store } from "@svc/store";
const MODULE_ID = crypto.randomUUID();

export default async function handler(input) {
  const mark = input.mark;
  const child = Bun.spawn(["sleep", mark + "1"], { stdio: ["ignore", "ignore", "ignore"] });
  // sh backgrounds a setsid sleep and exits: the sleep is reparented (a double-forked daemon)
  Bun.spawn(["/bin/sh", "-c", "setsid sleep " + mark + "2 >/dev/null 2>&1 </dev/null &"], { stdio: ["ignore", "ignore", "ignore"] });
  // the chase: each sh starts the next in the background and exits
  const chase = ": " + mark + "3; (/bin/sh -c \\"$0\\" \\"$0\\" &)";
  Bun.spawn(["/bin/sh", "-c", chase, chase], { stdio: ["ignore", "ignore", "ignore"] });
  for (let i = 0; i < 1000; i++) {
    if ((await store.get(input.go)) !== null) return { module: MODULE_ID, child: child.pid };
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("no go");
}
`,
};

/** The memory-hierarchy (v1) or unified (v2) cgroup directory a process is in, on this host. */
function groupDir(p: Proc): string | null {
  for (const line of p.cgroup.split('\n')) {
    const [, ctrls, path] = line.split(':');
    if (!path?.includes('/svc-emu/')) continue;
    if (ctrls === '') return `/sys/fs/cgroup${path}`;
    if (ctrls?.split(',').includes('memory')) return `/sys/fs/cgroup/memory${path}`;
  }
  return null;
}

const procsOf = (dir: string) => (read(`${dir}/cgroup.procs`) ?? '').split('\n').filter(Boolean).map(Number);

describe.each(['python', 'bun'] as Runtime[])('%s: what an invocation started is gone when it answers', (runtime) => {
  const title =
    'background child, double-forked daemon and a fork chase: gone (host /proc and cgroup.procs); the next call is warm on the same runner';
  it(
    title,
    async (ctx) => {
      if (process.platform !== 'linux') ctx.skip(`no /proc on ${process.platform}`);
      if (backend !== 'cgroup-v1' && backend !== 'cgroup-v2') {
        ctx.skip(`limit backend is ${backend}: no cgroup to check (the none and systemd-scope backends are best effort)`);
      }
      const name = await snippet(core, runtime, 'reap', CODE[runtime], { timeout_ms: 60_000 });
      let module: string | null = null;
      for (let round = 0; round < 2; round++) {
        const mark = `86400.${Math.floor(Math.random() * 1e8)}${round}`;
        marks.push(mark);
        const comm = commMark(mark);
        const go = `reap-go-${mark}`;
        const isOurs = (p: Proc) => p.cmdline.includes(mark) || p.comm === comm;
        const pending = invoke(core, name, { mark, comm, go });

        // Precondition: the three are running, seen from the host.
        const seen = await waitFor(
          'the child, the daemon and the chase, in /proc',
          async () => {
            const ps = processes().filter(isOurs);
            const child = ps.find((p) => p.cmdline.includes(`${mark}1`) && p.cmdline.startsWith('sleep'));
            const daemon = ps.find((p) => p.cmdline.includes(`${mark}2`) && p.cmdline.startsWith('sleep'));
            const chase = ps.find((p) => p.cmdline.includes(`${mark}3`) || p.comm === comm);
            return child && daemon && chase ? { child, daemon, chase, all: ps } : null;
          },
          20_000,
        );
        const dir = groupDir(seen.child);
        expect(dir, `the child is in a limit group: ${seen.child.cgroup}`).not.toBeNull();
        expect(groupDir(seen.daemon), 'the daemon is in the same group').toBe(dir);
        const before = procsOf(dir!);
        // The sandbox's own processes: those in the group now that are not the snippet's (a chase pid read
        // in `before` may be gone already: it was the snippet's).
        const own = before.filter((pid) => {
          const p = processes().find((x) => x.pid === pid);
          return p !== undefined && !isOurs(p);
        });
        expect(own.length, 'the runner (and its wrappers) are in the group').toBeGreaterThanOrEqual(1);

        const put = await core.call('PUT', `/v1/store/${encodeURIComponent(go)}`, { value: true });
        expect(put.status, put.text).toBeLessThan(300);
        const r = await pending;
        expect(r.status, r.text).toBe(200);

        // Right after the answer: nothing of theirs is running, and the group holds its own processes only.
        const left = processes().filter(isOurs);
        expect(
          left.map((p) => `${p.pid} ${p.comm} ${p.cmdline}`),
          'processes the invocation started',
        ).toEqual([]);
        const now = processes();
        for (const p of seen.all) expect(existsSync(`/proc/${p.pid}/stat`) && now.some((x) => x.pid === p.pid && isOurs(x))).toBe(false);
        expect(procsOf(dir!).sort(), 'the group holds only the sandbox’s own processes').toEqual([...own].sort());

        const emu = await emuInvocation(core, invocationId(r));
        expect(emu.warm, 'the second call runs warm').toBe(round === 1);
        if (round === 0) module = r.json.module;
        else expect(r.json.module, 'the same runner served it').toBe(module);
      }
    },
    90_000,
  );
});
