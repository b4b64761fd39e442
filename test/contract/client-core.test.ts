/**
 * The typed client (contract/client.ts) against a real core, validating every answer against its Operation:
 * the path a snippet takes from creation to a streamed run, and the problems on the way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContractError, ProblemError } from '../../contract/client';
import { operations as ops } from '../../contract';
import { startTestCore, type TestCore } from '../helpers/core';

let core: TestCore;
const TICKS = 'export default async function* handler(input) { yield 1; yield input.n; return { done: true }; }\n';

// Each test's snippets exist before any test runs (any order passes).
beforeAll(async () => {
  core = await startTestCore();
  for (const [name, code] of [
    ['typed-ticks', TICKS],
    ['typed-boom', 'export default async function handler() { throw new Error("boom"); }\n'],
  ] as const) {
    expect((await core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
    expect((await core.call('POST', `/v1/snippets/${name}/versions`, { code })).status).toBe(201);
  }
});
afterAll(async () => core?.stop());

describe('the typed client against a core (validate: true)', () => {
  it('creates a snippet and a version, reads them back, and the answers match their schemas', async () => {
    const c = core.client;
    const snippet = await c.call(ops.createSnippet, { body: { name: 'typed-made', runtime: 'bun' } });
    expect(snippet).toMatchObject({ name: 'typed-made', runtime: 'bun' });
    const version = await c.call(ops.createVersion, { params: { id: 'typed-made' }, body: { code: TICKS } });
    expect(version).toMatchObject({ version: 1, timeout_ms: 60000, max_memory_mb: 200, max_cpu_percent: 10 });
    expect(await c.call(ops.getVersion, { params: { id: 'typed-made', version: '1' } })).toMatchObject({ version: 1 });
    const page = (await c.call(ops.listSnippets, { query: { limit: '5' } })) as { data: { name: string }[] };
    expect(page.data.map((s) => s.name)).toContain('typed-made');
  });

  it('streams a run as typed events, in order, with the run named in the headers', async () => {
    const s = await core.client.stream(ops.invoke, {
      params: { snippet: 'typed-ticks' },
      body: { n: 2 },
      headers: { 'x-invoke-mode': 'stream' },
    });
    expect(s.status).toBe(200);
    const id = s.headers.get('x-invocation-id');
    expect(id).toMatch(/^inv_/);
    const got: [string | undefined, string, unknown][] = [];
    for await (const e of s) got.push([e.id, e.event, e.data]);
    expect(got.map(([i, e]) => [i, e])).toEqual([
      ['1', 'start'],
      ['2', 'chunk'],
      ['3', 'chunk'],
      ['4', 'result'],
    ]);
    expect(got[2]![2]).toEqual({ data: 2 });
    expect(await core.client.call(ops.getInvocation, { params: { id: id! } })).toMatchObject({ id, outcome: 'success', mode: 'stream' });
  });

  it('throws a ProblemError with the code and the run’s invocation_id for a failed sync run', async () => {
    const c = core.client;
    const err = (await c.call(ops.invoke, { params: { snippet: 'typed-boom' }, body: {} }).catch((e: unknown) => e)) as ProblemError;
    expect(err).toBeInstanceOf(ProblemError);
    expect([err.status, err.code, err.detail]).toEqual([500, 'handler_error', 'boom']);
    expect(err.extra.invocation_id).toMatch(/^inv_/);
  });

  it('sends the admin token on /_emu ops and the key on /v1 ops; the wrong credential is a 401 the op declares', async () => {
    expect(await core.client.call(ops.emuInfo)).toMatchObject({ local_api_key: core.key });
    const swapped = core.client.with({ adminToken: core.key });
    const r = await swapped.send(ops.emuInfo);
    expect([r.status, r.body.code]).toEqual([401, 'unauthenticated']);
    const missing = await core.client.send(ops.getSnippet, { params: { id: 'no/such snippet' } });
    expect([missing.status, missing.body.code]).toEqual([404, 'not_found']);
  });

  it('a validation failure is a 422 whose errors name the field', async () => {
    const r = await core.client.send(ops.createVersion, { params: { id: 'typed-ticks' }, body: { code: 'x', max_memory_mb: 999999 } });
    expect(r.status, r.text).toBe(422);
    expect(r.body.code).toBe('limit_exceeds_tenant_cap');
  });

  it('fails loudly when an answer does not match its op (here: an op whose success schema is wrong on purpose)', async () => {
    const wrong = {
      ...ops.getRuntimeLimits,
      responses: { ...ops.getRuntimeLimits.responses, 200: { description: 'x', schema: ops.getSnippet.responses[200].schema } },
    };
    await expect(core.client.call(wrong)).rejects.toBeInstanceOf(ContractError);
  });
});
