/**
 * Runners started ahead (spares): a cold start takes one, and it is then exactly the sandbox a fresh
 * spawn would have been — the version's own memory limit, its bundle, no trace of another tenant.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';

let core: TestCore;
let backend = 'none';
const executor = async () => (await core.call('GET', '/_emu/executor', undefined, { key: core.admin })).json;
async function sparesReady(runtime: 'bun' | 'python') {
  for (let i = 0; i < 100; i++) {
    if ((await executor()).pool.spares?.ready[runtime] >= 1) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no ${runtime} spare became ready within 5 s`);
}

beforeAll(async () => {
  core = await startTestCore();
  backend = (await executor()).backend;
});
afterAll(async () => {
  await core?.stop();
});

describe('spare runners', () => {
  // it.for, not it.each: only it.for hands the test its context (ctx.skip).
  it.for(['bun', 'python'] as const)(
    '%s: a cold start is served by a spare, with the version’s memory limit and a fresh module',
    async (runtime, ctx) => {
      await sparesReady(runtime);
      const claimedBefore = (await executor()).pool.spares.claimed;
      const name = `spare-${runtime}`;
      expect((await core.call('POST', '/v1/snippets', { name, runtime })).status).toBe(201);
      const code =
        runtime === 'bun'
          ? 'const id = Math.random();\nexport default async function handler(input) {\n  if (input.hog) { const b = new Uint8Array(300 * 1024 * 1024); b.fill(1); return { n: b.length }; }\n  return { id };\n}\n'
          : 'import random\nid = random.random()\ndef handler(input):\n    if input.get("hog"):\n        b = bytearray(300 * 1024 * 1024)\n        return {"n": len(b)}\n    return {"id": id}\n';
      expect((await core.call('POST', `/v1/snippets/${name}/versions`, { code, max_memory_mb: 64, max_cpu_percent: 100 })).status).toBe(
        201,
      );
      const first = await core.call('POST', `/v1/invoke/${name}`, {});
      expect(first.status, first.text).toBe(200);
      expect((await executor()).pool.spares.claimed).toBe(claimedBefore + 1);
      // Same warm sandbox afterwards: the module loaded once.
      expect((await core.call('POST', `/v1/invoke/${name}`, {})).json).toEqual(first.json);
      if (backend === 'none')
        ctx.skip('no cgroup limit backend on this host: the version’s memory limit cannot bite (the spare half passed)');
      // The spare's generous start-up limit is gone: the version's 64 MB bites.
      const hog = await core.call('POST', `/v1/invoke/${name}`, { hog: true });
      expect(hog.status, hog.text).toBe(500);
      expect(hog.json.code).toBe('oom_killed');
    },
  );
});
