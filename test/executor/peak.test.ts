/**
 * peak_memory_mb is the run's own peak: a warm sandbox that once held 150 MB reports a small peak for a
 * later run that allocates nothing (where the backend can reset the kernel's peak counter: cgroup v1, and none, which
 * clears each process's VmHWM).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';

let core: TestCore;
let backend = 'none';
beforeAll(async () => {
  core = await startTestCore();
  backend = (await core.call('GET', '/_emu/executor', undefined, { key: core.admin })).json.backend;
});
afterAll(async () => {
  await core?.stop();
});

describe('per-run peak memory', () => {
  it('a warm run that allocates nothing does not inherit an earlier run’s peak', async (ctx) => {
    if (backend !== 'cgroup-v1' && backend !== 'none')
      ctx.skip(`limit backend ${backend}: the kernel's peak counter is reset on cgroup v1 and none only`);
    expect((await core.call('POST', '/v1/snippets', { name: 'peaky', runtime: 'python' })).status).toBe(201);
    const code = 'def handler(input):\n    b = bytearray(input.get("mb", 0) * 1024 * 1024)\n    return {"n": len(b)}\n';
    expect((await core.call('POST', '/v1/snippets/peaky/versions', { code, max_memory_mb: 512, max_cpu_percent: 100 })).status).toBe(201);
    const big = await core.call('POST', '/v1/invoke/peaky', { mb: 150 });
    expect(big.status, big.text).toBe(200);
    const small = await core.call('POST', '/v1/invoke/peaky', { mb: 0 });
    const usage = async (id: string) => (await core.call('GET', `/v1/invocations/${id}`)).json.usage;
    const bigUsage = await usage(big.headers.get('x-invocation-id')!);
    const smallUsage = await usage(small.headers.get('x-invocation-id')!);
    expect(bigUsage.peak_memory_mb).toBeGreaterThanOrEqual(150);
    expect(smallUsage.peak_memory_mb, JSON.stringify({ bigUsage, smallUsage })).toBeLessThan(bigUsage.peak_memory_mb - 100);
  });
});
