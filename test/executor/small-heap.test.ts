/**
 * Issue 14, item 2, as a regression test: a core with a 64 MB V8 heap (node --max-old-space-size=64) runs
 * 1,200 warm hello invocations and 150 that each log 1 MB, in real Bun. Before the fix every run stayed
 * reachable from its warm sandbox (~1 MB per 1 MB-log call): a 96 MB core died of heap exhaustion after 74
 * such calls. Now the core lives, and its heap after a forced GC (`/_emu/memory?gc=1`, the core started with
 * --expose-gc) grows by less than 8 MB over the 150 big calls and the last 200 hellos. The soak benchmark
 * (`npm run bench -- soak`) is the long version.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import { killAll, spawnCore, PROJECT_ROOT_ARGS, type Child } from '../helpers/spawn-core';
import { request, tempDir } from '../helpers/core';

const HEAP_MB = 64;
const MB = 1024 * 1024;
const HELLO = 'export default async function handler(input) { return { hello: input.name ?? "world" }; }\n';
const LOGS_1MB = 'const line = "x".repeat(999_999);\nexport default async function handler() { console.log(line); return { ok: true }; }\n';

let core: Child;
let dataDir: string;
beforeAll(async () => {
  dataDir = await tempDir('svc-emu-small-heap-');
  core = await spawnCore(dataDir, PROJECT_ROOT_ARGS, [`--max-old-space-size=${HEAP_MB}`, '--expose-gc']);
}, 60_000);
afterAll(async () => {
  killAll();
  await rm(dataDir, { recursive: true, force: true });
});

const call = (method: string, path: string, body?: unknown, key = core.key) => request(core.url, method, path, body, { key });

/** heap_used after a forced full GC, in bytes. */
async function heapAfterGc(): Promise<number> {
  const r = await call('GET', '/_emu/memory?gc=1', undefined, core.admin);
  expect(r.status, r.text).toBe(200);
  expect(r.json.gc).toBe('forced');
  return r.json.heap_used_bytes as number;
}

/** Runs `n` invocations of `name`, each must answer 200; a dead core says how it died. */
async function invokeMany(name: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await call('POST', `/v1/invoke/${name}`, { name: 'soak' }).catch((err: Error) => ({
      status: 0,
      text: String(err.cause ?? err),
    }));
    if (r.status !== 200) {
      const died = core.proc.exitCode !== null || core.proc.signalCode !== null;
      const why = died
        ? `the core died (${core.proc.signalCode ?? core.proc.exitCode}): ${core.stderr().slice(-800)}`
        : r.text.slice(0, 400);
      expect.fail(`invocation ${i + 1} of ${n} of ${name}: ${r.status} ${why}`);
    }
  }
}

describe(`a core with a ${HEAP_MB} MB heap`, () => {
  it('runs 1,200 hellos and 150 invocations that log 1 MB each without growing', async () => {
    for (const [name, code] of [
      ['hello', HELLO],
      ['logs-1mb', LOGS_1MB],
    ] as const) {
      expect((await call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
      expect((await call('POST', `/v1/snippets/${name}/versions`, { code })).status).toBe(201);
    }
    // The invocation history (1,000 records per tenant) is full first: from here on it only turns over.
    await invokeMany('hello', 1000);
    await invokeMany('logs-1mb', 10);
    const before = await heapAfterGc();
    await invokeMany('logs-1mb', 150);
    await invokeMany('hello', 200);
    const after = await heapAfterGc();
    const logs = await call('GET', '/v1/invocations?snippet=logs-1mb&limit=1');
    expect(logs.json.data[0].outcome).toBe('success');
    expect(
      after - before,
      `heap after GC: ${(before / MB).toFixed(1)} MB after the warm-up, ${(after / MB).toFixed(1)} MB after 150 × 1 MB of logs`,
    ).toBeLessThan(8 * MB);
  }, 120_000);
});
