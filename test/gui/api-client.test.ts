/** The GUI's API client and router, under Node against a real core (no browser needed). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiProblem, createApi, sseEvents } from '../../renderer/src/api';
import { href, parseRoute } from '../../renderer/src/router';
import { startTestCore, type TestCore } from '../helpers/core';

let core: TestCore;
beforeAll(async () => {
  core = await startTestCore();
  await core.call('POST', '/v1/snippets', { name: 'ticks', runtime: 'bun' });
  await core.call('POST', '/v1/snippets/ticks/versions', { code: 'export default async function* handler() { yield 1; yield 2; return { done: true }; }\n' });
});
afterAll(async () => core?.stop());

const api = () => createApi({ token: core.admin, key: core.key, fetchImpl: (input, init) => fetch(`${core.url}${String(input)}`, init) });

describe('createApi', () => {
  it('calls /v1 with the tenant key and /_emu with the admin token', async () => {
    expect((await api().v1('GET', '/v1/tenant/runtime-limits')).body).toMatchObject({ max_memory_mb: 2048 });
    expect((await api().emu('GET', '/_emu/info')).body).toMatchObject({ local_api_key: core.key });
  });

  it('turns a problem answer into ApiProblem with its code, detail and field errors', async () => {
    const notFound = await api().v1('GET', '/v1/snippets/nope').catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(ApiProblem);
    expect(notFound).toMatchObject({ status: 404, code: 'not_found' });
    const invalid = (await api().v1('POST', '/v1/snippets/ticks/versions', { code: 'export default function handler() {}', max_memory_mb: 999999 }).catch((e: unknown) => e)) as ApiProblem;
    expect(invalid.status).toBe(422);
    expect(invalid.code).toBe('limit_exceeds_tenant_cap');
    // /_emu with the tenant key is refused: the two credentials are not interchangeable
    const wrong = createApi({ token: core.key, key: core.key, fetchImpl: (i, init) => fetch(`${core.url}${String(i)}`, init) });
    expect(await wrong.emu('GET', '/_emu/info').catch((e: unknown) => (e as ApiProblem).code)).toBe('unauthenticated');
  });

  it('reads a stream as events, in order', async () => {
    const res = await api().stream('/v1/invoke/ticks', { method: 'POST', body: {}, headers: { 'X-Invoke-Mode': 'stream' } });
    const got: [number, string, unknown][] = [];
    for await (const e of sseEvents(res)) got.push([e.id, e.event, e.data]);
    expect(got.map(([id, event]) => [id, event])).toEqual([[1, 'start'], [2, 'chunk'], [3, 'chunk'], [4, 'result']]);
    expect(got[1]![2]).toEqual({ data: 1 });
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
