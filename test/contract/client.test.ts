import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { ContractError, createClient, ProblemError, type StreamEvent } from '../../contract/client';
import { defineOperation, type ResponseSpec } from '../../contract/operation';

// Small Operations of our own, so the client is tested apart from the core's routes; a real HTTP server
// answers them as the test says (the core's own routes are called through the client by the route tests).

const problem = z.object({ type: z.string(), title: z.string(), status: z.number(), detail: z.string(), code: z.string() }).loose();
const thing = z.object({ id: z.string(), name: z.string(), size: z.number() });

const getThing = defineOperation({
  operationId: 'getThing',
  method: 'get',
  path: '/v1/things/{id}',
  auth: 'tenant',
  tag: 'things',
  summary: 'a thing',
  params: z.object({ id: z.string() }),
  query: z.object({ fields: z.string().optional(), tag: z.array(z.string()).optional() }),
  responses: {
    200: { description: 'the thing', schema: thing, headers: z.object({ 'x-thing': z.string() }) },
    404: { description: 'none', schema: problem, contentType: 'application/problem+json', codes: ['not_found'] },
  },
});

const makeThing = defineOperation({
  operationId: 'makeThing',
  method: 'post',
  path: '/v1/things',
  auth: 'tenant',
  tag: 'things',
  summary: 'make one',
  body: z.object({ name: z.string(), size: z.number().int() }),
  responses: {
    201: { description: 'made', schema: thing },
    422: { description: 'invalid', schema: problem, contentType: 'application/problem+json', codes: ['validation_failed'] },
  },
});

const adminInfo = defineOperation({
  operationId: 'adminInfo',
  method: 'get',
  path: '/_emu/info',
  auth: 'admin',
  tag: 'emu',
  summary: 'info',
  responses: { 200: { description: 'info', schema: z.object({ ok: z.literal(true) }) }, 202: { description: 'accepted, no body' } },
});

const health = defineOperation({
  operationId: 'health',
  method: 'get',
  path: '/healthz',
  auth: 'none',
  tag: 'ops',
  summary: 'live',
  responses: { 200: { description: 'ok', schema: z.object({ status: z.string() }) } },
});

const follow = defineOperation({
  operationId: 'follow',
  method: 'post',
  path: '/v1/follow/{name}',
  auth: 'tenant',
  tag: 'things',
  summary: 'a stream',
  params: z.object({ name: z.string() }),
  headers: z.object({ 'x-invoke-mode': z.enum(['stream']).optional() }),
  responses: {
    200: {
      description: 'events',
      contentType: 'text/event-stream',
      events: { start: z.object({ n: z.number() }), chunk: z.object({ data: z.unknown() }), result: z.object({ output: z.string() }) },
    },
    404: { description: 'none', schema: problem, contentType: 'application/problem+json', codes: ['not_found'] },
  },
});

interface Seen {
  method: string;
  url: string;
  auth: string | undefined;
  type: string | undefined;
  accept: string | undefined;
  mode: string | undefined;
  body: string;
}

/** What the server answers next, by the request's path (set per test). */
let answer: (req: IncomingMessage, res: import('node:http').ServerResponse) => void;
let seen: Seen[] = [];
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        auth: req.headers.authorization,
        type: req.headers['content-type'],
        accept: req.headers.accept,
        mode: req.headers['x-invoke-mode'] as string | undefined,
        body,
      });
      answer(req, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

function json(status: number, body: unknown, headers: Record<string, string> = {}, type = 'application/json') {
  return (_req: IncomingMessage, res: import('node:http').ServerResponse) => {
    res.writeHead(status, { 'content-type': type, ...headers });
    res.end(JSON.stringify(body));
  };
}
const notFound = json(
  404,
  { type: 'about:blank', title: 'Not found', status: 404, detail: 'no thing x/y', code: 'not_found', invocation_id: 'inv_1' },
  {},
  'application/problem+json',
);

function client(validate = true) {
  seen = [];
  return createClient({ baseUrl: `${base}/`, key: 'svc_key', adminToken: 'emu_admin', validate });
}

describe('createClient', () => {
  it('sends the tenant key, URL-encodes path params, serialises the query and types the success body', async () => {
    answer = json(200, { id: 'x/y', name: 'n', size: 3 }, { 'x-thing': 'yes' });
    const got = await client().call(getThing, { params: { id: 'x/y ü' }, query: { fields: 'a&b', tag: ['p', 'q'] } });
    expectTypeOf(got).toEqualTypeOf<{ id: string; name: string; size: number }>();
    expect(got).toEqual({ id: 'x/y', name: 'n', size: 3 });
    expect(seen).toEqual([
      expect.objectContaining({
        method: 'GET',
        url: '/v1/things/x%2Fy%20%C3%BC?fields=a%26b&tag=p&tag=q',
        auth: 'Bearer svc_key',
        accept: 'application/json',
      }),
    ]);
  });

  it('sends the admin token on admin ops, nothing on open ones, and the credential a call overrides', async () => {
    answer = json(200, { ok: true });
    const c = client();
    await c.call(adminInfo);
    answer = json(200, { status: 'ok' });
    await c.call(health);
    answer = json(201, { id: 'a', name: 'n', size: 1 });
    await c.call(makeThing, { body: { name: 'n', size: 1 }, credential: 'svc_other' });
    await c.with({ key: null }).send(makeThing, { body: { name: 'n', size: 1 } });
    expect(seen.map((s) => s.auth)).toEqual(['Bearer emu_admin', undefined, 'Bearer svc_other', undefined]);
    expect(seen[2]).toMatchObject({ method: 'POST', type: 'application/json', body: '{"name":"n","size":1}' });
  });

  it('throws a ProblemError with the code, detail and extra members of a problem+json answer', async () => {
    answer = notFound;
    const err = await client()
      .call(getThing, { params: { id: 'x/y' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProblemError);
    const p = err as ProblemError;
    expect([p.status, p.code, p.title, p.detail, p.errors, p.extra]).toEqual([
      404,
      'not_found',
      'Not found',
      'no thing x/y',
      [],
      { invocation_id: 'inv_1' },
    ]);
    expect(p.message).toBe('no thing x/y');
  });

  it('throws a ProblemError named http_<status> for an error answer that is not a problem', async () => {
    answer = (_req, res) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end('bad gateway');
    };
    const err = (await client(false)
      .call(health)
      .catch((e: unknown) => e)) as ProblemError;
    expect([err.status, err.code, err.detail]).toEqual([502, 'http_502', 'bad gateway']);
  });

  it('send answers any status without throwing, with the body parsed and the text', async () => {
    answer = json(
      422,
      { type: 'about:blank', title: 'Invalid', status: 422, detail: 'size', code: 'validation_failed' },
      {},
      'application/problem+json',
    );
    const r = await client().send(makeThing, { raw: '{"name":', headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('validation_failed');
    expect(JSON.parse(r.text)).toEqual(r.body);
    expect(seen[0]).toMatchObject({ body: '{"name":', type: 'application/json' });
  });

  it('request gives the status and headers with the typed body', async () => {
    answer = json(200, { id: 'a', name: 'n', size: 1 }, { 'x-thing': 'yes' });
    const r = await client().request(getThing, { params: { id: 'a' } });
    expect([r.status, r.headers.get('x-thing'), r.body.size]).toEqual([200, 'yes', 1]);
  });

  describe('validate: true', () => {
    it('refuses a status the op does not declare', async () => {
      answer = json(418, { code: 'teapot' });
      await expect(client().send(getThing, { params: { id: 'a' } })).rejects.toThrow(/status 418 is not declared \(the op declares 200, /);
    });

    it('refuses a body that does not match the schema, and names the field', async () => {
      answer = json(200, { id: 'a', name: 'n', size: 'big' }, { 'x-thing': 'yes' });
      const err = (await client()
        .call(getThing, { params: { id: 'a' } })
        .catch((e: unknown) => e)) as ContractError;
      expect(err).toBeInstanceOf(ContractError);
      expect(err.issues).toEqual([expect.objectContaining({ path: ['size'] })]);
    });

    it('refuses a missing declared header, a wrong content type, a body where none is declared and an undeclared code', async () => {
      const c = client();
      answer = json(200, { id: 'a', name: 'n', size: 1 });
      await expect(c.call(getThing, { params: { id: 'a' } })).rejects.toThrow(/response headers/);
      answer = json(404, { type: 'about:blank', title: 'x', status: 404, detail: 'd', code: 'not_found' });
      await expect(c.send(getThing, { params: { id: 'a' } })).rejects.toThrow(
        /content type application\/json, declared application\/problem\+json/,
      );
      answer = json(202, { surprise: true });
      await expect(c.send(adminInfo)).rejects.toThrow(/body where the op declares none/);
      answer = json(404, { type: 'about:blank', title: 'x', status: 404, detail: 'd', code: 'gone' }, {}, 'application/problem+json');
      await expect(c.send(getThing, { params: { id: 'a' } })).rejects.toThrow(/problem code 'gone' is not among the declared not_found/);
    });

    it('lets the same answers through when validation is off', async () => {
      answer = json(418, { code: 'teapot' });
      expect((await client(false).send(getThing, { params: { id: 'a' } })).status).toBe(418);
    });
  });

  describe('stream', () => {
    function sse(frames: string[]) {
      return (_req: IncomingMessage, res: import('node:http').ServerResponse) => {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'x-invocation-id': 'inv_9' });
        // Written a frame at a time, each split in two, as a slow server would.
        let i = 0;
        const next = () => {
          if (i >= frames.length) return res.end();
          const f = frames[i++]!;
          res.write(f.slice(0, 5));
          setImmediate(() => {
            res.write(f.slice(5));
            setImmediate(next);
          });
        };
        next();
      };
    }

    it('yields typed events as they arrive, with the response headers, and asks for an event stream', async () => {
      answer = sse([
        'id: 1\nevent: start\ndata: {"n":1}\n\n',
        ': ping\n\n',
        'id: 2\nevent: chunk\ndata: {"data":[1,2]}\n\n',
        'id: 3\nevent: result\ndata: {"output":"done"}\n\n',
      ]);
      const s = await client().stream(follow, { params: { name: 'f' }, headers: { 'x-invoke-mode': 'stream' }, body: undefined });
      expect(s.headers.get('x-invocation-id')).toBe('inv_9');
      const got: StreamEvent<typeof follow>[] = [];
      for await (const e of s) {
        if (e.event === 'result') expectTypeOf(e.data).toEqualTypeOf<{ output: string }>();
        got.push(e);
      }
      expect(got).toEqual([
        { event: 'start', id: '1', data: { n: 1 } },
        { event: 'chunk', id: '2', data: { data: [1, 2] } },
        { event: 'result', id: '3', data: { output: 'done' } },
      ]);
      expect(seen[0]).toMatchObject({ accept: 'text/event-stream', mode: 'stream', url: '/v1/follow/f' });
    });

    it('throws the ProblemError when the answer is a problem instead of a stream', async () => {
      answer = notFound;
      await expect(client().stream(follow, { params: { name: 'f' } })).rejects.toMatchObject({ code: 'not_found', status: 404 });
    });

    it('with validate, refuses an event the op does not declare and data that does not match', async () => {
      answer = sse(['event: start\ndata: {"n":1}\n\n', 'event: surprise\ndata: {}\n\n']);
      const names: string[] = [];
      const run = async () => {
        for await (const e of await client().stream(follow, { params: { name: 'f' } })) names.push(e.event);
      };
      await expect(run()).rejects.toThrow(/event 'surprise' is not among the op's events/);
      expect(names).toEqual(['start']);
      answer = sse(['event: start\ndata: {"n":"one"}\n\n']);
      await expect(run()).rejects.toThrow(/event 'start' data/);
    });
  });

  it('types the success body of an op whose responses spread a Record of problems', async () => {
    const problems = (...statuses: number[]): Record<number, ResponseSpec> =>
      Object.fromEntries(statuses.map((s) => [s, { description: 'problem', schema: problem, contentType: 'application/problem+json' }]));
    const spread = defineOperation({
      operationId: 'spread',
      method: 'get',
      path: '/v1/spread',
      auth: 'tenant',
      tag: 'things',
      summary: 'spread',
      responses: { 200: { description: 'ok', schema: z.object({ n: z.number() }) }, ...problems(401, 404) },
    });
    answer = json(200, { n: 1 });
    const got = await client().call(spread);
    expectTypeOf(got).toEqualTypeOf<{ n: number }>();
    expect(got).toEqual({ n: 1 });
    answer = json(404, { type: 'about:blank', title: 'x', status: 404, detail: 'd', code: 'not_found' }, {}, 'application/problem+json');
    expect((await client().send(spread)).status).toBe(404);
  });

  it('sendPath makes an untyped request with the credential its auth names (tenant by default)', async () => {
    answer = json(405, { code: 'method_not_allowed' }, { allow: 'GET' }, 'application/problem+json');
    const c = client();
    const r = await c.sendPath('patch', '/v1/things/a', { raw: 'x', headers: { 'content-type': 'text/plain' } });
    expect([r.status, r.body.code, r.headers.get('allow')]).toEqual([405, 'method_not_allowed', 'GET']);
    await c.sendPath('GET', '/_emu/info', { auth: 'admin' });
    await c.sendPath('GET', '/healthz', { auth: 'none' });
    expect(seen.map((x) => [x.method, x.auth, x.body])).toEqual([
      ['PATCH', 'Bearer svc_key', 'x'],
      ['GET', 'Bearer emu_admin', ''],
      ['GET', undefined, ''],
    ]);
  });

  it('refuses to call an op whose path param is missing, before any request', () => {
    const c = client();
    // @ts-expect-error: params are required by the op
    expect(() => c.path(getThing, {})).toThrow(/path param 'id' is missing/);
    expect(seen).toEqual([]);
  });
});
