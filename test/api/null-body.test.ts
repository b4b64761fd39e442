/**
 * A JSON `null` body is a value, not an absent body (issue 15: Schemathesis's negative_data_rejection check
 * found `PATCH /_emu/tenants/{name}/limits` with the body `null` answered 200, read as `{}`): the route's schema
 * judges it, and every body schema wants an object, so 422. An absent body where the body is optional (the
 * invoke route) still means `{}`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { expectProblem } from './_util';

let core: TestCore;
beforeAll(async () => {
  core = await startTestCore({ config: { terminal: false } });
  expect((await core.call('POST', '/v1/snippets', { name: 'echo', runtime: 'python' })).status).toBe(201);
  const version = await core.call('POST', '/v1/snippets/echo/versions', { code: 'def handler(input):\n    return {"input": input}\n' });
  expect(version.status, version.text).toBe(201);
});
afterAll(async () => {
  await core?.stop();
});

const json = { 'content-type': 'application/json' };

describe('a JSON null body', () => {
  it('is refused with 422 where a body is required (PATCH /_emu/tenants/{name}/limits), and changes nothing', async () => {
    const before = await core.call('GET', '/v1/tenant/runtime-limits');
    const res = await core.call('PATCH', '/_emu/tenants/local/limits', undefined, { key: core.admin, raw: 'null', headers: json });
    expectProblem(res, 422, 'validation_failed');
    expect((await core.call('GET', '/v1/tenant/runtime-limits')).json).toEqual(before.json);
  });

  it('is refused with 422 where the body is optional (the invoke route), which runs nothing', async () => {
    // Compared with what was there before: the next test's run of echo may come first (the order is shuffled).
    const runs = async () => ((await core.call('GET', '/v1/invocations?snippet=echo')).json.data as { id: string }[]).map((r) => r.id);
    const before = await runs();
    const res = await core.call('POST', '/v1/invoke/echo', undefined, { raw: 'null', headers: json });
    expectProblem(res, 422, 'validation_failed');
    expect(await runs()).toEqual(before);
  });

  it('an absent body where the body is optional still means {}', async () => {
    const res = await core.call('POST', '/v1/invoke/echo');
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ input: {} });
  });
});
