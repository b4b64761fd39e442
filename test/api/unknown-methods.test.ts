/**
 * Every unknown route or method answers problem+json with a stable code (issue 14): any method a path
 * does not take, even one the router implements nowhere (TRACE), → 405 `method_not_allowed` with `Allow`
 * (issue 15: Schemathesis's unsupported_method check); such a method on an unknown path → 501
 * `not_implemented`; an unknown path → 404 `not_found`; and what Node's
 * HTTP parser refuses before Koa (a method HTTP does not define, CONNECT) is problem+json too.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { PROBLEM_FIELDS } from './_util';

let core: TestCore;
beforeAll(async () => {
  core = await startTestCore();
});
afterAll(async () => {
  await core?.stop();
});

interface Raw {
  status: number;
  headers: Map<string, string>;
  body: Record<string, unknown>;
}

/** One request written byte for byte (fetch refuses TRACE and CONNECT, node:http refuses unknown methods). */
function rawHttp(method: string, target: string, extraHeaders = ''): Promise<Raw> {
  const u = new URL(core.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(u.port), u.hostname, () => {
      socket.write(
        `${method} ${target} HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${core.key}\r\n${extraHeaders}Connection: close\r\n\r\n`,
      );
    });
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', body = ''] = text.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = new Map(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as [string, string]),
      );
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(body) as Record<string, unknown>;
      } catch {
        /* asserted below */
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: json });
    });
  });
}

function expectRawProblem(res: Raw, status: number, code: string): void {
  expect({ status: res.status, code: res.body.code }).toEqual({ status, code });
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  for (const f of PROBLEM_FIELDS) expect(res.body).toHaveProperty(f);
  expect(res.body.request_id).toBe(res.headers.get('x-request-id'));
}

describe('unknown methods and routes', () => {
  it.each(['TRACE', 'PROPFIND', 'MKCOL', 'LOCK', 'SEARCH', 'QUERY', 'PURGE'])(
    '%s on a known path → 405 method_not_allowed with its Allow',
    async (method) => {
      const res = await rawHttp(method, '/v1/snippets');
      expectRawProblem(res, 405, 'method_not_allowed');
      expect(res.headers.get('allow')?.split(', ').sort()).toEqual(['GET', 'HEAD', 'POST']);
    },
  );

  it('TRACE on an unknown path → 501 without an Allow header', async () => {
    const res = await rawHttp('TRACE', '/no/such/thing');
    expectRawProblem(res, 501, 'not_implemented');
    expect(res.headers.has('allow')).toBe(false);
  });

  it('a known method a path does not take → 405 method_not_allowed with Allow', async () => {
    const res = await rawHttp('PATCH', '/v1/snippets');
    expectRawProblem(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')?.split(', ').sort()).toEqual(['GET', 'HEAD', 'POST']);
    const emu = await rawHttp('DELETE', '/_emu/info');
    expectRawProblem(emu, 405, 'method_not_allowed');
    expect(emu.headers.get('allow')?.split(', ').sort()).toEqual(['GET', 'HEAD']);
  });

  it.each(['/v1/nope', '/_emu/nope', '/nope', '/v1/snippets/x/y/z'])('GET %s → 404 not_found', async (path) => {
    expectRawProblem(await rawHttp('GET', path), 404, 'not_found');
    expectRawProblem(await rawHttp('POST', path), 404, 'not_found');
  });

  it('a method HTTP does not define (refused by Node before Koa) → 501 problem+json', async () => {
    expectRawProblem(await rawHttp('FOO', '/v1/snippets'), 501, 'not_implemented');
    expectRawProblem(await rawHttp('BREW', '/'), 501, 'not_implemented');
  });

  it('CONNECT (handed by Node to a separate event) → 501 problem+json', async () => {
    expectRawProblem(await rawHttp('CONNECT', 'example.com:443'), 501, 'not_implemented');
  });

  it('a request line that is not HTTP → 400 bad_request problem+json', async () => {
    expectRawProblem(await rawHttp('GET', '/ with spaces'), 400, 'bad_request');
  });

  it('headers over the limit of Node’s parser → 431 headers_too_large problem+json', async () => {
    expectRawProblem(await rawHttp('GET', '/v1/snippets', `X-Big: ${'a'.repeat(20_000)}\r\n`), 431, 'headers_too_large');
  });

  it('the core keeps answering afterwards', async () => {
    const r = await core.call('GET', '/v1/snippets');
    expect(r.status).toBe(200);
  });
});
