// The runner round trip alone (RunnerChannel → runner → result), Bun and Python runners interleaved call by call,
// outside the sandbox, each optionally in its own cgroup-v1 cpu group at a quota (--cpu 10). Per runner: p50/p90/p99,
// CPU per call (all its threads, /proc/…/schedstat) and context switches per call. For an A/B of the Python runner,
// copy the old one aside first (e.g. `git show`/`git worktree` its executor/runtimes/python into /tmp/old-py) and name
// both: --py old=/tmp/old-py,new=executor/runtimes/python. By default the egress relay listens (as in the sandbox).
// usage: npx tsx bench/runner-hop.mts [--py new=executor/runtimes/python] [--n 2000] [--cpu 10] [--bun 0] [--egress 0]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Duplex } from 'node:stream';
import { RunnerChannel } from '../executor/runner-client';
import { BUN_RUNNER, findBun, findPython, makeBundle, PY_SVC_DIR } from '../test/runners/helpers';
import { stats } from './lib';

const arg = (k: string, d: string) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1]! : d;
};
const n = Number(arg('n', '2000'));
const cpu = Number(arg('cpu', '0'));
const pys = arg('py', 'new=executor/runtimes/python')
  .split(',')
  .map((s) => s.split('='))
  .map(([k, d]) => ({ key: `py-${k}`, dir: resolve(d!) }));
const withBun = arg('bun', '1') === '1';

const PY = 'def handler(input):\n    return {"hello": input.get("name", "world")}\n';
const BUN = 'export default async function handler(input) { return { hello: input.name ?? "world" }; }\n';
// CPU ms of all the process's threads (schedstat: ns on CPU), and their context switches.
const tasks = (pid: number) => readdirSync(`/proc/${pid}/task`);
const cpuMs = (pid: number) =>
  tasks(pid).reduce((a, t) => a + Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]) / 1e6, 0);
const switches = (pid: number) =>
  tasks(pid).reduce((a, t) => {
    const s = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8');
    return a + Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(s)![1]) + Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(s)![1]);
  }, 0);
const CG = '/sys/fs/cgroup/cpu';
const throttled = (g: string) => {
  const m = /nr_throttled (\d+)/.exec(readFileSync(join(CG, g, 'cpu.stat'), 'utf8'));
  return Number(m?.[1] ?? 0);
};

interface R {
  key: string;
  child: ChildProcess;
  ch: RunnerChannel;
  group: string | null;
  ms: number[];
}
async function start(key: string, argv: string[], bundle: string, env: NodeJS.ProcessEnv): Promise<R> {
  let group: string | null = null;
  let bin = argv[0]!;
  let args = argv.slice(1);
  if (cpu > 0) {
    group = `runner-hop-${key}-${process.pid}`;
    mkdirSync(join(CG, group));
    writeFileSync(join(CG, group, 'cpu.cfs_period_us'), '100000');
    writeFileSync(join(CG, group, 'cpu.cfs_quota_us'), String(cpu * 1000));
    // enter the group before exec
    args = ['-c', `echo $$ > ${join(CG, group, 'cgroup.procs')} && exec "$@"`, 'sh', bin, ...args];
    bin = '/bin/sh';
  }
  const child = spawn(bin, args, { cwd: bundle, env, stdio: ['ignore', 'inherit', 'inherit', 'pipe'] });
  const ch = new RunnerChannel(child.stdio[3] as Duplex);
  await ch.waitReady(15000);
  return { key, child, ch, group, ms: [] };
}

const rs: R[] = [];
const base: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: '/tmp', PYTHONDONTWRITEBYTECODE: '1' };
if (arg('egress', '1') === '1') base.SVC_EGRESS_SOCKET = '/nonexistent/egress.sock'; // the relay listens; nothing connects
if (withBun) {
  const b = makeBundle({ 'main.ts': BUN });
  rs.push(await start('bun', [findBun()!, '--no-install', BUN_RUNNER, '--bundle', b, '--entry', 'main.ts'], b, base));
}
for (const p of pys) {
  const b = makeBundle({ 'main.py': PY });
  rs.push(
    await start(p.key, [findPython()!, '-I', '-u', join(p.dir, 'svc_runner.py'), '--bundle', b, '--entry', 'main.py'], b, {
      ...base,
      PYTHONPATH: PY_SVC_DIR,
    }),
  );
}
let seq = 0;
const one = async (r: R) => {
  const t = performance.now();
  const o = await r.ch.invoke(`i${++seq}`, { name: 'x' }, { SECRET: 's' }, { onCall: async () => null });
  const d = performance.now() - t;
  if (o.kind !== 'result') throw new Error(`${r.key}: ${JSON.stringify(o)}`);
  return d;
};
for (let i = 0; i < 100; i++) for (const r of rs) await one(r);
const cpu0 = rs.map((r) => cpuMs(r.child.pid!));
const sw0 = rs.map((r) => switches(r.child.pid!));
const thr0 = rs.map((r) => (r.group ? throttled(r.group) : 0));
for (let i = 0; i < n; i++) for (const r of rs) r.ms.push(await one(r));
const out = rs.map((r, i) => {
  const s = stats(r.ms);
  return {
    key: r.key,
    p50: +s.p50_ms.toFixed(4),
    p90: s.p90_ms,
    p99: +s.p99_ms.toFixed(4),
    cpu_us_per_call: +(((cpuMs(r.child.pid!) - cpu0[i]!) * 1000) / n).toFixed(1),
    switches_per_call: +((switches(r.child.pid!) - sw0[i]!) / n).toFixed(2),
    throttled: r.group ? throttled(r.group) - thr0[i]! : null,
  };
});
console.log(JSON.stringify({ n, cpu, load: readFileSync('/proc/loadavg', 'utf8').trim(), out }));
for (const r of rs) {
  r.ch.close();
  await new Promise((res) => (r.child.exitCode !== null ? res(null) : r.child.once('exit', res)));
  if (r.group) rmdirSync(join(CG, r.group));
}
