/**
 * Prewarm (executor/executor.ts, issue 16): a version's sandbox started before its first run, with real runtimes,
 * this host's limit backend and bubblewrap. The first run of that version finds it warm; a run that comes while it
 * starts waits for it instead of starting a second one; a retire during the start destroys it; a module that fails
 * to load or runs out of memory while loading is reported the way its cold start would be; the idle budget counts it.
 */
import { createHash } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalHost } from '../../executor';
import { PooledExecutor } from '../../executor/executor';
import type { LocalSandboxHost } from '../../executor/local-host';
import type { ExecutorEvents, ExecutorJob, PrewarmJob, Runtime } from '../../executor/types';
import { PROJECT_ROOT, tempDir } from '../helpers/core';

const installed = existsSync(join(PROJECT_ROOT, '.runtimes', 'runtime-lock.json'));
const NOT_INSTALLED = 'runtimes not installed (node scripts/setup.mjs --for=test)';
const ENTRY: Record<Runtime, string> = { bun: 'index.ts', python: 'main.py' };
const HELLO: Record<Runtime, (n: number) => string> = {
  bun: (n) => `export default async () => ({ n: ${n} });\n`,
  python: (n) => `def handler(input):\n    return {"n": ${n}}\n`,
};
const events: ExecutorEvents = { onCall: async () => null };

let host: LocalSandboxHost;
let workDir: string;
const executors: PooledExecutor[] = [];

beforeAll(async () => {
  if (!installed) return;
  workDir = await tempDir('svc-emu-prewarm-');
  host = (await createLocalHost({ projectRoot: PROJECT_ROOT, workDir, spares: 'plain' })).host;
}, 30_000);
afterAll(async () => {
  for (const e of executors) await e.retire({}); // their idle sandboxes (close() would close the shared host)
  await host?.close();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

/** A pool of its own for each test, over the one host (its spares are the file's). */
function pool(maxIdle?: number): PooledExecutor {
  const e = new PooledExecutor({ host, ...(maxIdle ? { maxIdle } : {}) });
  executors.push(e);
  return e;
}

let seq = 0;
function version(runtime: Runtime, code: string, o: { memoryMb?: number } = {}): PrewarmJob {
  const entrypoint = ENTRY[runtime];
  const n = ++seq;
  return {
    tenantId: 'ten_prewarm',
    snippetId: `snp_prewarm_${process.pid}_${n}`,
    version: 1,
    runtime,
    bundle: {
      sha256: createHash('sha256').update(`${runtime}\0${n}\0${code}`).digest('hex'),
      entrypoint,
      load: async () => ({ [entrypoint]: code }),
    },
    limits: { timeout_ms: 20_000, max_memory_mb: o.memoryMb ?? 256, max_cpu_percent: 100 },
  };
}
const runOf = (v: PrewarmJob): ExecutorJob => ({ ...v, invocationId: `inv_prewarm_${process.pid}_${++seq}`, input: {}, env: {} });

describe('prewarm', () => {
  for (const runtime of ['bun', 'python'] as const) {
    it(`${runtime}: the first run of a prewarmed version is warm, with no init of its own`, async (ctx) => {
      if (!installed) ctx.skip(NOT_INSTALLED);
      const e = pool();
      const v = version(runtime, HELLO[runtime](1));
      expect(await e.prewarm(v)).toEqual({ outcome: 'ready' });
      expect(e.stats()).toMatchObject({ idle: 1, created: 1 });
      expect(await e.prewarm(v)).toEqual({ outcome: 'skipped' }); // already warm: no second sandbox
      const r = await e.run(runOf(v), events);
      expect(r.outcome, JSON.stringify(r.error)).toBe('success');
      expect(r.output).toEqual({ n: 1 });
      expect(r.warm).toBe(true);
      expect(r.usage.init_ms).toBe(0);
      expect(e.stats()).toMatchObject({ created: 1, reused: 1 });
    });
  }

  it('a run that comes while its version starts takes that sandbox (one start, not two)', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const e = pool();
    const v = version('bun', HELLO.bun(2));
    const warming = e.prewarm(v);
    const r = await e.run(runOf(v), events);
    expect(await warming).toEqual({ outcome: 'ready' });
    expect(r.outcome, JSON.stringify(r.error)).toBe('success');
    expect(r.output).toEqual({ n: 2 });
    expect(r.warm).toBe(false); // it waited for the start
    expect(e.stats()).toMatchObject({ created: 1, idle: 1 });
  });

  it('a retire while the version starts destroys its sandbox when it is up', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const e = pool();
    const v = version('python', HELLO.python(3));
    const warming = e.prewarm(v);
    await e.retire({ snippetId: v.snippetId, keepVersions: [] });
    expect(await warming).toEqual({ outcome: 'skipped' });
    expect(e.stats()).toMatchObject({ idle: 0, busy: 0 });
  });

  it("a retire naming one bundle's version takes that sandbox only; a prewarm asked again while it starts keeps it", async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const e = pool();
    const a = version('bun', HELLO.bun(6));
    const b = { ...version('bun', HELLO.bun(7)), snippetId: a.snippetId }; // the same snippet, another bundle of version 1
    expect(await e.prewarm(a)).toEqual({ outcome: 'ready' });
    const warming = e.prewarm(b);
    await e.retire({ snippetId: a.snippetId, bundle: { version: 1, sha256: b.bundle.sha256 } });
    expect(await e.prewarm(b)).toEqual({ outcome: 'skipped' }); // already starting: wanted again
    expect(await warming).toEqual({ outcome: 'ready' });
    expect(e.stats()).toMatchObject({ idle: 2 });
    await e.retire({ snippetId: a.snippetId, bundle: { version: 1, sha256: b.bundle.sha256 } });
    expect(e.stats()).toMatchObject({ idle: 1 });
    expect((await e.run(runOf(a), events)).warm).toBe(true);
  });

  it('a module that fails to load is reported as its cold start would be, and nothing is pooled', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const e = pool();
    const bun = await e.prewarm(version('bun', "throw new Error('broken at load');\nexport default async () => 1;\n"));
    expect(bun).toMatchObject({ outcome: 'handler_error', message: expect.stringContaining('broken at load') });
    const py = await e.prewarm(version('python', 'raise RuntimeError("broken at load")\ndef handler(input):\n    return 1\n'));
    expect(py).toMatchObject({ outcome: 'handler_error', message: expect.stringContaining('broken at load') });
    expect(e.stats()).toMatchObject({ idle: 0, busy: 0 });
  });

  it('a module that runs out of memory while loading is oom_killed', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    if (host.info.degraded.some((d) => /memory/i.test(d))) ctx.skip(`no memory limit here: ${host.info.degraded.join('; ')}`);
    const e = pool();
    const hog =
      'big = bytearray(400 * 1024 * 1024)\nfor i in range(0, len(big), 4096):\n    big[i] = 1\ndef handler(input):\n    return 1\n';
    const r = await e.prewarm(version('python', hog, { memoryMb: 64 }));
    expect(r).toMatchObject({ outcome: 'oom_killed' });
    expect(e.stats()).toMatchObject({ idle: 0 });
  });

  it('a prewarmed sandbox counts against the idle budget', async (ctx) => {
    if (!installed) ctx.skip(NOT_INSTALLED);
    const e = pool(1);
    const a = version('bun', HELLO.bun(4));
    const b = version('bun', HELLO.bun(5));
    expect(await e.prewarm(a)).toEqual({ outcome: 'ready' });
    expect(await e.prewarm(b)).toEqual({ outcome: 'ready' });
    expect(e.stats().idle).toBe(1);
    expect((await e.run(runOf(b), events)).warm).toBe(true); // the older one went
    expect((await e.run(runOf(a), events)).warm).toBe(false);
  });
});
