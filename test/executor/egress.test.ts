/**
 * The sandbox half of the egress proxy (issue 7 item 1; docs/architecture.md "Parity sandbox", docs/egress-relay.md): with
 * `egressSocket`, every runner — spares too — gets SVC_EGRESS_SOCKET (bound into the bubblewrap sandbox at
 * /run/svc-egress.sock), relays its HTTP(S)_PROXY traffic there with the invocation's id in the preamble,
 * and under bubblewrap that is the only way out: a raw socket to the host gets nowhere. Real Bun and
 * CPython, real cgroups and bubblewrap; the core side is a fake (test/runners/fake-egress.ts).
 * The bubblewrap half skips LOUDLY where bubblewrap does not work here.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi, type TestContext } from 'vitest';
import { createExecutor, type Executor, type ExecutorJob } from '../../executor';
import { PooledExecutor } from '../../executor/executor';
import { LocalSandboxHost } from '../../executor/local-host';
import { detectLimitBackend } from '../../executor/limits/detect';
import { readRuntimeInfo } from '../../executor/runtime-info';
import { ROOT } from '../runners/helpers';
import { startFakeEgress, type FakeEgress } from '../runners/fake-egress';
import { EGRESS_PROBE, PROXY_ENV } from '../helpers/egress-probe';
import { loudSkip, type Runtime } from './_helpers';

const installed = existsSync(join(ROOT, '.runtimes', 'runtime-lock.json'));
if (!installed) loudSkip('the egress sandbox tests (test/executor/egress.test.ts)', 'runtimes not installed (run npm run build)');

const CODE = EGRESS_PROBE;
const FETCH: Record<Runtime, string[]> = { bun: ['fetch'], python: ['urllib', 'requests', 'httpx'] };

let seq = 0;
function job(runtime: Runtime, input: Record<string, unknown>): ExecutorJob {
  const id = `inv_egress_${process.pid}_${++seq}`;
  const entrypoint = runtime === 'bun' ? 'index.ts' : 'main.py';
  const sha256 = createHash('sha256').update(`${runtime}\0${CODE[runtime]}`).digest('hex');
  return {
    invocationId: id,
    tenantId: 'ten_egress',
    snippetId: `egress-${runtime}`,
    version: 1,
    runtime,
    bundle: { sha256, entrypoint, load: async () => ({ [entrypoint]: CODE[runtime] }) },
    limits: { timeout_ms: 15_000, max_memory_mb: 256, max_cpu_percent: 100 },
    input,
    env: { SVC_INVOCATION_ID: id },
  };
}

async function run(
  executor: Executor,
  runtime: Runtime,
  input: Record<string, unknown>,
  snippetId?: string,
): Promise<{ id: string; output: any }> {
  const j = { ...job(runtime, input), ...(snippetId ? { snippetId } : {}) };
  const r = await executor.run(j, { onCall: async () => null });
  expect(r.outcome, `${runtime} ${JSON.stringify(input)}: ${JSON.stringify(r.error)}\n${r.logs}`).toBe('success');
  return { id: j.invocationId, output: r.output };
}

/** Until the executor has a spare runner of `runtime` ready; fails (rather than going on without one) after 20 s. */
async function spareReady(executor: Executor, runtime: Runtime): Promise<void> {
  await vi.waitFor(() => expect(executor.stats().spares?.ready[runtime] ?? 0, `a ready ${runtime} spare`).toBeGreaterThan(0), {
    timeout: 20_000,
    interval: 25,
  });
}

/** A non-loopback IPv4 address of this host, if it has one. */
function hostAddress(): string | null {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return null;
}

let egress: FakeEgress;
/** A TCP server on the host (all addresses): reaching it directly would be a way around the proxy. */
let target: Server;
let targetPort = 0;
let targetHits = 0;
const work: string[] = [];
const scratch = (p: string) => {
  const d = mkdtempSync(join(tmpdir(), p));
  work.push(d);
  return d;
};

beforeAll(async () => {
  if (!installed) return;
  egress = await startFakeEgress();
  target = createServer((s) => {
    targetHits++;
    s.end('HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\ndirect');
  });
  await new Promise<void>((r) => target.listen(0, '0.0.0.0', () => r()));
  targetPort = (target.address() as { port: number }).port;
});
afterAll(async () => {
  await egress?.close();
  await new Promise((r) => (target ? target.close(r) : r(null)));
  for (const d of work) rmSync(d, { recursive: true, force: true });
});

/**
 * The checks both sandbox modes share: the proxy is set, and every client goes through it. `get` answers the
 * executor, or why this mode cannot run here (the tests then skip with that reason). it.for, not it.each:
 * only it.for hands the test its context (ctx.skip).
 */
function sharedChecks(name: string, get: () => { executor: Executor; socketInside: string } | string) {
  const ready = (ctx: TestContext) => {
    const got = get();
    if (typeof got === 'string') ctx.skip(got);
    return got;
  };
  describe.each(['bun', 'python'] as const)(`${name}: %s`, (runtime) => {
    it('the runner is told the socket and points the proxy variables at its relay', async (ctx) => {
      const { executor, socketInside } = ready(ctx);
      const { output } = await run(executor, runtime, { op: 'env' });
      expect(output.SVC_EGRESS_SOCKET).toBe(socketInside);
      expect(output.HTTP_PROXY).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      for (const k of PROXY_ENV) expect(output[k], k).toBe(output.HTTP_PROXY);
      expect(output.NO_PROXY).toBe('');
      expect(output.no_proxy).toBe('');
    });

    it.for(FETCH[runtime])('%s reaches the proxy; the preamble names the invocation (SVC_INVOCATION_ID)', async (op, ctx) => {
      const { executor } = ready(ctx);
      const { id, output } = await run(executor, runtime, { op, url: 'http://example.test/x' });
      if (output.skipped) ctx.skip(output.skipped);
      expect(output).toEqual({ status: 200, body: 'ok' });
      expect(egress.preambles).toContain(`SVC-EGRESS 1 ${id}`);
      expect(egress.requests.filter((r) => r.id === id).map((r) => r.line)).toEqual(['GET http://example.test/x HTTP/1.1']);
    });

    it.for(FETCH[runtime])('%s to http://127.0.0.1:<port> goes through the proxy too', async (op, ctx) => {
      const { executor } = ready(ctx);
      const hits = targetHits;
      const url = `http://127.0.0.1:${targetPort}/loop`;
      const { id, output } = await run(executor, runtime, { op, url });
      if (output.skipped) ctx.skip(output.skipped);
      expect(output).toEqual({ status: 200, body: 'ok' });
      expect(egress.requests.filter((r) => r.id === id).map((r) => r.target)).toEqual([url]);
      expect(targetHits).toBe(hits);
    });
  });
}

describe.skipIf(!installed)('egress under bubblewrap (createExecutor with egressSocket)', () => {
  let executor: Executor;
  let noSandbox: string | null = null;
  beforeAll(async () => {
    const built = await createExecutor({ projectRoot: ROOT, workDir: scratch('svc-egress-bwrap-'), egressSocket: egress.path });
    executor = built.executor;
    if (executor.info.sandbox !== 'bwrap') {
      noSandbox = `the executor's sandbox is ${JSON.stringify(executor.info.sandbox)} (${executor.info.parity.reasons.join('; ')})`;
      loudSkip('the bubblewrap half of test/executor/egress.test.ts', noSandbox);
    }
  }, 30_000);
  afterAll(async () => {
    await executor?.close();
  });

  it.for(['bun', 'python'] as const)('%s: a spare runner, claimed by a cold start, has the way out too', async (runtime, ctx) => {
    if (noSandbox) ctx.skip(noSandbox);
    await spareReady(executor, runtime);
    const claimed = executor.stats().spares?.claimed ?? 0;
    // A snippet of its own: the shared checks' warm sandbox (the same snippet and bundle) would serve it otherwise.
    const { id, output } = await run(executor, runtime, { op: FETCH[runtime][0], url: 'http://example.test/spare' }, `spare-${runtime}`);
    expect(executor.stats().spares?.claimed).toBe(claimed + 1);
    expect(output).toEqual({ status: 200, body: 'ok' });
    expect(egress.requests.find((r) => r.id === id)?.target).toBe('http://example.test/spare');
  });

  sharedChecks('bwrap', () => noSandbox ?? { executor, socketInside: '/run/svc-egress.sock' });

  it.for(['bun', 'python'] as const)('%s: a raw socket to the host gets nowhere, while the proxy route works', async (runtime, ctx) => {
    if (noSandbox) ctx.skip(noSandbox);
    const hits = targetHits;
    const loop = await run(executor, runtime, { op: 'connect', host: '127.0.0.1', port: targetPort });
    expect(loop.output.ok).toBe(false);
    expect(loop.output.error).toMatch(/ECONNREFUSED|ConnectionRefused|refused/i);
    const addr = hostAddress();
    if (addr) {
      const out = await run(executor, runtime, { op: 'connect', host: addr, port: targetPort });
      expect(out.output.ok, `connect to ${addr}`).toBe(false);
      expect(out.output.error).toMatch(/ENETUNREACH|EHOSTUNREACH|ECONNREFUSED|unreachable|refused/i);
    } else console.warn('  (no non-loopback IPv4 address on this host: only loopback checked)');
    // the proxy's own unix socket in the sandbox takes no TCP: 127.0.0.1 there is the sandbox itself
    const via = await run(executor, runtime, { op: FETCH[runtime][0], url: `http://127.0.0.1:${targetPort}/via-proxy` });
    expect(via.output).toEqual({ status: 200, body: 'ok' });
    expect(targetHits).toBe(hits);
  });
});

describe.skipIf(!installed)('egress when the proxy listens only after the executor started', () => {
  let executor: Executor;
  let late: FakeEgress | null = null;
  let path = '';
  beforeAll(async () => {
    path = join(scratch('svc-egress-late-'), 'egress.sock');
    executor = (await createExecutor({ projectRoot: ROOT, workDir: scratch('svc-egress-late-work-'), egressSocket: path })).executor;
  }, 30_000);
  afterAll(async () => {
    await executor?.close();
    await late?.close();
  });

  it('no socket yet → the relay answers 502; once it listens, the next sandbox (not the early spare) gets through', async (ctx) => {
    if (executor.info.sandbox !== 'bwrap')
      ctx.skip(`no bubblewrap here: the executor's sandbox is ${JSON.stringify(executor.info.sandbox)}`);
    for (const runtime of ['bun', 'python'] as const) {
      await spareReady(executor, runtime);
      const early = { ...job(runtime, { op: FETCH[runtime][0], url: 'http://example.test/early' }), snippetId: `late-before-${runtime}` };
      const r = await executor.run(early, { onCall: async () => null });
      expect(r.outcome, r.logs).toBe('success');
      expect(JSON.stringify(r.output), runtime).toMatch(/502/);
    }
    // the spares made before the socket existed are refilled ahead too: let them be ready before it listens
    for (const runtime of ['bun', 'python'] as const) {
      await spareReady(executor, runtime);
    }
    late = await startFakeEgress({ path });
    for (const runtime of ['bun', 'python'] as const) {
      const { id, output } = await run(executor, runtime, { op: FETCH[runtime][0], url: 'http://example.test/late' });
      expect(output, runtime).toEqual({ status: 200, body: 'ok' });
      expect(late.requests.find((r) => r.id === id)?.target).toBe('http://example.test/late');
    }
  });
});

/** A sandbox host of this machine's runtimes with bubblewrap turned off, as `root` or a normal user would run it. */
async function hostWithoutBwrap(o: { root: boolean; workDir: string; egressSocket?: string }): Promise<LocalSandboxHost> {
  const runtime = await readRuntimeInfo(ROOT);
  return new LocalSandboxHost({
    backend: (await detectLimitBackend()).backend,
    runtimes: {
      bun: { bin: runtime.bun.bin, nodeModules: runtime.bun.nodeModules },
      python: { bin: runtime.python.bin, venv: runtime.python.venv, basePrefix: runtime.python.basePrefix },
      runtimesDir: join(ROOT, 'executor', 'runtimes'),
    },
    workDir: o.workDir,
    bwrap: null,
    bwrapMissingReason: 'off in this test',
    root: o.root,
    spares: 0,
    ...(o.egressSocket ? { egressSocket: o.egressSocket } : {}),
  });
}

describe.skipIf(!installed)('egress without bubblewrap (sandbox none)', () => {
  let executor: Executor;
  beforeAll(async () => {
    // The unsandboxed path as a normal user runs it (a root core refuses it: see the test below).
    const host = await hostWithoutBwrap({ root: false, workDir: scratch('svc-egress-none-'), egressSocket: egress.path });
    await host.sweep();
    executor = new PooledExecutor({ host });
  }, 30_000);
  afterAll(async () => {
    await executor?.close();
  });

  sharedChecks('none', () => ({ executor, socketInside: egress.path }));
});

describe.skipIf(!installed)('without egressSocket nothing changes', () => {
  let executor: Executor;
  beforeAll(async () => {
    executor = (await createExecutor({ projectRoot: ROOT, workDir: scratch('svc-egress-off-') })).executor;
  }, 30_000);
  afterAll(async () => {
    await executor?.close();
  });

  it.each(['bun', 'python'] as const)('%s: no proxy variables, no SVC_EGRESS_SOCKET', async (runtime) => {
    const before = egress.requests.length;
    expect((await run(executor, runtime, { op: 'env' })).output).toEqual({});
    expect(egress.requests.length).toBe(before);
  });

  it('a root core without bubblewrap runs no snippet (it would be host root), and says why', async () => {
    const host = await hostWithoutBwrap({ root: true, workDir: scratch('svc-egress-root-') });
    expect(host.info.degraded.join('\n')).toMatch(/runs as root .* none run/);
    const refusing = new PooledExecutor({ host });
    try {
      const r = await refusing.run(job('python', { op: 'env' }), { onCall: async () => null });
      expect(r.outcome).toBe('failed');
      expect(r.error?.message).toMatch(/snippets would run as host root/);
    } finally {
      await refusing.close();
    }
  });

  it('a relative socket path is refused up front', () => {
    expect(
      () =>
        new LocalSandboxHost({
          backend: { name: 'none' } as never,
          runtimes: { bun: { bin: '/x', nodeModules: '/x' }, python: { bin: '/x', venv: '/x', basePrefix: '/x' }, runtimesDir: '/x' },
          workDir: '/tmp/x',
          bwrap: null,
          egressSocket: 'egress.sock',
        }),
    ).toThrow(/absolute/);
  });
});
