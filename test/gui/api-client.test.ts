/** The GUI's API client and router, under Node against a real core (no browser needed). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApi, ProblemError, rawFrame } from '../../renderer/src/api';
import { href, parseRoute } from '../../renderer/src/router';
import { operations as ops } from '../../contract';
import { startTestCore, type TestCore } from '../helpers/core';

let core: TestCore;
beforeAll(async () => {
  core = await startTestCore();
  await core.call('POST', '/v1/snippets', { name: 'ticks', runtime: 'bun' });
  await core.call('POST', '/v1/snippets/ticks/versions', {
    code: 'export default async function* handler() { yield 1; yield 2; return { done: true }; }\n',
  });
});
afterAll(async () => core?.stop());

const api = () => createApi({ token: core.admin, key: core.key, fetchImpl: (input, init) => fetch(`${core.url}${String(input)}`, init) });

describe('createApi', () => {
  it('calls /v1 with the tenant key and /_emu with the admin token', async () => {
    expect(await api().client.call(ops.getRuntimeLimits)).toMatchObject({ max_memory_mb: 2048 });
    expect(await api().client.call(ops.emuInfo)).toMatchObject({ local_api_key: core.key });
  });

  it('turns a problem answer into ProblemError with its code, detail and field errors (what ui/kit.tsx shows)', async () => {
    const notFound = await api()
      .client.call(ops.getSnippet, { params: { id: 'nope' } })
      .catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(ProblemError);
    expect(notFound).toMatchObject({ status: 404, code: 'not_found' });
    const invalid = (await api()
      .client.call(ops.createVersion, {
        params: { id: 'ticks' },
        body: { code: 'export default function handler() {}', max_memory_mb: 999999 },
      })
      .catch((e: unknown) => e)) as ProblemError;
    expect(invalid).toBeInstanceOf(ProblemError);
    expect(invalid.status).toBe(422);
    expect(invalid.code).toBe('limit_exceeds_tenant_cap');
    expect(invalid.detail).not.toBe('');
    // A body that fails validation names its fields.
    const fields = (await api()
      .client.call(ops.createVersion, { params: { id: 'ticks' }, body: { code: 'x', timeout_ms: -1 } })
      .catch((e: unknown) => e)) as ProblemError;
    expect(fields).toBeInstanceOf(ProblemError);
    expect(fields.errors.length).toBeGreaterThan(0);
    expect(fields.errors[0]).toMatchObject({ location: expect.any(String), message: expect.any(String) });
    // /_emu with the tenant key is refused: the two credentials are not interchangeable
    const wrong = createApi({ token: core.key, key: core.key, fetchImpl: (i, init) => fetch(`${core.url}${String(i)}`, init) });
    expect(await wrong.client.call(ops.emuInfo).catch((e: unknown) => (e as ProblemError).code)).toBe('unauthenticated');
  });

  it('reads a stream as typed events, in order, and rebuilds each frame as the core wrote it', async () => {
    const stream = await api().client.stream(ops.invoke, {
      params: { snippet: 'ticks' },
      body: {},
      headers: { 'x-invoke-mode': 'stream' },
    });
    const got: [number, string, unknown, string][] = [];
    for await (const e of stream) got.push([Number(e.id), e.event, e.data, rawFrame(e)]);
    expect(got.map(([id, event]) => [id, event])).toEqual([
      [1, 'start'],
      [2, 'chunk'],
      [3, 'chunk'],
      [4, 'result'],
    ]);
    expect(got[1]![2]).toEqual({ data: 1 });
    expect(got[1]![3]).toBe('id: 2\nevent: chunk\ndata: {"data":1}');
  });
});

describe('api.client', () => {
  it('is the typed client with the same credentials: a /v1 op with the key, an /_emu op with the token, a stream of typed events', async () => {
    const client = api().client;
    expect(await client.call(ops.getSnippet, { params: { id: 'ticks' } })).toMatchObject({ name: 'ticks', runtime: 'bun' });
    expect(await client.call(ops.emuInfo)).toMatchObject({ local_api_key: core.key });
    const events: string[] = [];
    for await (const e of await client.stream(ops.invoke, { params: { snippet: 'ticks' }, headers: { 'x-invoke-mode': 'stream' } }))
      events.push(e.event);
    expect(events).toEqual(['start', 'chunk', 'chunk', 'result']);
  });
});

describe('routes', () => {
  it('parses hash routes and builds them back, with encoding', () => {
    expect(parseRoute('')).toEqual({ page: '', params: [] });
    expect(parseRoute('#/snippet/hello%20world/settings')).toEqual({ page: 'snippet', params: ['hello world', 'settings'] });
    expect(href('snippet', 'a/b', 2)).toBe('#/snippet/a%2Fb/2');
    expect(parseRoute(href('snippet', 'a/b', 2))).toEqual({ page: 'snippet', params: ['a/b', '2'] });
  });
});
