/**
 * Limits for real (issue 3, "Tests"), in real Bun and CPython under the host's limit backend: a timeout,
 * an OOM kill and a CPU cap happen, with their evidence; per-run overrides; the tenant's max_concurrency.
 * Skips LOUDLY where the executor reports backend `none` (timeout only, nothing to measure).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { expectProblem } from '../api/_util';
import {
  RUNTIMES,
  emuInvocation,
  executorInfo,
  invocationId,
  invoke,
  loudSkip,
  newTenant,
  ok,
  snippet,
  waitFor,
  type Code,
} from './_helpers';

let core: TestCore;
let noBackend: string | null = null;
beforeAll(async () => {
  core = await startTestCore();
  const info = await executorInfo(core);
  if (!info.backend || info.backend === 'none') {
    noBackend = `GET /_emu/executor says backend ${JSON.stringify(info.backend)} (${JSON.stringify(info.parity)})`;
    loudSkip('the executor limit tests (test/executor/limits.test.ts)', noBackend);
  }
}, 60_000);
afterAll(async () => {
  await core?.stop();
});

/** A busy loop that never ends (unless input.spin is false). */
const SPIN_FOREVER: Code = {
  bun: 'export default async function handler(input) {\n  let n = 0;\n  if (input.spin === false) return { n };\n  console.log("spinning now");\n  while (true) n++;\n}\n',
  python:
    'def handler(input):\n    n = 0\n    if input.get("spin") is False:\n        return {"n": n}\n    print("spinning now")\n    while True:\n        n += 1\n',
};

/** Allocates input.mb MB (and touches every byte), or returns at once when input.mb is 0. */
const ALLOC: Code = {
  bun: 'export default async function handler(input) {\n  if (!input.mb) return { small: true };\n  console.log(`allocating ${input.mb} MB`);\n  const a = new Uint8Array(input.mb * 1024 * 1024).fill(1);\n  return { len: a.length };\n}\n',
  python:
    'def handler(input):\n    mb = input.get("mb", 0)\n    if not mb:\n        return {"small": True}\n    print(f"allocating {mb} MB")\n    b = bytearray(mb * 1024 * 1024)\n    return {"len": len(b)}\n',
};

/** Allocates 400 MB while the module loads (as a heavy framework import would). */
const ALLOC_AT_LOAD: Code = {
  bun: 'const big = new Uint8Array(400 * 1024 * 1024).fill(1);\nexport default async function handler() {\n  return { len: big.length };\n}\n',
  python: 'big = bytearray(400 * 1024 * 1024)\n\ndef handler(input):\n    return {"len": len(big)}\n',
};

/** Busy for input.ms of wall-clock time. */
const BUSY_FOR: Code = {
  bun: 'export default async function handler(input) {\n  const end = Date.now() + input.ms;\n  let n = 0;\n  while (Date.now() < end) n++;\n  return { n };\n}\n',
  python:
    'import time\n\ndef handler(input):\n    end = time.monotonic() + input["ms"] / 1000\n    n = 0\n    while time.monotonic() < end:\n        n += 1\n    return {"n": n}\n',
};

const SLEEP: Code = {
  bun: 'export default async function handler(input) {\n  await new Promise((r) => setTimeout(r, input.ms ?? 2000));\n  return { slept: true };\n}\n',
  python: 'import time\n\ndef handler(input):\n    time.sleep(input.get("ms", 2000) / 1000)\n    return {"slept": True}\n',
};

describe.each(RUNTIMES)('%s under real limits', (runtime) => {
  it('timeout: a busy loop with timeout_ms 1000 ends 504 timeout in 1.0–1.5 s of wall time', async ({ skip }) => {
    if (noBackend) return skip(noBackend);
    const name = await snippet(core, runtime, 'timeout', SPIN_FOREVER[runtime], { timeout_ms: 1000 });
    const r = await invoke(core, name, { spin: true });
    expectProblem(r, 504, 'timeout');
    expect(r.json.invocation_id).toBe(invocationId(r));
    expect(r.ms, `wall time of the timed-out call: ${Math.round(r.ms)} ms`).toBeGreaterThanOrEqual(1000);
    expect(r.ms, `wall time of the timed-out call: ${Math.round(r.ms)} ms`).toBeLessThanOrEqual(1500);
    const rec = await core.call('GET', `/v1/invocations/${invocationId(r)}`);
    expect(rec.json).toMatchObject({ status: 'failed', outcome: 'timeout', error: { code: 'timeout' } });
    expect(rec.json.usage.duration_ms).toBeGreaterThanOrEqual(1000);
    expect(rec.json.usage.duration_ms).toBeLessThan(1500);
    const logs = await core.call('GET', `/v1/invocations/${invocationId(r)}/logs`);
    expect(logs.json.logs, 'what it printed before it was killed is kept').toContain('spinning now');
  });

  it('OOM: 400 MB under max_memory_mb 64 → 500 oom_killed; the next small call of the same version succeeds; the timeline shows memory climbing to the limit', async ({
    skip,
  }) => {
    if (noBackend) return skip(noBackend);
    const name = await snippet(core, runtime, 'oom', ALLOC[runtime], { max_memory_mb: 64 });
    const t0 = performance.now();
    const r = await invoke(core, name, { mb: 400 });
    const ms = performance.now() - t0;
    expectProblem(r, 500, 'oom_killed');
    const id = invocationId(r);
    expect(r.json.invocation_id).toBe(id);
    expect(r.headers.get('x-snippet-version')).toBe('1');
    expect(ms, 'an OOM is detected promptly, even under the default 10% CPU cap').toBeLessThan(10_000);

    const rec = await core.call('GET', `/v1/invocations/${id}`);
    expect(rec.json).toMatchObject({ status: 'failed', outcome: 'oom_killed', error: { code: 'oom_killed' } });
    expect(rec.json.usage.peak_memory_mb, 'peak memory reached the limit').toBeGreaterThanOrEqual(64 * 0.9);
    expect(rec.json.usage.peak_memory_mb, 'peak memory never exceeds the limit by much').toBeLessThanOrEqual(64 * 1.1);

    const logs = await core.call('GET', `/v1/invocations/${id}/logs`);
    expect(logs.json.logs, 'what it printed before it was killed is kept').toContain('allocating 400 MB');

    const next = await invoke(core, name, { mb: 0 });
    expect(next.status, next.text).toBe(200);
    expect(next.json).toEqual({ small: true });
    expect(next.headers.get('x-snippet-version')).toBe('1');
    // And something real still fits under the same limit.
    expect(await ok(core, name, { mb: 8 })).toEqual({ len: 8 * 1024 * 1024 });

    const emu = await emuInvocation(core, id);
    expect(emu.outcome).toBe('oom_killed');
    const timeline: { t_ms: number; memory_mb: number; cpu_percent: number; throttled: boolean }[] = emu.timeline;
    expect(Array.isArray(timeline)).toBe(true);
    expect(timeline.length, `timeline: ${JSON.stringify(timeline)}`).toBeGreaterThanOrEqual(2);
    for (const p of timeline) {
      expect(typeof p.t_ms).toBe('number');
      expect(typeof p.memory_mb).toBe('number');
      expect(typeof p.cpu_percent).toBe('number');
    }
    const mem = timeline.map((p) => p.memory_mb);
    const top = Math.max(...mem);
    expect(top, `timeline memory: ${mem.join(', ')}`).toBeGreaterThanOrEqual(64 * 0.85);
    expect(top).toBeLessThanOrEqual(64 * 1.1);
    expect(mem[0]!, `timeline memory climbs: ${mem.join(', ')}`).toBeLessThan(top);
    const ts = timeline.map((p) => p.t_ms);
    expect(
      [...ts].sort((a, b) => a - b),
      'timeline is in time order',
    ).toEqual(ts);
  });

  it('OOM while the module loads (the memory limit applies from the sandbox start) → 500 oom_killed, not 503 failed', async ({ skip }) => {
    if (noBackend) return skip(noBackend);
    const name = await snippet(core, runtime, 'oom-at-load', ALLOC_AT_LOAD[runtime], { max_memory_mb: 64 });
    const r = await invoke(core, name);
    // The snippet's own allocation exceeded its limit: its fault (oom_killed), not the service's (failed → 503).
    expectProblem(r, 500, 'oom_killed');
    expect(r.json.invocation_id).toBe(invocationId(r));
  });

  it('CPU cap: a 1.5 s busy loop at 10% uses ≤ 20% of its wall time and reports throttling; at 100% it is not throttled', async ({
    skip,
  }) => {
    if (noBackend) return skip(noBackend);
    const capped = await snippet(core, runtime, 'cpu10', BUSY_FOR[runtime], { max_cpu_percent: 10 });
    const full = await snippet(core, runtime, 'cpu100', BUSY_FOR[runtime], { max_cpu_percent: 100 });

    const r10 = await invoke(core, capped, { ms: 1500 });
    expect(r10.status, r10.text).toBe(200);
    const u10 = (await core.call('GET', `/v1/invocations/${invocationId(r10)}`)).json.usage;
    const share10 = u10.cpu_ms / u10.duration_ms;
    expect(u10.duration_ms).toBeGreaterThanOrEqual(1500);
    expect(share10, `10%: cpu_ms ${u10.cpu_ms} of duration_ms ${u10.duration_ms}`).toBeLessThanOrEqual(0.2);
    expect(share10, `10%: cpu_ms ${u10.cpu_ms} of duration_ms ${u10.duration_ms} (it did run)`).toBeGreaterThan(0.02);
    expect(u10.cpu_throttled_ms, `10%: usage ${JSON.stringify(u10)}`).toBeGreaterThan(0);

    const r100 = await invoke(core, full, { ms: 1500 });
    expect(r100.status, r100.text).toBe(200);
    const u100 = (await core.call('GET', `/v1/invocations/${invocationId(r100)}`)).json.usage;
    const share100 = u100.cpu_ms / u100.duration_ms;
    // At 100% the cap does not bind: what share the loop gets is the host's to give (a fresh-clone CI run, with the
    // linters beside it on 2 cores, gave 0.59). So it is judged against the capped run and by the throttling.
    const said = `100%: cpu_ms ${u100.cpu_ms} of duration_ms ${u100.duration_ms} (10%: ${share10.toFixed(2)})`;
    expect(share100, said).toBeGreaterThanOrEqual(3 * share10);
    expect(share100, said).toBeLessThanOrEqual(1.1);
    expect(u100.cpu_throttled_ms, `${said}, throttled ${u100.cpu_throttled_ms} ms`).toBeLessThan(0.1 * u100.duration_ms);
  });

  it('per-run override: X-Emu-Limits timeout_ms=500 with X-Emu-Admin times out a 2 s sleep at ~0.5 s without a new version; without X-Emu-Admin → 403', async ({
    skip,
  }) => {
    if (noBackend) return skip(noBackend);
    const name = await snippet(core, runtime, 'override', SLEEP[runtime], { timeout_ms: 10_000 });
    const denied = await invoke(core, name, { ms: 2000 }, { headers: { 'x-emu-limits': 'timeout_ms=500' } });
    expectProblem(denied, 403, 'forbidden');
    const wrong = await invoke(
      core,
      name,
      { ms: 2000 },
      { headers: { 'x-emu-limits': 'timeout_ms=500', 'x-emu-admin': `${core.admin}x` } },
    );
    expectProblem(wrong, 403, 'forbidden');
    for (const bad of ['timeout_ms=abc', 'timeout_ms=0', 'cpu=5', 'timeout_ms']) {
      const r = await invoke(core, name, { ms: 2000 }, { headers: { 'x-emu-limits': bad, 'x-emu-admin': core.admin } });
      expectProblem(r, 400, 'validation_failed');
    }
    const none = await core.call('GET', `/v1/invocations?snippet=${name}`);
    expect(none.json.data, 'a refused or malformed override runs nothing').toEqual([]);

    const r = await invoke(core, name, { ms: 2000 }, { headers: { 'x-emu-limits': 'timeout_ms=500', 'x-emu-admin': core.admin } });
    // A timeout at all proves the override acted: the version's own 10 s would let the 2 s sleep finish.
    // The handler's own clock says where it was cut (wall time also holds the sandbox's start, which a
    // loaded CI machine stretches).
    expectProblem(r, 504, 'timeout');
    const cut = (await core.call('GET', `/v1/invocations/${invocationId(r)}`)).json.usage.duration_ms;
    expect(cut, `handler ran ${cut} ms`).toBeGreaterThanOrEqual(500);
    expect(cut, `handler ran ${cut} ms`).toBeLessThan(2000);
    expect(r.headers.get('x-snippet-version')).toBe('1');
    const emu = await emuInvocation(core, invocationId(r));
    expect(emu.overridden).toBe(true);
    expect(emu.limits).toMatchObject({ timeout_ms: 500 });
    const versions = await core.call('GET', `/v1/snippets/${name}/versions`);
    expect((versions.json.data ?? versions.json).length, 'no new version').toBe(1);

    // The override was for that run only: the version's own limit still applies to the next one.
    const plain = await invoke(core, name, { ms: 700 });
    expect(plain.status, plain.text).toBe(200);
  });

  it('per-run override of max_memory_mb and max_cpu_percent: applied to that run only', async ({ skip }) => {
    if (noBackend) return skip(noBackend);
    const admin = { 'x-emu-admin': core.admin };
    // The overridden run comes first: a warm Bun sandbox keeps an earlier run's unreachable 100 MB until its GC
    // runs (JSC does not see the cgroup's limit), so a 100 MB run before it would leave the last run ~150 MB
    // short of room. The last run shows both that 100 MB fits the version's 200 MB and that the override is gone.
    const mem = await snippet(core, runtime, 'override-mem', ALLOC[runtime]); // 200 MB by default
    const oom = await invoke(core, mem, { mb: 100 }, { headers: { ...admin, 'x-emu-limits': 'max_memory_mb=64' } });
    expectProblem(oom, 500, 'oom_killed');
    expect((await emuInvocation(core, invocationId(oom))).limits).toMatchObject({ max_memory_mb: 64 });
    expect(await ok(core, mem, { mb: 100 }), 'the next run has the version’s limit again').toEqual({ len: 100 * 1024 * 1024 });

    const cpu = await snippet(core, runtime, 'override-cpu', BUSY_FOR[runtime], { max_cpu_percent: 10 });
    const fast = await invoke(core, cpu, { ms: 1000 }, { headers: { ...admin, 'x-emu-limits': 'max_cpu_percent=100' } });
    expect(fast.status, fast.text).toBe(200);
    const u = (await emuInvocation(core, invocationId(fast))).usage;
    // At the version's 10% the share cannot pass 0.2 (the slow run below); 0.5 is the override, whatever else this
    // 2-core host runs meanwhile (0.8 measured how idle the host was: a fresh-clone CI run got 0.78, unthrottled).
    expect(u.cpu_ms / u.duration_ms, `overridden to 100%: ${JSON.stringify(u)}`).toBeGreaterThanOrEqual(0.5);
    const slow = await invoke(core, cpu, { ms: 1000 });
    expect(slow.status, slow.text).toBe(200);
    const u2 = (await emuInvocation(core, invocationId(slow))).usage;
    expect(u2.cpu_ms / u2.duration_ms, `back to the version's 10% (same warm sandbox): ${JSON.stringify(u2)}`).toBeLessThanOrEqual(0.2);
    // The direct evidence of which cap each run had: the throttled time the kernel counted.
    expect(u.cpu_throttled_ms, `overridden run: ${JSON.stringify(u)}; version's 10%: ${JSON.stringify(u2)}`).toBeLessThan(
      u2.cpu_throttled_ms / 4,
    );
  });
});

describe('tenant max_concurrency', () => {
  it('at max_concurrency 1, a second concurrent invoke → 429 with Retry-After', async ({ skip }) => {
    if (noBackend) return skip(noBackend);
    const slow = await snippet(core, 'bun', 'conc-slow', SLEEP.bun);
    const fast = await snippet(core, 'python', 'conc-fast', 'def handler(input):\n    return {"ok": True}\n');
    await ok(core, fast); // warm, so the last call below is quick
    const neighbourKey = await newTenant(core, 'conc-neighbour');
    const neighbours = await snippet(core, 'python', 'conc-fast', 'def handler(input):\n    return {"ok": True}\n', {}, neighbourKey);
    const patch = await core.call('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 1 }, { key: core.admin });
    expect(patch.status, patch.text).toBe(200);
    expect(patch.json.max_concurrency).toBe(1);
    try {
      const first = invoke(core, slow, { ms: 1000 });
      await waitFor('the first invocation to be running', async () => {
        const l = await core.call('GET', `/v1/invocations?snippet=${slow}&status=running`);
        return l.json.data.length === 1;
      });
      const second = await invoke(core, fast);
      expectProblem(second, 429, 'rate_limited');
      const retry = second.headers.get('retry-after');
      expect(retry, 'Retry-After header').toMatch(/^\d+$/);
      expect(Number(retry)).toBeGreaterThanOrEqual(1);
      // The cap is the tenant's: another tenant runs meanwhile.
      expect(await ok(core, neighbours, {}, { key: neighbourKey })).toEqual({ ok: true });
      const f = await first;
      expect(f.status, f.text).toBe(200);
      // The slot is free again.
      expect(await ok(core, fast)).toEqual({ ok: true });
    } finally {
      const back = await core.call('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 10 }, { key: core.admin });
      expect(back.status, back.text).toBe(200);
    }
  });
});
