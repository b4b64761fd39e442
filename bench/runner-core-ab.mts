// A warm sync hello through whole cores that differ only in their runners: each --roots entry is a project root
// made for it (out/cli and executor/runtimes copied, the old or new runner in the copy; .runtimes, node_modules and
// package.json linked or copied from this checkout; then `python -m compileall -q <root>/executor/runtimes/python`).
// Python at 10% and 100% and Bun at 10% in each core, and Miniflare (--mf 1), hit in turn by one lean client, the
// order reversed every round. Also each root's runners' CPU and context switches per call (/proc, summed over the
// processes running that root's runner file, sandboxed or not) and the core's CPU per call.
// usage: npx tsx bench/runner-core-ab.mts --roots /tmp/rootOld,/tmp/rootNew [--n 1000] [--mf 1] [--out file.json]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { isServed, startMiniflare } from './anchors';
import { helloAnswer, leanClient, type LeanClient } from './lean-http';
import { client, stats } from './lib';
import { HELLO, okCall } from './speed-core';
import { CORE_NODE_FLAGS } from '../scripts/core-node-flags.mjs';

const arg = (k: string, d: string) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1]! : d;
};
const roots = arg('roots', '').split(',').filter(Boolean);
if (roots.length === 0) throw new Error('--roots ROOT[,ROOT…]: see the comment at the top of this file');
const n = Number(arg('n', '1000'));
const withMf = arg('mf', '1') === '1';

interface Core {
  root: string;
  child: ChildProcess;
  url: string;
  key: string;
  data: string;
}
async function start(root: string): Promise<Core> {
  const data = mkdtempSync(join(tmpdir(), 'runner-core-ab-'));
  const child = spawn(
    process.execPath,
    [...CORE_NODE_FLAGS, join(root, 'out/cli/svc-emu.mjs'), 'serve', '--port', '0', '--json', '--spares', 'plain', '--data-dir', data],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const line = await new Promise<string>((res, rej) => {
    createInterface({ input: child.stdout }).once('line', res);
    child.once('exit', (c) => rej(new Error(`exit ${c}`)));
  });
  const info = JSON.parse(line) as { url: string; api_key: string };
  for (;;) {
    const r = await client(info.url)('GET', '/readyz').catch(() => ({ status: 0 }));
    if (r.status === 200) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  const ok = okCall(client(info.url, info.api_key));
  for (const [name, runtime, cpu] of [
    ['py10', 'python', 10],
    ['py100', 'python', 100],
    ['bun10', 'bun', 10],
  ] as const) {
    await ok('POST', '/v1/snippets', { name, runtime });
    await ok('POST', `/v1/snippets/${name}/versions`, { code: HELLO[runtime], max_cpu_percent: cpu });
  }
  return { root, child, url: info.url, key: info.api_key, data };
}

const cores: Core[] = [];
for (const r of roots) cores.push(await start(r));
const targets: { key: string; c: LeanClient }[] = [];
for (const core of cores)
  for (const s of ['py10', 'py100', 'bun10'])
    targets.push({
      key: `${basename(core.root)}:${s}`,
      c: leanClient({
        name: s,
        url: core.url,
        method: 'POST',
        path: `/v1/invoke/${s}`,
        headers: { authorization: `Bearer ${core.key}` },
        body: { name: 'bench' },
        expect: helloAnswer,
      }),
    });
const mf = withMf ? await startMiniflare(() => {}) : null;
if (mf && isServed(mf))
  targets.push({
    key: 'miniflare',
    c: leanClient({ name: 'mf', url: mf.url, method: 'POST', path: '/', body: { name: 'bench' }, expect: helloAnswer }),
  });
const samples = new Map(targets.map((t) => [t.key, [] as number[]]));
// The runners of each root (sandboxed, any uid), by the runner file on their command line; idle spares add ~0.
const runnerPids = (root: string, runtime: 'python' | 'bun') => {
  const file = join(root, 'executor/runtimes', runtime === 'python' ? 'python/svc_runner.py' : 'bun/runner.ts');
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').includes(file);
      } catch {
        return false;
      }
    })
    .map(Number);
};
const taskSum = (pids: number[], f: (pid: number, tid: string) => number) =>
  pids.reduce((a, pid) => {
    try {
      return a + readdirSync(`/proc/${pid}/task`).reduce((b, t) => b + f(pid, t), 0);
    } catch {
      return a;
    }
  }, 0);
const cpuNs = (pid: number, t: string) => Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
const ctx = (pid: number, t: string) => {
  const st = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8');
  return Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(st)![1]) + Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(st)![1]);
};
const counters = () =>
  cores.flatMap((c) =>
    (['python', 'bun'] as const).map((rt) => {
      const pids = runnerPids(c.root, rt);
      return {
        key: `${basename(c.root)}:${rt}`,
        cpuNs: taskSum(pids, cpuNs),
        switches: taskSum(pids, ctx),
        core: taskSum([c.child.pid!], cpuNs),
      };
    }),
  );
let before: ReturnType<typeof counters> = [];
for (let i = -100; i < n; i++) {
  if (i === 0) before = counters();
  const order = i % 2 === 0 ? targets : [...targets].reverse();
  for (const t of order) {
    const t0 = performance.now();
    await t.c.hit();
    if (i >= 0) samples.get(t.key)!.push(performance.now() - t0);
  }
}
const after = counters();
const perCall = after.map((a, i) => {
  const calls = a.key.endsWith(':python') ? 2 * n : n; // py10 + py100, or bun10
  return {
    key: a.key,
    runner_cpu_us_per_call: +((a.cpuNs - before[i]!.cpuNs) / 1000 / calls).toFixed(1),
    runner_switches_per_call: +((a.switches - before[i]!.switches) / calls).toFixed(2),
  };
});
const coreCpu = cores.map((c) => {
  const a = after.find((x) => x.key === `${basename(c.root)}:python`)!;
  const b = before.find((x) => x.key === a.key)!;
  return { key: basename(c.root), core_cpu_us_per_call: +((a.core - b.core) / 1000 / (3 * n)).toFixed(1) };
});
// Paired by round (the two calls were made a few ms apart and share the host's noise): the median of first root
// minus second root, per snippet; Bun's runner is the same in both, so its line is the noise floor.
const paired =
  cores.length === 2
    ? Object.fromEntries(
        ['py10', 'py100', 'bun10'].map((sn) => {
          const a = samples.get(`${basename(cores[0]!.root)}:${sn}`)!;
          const b = samples.get(`${basename(cores[1]!.root)}:${sn}`)!;
          const d = a.map((x, i) => x - b[i]!).sort((x, y) => x - y);
          return [
            sn,
            {
              median_diff_ms: +d[Math.floor(d.length / 2)]!.toFixed(4),
              first_slower: +(d.filter((x) => x > 0).length / d.length).toFixed(3),
            },
          ];
        }),
      )
    : null;
const mfP50 = samples.has('miniflare') ? stats(samples.get('miniflare')!).p50_ms : null;
const out = Object.fromEntries(
  [...samples].map(([k, v]) => {
    const s = stats(v);
    return [k, { p50: s.p50_ms, p90: s.p90_ms, p99: s.p99_ms, vs_mf: mfP50 ? +(s.p50_ms / mfP50).toFixed(3) : null }];
  }),
);
const report = JSON.stringify({ n, load: readFileSync('/proc/loadavg', 'utf8').trim(), out, paired, perCall, coreCpu });
console.log(report);
if (arg('out', '')) writeFileSync(arg('out', ''), report);
for (const t of targets) t.c.close();
if (mf && isServed(mf)) await mf.close();
await Promise.all(cores.map((c) => new Promise<void>((res) => (c.child.once('exit', () => res()), c.child.kill('SIGTERM')))));
for (const c of cores) rmSync(c.data, { recursive: true, force: true });
