/**
 * The warm pool (issue 3, "Tests"): warm sandboxes never cross tenants or versions; a sandbox is not reused
 * after a timeout or an OOM kill; a version that stops being deployed loses its warm sandbox.
 * A sandbox is identified by a random id the snippet draws once, at module load.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { expectProblem } from '../api/_util';
import {
  RUNTIMES,
  createSnippet,
  createVersion,
  deploy,
  emuInvocation,
  executorInfo,
  invocationId,
  invoke,
  newTenant,
  snippet,
  uniqueName,
  waitFor,
  type Code,
  type InvokeOpts,
} from './_helpers';

let core: TestCore;
let otherKey: string;
beforeAll(async () => {
  core = await startTestCore();
  otherKey = await newTenant(core, 'pool-other');
}, 60_000);
afterAll(async () => {
  await core?.stop();
});

const MODULE_ID: Code = {
  bun: `const MODULE_ID = crypto.randomUUID();
export default async function handler(input) {
  if (input.spin) { let n = 0; while (true) n++; }
  if (input.sleep_ms) await new Promise((r) => setTimeout(r, input.sleep_ms));
  if (input.mb) { const a = new Uint8Array(input.mb * 1024 * 1024).fill(1); return { len: a.length }; }
  return { module: MODULE_ID };
}
`,
  python: `import time
import uuid
MODULE_ID = uuid.uuid4().hex


def handler(input):
    if input.get("spin"):
        n = 0
        while True:
            n += 1
    if input.get("sleep_ms"):
        time.sleep(input["sleep_ms"] / 1000)
    if input.get("mb"):
        b = bytearray(input["mb"] * 1024 * 1024)
        return {"len": len(b)}
    return {"module": MODULE_ID}
`,
};

/** Invokes; returns the module id of the sandbox that ran it and whether the run was warm. */
async function whoRan(
  name: string,
  o: InvokeOpts = {},
  input: Record<string, unknown> = {},
): Promise<{ module: string; warm: boolean; version: string }> {
  const r = await invoke(core, name, input, o);
  expect(r.status, r.text).toBe(200);
  expect(typeof r.json.module).toBe('string');
  const emu = await emuInvocation(core, invocationId(r));
  return { module: r.json.module, warm: emu.warm, version: r.headers.get('x-snippet-version')! };
}

describe.each(RUNTIMES)('%s warm pool', (runtime) => {
  it('two tenants with identical code each get their own sandbox; stable per tenant+version; a new version gets a new one', async () => {
    const name = uniqueName(`same-${runtime}`);
    await createSnippet(core, runtime, name);
    await createSnippet(core, runtime, name, otherKey);
    await createVersion(core, name, MODULE_ID[runtime]);
    await createVersion(core, name, MODULE_ID[runtime], {}, otherKey);

    const a1 = await whoRan(name);
    const b1 = await whoRan(name, { key: otherKey });
    const a2 = await whoRan(name);
    const b2 = await whoRan(name, { key: otherKey });
    const a3 = await whoRan(name);
    expect(a1.warm).toBe(false);
    expect(b1.warm, "the other tenant's first call is cold: it does not get our warm sandbox").toBe(false);
    expect(b1.module, 'another tenant, identical code: another sandbox').not.toBe(a1.module);
    expect([a2.module, a3.module], 'stable for repeated calls of one tenant+version').toEqual([a1.module, a1.module]);
    expect([a2.warm, a3.warm]).toEqual([true, true]);
    expect(b2.module).toBe(b1.module);
    expect(b2.warm).toBe(true);

    // A new version, even with identical code, runs in a new sandbox.
    expect(await createVersion(core, name, MODULE_ID[runtime])).toBe(2);
    const a4 = await whoRan(name);
    expect(a4.version).toBe('2');
    expect(a4.warm).toBe(false);
    expect(a4.module, 'a new version: a new sandbox').not.toBe(a1.module);
    expect((await whoRan(name)).module).toBe(a4.module);
    // The other tenant still has its own, untouched.
    const b3 = await whoRan(name, { key: otherKey });
    expect(b3.module).toBe(b1.module);
    expect(b3.warm).toBe(true);
  });

  it('one invocation per sandbox at a time: two concurrent calls of one version run side by side in two sandboxes', async () => {
    const name = await snippet(core, runtime, 'side-by-side', MODULE_ID[runtime]);
    await whoRan(name); // one warm sandbox
    const t0 = performance.now();
    const [x, y] = await Promise.all([whoRan(name, {}, { sleep_ms: 600 }), whoRan(name, {}, { sleep_ms: 600 })]);
    const wall = performance.now() - t0;
    expect(x.module, 'two sandboxes').not.toBe(y.module);
    expect([x.warm, y.warm].sort(), 'one reused the warm sandbox, the other started a new one').toEqual([false, true]);
    expect(wall, 'they ran at the same time, not one after the other').toBeLessThan(1100);
    // Both are warm now: the next two concurrent calls reuse exactly those two.
    const [p, q] = await Promise.all([whoRan(name, {}, { sleep_ms: 200 }), whoRan(name, {}, { sleep_ms: 200 })]);
    expect([p.module, q.module].sort()).toEqual([x.module, y.module].sort());
    expect([p.warm, q.warm]).toEqual([true, true]);
  });

  it('after a timeout the sandbox is not reused', async () => {
    const name = await snippet(core, runtime, 'after-timeout', MODULE_ID[runtime], { timeout_ms: 500 });
    const before = await whoRan(name);
    expect((await whoRan(name)).module, 'control: reused while healthy').toBe(before.module);
    const t = await invoke(core, name, { spin: true });
    expectProblem(t, 504, 'timeout');
    const after = await whoRan(name);
    expect(after.warm).toBe(false);
    expect(after.module, 'a new sandbox after the timeout').not.toBe(before.module);
  });

  it('after an OOM kill the sandbox is not reused', async () => {
    const name = await snippet(core, runtime, 'after-oom', MODULE_ID[runtime], { max_memory_mb: 64 });
    const before = await whoRan(name);
    expect((await whoRan(name)).module, 'control: reused while healthy').toBe(before.module);
    const o = await invoke(core, name, { mb: 400 });
    expectProblem(o, 500, 'oom_killed');
    const after = await whoRan(name);
    expect(after.warm).toBe(false);
    expect(after.module, 'a new sandbox after the OOM kill').not.toBe(before.module);
  });

  it("a new version deployed to prod retires the old version's warm sandbox", async () => {
    const name = uniqueName(`retire-${runtime}`);
    await createSnippet(core, runtime, name);
    await createVersion(core, name, MODULE_ID[runtime]);
    await deploy(core, name, 'prod', 1);
    const v1 = await whoRan(name);
    expect(v1.version).toBe('1');
    // A new version that is not deployed yet: prod still runs v1, in its warm sandbox.
    await createVersion(core, name, MODULE_ID[runtime]);
    const stillV1 = await whoRan(name);
    expect([stillV1.version, stillV1.module, stillV1.warm]).toEqual(['1', v1.module, true]);

    const idleBefore = (await executorInfo(core)).pool.idle as number;
    expect(idleBefore).toBeGreaterThanOrEqual(1);
    await deploy(core, name, 'prod', 2);
    await waitFor('the pool to drop the retired v1 sandbox', async () => (await executorInfo(core)).pool.idle === idleBefore - 1, 3000);

    const pinnedV1 = await whoRan(name, { query: 'version=1' });
    expect(pinnedV1.version).toBe('1');
    expect(pinnedV1.warm, 'v1 has no warm sandbox left').toBe(false);
    expect(pinnedV1.module).not.toBe(v1.module);
    const prod = await whoRan(name);
    expect(prod.version).toBe('2');
    expect(prod.module).not.toBe(v1.module);
  });

  it('a sandbox that is busy when its version stops being deployed is not put back into the pool', async () => {
    const name = uniqueName(`retire-busy-${runtime}`);
    await createSnippet(core, runtime, name);
    await createVersion(core, name, MODULE_ID[runtime]);
    await deploy(core, name, 'prod', 1);
    const warmV1 = await whoRan(name);
    // v1 is running (for 800 ms) while v2 replaces it in prod.
    const running = whoRan(name, {}, { sleep_ms: 800 });
    await waitFor('the v1 run to be running', async () => {
      const l = await core.call('GET', `/v1/invocations?snippet=${name}&status=running`);
      return l.json.data.length === 1;
    });
    await createVersion(core, name, MODULE_ID[runtime]);
    await deploy(core, name, 'prod', 2);
    const done = await running;
    expect([done.version, done.module, done.warm], 'the busy run finishes in its warm v1 sandbox').toEqual(['1', warmV1.module, true]);
    // No wait needed: the deploy marked the busy sandbox retiring (PooledExecutor.retire, executor/executor.ts), and
    // the run destroys rather than pools it before its result (and so this response) exists.
    const pinnedV1 = await whoRan(name, { query: 'version=1' });
    expect(pinnedV1.warm, 'v1 is no longer deployed: its sandbox was retired when the run ended, not kept warm').toBe(false);
    expect(pinnedV1.module).not.toBe(warmV1.module);
  });
});
