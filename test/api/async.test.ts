/**
 * Async mode end to end (issue 5): real snippets, a real HTTP receiver on loopback, callbacks checked
 * with the Standard Webhooks algorithm written out here (not the emulator's own verifier), retries on a
 * compressed schedule, the production egress profile, fairness across tenants, the concurrency cap,
 * idempotency and cancel. The kill -9 recovery is in async-crash.test.ts.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { expectProblem, sleep } from './_util';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** A webhook receiver: records every POST and answers with the next status from `answers` (then 200). */
class Receiver {
  readonly got: Received[] = [];
  answers: { status: number; headers?: Record<string, string> }[] = [];
  private server!: Server;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
        const answer = this.answers.shift() ?? { status: 200 };
        res.writeHead(answer.status, answer.headers ?? {}).end();
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }

  async waitFor(n: number, ms = 10_000): Promise<Received[]> {
    const until = Date.now() + ms;
    while (this.got.length < n && Date.now() < until) await sleep(10);
    expect(this.got.length, `deliveries received in ${ms} ms`).toBeGreaterThanOrEqual(n);
    return this.got;
  }

  close(): Promise<void> {
    return new Promise((r) => {
      this.server.close(() => r());
      this.server.closeAllConnections();
    });
  }
}

/**
 * An endpoint that never answers until closed: a handler that fetches it is running, and stays so until the test
 * ends it (no sleep in the snippet decides how long it runs).
 */
class Gate {
  private readonly held: ServerResponse[] = [];
  private server!: Server;
  url = '';

  /** Requests that reached it: a handler that fetched it has started. */
  get reached(): number {
    return this.held.length;
  }

  async start(): Promise<this> {
    this.server = createServer((_req, res) => this.held.push(res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/gate`;
    return this;
  }

  close(): Promise<void> {
    for (const res of this.held.splice(0)) res.destroy();
    return new Promise((r) => {
      this.server.close(() => r());
      this.server.closeAllConnections();
    });
  }
}

/** Standard Webhooks, from the spec: HMAC-SHA256 over `id.timestamp.body` with the base64 key after `whsec_`. */
function verifies(secret: string, headers: IncomingHttpHeaders, body: string): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`).digest();
  return String(headers['webhook-signature'] ?? '')
    .split(' ')
    .some((sig) => {
      const [version, value] = sig.split(',');
      const given = Buffer.from(value ?? '', 'base64');
      return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
    });
}

const ASYNC = { 'x-invoke-mode': 'async' };
/** Runs until the gate it is given answers (the cancel test's gate never does). */
const HOLDER = 'export default async function handler(input) { const res = await fetch(input.gate); return { status: res.status }; }\n';
const SLEEPER =
  'export default async function handler(input) { await new Promise((r) => setTimeout(r, input.ms ?? 0)); return { slept: input.ms ?? 0, tag: input.tag ?? null }; }\n';

let core: TestCore;
let receiver: Receiver;
beforeAll(async () => {
  core = await startTestCore({ config: { callbackRetryScale: 0.001, asyncWorkers: 4 } });
  receiver = await new Receiver().start();
  for (const name of ['sleeper', 'other']) {
    expect((await core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
    const v = await core.call('POST', `/v1/snippets/${name}/versions`, { code: SLEEPER, max_cpu_percent: 100 });
    expect(v.status, v.text).toBe(201);
  }
});
afterAll(async () => {
  await core?.stop();
  await receiver?.close();
});

async function submit(body: Record<string, unknown>, opts: { key?: string; headers?: Record<string, string>; snippet?: string } = {}) {
  const r = await core.call('POST', `/v1/invoke/${opts.snippet ?? 'sleeper'}`, body, {
    key: opts.key,
    headers: { ...ASYNC, ...opts.headers },
  });
  expect(r.status, r.text).toBe(202);
  return r.json.invocation_id as string;
}

async function until(id: string, done: (rec: any) => boolean, key?: string, ms = 15_000) {
  const end = Date.now() + ms;
  let rec = (await core.call('GET', `/v1/invocations/${id}`, undefined, { key })).json;
  while (!done(rec) && Date.now() < end) {
    await sleep(20);
    rec = (await core.call('GET', `/v1/invocations/${id}`, undefined, { key })).json;
  }
  return rec;
}
const finished = (rec: any) => rec.status === 'succeeded' || rec.status === 'failed';

describe('callbacks', () => {
  it('arrive signed per Standard Webhooks with the tenant’s secret; a tampered body does not verify', async () => {
    const secret = (await core.call('GET', '/v1/tenant/webhook-secret')).json.secret as string;
    const before = receiver.got.length;
    const id = await submit({ ms: 1, tag: 'signed', callback_url: receiver.url });
    const [got] = (await receiver.waitFor(before + 1)).slice(before);
    expect(got!.headers['content-type']).toBe('application/json');
    expect(got!.headers['webhook-id']).toMatch(/^msg_/);
    expect(Math.abs(Number(got!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(30);
    // One signature, or two while a rotation's grace lasts (the rotation test below may have run first).
    const signatures = String(got!.headers['webhook-signature']).split(' ');
    expect(signatures.length === 1 || signatures.length === 2, signatures.join(' ')).toBe(true);
    for (const s of signatures) expect(s).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(verifies(secret, got!.headers, got!.body)).toBe(true);
    expect(verifies(secret, got!.headers, got!.body.replace('signed', 'forged'))).toBe(false);
    expect(verifies('whsec_' + Buffer.from('another key').toString('base64'), got!.headers, got!.body)).toBe(false);

    const payload = JSON.parse(got!.body);
    expect(payload).toMatchObject({
      id,
      snippet: 'sleeper',
      mode: 'async',
      status: 'succeeded',
      outcome: 'success',
      attempts: 1,
      output: { slept: 1, tag: 'signed' },
    });
    expect(payload.usage.duration_ms).toBeGreaterThanOrEqual(0);
    expect(payload).not.toHaveProperty('input'); // callback_url was taken out of the input, and the input is not echoed
    const rec = await until(id, (r) => r.callback?.status === 'delivered');
    expect(rec.callback).toMatchObject({ status: 'delivered', attempts: 1, webhook_id: got!.headers['webhook-id'], next_attempt_at: null });
  });

  it('after a rotation both the new and the old secret verify (two signatures), for the 24 h grace', async () => {
    const old = (await core.call('GET', '/v1/tenant/webhook-secret')).json.secret as string;
    const rotated = await core.call('POST', '/v1/tenant/webhook-secret');
    expect(rotated.status).toBe(200);
    const fresh = rotated.json.secret as string;
    expect(fresh).not.toBe(old);
    const before = receiver.got.length;
    await submit({ callback_url: receiver.url });
    const [got] = (await receiver.waitFor(before + 1)).slice(before);
    expect(String(got!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifies(fresh, got!.headers, got!.body)).toBe(true);
    expect(verifies(old, got!.headers, got!.body)).toBe(true);
  });

  it('a 500 is retried on the (compressed) schedule with the same webhook-id; a later 2xx ends it', async () => {
    const before = receiver.got.length;
    receiver.answers.push({ status: 500 }, { status: 500 });
    const id = await submit({ callback_url: receiver.url });
    const got = (await receiver.waitFor(before + 3)).slice(before, before + 3);
    const ids = new Set(got.map((g) => g.headers['webhook-id']));
    expect(ids.size).toBe(1);
    // 0, then 5 s and 5 min × 0.001 (±20 % jitter): the third attempt comes ≥ 240 ms after the second
    expect(got[2]!.at - got[1]!.at).toBeGreaterThanOrEqual(230);
    const rec = await until(id, (r) => r.callback?.status === 'delivered');
    expect(rec.callback).toMatchObject({ status: 'delivered', attempts: 3 });
    const emu = await core.call('GET', `/_emu/invocations/${id}`, undefined, { key: core.admin });
    expect(emu.json.callback_deliveries.map((d: any) => d.status_code)).toEqual([500, 500, 200]);
  });

  it('410 Gone stops the retries: the callback failed after one attempt', async () => {
    receiver.answers.push({ status: 410 });
    const before = receiver.got.length;
    const id = await submit({ callback_url: receiver.url });
    await receiver.waitFor(before + 1);
    const rec = await until(id, (r) => r.callback?.status === 'failed');
    // next_attempt_at null is the record saying no retry is scheduled (server/services/callbacks.ts arms its
    // timer from it): no fixed wait for a retry that would not come within it anyway.
    expect(rec.callback).toMatchObject({ status: 'failed', attempts: 1, next_attempt_at: null, last_attempt: { status_code: 410 } });
    expect(receiver.got.length).toBe(before + 1);
  });

  it('a connection that fails is retried', async () => {
    const dead = new Receiver();
    await dead.start();
    const url = dead.url;
    await dead.close(); // nobody listens there now
    const id = await submit({ callback_url: url });
    const rec = await until(id, (r) => r.callback?.attempts >= 2);
    expect(rec.callback.status).toBe('pending');
    expect(rec.callback.last_attempt.error).toMatch(/connection refused \(ECONNREFUSED\)/);
  });
});

describe('outcomes', () => {
  it('a handler error is final: failed after one attempt, never retried, and the callback says so', async () => {
    await core.call('POST', '/v1/snippets', { name: 'thrower', runtime: 'python' });
    await core.call('POST', '/v1/snippets/thrower/versions', {
      code: 'def handler(input):\n    raise ValueError("nope " + str(input["n"]))\n',
    });
    const before = receiver.got.length;
    const id = await submit({ n: 7, callback_url: receiver.url }, { snippet: 'thrower' });
    const [got] = (await receiver.waitFor(before + 1)).slice(before);
    expect(JSON.parse(got!.body)).toMatchObject({
      id,
      status: 'failed',
      outcome: 'handler_error',
      attempts: 1,
      error: { code: 'handler_error', message: expect.stringContaining('nope 7') },
    });
    // The record once its callback is settled: failed for good, one attempt, nothing more scheduled.
    const rec = await until(id, (r) => r.callback?.status === 'delivered');
    expect(rec).toMatchObject({ status: 'failed', outcome: 'handler_error', attempts: 1, callback: { next_attempt_at: null } });
    expect(receiver.got.slice(before).filter((g) => JSON.parse(g.body).id === id)).toHaveLength(1);
  });
});

describe('the production egress profile', () => {
  let prod: TestCore;
  beforeAll(async () => {
    prod = await startTestCore({ config: { egressProfile: 'production', egressAllow: [`127.0.0.1:${new URL(receiver.url).port}`] } });
    await prod.call('POST', '/v1/snippets', { name: 'hello', runtime: 'bun' });
    await prod.call('POST', '/v1/snippets/hello/versions', { code: SLEEPER });
  });
  afterAll(async () => prod?.stop());

  it('refuses metadata, private and loopback callback targets at submit (422), in every spelling', async () => {
    // What other tests here left (the allowed delivery may run first): none of the refused ones may add to it.
    const ids = async () => ((await prod.call('GET', '/v1/invocations')).json.data as { id: string }[]).map((r) => r.id);
    const before = await ids();
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:169.254.169.254]/',
      'http://[64:ff9b::a9fe:a9fe]/',
      'http://10.1.2.3/hook',
      'http://localhost:9/hook',
      'http://127.0.0.1:9/hook',
      'http://[::1]:9/hook',
    ]) {
      const r = await prod.call('POST', '/v1/invoke/hello', { callback_url: url }, { headers: ASYNC });
      expectProblem(r, 422, 'callback_url_refused');
      expect(r.json.errors[0].location).toBe('body.callback_url');
      expect(r.json.detail).toMatch(/production refuses/);
    }
    expect(await ids()).toEqual(before);
    // an unknown snippet is a 404 whatever the callback_url
    expectProblem(await prod.call('POST', '/v1/invoke/nope', { callback_url: 'http://10.0.0.1/' }, { headers: ASYNC }), 404, 'not_found');
  });

  it('allows what --egress-allow names, and delivers to it', async () => {
    const before = receiver.got.length;
    const r = await prod.call('POST', '/v1/invoke/hello', { callback_url: receiver.url }, { headers: ASYNC });
    expect(r.status, r.text).toBe(202);
    await receiver.waitFor(before + 1);
    const rec = (await prod.call('GET', r.headers.get('location')!)).json;
    expect(rec.parity_warnings.join(' ')).toMatch(/allowed here by --egress-allow/);
  });

  it('the local profile allows the same targets and says production would refuse them', async () => {
    // (a closed loopback port: nothing is really sent anywhere)
    const r = await core.call('POST', '/v1/invoke/sleeper', { callback_url: 'http://[::ffff:127.0.0.1]:1/hook' }, { headers: ASYNC });
    expect(r.status, r.text).toBe(202);
    const rec = (await core.call('GET', r.headers.get('location')!)).json;
    expect(rec.parity_warnings).toEqual([expect.stringMatching(/production would refuse this target: .*loopback \(IPv4-mapped\)/)]);
  });
});

describe('the queue', () => {
  it('is fair: with 500 jobs of one tenant queued, another tenant’s job starts within 1 s', async () => {
    const admin = { key: core.admin };
    expect((await core.call('POST', '/_emu/tenants', { name: 'fair-b' }, admin)).status).toBe(201);
    const bKey = (await core.call('POST', '/_emu/tenants/fair-b/keys', undefined, admin)).json.key as string;
    await core.call('POST', '/v1/snippets', { name: 'sleeper', runtime: 'bun' }, { key: bKey });
    await core.call('POST', '/v1/snippets/sleeper/versions', { code: SLEEPER, max_cpu_percent: 100 }, { key: bKey });

    // 500 jobs of 100 ms on 4 workers: first come, first served would start B's job after ~12 s.
    const ids: string[] = [];
    for (let i = 0; i < 500; i += 50) {
      ids.push(...(await Promise.all(Array.from({ length: 50 }, () => submit({ ms: 100, tag: 'a' })))));
    }
    expect((await core.call('GET', '/_emu/info', undefined, admin)).json.async_queue.queued).toBeGreaterThan(400);
    const b = await submit({ ms: 1, tag: 'b' }, { key: bKey });
    const rec = await until(b, (r) => r.started_at !== null, bKey, 5000);
    const waited = Date.parse(rec.started_at) - Date.parse(rec.created_at);
    expect(waited, `B waited ${waited} ms`).toBeLessThan(1000);

    // Clear A's backlog so the next tests have workers.
    await Promise.all(ids.map((id) => core.call('POST', `/v1/invocations/${id}/cancel`)));
    await core.emu.services.async.idle();
    expect((await core.call('GET', '/_emu/info', undefined, admin)).json.async_queue).toMatchObject({ queued: 0, running: 0 });
  }, 60_000);

  it('runs at most max_concurrency of a tenant at once, sharing the cap with sync runs (429)', async () => {
    const admin = { key: core.admin };
    await core.call('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 2 }, admin);
    try {
      const ids = await Promise.all(Array.from({ length: 6 }, () => submit({ ms: 300 })));
      let most = 0;
      let sawSync429 = false;
      while (true) {
        const recs = await Promise.all(ids.map((id) => core.call('GET', `/v1/invocations/${id}`).then((r) => r.json)));
        const running = recs.filter((r) => r.status === 'running').length;
        most = Math.max(most, running);
        if (running === 2 && !sawSync429) {
          const sync = await core.call('POST', '/v1/invoke/other', { ms: 1 });
          if (sync.status === 429) sawSync429 = true;
        }
        if (recs.every(finished)) break;
        await sleep(20);
      }
      expect(most).toBe(2);
      expect(sawSync429).toBe(true);
    } finally {
      await core.call('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 10 }, admin);
    }
  }, 30_000);
});

describe('idempotency', () => {
  it('async: the same key answers the same invocation (queued, running or done); racing repeats make one', async () => {
    const headers = { 'idempotency-key': 'async-once' };
    const ids = await Promise.all(Array.from({ length: 8 }, () => submit({ ms: 200 }, { headers })));
    expect(new Set(ids).size).toBe(1);
    const again = await core.call('POST', '/v1/invoke/sleeper', { ms: 200 }, { headers: { ...ASYNC, ...headers } });
    expect(again.status).toBe(202);
    expect(again.json.invocation_id).toBe(ids[0]);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    // the repeat is answered before its body is looked at: even a callback_url that would be refused
    const odd = await core.call('POST', '/v1/invoke/sleeper', { callback_url: 'ftp://nowhere' }, { headers: { ...ASYNC, ...headers } });
    expect(odd.status, odd.text).toBe(202);
    expect(odd.json.invocation_id).toBe(ids[0]);
    // sync with the key of a job still running: 409; once it is done: its stored result
    expectProblem(await core.call('POST', '/v1/invoke/sleeper', { ms: 200 }, { headers }), 409, 'conflict');
    await until(ids[0]!, finished);
    const sync = await core.call('POST', '/v1/invoke/sleeper', {}, { headers });
    expect(sync.status).toBe(200);
    expect(sync.json).toEqual({ slept: 200, tag: null });
    expect(sync.headers.get('x-invocation-id')).toBe(ids[0]);
    const all = (await core.call('GET', '/v1/invocations?snippet=sleeper&limit=200')).json.data.filter((r: any) => r.id === ids[0]);
    expect(all).toHaveLength(1);
    // the same key for another snippet is refused
    expectProblem(await core.call('POST', '/v1/invoke/other', {}, { headers: { ...ASYNC, ...headers } }), 422, 'idempotency_key_reused');
  });

  it('sync: a repeat answers the stored result; an async repeat of a sync key gets its id', async () => {
    const headers = { 'idempotency-key': 'sync-once' };
    const first = await core.call('POST', '/v1/invoke/sleeper', { ms: 1, tag: 'one' }, { headers });
    expect(first.status).toBe(200);
    const repeat = await core.call('POST', '/v1/invoke/sleeper', { ms: 1, tag: 'two' }, { headers });
    expect(repeat.json).toEqual({ slept: 1, tag: 'one' });
    expect(repeat.headers.get('idempotent-replayed')).toBe('true');
    const asAsync = await core.call('POST', '/v1/invoke/sleeper', {}, { headers: { ...ASYNC, ...headers } });
    expect(asAsync.status).toBe(202);
    expect(asAsync.json.invocation_id).toBe(first.headers.get('x-invocation-id'));
    expect(asAsync.json.status).toBe('succeeded');
  });
});

describe('cancel', () => {
  it('a queued job never runs; a running one is killed; both end cancelled with their callback; finished → 409', async () => {
    const admin = { key: core.admin };
    expect((await core.call('POST', '/v1/snippets', { name: 'holder', runtime: 'bun' })).status).toBe(201);
    const v = await core.call('POST', '/v1/snippets/holder/versions', { code: HOLDER, max_cpu_percent: 100 });
    expect(v.status, v.text).toBe(201);
    const gate = await new Gate().start();
    await core.call('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 1 }, admin);
    try {
      const before = receiver.got.length;
      // It holds the tenant's one slot until it is cancelled: its handler waits on a gate that never answers.
      const running = await submit({ gate: gate.url }, { snippet: 'holder' });
      const queued = await submit({ ms: 1, tag: 'queued', callback_url: receiver.url });
      // Running means its handler has made its request (the record says `running` from before its sandbox is ready).
      const started = await until(running, (r) => gate.reached > 0 || finished(r));
      expect(gate.reached, `the handler reached the gate; its record: ${JSON.stringify(started)}`).toBe(1);
      expect(started.status).toBe('running');
      expect((await core.call('GET', `/v1/invocations/${queued}`)).json.status).toBe('queued');

      const q = await core.call('POST', `/v1/invocations/${queued}/cancel`);
      expect(q.status, q.text).toBe(202);
      expect(q.json).toEqual({ id: queued, status: 'cancelled' });
      const qrec = (await core.call('GET', `/v1/invocations/${queued}`)).json;
      expect(qrec).toMatchObject({ status: 'failed', outcome: 'cancelled', attempts: 0, started_at: null, error: { code: 'cancelled' } });

      const r = await core.call('POST', `/v1/invocations/${running}/cancel`);
      expect(r.status, r.text).toBe(202);
      expect(r.json).toEqual({ id: running, status: 'cancelling' });
      const rrec = await until(running, finished);
      expect(rrec).toMatchObject({ status: 'failed', outcome: 'cancelled', attempts: 1 });
      expect(rrec.usage.duration_ms).toBeLessThan(4000);
      expectProblem(await core.call('POST', `/v1/invocations/${running}/cancel`), 409, 'conflict');
      expectProblem(await core.call('POST', `/v1/invocations/${queued}/cancel`), 409, 'conflict');

      // The queued job's callback, found by its id rather than by its place among the receiver's deliveries.
      const callbackOf = (id: string) => receiver.got.slice(before).find((g) => (JSON.parse(g.body) as { id: string }).id === id);
      await expect.poll(() => callbackOf(queued), { timeout: 10_000 }).toBeDefined();
      expect(JSON.parse(callbackOf(queued)!.body)).toMatchObject({ id: queued, outcome: 'cancelled' });
    } finally {
      await core.call('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 10 }, admin);
      await gate.close();
    }
  }, 20_000);
});
