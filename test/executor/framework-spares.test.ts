/**
 * Framework spares (executor/local-host.ts, executor/import-profile.ts): a runner per runtime that has imported its
 * framework (Mastra, LangGraph) before any bundle; a cold start of a version that imports it claims that runner.
 * Held here, with real runtimes, this host's limit backend and bubblewrap: which spare a version claims (the host's
 * stats say; no timing is asserted), that a claimed spare is that version's alone (a second version or tenant gets
 * another), that the version's CPU quota is in force before the snippet's first instruction, and how the framework's
 * memory counts against max_memory_mb (a spare already over the limit is left alone, and the fresh start's import
 * meets the limit: oom_killed during init). One host for the file (each framework import is ~0.4–1 s of CPU); every
 * test waits for the spare it needs, so any order passes.
 */
import { createHash } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLocalHost } from '../../executor';
import { PooledExecutor } from '../../executor/executor';
import type { LocalSandboxHost, SpareEvent } from '../../executor/local-host';
import type { ExecutorJob, Runtime } from '../../executor/types';
import { PROJECT_ROOT, tempDir } from '../helpers/core';

const installed = existsSync(join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json'));
const NOT_INSTALLED = 'runtimes not installed (node scripts/setup.mjs --for=test)';
const FRAMEWORK: Record<Runtime, 'mastra' | 'langgraph'> = { bun: 'mastra', python: 'langgraph' };
const ENTRY: Record<Runtime, string> = { bun: 'index.ts', python: 'main.py' };

let host: LocalSandboxHost;
let executor: PooledExecutor;
let workDir: string;
/** What the host told of its spares (each framework spare's imports and warm-up). */
const spareEvents: SpareEvent[] = [];

beforeAll(async () => {
  if (!installed) return;
  workDir = await tempDir('svc-emu-framework-spares-');
  host = (await createLocalHost({ projectRoot: PROJECT_ROOT, workDir, spares: 'all', onSpare: (e) => spareEvents.push(e) })).host;
  executor = new PooledExecutor({ host });
}, 30_000);
afterAll(async () => {
  await executor?.close(); // closes the host
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

/** The id of the runtime's framework spare once it is ready (imported), waiting for one for up to 30 s. */
async function readyFrameworkSpare(runtime: Runtime): Promise<string> {
  return vi.waitFor(
    () => {
      const s = host.spareStats().spares?.find((x) => x.runtime === runtime && x.profile === FRAMEWORK[runtime] && x.state === 'ready');
      if (!s) throw new Error(`no ready ${FRAMEWORK[runtime]} spare: ${JSON.stringify(host.spareStats().spares)}`);
      return s.id;
    },
    { timeout: 30_000, interval: 50 },
  );
}
const spareIds = () => (host.spareStats().spares ?? []).map((s) => s.id);
const claimedBy = () => ({ plain: 0, mastra: 0, langgraph: 0, ...host.spareStats().claimed_by_profile });

let seq = 0;
function job(
  runtime: Runtime,
  code: string,
  o: { tenantId?: string; memoryMb?: number; cpuPercent?: number; env?: Record<string, string> } = {},
): ExecutorJob {
  const id = `inv_fwspare_${process.pid}_${++seq}`;
  const entrypoint = ENTRY[runtime];
  return {
    invocationId: id,
    tenantId: o.tenantId ?? 'ten_fw_a',
    snippetId: `fw-${runtime}-${seq}`,
    version: 1,
    runtime,
    bundle: {
      sha256: createHash('sha256').update(`${runtime}\0${seq}\0${code}`).digest('hex'),
      entrypoint,
      load: async () => ({ [entrypoint]: code }),
    },
    limits: { timeout_ms: 20_000, max_memory_mb: o.memoryMb ?? 512, max_cpu_percent: o.cpuPercent ?? 100 },
    input: {},
    env: o.env ?? {},
  };
}

/** A framework snippet that records a mark in its process at load, and what was there before it. */
const MARKED: Record<Runtime, (mark: string) => string> = {
  bun: (mark) => `import { Agent } from '@mastra/core/agent';
const before = (globalThis as any).__svcTestMark ?? null;
(globalThis as any).__svcTestMark = ${JSON.stringify(mark)};
export default function handler() { return { mark: ${JSON.stringify(mark)}, before, agent: typeof Agent }; }
`,
  python: (mark) => `import builtins
import sys
preimported = "langgraph.graph" in sys.modules
from langgraph.graph import StateGraph
before = getattr(builtins, "_svc_test_mark", None)
builtins._svc_test_mark = ${JSON.stringify(mark)}
def handler(input):
    return {"mark": ${JSON.stringify(mark)}, "before": before, "preimported": preimported, "graph": StateGraph.__name__}
`,
};

describe('framework spares', () => {
  it.for(['bun', 'python'] as const)('%s: a version that imports the framework claims the pre-imported spare', async (runtime, ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const spare = await readyFrameworkSpare(runtime);
    const before = claimedBy();
    const r = await executor.run(job(runtime, MARKED[runtime]('a')), { onCall: async () => null });
    expect(r.outcome, JSON.stringify(r.error)).toBe('success');
    expect(r.output).toMatchObject({ mark: 'a', before: null });
    if (runtime === 'python')
      expect(r.output).toMatchObject({ preimported: true, graph: 'StateGraph' }); // imported before its first line
    else expect(r.output).toMatchObject({ agent: 'function' });
    expect(claimedBy()).toEqual({ ...before, [FRAMEWORK[runtime]]: before[FRAMEWORK[runtime]] + 1 });
    expect(spareIds()).not.toContain(spare); // it is that version's sandbox now, not a spare
  });

  it('a plain version takes the plain spare, never the framework one', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const spare = await readyFrameworkSpare('bun');
    const before = claimedBy();
    const r = await executor.run(job('bun', 'export default () => ({ ok: true });\n'), { onCall: async () => null });
    expect(r.outcome, JSON.stringify(r.error)).toBe('success');
    expect(claimedBy()).toEqual({ ...before, plain: before.plain + 1 });
    expect(spareIds()).toContain(spare);
  });

  it('a claimed spare is one version’s: a second version of another tenant gets another spare, with nothing of the first', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const first = await readyFrameworkSpare('bun');
    const a = await executor.run(job('bun', MARKED.bun('tenant-a'), { tenantId: 'ten_fw_a' }), { onCall: async () => null });
    expect(a.outcome, JSON.stringify(a.error)).toBe('success');
    expect(spareIds()).not.toContain(first);
    // The replacement, a new process: the second version claims it, and finds no mark of the first.
    const second = await readyFrameworkSpare('bun');
    expect(second).not.toBe(first);
    const before = claimedBy();
    const b = await executor.run(job('bun', MARKED.bun('tenant-b'), { tenantId: 'ten_fw_b' }), { onCall: async () => null });
    expect(b.outcome, JSON.stringify(b.error)).toBe('success');
    expect(b.output).toEqual({ mark: 'tenant-b', before: null, agent: 'function' });
    expect(claimedBy().mastra).toBe(before.mastra + 1);
    expect(spareIds()).not.toContain(second);
  });

  it('the CPU quota is in force before the snippet’s first instruction: a top-level busy loop is throttled while loading', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    if (host.info.backend === 'none') ctx.skip('no cgroup limit backend on this host: no CPU quota to be in force');
    await vi.waitFor(() => expect(host.spareStats().ready.python).toBe(1), { timeout: 30_000, interval: 50 });
    // 60 ms of CPU at the top level: at 10 % (10 ms per 100 ms period) the group is throttled several times.
    const code =
      'import time\nt = time.process_time()\nwhile time.process_time() - t < 0.06:\n    pass\ndef handler(input):\n    return {}\n';
    const j = job('python', code, { cpuPercent: 10 });
    await host.materialize(j.bundle.sha256, j.bundle.entrypoint, await j.bundle.load());
    const spec = {
      id: j.invocationId,
      runtime: 'python' as const,
      bundleSha: j.bundle.sha256,
      entrypoint: 'main.py',
      memoryMb: 256,
      pidsMax: 256,
      tmpSizeMb: 64,
    };
    const capped = await host.create({ ...spec, cpuPercent: 10 });
    try {
      expect(capped.ready.t).toBe('ready');
      expect(capped.cpuPercent).toBe(10);
      expect((await capped.sample()).cpu_throttled_ns, 'throttled while its top level ran').toBeGreaterThan(0);
    } finally {
      await capped.destroy();
    }
    // The same load on a spare given no quota (SandboxSpec.cpuPercent absent): never throttled.
    await vi.waitFor(() => expect(host.spareStats().ready.python).toBe(1), { timeout: 30_000, interval: 50 });
    const free = await host.create({ ...spec, id: `${spec.id}-free` });
    try {
      expect(free.ready.t).toBe('ready');
      expect(free.cpuPercent).toBeUndefined();
      expect((await free.sample()).cpu_throttled_ns).toBe(0);
    } finally {
      await free.destroy();
    }
  });

  it('memory: the framework counts against max_memory_mb — at 64 MB a Mastra version is oom_killed while loading, and the spare stays', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    if (host.info.backend === 'none') ctx.skip('no cgroup limit backend on this host: max_memory_mb cannot bite');
    const spare = await readyFrameworkSpare('bun');
    const rss = host.spareStats().spares?.find((s) => s.id === spare)?.rss_mb ?? null;
    if (rss !== null) expect(rss, 'the spare holds the framework').toBeGreaterThan(64);
    const before = claimedBy();
    const r = await executor.run(job('bun', MARKED.bun('small'), { memoryMb: 64 }), { onCall: async () => null });
    expect(r.outcome, JSON.stringify(r.error)).toBe('oom_killed');
    expect(r.error?.evidence).toMatchObject({ during: 'init', limit_mb: 64 });
    // Not claimed: already over the limit, it was left for a version it fits; the fresh start's import met the limit.
    expect(claimedBy()).toEqual(before);
    expect(spareIds()).toContain(spare);
  });
});

/**
 * What a snippet can see of its process: the environment, /tmp, its socket descriptors, its threads (Python) and
 * (Python) the default TLS context httpcore2 gives a client. The same probe with and without a framework import,
 * so one runs on the (warmed-up) framework spare and the other on a plain one.
 */
const PROBE: Record<Runtime, (framework: boolean) => string> = {
  bun: (framework) => `${framework ? "import { Agent } from '@mastra/core/agent';\n" : ''}import fs from 'node:fs';
export default function handler() {
  let sockets = 0;
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      if (fs.readlinkSync('/proc/self/fd/' + fd).startsWith('socket:')) sockets++;
    } catch {}
  }
  return { env: { ...process.env }, tmp: fs.readdirSync('/tmp').sort(), sockets };
}
`,
  python: (framework) => `${framework ? 'from langgraph.graph import StateGraph\n' : ''}import os
import threading

def handler(input):
    import httpcore2
    sockets = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            sockets += os.readlink("/proc/self/fd/" + fd).startswith("socket:")
        except OSError:
            pass
    a, b = httpcore2.default_ssl_context(), httpcore2.default_ssl_context()
    tls = {
        "distinct": a is not b,
        "verify_mode": int(a.verify_mode),
        "check_hostname": a.check_hostname,
        "options": int(a.options),
        "verify_flags": int(a.verify_flags),
        "minimum_version": int(a.minimum_version),
        "maximum_version": int(a.maximum_version),
        "store": a.cert_store_stats(),
        "ca_certs": len(a.get_ca_certs()),
        "same_ca_as_b": a.get_ca_certs() == b.get_ca_certs(),
    }
    # What langsmith makes of this invocation's env (it caches it on first use: the warm-up must not have).
    tracing = __import__("langsmith.utils").utils.tracing_is_enabled()
    return {"env": dict(os.environ), "tmp": sorted(os.listdir("/tmp")), "sockets": sockets,
            "threads": sorted(t.name for t in threading.enumerate()), "tls": tls, "tracing": tracing}
`,
};

describe('the framework spare’s warm-up', () => {
  it.for(['bun', 'python'] as const)('%s: the framework spare ran its warm-up, and it did not fail', async (runtime, ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    await readyFrameworkSpare(runtime);
    const warmed = spareEvents.filter((e) => e.type === 'preloaded' && e.runtime === runtime);
    expect(warmed.length).toBeGreaterThan(0);
    for (const e of warmed) {
      if (e.type !== 'preloaded') continue;
      expect(e.failed).toEqual([]);
      expect(e.warmupFailed).toBeUndefined();
      expect(e.warmupMs).toBeGreaterThan(0);
    }
  });

  it.for(['bun', 'python'] as const)(
    '%s: it leaves nothing a snippet could see — env, /tmp, sockets and threads as on a plain spare; TLS contexts fresh and the same',
    async (runtime, ctx) => {
      if (!installed) ctx.skip(NOT_INSTALLED);
      await readyFrameworkSpare(runtime);
      const before = claimedBy();
      // An env the framework reads on first use (LangSmith tracing): the snippet's, not the spare's, decides.
      const env = { LANGSMITH_TRACING: 'true' };
      const fw = await executor.run(job(runtime, PROBE[runtime](true), { env }), { onCall: async () => null });
      expect(fw.outcome, JSON.stringify(fw.error)).toBe('success');
      expect(claimedBy()[FRAMEWORK[runtime]]).toBe(before[FRAMEWORK[runtime]] + 1); // it ran on the warmed-up spare
      await vi.waitFor(() => expect(host.spareStats().ready[runtime]).toBe(1), { timeout: 30_000, interval: 50 });
      const plain = await executor.run(job(runtime, PROBE[runtime](false), { env }), { onCall: async () => null });
      expect(plain.outcome, JSON.stringify(plain.error)).toBe('success');
      expect(claimedBy().plain).toBe(before.plain + 1);
      const [a, b] = [fw.output as Record<string, unknown>, plain.output as Record<string, unknown>];
      expect(a.env).toEqual(b.env);
      // The sandbox's /tmp is its own tmpfs: empty, but for the mount points of the read-only binds when the
      // project itself lives under /tmp (a fresh clone in /tmp/…: its runtimes dir and node_modules are bound there).
      const mountPoints = PROJECT_ROOT.startsWith('/tmp/') ? [PROJECT_ROOT.split('/')[2]] : [];
      expect(a.tmp).toEqual(mountPoints);
      expect(b.tmp).toEqual(mountPoints);
      expect(a.sockets).toBe(b.sockets);
      if (runtime === 'python') {
        expect(a.threads).toEqual(b.threads);
        // Built ahead on the framework spare, fresh on the plain one: the same verification, and one per caller.
        expect(a.tls).toEqual(b.tls);
        expect(a.tls).toMatchObject({ distinct: true, verify_mode: 2, check_hostname: true, same_ca_as_b: true });
        expect([a.tracing, b.tracing]).toEqual([true, true]);
      }
    },
  );
});
