import { mkdtempSync, readFileSync, readdirSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { client, serveCore, stats, timeEach } from './lib';

/**
 * Issue 3's figures, against the built core as a separate process (`svc-emu serve`), over loopback:
 * warm invoke p50/p99 (with /healthz in the same run), cold start, a LangGraph cold start, throughput
 * with 8 clients, idle sandbox RSS, and limit fidelity (timeout overshoot, CPU share, OOM classification).
 */
const HELLO = {
  bun: 'export default async function handler(input) { return { hello: input.name ?? "world" }; }\n',
  python: 'def handler(input):\n    return {"hello": input.get("name", "world")}\n',
};

export async function executorBench(opts: { iterations: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-exec-'));
  const core = await serveCore(dir);
  const call = client(core.url, core.apiKey);
  const admin = JSON.parse(readFileSync(join(dir, 'emulator.json'), 'utf8')).admin_token as string;
  const asAdmin = client(core.url, admin);
  const ok = async (m: string, p: string, b?: unknown, want = [200, 201]) => {
    const r = await call(m, p, b);
    if (!want.includes(r.status)) throw new Error(`${m} ${p}: ${r.status} ${r.body}`);
    return JSON.parse(r.body || 'null');
  };
  try {
    const exec = JSON.parse((await asAdmin('GET', '/_emu/executor')).body);
    await ok('PATCH', '/_emu/tenants/local/limits', {}, [401]).catch(() => {});
    const out: Record<string, unknown> = { executor: { backend: exec.backend, sandbox: exec.sandbox, parity: exec.parity } };

    for (const runtime of ['bun', 'python'] as const) {
      const name = `hello-${runtime}`;
      await ok('POST', '/v1/snippets', { name, runtime });
      await ok('POST', `/v1/snippets/${name}/versions`, { code: HELLO[runtime] });
      // Warm: the same sandbox every time, interleaved with /healthz for the floor.
      const warm: number[] = [];
      const health: number[] = [];
      await timeEach(opts.iterations, async (i) => {
        let t = performance.now();
        const r = await call('POST', `/v1/invoke/${name}`, { name: 'bench' });
        if (r.status !== 200) throw new Error(`invoke ${name}: ${r.status} ${r.body}`);
        if (i >= 0) warm.push(performance.now() - t);
        t = performance.now();
        await call('GET', '/healthz');
        if (i >= 0) health.push(performance.now() - t);
      }, 50);
      // Cold: the first invocation of a new version (a new sandbox). Twice: at a human pace (a spare
      // runner is ready: the usual case), and back to back (the spare's replacement is still starting,
      // so most of these spawn a runtime: cgroup, bwrap, runtime start, import).
      const coldAt = async (pauseMs: number, tag: string) => {
        const out: number[] = [];
        for (let i = 0; i < 20; i++) {
          await ok('POST', `/v1/snippets/${name}/versions`, { code: HELLO[runtime] + (runtime === 'bun' ? `// ${tag}${i}\n` : `# ${tag}${i}\n`) });
          if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
          const t = performance.now();
          const r = await call('POST', `/v1/invoke/${name}`, {});
          out.push(performance.now() - t);
          if (r.status !== 200) throw new Error(`cold ${name}: ${r.status}`);
        }
        return out;
      };
      const cold = await coldAt(200, 'paced');
      const coldBackToBack = await coldAt(0, 'burst');
      const w = stats(warm);
      const h = stats(health);
      out[runtime] = {
        warm_invoke: w,
        healthz_same_run: h,
        warm_p50_ratio_to_healthz: Math.round((w.p50_ms / h.p50_ms) * 100) / 100,
        cold_start: stats(cold),
        cold_start_back_to_back: stats(coldBackToBack),
      };
    }

    // LangGraph cold start: a Python snippet importing langgraph, first invocation of its version.
    await ok('POST', '/v1/snippets', { name: 'graph', runtime: 'python' });
    const graphCode =
      'from typing import TypedDict\nfrom langgraph.graph import StateGraph, END\n\nclass S(TypedDict):\n    n: int\n\ng = StateGraph(S)\ng.add_node("inc", lambda s: {"n": s["n"] + 1})\ng.set_entry_point("inc")\ng.add_edge("inc", END)\napp = g.compile()\n\ndef handler(input):\n    return app.invoke({"n": input.get("n", 0)})\n';
    const graphCold: number[] = [];
    const graphInit: number[] = [];
    for (let i = 0; i < 5; i++) {
      await ok('POST', '/v1/snippets/graph/versions', { code: graphCode + `# ${i}\n`, max_memory_mb: 512 });
      const t = performance.now();
      const r = await call('POST', '/v1/invoke/graph', { n: 1 });
      graphCold.push(performance.now() - t);
      if (r.status !== 200) throw new Error(`graph: ${r.status} ${r.body}`);
      const id = (await call('GET', '/v1/invocations?snippet=graph&limit=1')).body;
      graphInit.push(JSON.parse(id).data[0].usage.init_ms);
    }
    out.python_langgraph_cold_start = { ...stats(graphCold), init_ms: stats(graphInit) };

    // Throughput: 8 clients for 10 s on the warm Bun hello (max_concurrency raised so none is refused).
    await asAdmin('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 16 });
    const until = performance.now() + 10_000;
    let done = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (performance.now() < until) {
          const r = await call('POST', '/v1/invoke/hello-bun', {});
          if (r.status === 200) done++;
          else failed++;
        }
      }),
    );
    out.throughput_8_clients = { requests_per_s: Math.round(done / 10), failed, pool: JSON.parse((await asAdmin('GET', '/_emu/executor')).body).pool };

    // RSS of an idle warm sandbox: every process in its pids cgroup, after the pool settled.
    await new Promise((r) => setTimeout(r, 500));
    out.idle_sandbox_rss_mb = idleSandboxRss();

    // Limit fidelity.
    await ok('POST', '/v1/snippets', { name: 'spin', runtime: 'python' });
    await ok('POST', '/v1/snippets/spin/versions', { code: 'import time\ndef handler(input):\n    end = time.time() + input.get("s", 100)\n    while time.time() < end:\n        pass\n    return {}\n', timeout_ms: 1000, max_cpu_percent: 100 });
    const overshoot: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      const r = await call('POST', '/v1/invoke/spin', {});
      if (r.status !== 504) throw new Error(`timeout run: ${r.status}`);
      overshoot.push(performance.now() - t - 1000);
    }
    const share: Record<string, number> = {};
    for (const pct of [10, 50, 100]) {
      await ok('POST', '/v1/snippets/spin/versions', { code: 'import time\ndef handler(input):\n    end = time.time() + 1.5\n    while time.time() < end:\n        pass\n    return {}\n', max_cpu_percent: pct });
      await call('POST', '/v1/invoke/spin', {}); // cold start outside the measurement
      const r = await call('POST', '/v1/invoke/spin', {});
      const inv = JSON.parse((await call('GET', `/v1/invocations?snippet=spin&limit=1`)).body).data[0];
      if (r.status !== 200) throw new Error(`cpu run: ${r.status}`);
      share[`${pct}%`] = Math.round((inv.usage.cpu_ms / inv.usage.duration_ms) * 1000) / 10;
    }
    await ok('POST', '/v1/snippets', { name: 'hog', runtime: 'python' });
    await ok('POST', '/v1/snippets/hog/versions', { code: 'def handler(input):\n    b = bytearray(400 * 1024 * 1024)\n    return {"n": len(b)}\n', max_memory_mb: 64 });
    let oom = 0;
    const oomMs: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      const r = await call('POST', '/v1/invoke/hog', {});
      oomMs.push(performance.now() - t);
      if (r.status === 500 && JSON.parse(r.body).code === 'oom_killed') oom++;
    }
    out.limit_fidelity = {
      timeout_overshoot_ms: stats(overshoot),
      cpu_share_percent_of_wall: share,
      oom_classified: `${oom}/20`,
      oom_invoke_ms: stats(oomMs),
    };
    return out;
  } finally {
    await core.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Sum of VmRSS of the processes of each idle sandbox group (cgroup v1 pids hierarchy here). */
function idleSandboxRss(): Record<string, unknown> {
  const root = '/sys/fs/cgroup/pids/svc-emu';
  if (!existsSync(root)) return { note: 'no cgroup v1 pids hierarchy here: not measured' };
  const perGroup: number[] = [];
  for (const g of readdirSync(root, { withFileTypes: true })) {
    if (!g.isDirectory()) continue;
    const pids = readFileSync(join(root, g.name, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
    let kb = 0;
    for (const pid of pids) {
      try {
        kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
      } catch {
        /* gone */
      }
    }
    if (kb) perGroup.push(kb / 1024);
  }
  perGroup.sort((a, b) => a - b);
  return { sandboxes: perGroup.length, rss_mb: perGroup.map((x) => Math.round(x * 10) / 10) };
}
