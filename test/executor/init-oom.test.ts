/**
 * The memory limit applies from the sandbox's start (docs/architecture.md, "What the limits cover"): a snippet whose
 * imports alone exceed max_memory_mb is `oom_killed`, not a service failure.
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

describe('out of memory while loading', () => {
  it('a LangGraph import under 30 MB ends oom_killed with evidence from the init phase', async (ctx) => {
    if (backend === 'none') ctx.skip('no cgroup limit backend on this host: nothing enforces max_memory_mb');
    expect((await core.call('POST', '/v1/snippets', { name: 'heavy', runtime: 'python' })).status).toBe(201);
    const v = await core.call('POST', '/v1/snippets/heavy/versions', {
      code: 'from langgraph.graph import StateGraph\n\ndef handler(input):\n    return {}\n',
      max_memory_mb: 30,
    });
    expect(v.status, v.text).toBe(201);
    const r = await core.call('POST', '/v1/invoke/heavy', {});
    expect(r.status, r.text).toBe(500);
    expect(r.json.code).toBe('oom_killed');
    const rec = await core.call('GET', `/_emu/invocations/${r.json.invocation_id}`, undefined, { key: core.admin });
    expect(rec.json.outcome).toBe('oom_killed');
    expect(rec.json.error_evidence).toMatchObject({ during: 'init', limit_mb: 30 });
  });
});
