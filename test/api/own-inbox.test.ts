/**
 * The emulator's own callback inbox is a callback target under either egress profile (issue 14): under
 * `production` an async invoke whose callback_url is `{this core}/_emu/inbox/NAME` is accepted, delivered,
 * recorded in the inbox and marked with a parity warning; any other loopback URL (another port, another
 * path of this core, credentials, https) is still refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { isOwnInbox, isSelfAddress, selfEndpoint } from '../../server/webhooks/own-inbox';
import { expectProblem, sleep } from './_util';

describe('isOwnInbox / selfEndpoint', () => {
  const v4 = selfEndpoint({ address: '127.0.0.1', port: 7070 }, 'http://127.0.0.1:7070');
  const any = selfEndpoint({ address: '::', port: 7070 }, 'http://127.0.0.1:7070');
  const named = selfEndpoint({ address: '127.0.0.1', port: 7070 }, 'http://localhost:7070');

  it('takes exactly the inbox path of an origin naming this core', () => {
    expect(isOwnInbox('http://127.0.0.1:7070/_emu/inbox/hooks', v4)).toBe(true);
    expect(isOwnInbox('http://127.0.0.1:7070/_emu/inbox/hooks?status=503', v4)).toBe(true);
    expect(isOwnInbox('http://[::1]:7070/_emu/inbox/hooks', any)).toBe(true);
    expect(isOwnInbox('http://localhost:7070/_emu/inbox/hooks', named)).toBe(true);
    for (const url of [
      'http://127.0.0.1:7071/_emu/inbox/hooks', // another port: another process
      'http://127.0.0.2:7070/_emu/inbox/hooks',
      'http://[::1]:7070/_emu/inbox/hooks', // not listening on IPv6
      'http://localhost:7070/_emu/inbox/hooks', // a name this core did not print
      'https://127.0.0.1:7070/_emu/inbox/hooks',
      'http://u:p@127.0.0.1:7070/_emu/inbox/hooks',
      'http://127.0.0.1:7070/_emu/tenants',
      'http://127.0.0.1:7070/_emu/inbox/hooks/response',
      'http://127.0.0.1:7070/_emu/inbox/../tenants',
      'http://127.0.0.1:7070/_emu/inbox/Hooks',
      'http://127.0.0.1:7070/_emu/inbox/',
      'not a url',
    ]) {
      expect(isOwnInbox(url, v4), url).toBe(false);
    }
    expect(isOwnInbox('http://127.0.0.1:7070/_emu/inbox/hooks', null)).toBe(false);
  });

  it('at connect time allows only the addresses it listens on, on its port', () => {
    expect(isSelfAddress('127.0.0.1', 7070, v4)).toBe(true);
    expect(isSelfAddress('127.0.0.1', 7071, v4)).toBe(false);
    expect(isSelfAddress('::1', 7070, v4)).toBe(false);
    expect(isSelfAddress('0:0:0:0:0:0:0:1', 7070, any)).toBe(true);
    expect(isSelfAddress('10.0.0.1', 7070, any)).toBe(false);
  });
});

describe('the own inbox under the production egress profile', () => {
  let core: TestCore;
  beforeAll(async () => {
    core = await startTestCore({ config: { egressProfile: 'production', callbackRetryScale: 0.001 } });
    for (const [path, body] of [
      ['/v1/snippets', { name: 'echo', runtime: 'bun' }],
      ['/v1/snippets/echo/versions', { code: 'export default async function handler(input) { return { got: input }; }\n' }],
    ] as const) {
      const r = await core.call('POST', path, body);
      expect(r.status, r.text).toBe(201);
    }
  });
  afterAll(async () => core?.stop());

  const asyncInvoke = (body: Record<string, unknown>) =>
    core.call('POST', '/v1/invoke/echo', body, { headers: { 'x-invoke-mode': 'async' } });

  it('is delivered, signed, recorded in the inbox, with a parity warning on the invocation', async () => {
    const callback = `${core.url}/_emu/inbox/prod-hooks`;
    const r = await asyncInvoke({ n: 7, callback_url: callback });
    expect(r.status, r.text).toBe(202);
    const id = r.json.invocation_id as string;
    let rec = (await core.call('GET', `/v1/invocations/${id}`)).json;
    for (let i = 0; i < 600 && rec.callback?.status !== 'delivered' && rec.callback?.status !== 'failed'; i++) {
      await sleep(25);
      rec = (await core.call('GET', `/v1/invocations/${id}`)).json;
    }
    expect(rec).toMatchObject({ status: 'succeeded', output: { got: { n: 7 } } });
    expect(rec.callback).toMatchObject({ url: callback, status: 'delivered', attempts: 1 });
    expect(rec.parity_warnings).toEqual([
      expect.stringMatching(
        /^callback_url: production would refuse this target: 127\.0\.0\.1 is a private\/loopback address.*own callback inbox/,
      ),
    ]);

    const inbox = await core.call('GET', '/_emu/inbox/prod-hooks', undefined, { key: core.admin });
    expect(inbox.status, inbox.text).toBe(200);
    expect(inbox.json.data).toHaveLength(1);
    expect(inbox.json.data[0].signature).toMatchObject({ verified: true, tenant: 'local' });
    expect(inbox.json.data[0].json).toMatchObject({ id, status: 'succeeded' });
  });

  it('still refuses every other loopback target, including other paths and ports of this core', async () => {
    const u = new URL(core.url);
    const other = Number(u.port) === 65535 ? 65534 : Number(u.port) + 1;
    for (const url of [
      `http://127.0.0.1:${other}/_emu/inbox/prod-hooks`,
      `${core.url}/_emu/tenants`,
      `${core.url}/v1/snippets`,
      `http://user:pw@${u.host}/_emu/inbox/prod-hooks`,
      `http://localhost:${u.port}/_emu/inbox/prod-hooks`,
      `http://[::1]:${u.port}/_emu/inbox/prod-hooks`,
    ]) {
      const r = await asyncInvoke({ callback_url: url });
      expectProblem(r, 422, 'callback_url_refused');
    }
  });
});
