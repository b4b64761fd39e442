import { afterEach, describe, expect, it } from 'vitest';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { newWebhookSecret } from '../../server/ids';
import { signHeaders, signatureOf, verify } from '../../server/webhooks/sign';
import { PRODUCTION_SCHEDULE_MS, nextDelayMs, parseRetryAfter, retryPolicy } from '../../server/webhooks/schedule';
import { deliver, guardedLookup } from '../../server/webhooks/deliver';

/**
 * The Standard Webhooks / Svix reference vector (it appears in the Svix libraries' own tests, e.g. the
 * PHP library's testSignFunctionWorks): a signature computed by their implementation, not by ours.
 */
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

describe('webhook signatures', () => {
  it('reproduces the Standard Webhooks reference vector', () => {
    expect(signatureOf(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body)).toBe(VECTOR.signature);
    expect(signHeaders([VECTOR.secret], VECTOR.id, VECTOR.timestamp, VECTOR.body)).toEqual({
      'webhook-id': VECTOR.id,
      'webhook-timestamp': '1614265330',
      'webhook-signature': VECTOR.signature,
    });
  });

  const vectorHeaders = { 'webhook-id': VECTOR.id, 'webhook-timestamp': String(VECTOR.timestamp), 'webhook-signature': VECTOR.signature };

  it('verifies the vector, with any header case and with the svix- aliases', () => {
    const ok = { verified: true, reason: null, matched: 0, timestamp_ok: true };
    expect(verify([VECTOR.secret], vectorHeaders, VECTOR.body, VECTOR.timestamp + 10)).toEqual(ok);
    const upper = { 'Webhook-Id': VECTOR.id, 'WEBHOOK-TIMESTAMP': String(VECTOR.timestamp), 'Webhook-Signature': VECTOR.signature };
    expect(verify([VECTOR.secret], upper, VECTOR.body, VECTOR.timestamp)).toEqual(ok);
    const svix = { 'svix-id': VECTOR.id, 'svix-timestamp': String(VECTOR.timestamp), 'svix-signature': `v1a,xyz ${VECTOR.signature}` };
    expect(verify([VECTOR.secret], svix, VECTOR.body, VECTOR.timestamp)).toEqual(ok);
  });

  it('fails a tampered body or header', () => {
    const r = verify([VECTOR.secret], vectorHeaders, '{"test": 2432232315}', VECTOR.timestamp);
    expect(r).toMatchObject({ verified: false, matched: null, timestamp_ok: true });
    expect(r.reason).toMatch(/^no signature matches the tenant’s secret/);
    const otherId = verify([VECTOR.secret], { ...vectorHeaders, 'webhook-id': 'msg_other' }, VECTOR.body, VECTOR.timestamp);
    expect(otherId.verified).toBe(false);
  });

  it('verifies with the previous secret during a rotation (matched = 1)', () => {
    const current = newWebhookSecret();
    const signed = signHeaders([current, VECTOR.secret], 'msg_1', 1_700_000_000, '{}');
    expect(signed['webhook-signature'].split(' ')).toHaveLength(2);
    // A receiver that still only knows the old secret…
    expect(verify([VECTOR.secret], signed, '{}', 1_700_000_000)).toMatchObject({ verified: true, matched: 0 });
    // …and one that knows a secret it does not match first.
    expect(verify([newWebhookSecret(), VECTOR.secret], signed, '{}', 1_700_000_000)).toMatchObject({ verified: true, matched: 1 });
    expect(verify([newWebhookSecret()], signed, '{}', 1_700_000_000).verified).toBe(false);
  });

  it('fails a stale timestamp even with a matching signature', () => {
    const r = verify([VECTOR.secret], vectorHeaders, VECTOR.body, VECTOR.timestamp + 712);
    expect(r).toEqual({
      verified: false,
      reason: 'timestamp is 712 s away from now (tolerance 300 s)',
      matched: 0,
      timestamp_ok: false,
    });
    expect(verify([VECTOR.secret], vectorHeaders, VECTOR.body, VECTOR.timestamp - 301).timestamp_ok).toBe(false);
    expect(verify([VECTOR.secret], vectorHeaders, VECTOR.body, VECTOR.timestamp + 712, 1000).verified).toBe(true);
  });

  it('names a missing header', () => {
    const { 'webhook-id': _id, ...noId } = vectorHeaders;
    expect(verify([VECTOR.secret], noId, VECTOR.body, VECTOR.timestamp).reason).toBe('missing webhook-id header');
    const { 'webhook-signature': _sig, ...noSig } = vectorHeaders;
    expect(verify([VECTOR.secret], noSig, VECTOR.body, VECTOR.timestamp).reason).toBe('missing webhook-signature header');
    expect(verify([VECTOR.secret], { ...vectorHeaders, 'webhook-timestamp': 'soon' }, VECTOR.body, 0).verified).toBe(false);
  });
});

describe('retry schedule', () => {
  const fixed = (r: number) => retryPolicy({ jitter: 0.2, random: () => r });

  it('starts at once, follows the schedule and gives up after 10 attempts', () => {
    const noJitter = retryPolicy({ jitter: 0 });
    expect(PRODUCTION_SCHEDULE_MS).toHaveLength(10);
    expect(nextDelayMs(0, fixed(0.9), null)).toBe(0);
    const delays = PRODUCTION_SCHEDULE_MS.map((_, i) => nextDelayMs(i, noJitter, null));
    expect(delays).toEqual([...PRODUCTION_SCHEDULE_MS]);
    expect(nextDelayMs(10, noJitter, null)).toBeNull();
    expect(nextDelayMs(11, noJitter, null)).toBeNull();
  });

  it('scales the schedule for QA', () => {
    expect(nextDelayMs(2, retryPolicy({ scale: 0.001, jitter: 0 }), null)).toBe(300);
    expect(nextDelayMs(9, retryPolicy({ scale: 0.001, jitter: 0 }), null)).toBe(86_400);
  });

  it('jitters within ±jitter', () => {
    expect(nextDelayMs(2, fixed(0), null)).toBe(240_000);
    expect(nextDelayMs(2, fixed(0.5), null)).toBe(300_000);
    expect(nextDelayMs(2, fixed(0.999_999), null)).toBe(360_000);
    const random = retryPolicy();
    for (let i = 0; i < 200; i++) {
      const d = nextDelayMs(1, random, null)!;
      expect(d).toBeGreaterThanOrEqual(4_000);
      expect(d).toBeLessThanOrEqual(6_000);
    }
  });

  it('waits for Retry-After when it asks for longer than the schedule, never less', () => {
    expect(nextDelayMs(1, fixed(0.5), 60_000)).toBe(60_000); // 5 s scheduled, receiver asked for 60 s
    expect(nextDelayMs(1, fixed(0), 60_000)).toBe(60_000); // jitter does not go below what was asked
    expect(nextDelayMs(1, fixed(0.999_999), 60_000)).toBe(72_000);
    expect(nextDelayMs(2, fixed(0.5), 60_000)).toBe(300_000); // the schedule is longer: it wins
    expect(nextDelayMs(1, retryPolicy({ scale: 0.001, jitter: 0 }), 60_000)).toBe(60);
  });

  it('parses Retry-After as seconds or an HTTP-date', () => {
    const now = new Date('2024-05-01T12:00:00Z');
    expect(parseRetryAfter(undefined, now)).toBeNull();
    expect(parseRetryAfter('', now)).toBeNull();
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter('1.5', now)).toBeNull();
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('-5', now)).toBe(0);
    expect(parseRetryAfter('999999', now)).toBe(86_400_000);
    expect(parseRetryAfter('Wed, 01 May 2024 12:01:30 GMT', now)).toBe(90_000);
    expect(parseRetryAfter('Wednesday, 01-May-24 12:01:30 GMT', now)).toBe(90_000);
    expect(parseRetryAfter('Wed May  1 12:01:30 2024', now)).toBe(90_000);
    expect(parseRetryAfter('Wed, 01 May 2024 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('Wed, 01 May 2030 11:00:00 GMT', now)).toBe(86_400_000);
    expect(parseRetryAfter('Wed, 01 Foo 2024 12:01:30 GMT', now)).toBeNull();
  });
});

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A loopback receiver on port 0 that records every request and answers with `handler`. */
async function receiver(handler: (req: IncomingMessage, res: ServerResponse) => void = (_q, s) => s.end('ok')) {
  const requests: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      handler(req, res);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const port = (server.address() as AddressInfo).port;
  const close = () =>
    new Promise<void>((ok) => {
      server.closeAllConnections();
      server.close(() => ok());
    });
  cleanups.push(close);
  return { port, url: `http://127.0.0.1:${port}/hook?x=1`, requests, close };
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

const BODY = JSON.stringify({ type: 'invocation.completed', data: { id: 'inv_1', text: 'héllo ✓' } });

describe('deliver', () => {
  it('POSTs the body and headers exactly, and reports a 2xx as ok', async () => {
    const r = await receiver((_q, s) => s.writeHead(204).end());
    const secret = newWebhookSecret();
    const ts = Math.floor(Date.now() / 1000);
    const signed = signHeaders([secret], 'msg_abc', ts, BODY);
    const attempt = await deliver({ url: r.url, headers: signed, body: BODY });
    expect(attempt).toMatchObject({ status_code: 204, ok: true, final: false, error: null, retry_after_ms: null });
    expect(attempt.duration_ms).toBeGreaterThanOrEqual(0);
    expect(r.requests).toHaveLength(1);
    const got = r.requests[0]!;
    expect(got.method).toBe('POST');
    expect(got.url).toBe('/hook?x=1');
    expect(got.body).toBe(BODY);
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['user-agent']).toBe('svc-emu-webhooks/1');
    expect(got.headers['content-length']).toBe(String(Buffer.byteLength(BODY)));
    expect(got.headers['webhook-id']).toBe('msg_abc');
    expect(got.headers['webhook-timestamp']).toBe(String(ts));
    expect(got.headers['webhook-signature']).toBe(signed['webhook-signature']);
    // What the receiver got verifies with the receiver-side check.
    expect(verify([secret], got.headers, got.body, ts).verified).toBe(true);
  });

  it('reports a 500 as a retryable failure', async () => {
    const r = await receiver((_q, s) => s.writeHead(500).end('boom'));
    expect(await deliver({ url: r.url, headers: {}, body: BODY })).toMatchObject({ status_code: 500, ok: false, final: false });
  });

  it('reports 410 Gone as final', async () => {
    const r = await receiver((_q, s) => s.writeHead(410).end());
    expect(await deliver({ url: r.url, headers: {}, body: BODY })).toMatchObject({ status_code: 410, ok: false, final: true });
  });

  it('does not follow a redirect', async () => {
    const target = await receiver();
    const r = await receiver((_q, s) => s.writeHead(302, { location: target.url }).end());
    const attempt = await deliver({ url: r.url, headers: {}, body: BODY });
    expect(attempt).toMatchObject({ status_code: 302, ok: false, final: false, error: 'redirects are not followed (3xx answered)' });
    expect(r.requests).toHaveLength(1);
    expect(target.requests).toHaveLength(0);
  });

  it('reads Retry-After', async () => {
    const r = await receiver((_q, s) => s.writeHead(429, { 'retry-after': '30' }).end());
    expect(await deliver({ url: r.url, headers: {}, body: BODY })).toMatchObject({ status_code: 429, ok: false, retry_after_ms: 30_000 });
  });

  it('reads at most 64 KiB of a large answer', async () => {
    const r = await receiver((_q, s) => {
      s.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 'x');
      const pump = () => {
        while (!s.destroyed && s.write(chunk));
        if (!s.destroyed) s.once('drain', pump);
      };
      pump();
    });
    const attempt = await deliver({ url: r.url, headers: {}, body: BODY, timeoutMs: 2_000 });
    expect(attempt).toMatchObject({ status_code: 200, ok: true, error: null });
  });

  it('gives up on a slow receiver at the deadline', async () => {
    const r = await receiver(() => {
      /* never answers */
    });
    const attempt = await deliver({ url: r.url, headers: {}, body: BODY, timeoutMs: 200 });
    expect(attempt).toMatchObject({ status_code: null, ok: false, final: false, error: 'no answer within 0.2 s' });
    expect(attempt.duration_ms).toBeGreaterThanOrEqual(150);
    expect(attempt.duration_ms).toBeLessThan(2_000);
  });

  it('gives up on an answer whose body never ends, keeping its status', async () => {
    const r = await receiver((_q, s) => {
      s.writeHead(200);
      s.write('partial');
    });
    const attempt = await deliver({ url: r.url, headers: {}, body: BODY, timeoutMs: 200 });
    expect(attempt).toMatchObject({ status_code: 200, ok: false, final: false });
    expect(attempt.error).toBe('no complete answer within 0.2 s (the body was still arriving)');
  });

  it('reports a refused connection', async () => {
    const r = await receiver();
    await r.close();
    const attempt = await deliver({ url: r.url, headers: {}, body: BODY });
    expect(attempt).toMatchObject({ status_code: null, ok: false, final: false, error: 'connection refused (ECONNREFUSED)' });
  });

  it('refuses a non-http URL as final', async () => {
    expect(await deliver({ url: 'file:///etc/passwd', headers: {}, body: BODY })).toMatchObject({ ok: false, final: true });
    expect(await deliver({ url: 'not a url', headers: {}, body: BODY })).toMatchObject({ ok: false, final: true });
  });

  const noLoopback = (address: string) =>
    address === '127.0.0.1' || address === '::1' ? `refused: ${address} is a loopback address` : null;

  it('lets the guard refuse an IP-literal host before any request', async () => {
    const r = await receiver();
    const seen: Array<[string, string, number]> = [];
    const attempt = await deliver({
      url: r.url,
      headers: {},
      body: BODY,
      guard: (a, h, p) => (seen.push([a, h, p]), noLoopback(a)),
    });
    expect(attempt).toMatchObject({ status_code: null, ok: false, final: true, error: 'refused: 127.0.0.1 is a loopback address' });
    expect(seen).toEqual([['127.0.0.1', '127.0.0.1', r.port]]);
    expect(r.requests).toHaveLength(0);
  });

  it('checks an IPv6 literal without its brackets', async () => {
    const attempt = await deliver({ url: 'http://[::1]:9/hook', headers: {}, body: BODY, guard: noLoopback });
    expect(attempt).toMatchObject({ final: true, error: 'refused: ::1 is a loopback address' });
  });

  it('lets the guard refuse a host name through the lookup', async () => {
    const r = await receiver();
    const seen: string[] = [];
    const attempt = await deliver({
      url: `http://localhost:${r.port}/hook`,
      headers: {},
      body: BODY,
      guard: (a, h, p) => (seen.push(`${a} ${h} ${p}`), noLoopback(a)),
    });
    expect(attempt).toMatchObject({ status_code: null, ok: false, final: true });
    expect(attempt.error).toMatch(/^refused: (127\.0\.0\.1|::1) is a loopback address$/);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((s) => s.endsWith(` localhost ${r.port}`))).toBe(true);
    expect(r.requests).toHaveLength(0);
  });

  it('connects through the lookup when the guard allows every address', async () => {
    const r = await receiver();
    const attempt = await deliver({ url: `http://localhost:${r.port}/hook`, headers: {}, body: BODY, guard: () => null });
    // Should localhost also resolve to ::1 where nothing listens, Node tries the next (checked) address.
    expect(attempt).toMatchObject({ status_code: 200, ok: true });
    expect(r.requests).toHaveLength(1);
  });
});

describe('guardedLookup', () => {
  const addrs = [
    { address: '203.0.113.7', family: 4 },
    { address: '10.0.0.1', family: 4 },
  ];
  const resolveAll = (_h: string, _f: unknown, cb: (e: NodeJS.ErrnoException | null, a: typeof addrs) => void) => cb(null, addrs);

  it('answers both call shapes when every address is allowed', async () => {
    const lookup = guardedLookup(() => null, 443, resolveAll);
    const all = await new Promise((ok) => lookup('example.test', { all: true }, (e, a) => ok([e, a])));
    expect(all).toEqual([null, addrs]);
    const one = await new Promise((ok) => lookup('example.test', {}, (e, a, f) => ok([e, a, f])));
    expect(one).toEqual([null, '203.0.113.7', 4]);
  });

  it('refuses when any address is refused', async () => {
    const lookup = guardedLookup((a) => (a.startsWith('10.') ? 'private address' : null), 443, resolveAll);
    const err = await new Promise<NodeJS.ErrnoException | null>((ok) => lookup('example.test', {}, (e) => ok(e)));
    expect(err).toMatchObject({ code: 'EGRESS_REFUSED', message: 'private address' });
  });
});
