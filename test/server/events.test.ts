import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestCore, tempDir, type Res, type TestCore } from '../helpers/core';
import { parseSse, type SseEvent } from '../../contract/sse';
import type { EmuEvent } from '../../contract/schemas/events';
import { followEvents, parseEmuFrame } from '../../contract/events-client';

/**
 * The live event feed, GET /_emu/events, on a real core: what a reader gets (replay, reset, filter), that
 * leaving releases everything, and that every change publishes its event (server/events/bus.ts).
 */

let core: TestCore;
/** Listeners of the bus with no feed open (the core's own, if any). */
let baseline = 0;

beforeAll(async () => {
  core = await startTestCore({ config: { streamPingMs: 200 } });
  baseline = core.emu.events.listenerCount;
});
afterAll(async () => {
  await core?.stop();
});

/** An open feed: raw text as it arrives, parsed frames, and a way to wait for one. */
interface Feed {
  frames: SseEvent[];
  /** Date.now() when each frame was parsed (same index as frames). */
  arrivals: number[];
  raw: () => string;
  comments: string[];
  /** The first frame (from `from` on) that matches, within `ms`. */
  next(match: (f: SseEvent) => boolean, ms?: number, from?: number): Promise<SseEvent>;
  close(): void;
  done: Promise<void>;
}

function openFeed(query = '', headers: Record<string, string> = {}): Promise<Feed> {
  return openFeedAt(core, query, headers);
}

async function openFeedAt(at: TestCore, query = '', headers: Record<string, string> = {}): Promise<Feed> {
  const ac = new AbortController();
  const res = await fetch(`${at.url}/_emu/events${query}`, {
    headers: { authorization: `Bearer ${at.admin}`, accept: 'text/event-stream', ...headers },
    signal: ac.signal,
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const frames: SseEvent[] = [];
  const arrivals: number[] = [];
  const comments: string[] = [];
  let text = '';
  const waiters = new Set<() => void>();
  const decoder = new TextDecoder();
  const tee = async function* () {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      yield chunk;
    }
  };
  const done = (async () => {
    try {
      for await (const f of parseSse(tee(), { onComment: (c) => comments.push(c) })) {
        frames.push(f);
        arrivals.push(Date.now());
        for (const w of waiters) w();
      }
    } catch {
      // aborted by close()
    }
  })();
  return {
    frames,
    arrivals,
    comments,
    raw: () => text,
    done,
    close: () => ac.abort(),
    next(match, ms = 5_000, from = 0) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const f = frames.slice(from).find(match);
          if (f) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(f);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching frame within ${ms} ms; got ${frames.map((f) => f.event).join(', ')}`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
  };
}

const body = (f: SseEvent) => JSON.parse(f.data) as EmuEvent;

async function until(cond: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('GET /_emu/events', () => {
  it('needs the admin token', async () => {
    const res = await fetch(`${core.url}/_emu/events`);
    expect(res.status).toBe(401);
    const bad = await fetch(`${core.url}/_emu/events`, { headers: { authorization: `Bearer ${core.key}` } });
    expect(bad.status).toBe(401);
  });

  it('sends each published event as a frame whose id and type match its envelope', async () => {
    const feed = await openFeed();
    const sent = core.emu.events.publish('environment.created', { tenant_id: 't_x', env: 'qa-feed' });
    const f = await feed.next((x) => x.event === 'environment.created');
    expect(f.id).toBe(sent.id);
    expect(body(f)).toEqual(sent);
    feed.close();
  });

  it('pings while silent and lets go of its listener when the reader leaves', async () => {
    // Feeds of earlier tests are let go of first (their close reaches the core asynchronously).
    await until(() => core.emu.events.listenerCount === baseline);
    const before = baseline;
    const feed = await openFeed();
    await until(() => core.emu.events.listenerCount === before + 1);
    await until(() => feed.comments.includes('ping'), 3_000);
    feed.close();
    await feed.done;
    await until(() => core.emu.events.listenerCount === before);
  });

  it('serves any number of readers at once, each every event, and lets go of all of them', async () => {
    await until(() => core.emu.events.listenerCount === baseline);
    const feeds = await Promise.all(Array.from({ length: 40 }, () => openFeed('?types=environment.created')));
    await until(() => core.emu.events.listenerCount === baseline + feeds.length);
    const sent = [1, 2, 3].map((i) => core.emu.events.publish('environment.created', { tenant_id: 't_x', env: `many${i}` }).id);
    await Promise.all(feeds.map((f) => f.next((x) => x.id === sent[2])));
    for (const f of feeds) expect(f.frames.map((x) => x.id)).toEqual(sent);
    for (const f of feeds) f.close();
    await Promise.all(feeds.map((f) => f.done));
    await until(() => core.emu.events.listenerCount === baseline);
  });

  it('replays exactly what a reader missed after its Last-Event-ID', async () => {
    const first = core.emu.events.publish('environment.created', { tenant_id: 't_x', env: 'r0' });
    const missed = [1, 2, 3].map((i) => core.emu.events.publish('environment.created', { tenant_id: 't_x', env: `r${i}` }));
    const feed = await openFeed('', { 'last-event-id': first.id });
    await until(() => feed.frames.length >= missed.length);
    expect(feed.frames.map((f) => f.id)).toEqual(missed.map((e) => e.id));
    const live = core.emu.events.publish('environment.created', { tenant_id: 't_x', env: 'r4' });
    expect((await feed.next((f) => f.id === live.id)).event).toBe('environment.created');
    expect(feed.frames.filter((f) => f.event === 'reset')).toEqual([]);
    feed.close();
  });

  it('answers an id of another start of the core with one reset, then follows', async () => {
    const feed = await openFeed('', { 'last-event-id': 'deadbeef-12' });
    const reset = await feed.next((f) => f.event === 'reset');
    expect(JSON.parse(reset.data)).toEqual({ reason: 'other_boot', latest: core.emu.events.latest() });
    // Its id resumes at this start of the core: a reconnect with it is not reset again.
    expect(reset.id).toBe(core.emu.events.latest());
    const live = core.emu.events.publish('environment.created', { tenant_id: 't_x', env: 'after-reset' });
    await feed.next((f) => f.id === live.id);
    expect(feed.frames.filter((f) => f.event === 'reset')).toHaveLength(1);
    feed.close();
    const bad = await openFeed('', { 'last-event-id': 'not-an-id' });
    expect(JSON.parse((await bad.next((f) => f.event === 'reset')).data).reason).toBe('bad_id');
    bad.close();
  });

  it('cuts off a reader that stopped reading, instead of buffering for it without end', async () => {
    await until(() => core.emu.events.listenerCount === baseline);
    const u = new URL(core.url);
    const sock = connect({ host: u.hostname, port: Number(u.port) });
    await new Promise<void>((r) => sock.once('connect', r));
    sock.write(`GET /_emu/events HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${core.admin}\r\n\r\n`);
    await until(() => core.emu.events.listenerCount === baseline + 1);
    sock.pause(); // reads nothing more: the kernel's buffers fill, then the core's
    const big = 'x'.repeat(16 * 1024);
    try {
      for (let i = 0; i < 2_000 && core.emu.events.listenerCount > baseline; i++) {
        core.emu.events.publish('environment.created', { tenant_id: 't_x', env: big });
        if (i % 50 === 0) await new Promise((r) => setTimeout(r, 5));
      }
      await until(() => core.emu.events.listenerCount === baseline);
    } finally {
      sock.destroy();
    }
  });

  it('keeps only the types asked for (exact or prefix*)', async () => {
    const feed = await openFeed('?types=secret.changed,store.*');
    core.emu.events.publish('environment.created', { tenant_id: 't_x', env: 'filtered-out' });
    core.emu.events.publish('store.changed', { tenant_id: 't_x', key: 'k', deleted: false });
    core.emu.events.publish('secret.changed', { tenant_id: 't_x', name: 'N', deleted: true });
    await feed.next((f) => f.event === 'secret.changed');
    expect(feed.frames.map((f) => f.event)).toEqual(['store.changed', 'secret.changed']);
    feed.close();
    // A replay the filter empties writes nothing: the first bytes are still sent at once (headers with them).
    const mark = core.emu.events.publish('environment.created', { tenant_id: 't_x', env: 'mark' });
    core.emu.events.publish('environment.created', { tenant_id: 't_x', env: 'not-a-store-event' });
    const quiet = await openFeed('?types=store.changed', { 'last-event-id': mark.id });
    await until(() => quiet.comments.length > 0);
    expect(quiet.comments[0]).toBe('open');
    expect(quiet.frames).toEqual([]);
    quiet.close();
    const bad = await fetch(`${core.url}/_emu/events?types=Bad Type`, { headers: { authorization: `Bearer ${core.admin}` } });
    expect(bad.status).toBe(400);
  });
});

describe('followEvents (contract/events-client.ts)', () => {
  it('yields typed events and, after a dropped connection, resumes with Last-Event-ID without losing or repeating one', async () => {
    const ac = new AbortController();
    const asked: (string | null)[] = [];
    let connections = 0;
    // The first connection breaks after its first frame, as a network drop would: the core sees a close.
    const dropping: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      asked.push(new Headers(init?.headers).get('last-event-id'));
      if (++connections > 1 || !res.body) return res;
      const reader = res.body.getReader();
      const body = new ReadableStream<Uint8Array>({
        async pull(ctl) {
          const r = await reader.read();
          if (r.done) return ctl.close();
          ctl.enqueue(r.value);
          if (new TextDecoder().decode(r.value).includes('event: ')) {
            await reader.cancel();
            ctl.error(new Error('connection reset'));
          }
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const states: string[] = [];
    const missed: string[] = [];
    const got: EmuEvent[] = [];
    const it = followEvents(
      { baseUrl: core.url, adminToken: core.admin, fetch: dropping },
      {
        types: ['environment.created'],
        signal: ac.signal,
        minRetryMs: 50,
        onState: (s) => {
          states.push(s.state);
          // Published while the reader is away: it must still get them, once each.
          if (s.state === 'retrying' && missed.length === 0)
            for (const i of [1, 2, 3]) missed.push(core.emu.events.publish('environment.created', { tenant_id: 't_f', env: `gap${i}` }).id);
        },
      },
    );
    const readAll = (async () => {
      for await (const e of it) {
        got.push(e);
        if (got.length === 5) ac.abort();
      }
    })();
    await until(() => states.includes('open'));
    const first = core.emu.events.publish('environment.created', { tenant_id: 't_f', env: 'before' });
    await until(() => missed.length === 3);
    await until(() => states.filter((s) => s === 'open').length === 2);
    const last = core.emu.events.publish('environment.created', { tenant_id: 't_f', env: 'after' });
    await readAll;
    expect(got.map((e) => e.id)).toEqual([first.id, ...missed, last.id]);
    expect(got[0]).toMatchObject({ type: 'environment.created', data: { env: 'before' } });
    expect(asked).toEqual([null, first.id]);
    await until(() => core.emu.events.listenerCount === baseline);
  });

  it('after a restart of the core, an id of the earlier start calls onReset once, then follows the new start', async () => {
    const dataDir = await tempDir('svc-emu-events-restart-');
    let first: TestCore | null = await startTestCore({ dataDir });
    let second: TestCore | null = null;
    try {
      const old = first.emu.events.publish('environment.created', { tenant_id: 't_r', env: 'before-restart' });
      await first.stop();
      first = null;
      second = await startTestCore({ dataDir });
      const ac = new AbortController();
      const resets: unknown[] = [];
      const got: EmuEvent[] = [];
      const reading = (async () => {
        for await (const e of followEvents(
          { baseUrl: second.url, adminToken: second.admin },
          { lastEventId: old.id, signal: ac.signal, types: 'environment.created', onReset: (r) => void resets.push(r) },
        )) {
          got.push(e);
          ac.abort();
        }
      })();
      await until(() => resets.length === 1);
      const fresh = second.emu.events.publish('environment.created', { tenant_id: 't_r', env: 'after-restart' });
      await reading;
      // `latest` is this start's newest id when the reader came (null here: nothing had happened yet).
      expect(resets).toEqual([{ reason: 'other_boot', latest: null }]);
      expect(got.map((e) => e.id)).toEqual([fresh.id]);
      expect(fresh.id.split('-')[0]).not.toBe(old.id.split('-')[0]);
    } finally {
      await first?.stop();
      await second?.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('throws the refusal when retrying cannot help (a bad token)', async () => {
    const it = followEvents({ baseUrl: core.url, adminToken: 'emu_wrong' });
    await expect(it.next()).rejects.toMatchObject({ name: 'ProblemError', status: 401 });
  });
});

const ok = async (p: Promise<Res>, status = 200) => {
  const r = await p;
  expect(r.status, r.text).toBe(status);
  return r;
};

/** The snippet the publisher tests run: stores a key, fetches a URL or sleeps, as its input says. */
const EVT_CODE = [
  'import { store } from "@svc/store";',
  'export default async function handler(input) {',
  '  if (input.store) await store.set(input.store, { secret: "store-VALUE-from-snippet" });',
  '  if (input.fetch) return { got: await (await fetch(input.fetch)).text() };',
  '  if (input.sleep) await new Promise((r) => setTimeout(r, input.sleep));',
  '  return { ok: true };',
  '}',
  '',
].join('\n');

describe('every change publishes its event (real API, loader, inbox, egress)', () => {
  let wcore: TestCore;
  let workspace: string;
  let feed: Feed;
  /** Milliseconds from the start of each change to its event's arrival at a feed reader. */
  const latency: Record<string, number[]> = {};
  let upstream: Server;
  let upstreamUrl = '';

  beforeAll(async () => {
    workspace = await tempDir('svc-emu-events-ws-');
    await mkdir(join(workspace, 'snippets'), { recursive: true });
    wcore = await startTestCore({ workspace, config: { callbackRetryScale: 0.001, streamPingMs: 1_000 } });
    upstream = createServer((_req, res) => res.end('upstream says hi'));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/hello`;
    feed = await openFeedAt(wcore);
    await ok(wcore.call('POST', '/v1/snippets', { name: 'evt', runtime: 'bun' }), 201);
    await ok(wcore.call('POST', '/v1/snippets/evt/versions', { code: EVT_CODE }), 201);
  });
  afterAll(async () => {
    // Every frame the feed carried matches the contract (contract/schemas/events.ts).
    const frames = feed?.frames ?? [];
    const bad = frames.map((f) => ({ f, p: parseEmuFrame(f.event, f.data) })).filter((x) => x.p.kind !== 'event');
    const publishToRead = frames.map((f, i) => feed.arrivals[i]! - Date.parse((JSON.parse(f.data) as EmuEvent).at));
    feed?.close();
    await wcore?.stop();
    upstream?.close();
    await rm(workspace, { recursive: true, force: true });
    const rows = Object.entries(latency).map(([type, ms]) => `${type}: ${ms.map((m) => m.toFixed(1)).join(', ')} ms`);
    console.log(`change → event latency (request start to frame read):\n  ${rows.join('\n  ')}`);
    const sorted = [...publishToRead].sort((a, b) => a - b);
    console.log(
      `publish → frame read over ${sorted.length} events: median ${sorted[Math.floor(sorted.length / 2)]} ms, max ${sorted.at(-1)} ms`,
    );
    expect(bad.map((x) => `${x.f.event}: ${x.f.data}`)).toEqual([]);
  });

  /** Runs a change and waits for the event it should publish; records the latency. */
  async function expectEvent<T extends EmuEvent['type']>(
    type: T,
    match: (data: Extract<EmuEvent, { type: T }>['data']) => boolean,
    change: () => Promise<unknown>,
    ms = 15_000,
  ): Promise<Extract<EmuEvent, { type: T }>> {
    const from = feed.frames.length;
    const t0 = performance.now();
    await change();
    const f = await feed.next((x) => x.event === type && match((JSON.parse(x.data) as { data: never }).data), ms, from);
    (latency[type] ??= []).push(performance.now() - t0);
    return JSON.parse(f.data) as Extract<EmuEvent, { type: T }>;
  }
  /** Resolves at the first frame arriving after now that matches. */
  const upcoming = <T extends EmuEvent['type']>(type: T, match: (data: Extract<EmuEvent, { type: T }>['data']) => boolean, ms = 15_000) => {
    const from = feed.frames.length;
    return feed
      .next((x) => x.event === type && match((JSON.parse(x.data) as { data: never }).data), ms, from)
      .then((f) => JSON.parse(f.data) as Extract<EmuEvent, { type: T }>);
  };

  it('snippets, versions, deployments and environments', async () => {
    const created = await expectEvent(
      'snippet.created',
      (d) => d.snippet === 'evt2',
      () => ok(wcore.call('POST', '/v1/snippets', { name: 'evt2', runtime: 'bun' }), 201),
    );
    expect(created.data).toMatchObject({ snippet: 'evt2', runtime: 'bun', tenant_id: expect.stringMatching(/^ten_/) });
    const v = await expectEvent(
      'version.created',
      (d) => d.snippet === 'evt2',
      () => ok(wcore.call('POST', '/v1/snippets/evt2/versions', { code: EVT_CODE }), 201),
    );
    expect(v.data).toMatchObject({ version: 1, source: 'api', snippet_id: created.data.snippet_id });
    const dep = await expectEvent(
      'deployment.changed',
      (d) => d.snippet === 'evt2',
      () => ok(wcore.call('PUT', '/v1/snippets/evt2/environments/dev', { version: 1 })),
    );
    expect(dep.data).toMatchObject({ env: 'dev', version: 1 });
    const undeployed = await expectEvent(
      'deployment.changed',
      (d) => d.snippet === 'evt2' && d.version === null,
      () => ok(wcore.call('DELETE', '/v1/snippets/evt2/environments/dev'), 204),
    );
    expect(undeployed.data.env).toBe('dev');
    const env = await expectEvent(
      'environment.created',
      (d) => d.env === 'qa',
      () => ok(wcore.call('POST', '/v1/environments', { name: 'qa' }), 201),
    );
    expect(env.data.tenant_id).toBe(created.data.tenant_id);
  });

  it('invocations in every mode: created, started, finished (summary only)', async () => {
    /** The event of this type for this invocation, among the frames from `from` on. */
    const of = async <T extends 'invocation.created' | 'invocation.started' | 'invocation.finished'>(type: T, id: string, from: number) =>
      JSON.parse(
        (await feed.next((x) => x.event === type && (JSON.parse(x.data) as { data: { id: string } }).data.id === id, 15_000, from)).data,
      ) as Extract<EmuEvent, { type: T }>;
    let from = feed.frames.length;
    const t0 = performance.now();
    const r = await ok(wcore.call('POST', '/v1/invoke/evt', { hello: 'input-VALUE-never-in-events' }));
    const id = r.headers.get('x-invocation-id')!;
    expect((await of('invocation.created', id, from)).data).toMatchObject({ id, mode: 'sync', status: 'running', outcome: null });
    expect((await of('invocation.started', id, from)).data.id).toBe(id);
    const fin = await of('invocation.finished', id, from);
    (latency['invocation.finished'] ??= []).push(performance.now() - t0);
    expect(fin.data).toMatchObject({ id, status: 'succeeded', outcome: 'success', error: null, version: 1, env: null });
    expect(fin.data.duration_ms).toEqual(expect.any(Number));

    // stream
    from = feed.frames.length;
    const s = await wcore.call('POST', '/v1/invoke/evt', {}, { headers: { 'x-invoke-mode': 'stream' } });
    expect(s.status).toBe(200);
    const sid = s.headers.get('x-invocation-id')!;
    expect((await of('invocation.created', sid, from)).data.mode).toBe('stream');
    expect((await of('invocation.finished', sid, from)).data).toMatchObject({ mode: 'stream', outcome: 'success' });

    // async: queued, then the worker starts it and finishes it
    from = feed.frames.length;
    const a = await ok(wcore.call('POST', '/v1/invoke/evt', {}, { headers: { 'x-invoke-mode': 'async' } }), 202);
    const aid = a.json.invocation_id as string;
    expect((await of('invocation.created', aid, from)).data).toMatchObject({ mode: 'async', status: 'queued' });
    expect((await of('invocation.started', aid, from)).data).toMatchObject({ status: 'running' });
    expect((await of('invocation.finished', aid, from)).data).toMatchObject({ status: 'succeeded', outcome: 'success' });

    // a failure says its code
    from = feed.frames.length;
    const t = await wcore.call(
      'POST',
      '/v1/invoke/evt',
      { sleep: 5_000 },
      { headers: { 'x-emu-limits': 'timeout_ms=200', 'x-emu-admin': wcore.admin } },
    );
    expect(t.status, t.text).toBe(504);
    const tid = t.headers.get('x-invocation-id')!;
    expect((await of('invocation.finished', tid, from)).data).toMatchObject({
      status: 'failed',
      outcome: 'timeout',
      error: { code: 'timeout' },
    });

    // a cancelled running job
    from = feed.frames.length;
    const b = await ok(wcore.call('POST', '/v1/invoke/evt', { sleep: 20_000 }, { headers: { 'x-invoke-mode': 'async' } }), 202);
    const bid = b.json.invocation_id as string;
    await of('invocation.started', bid, from);
    const cancelled = await expectEvent(
      'invocation.finished',
      (d) => d.id === bid,
      () => ok(wcore.call('POST', `/v1/invocations/${bid}/cancel`), 202),
    );
    expect(cancelled.data).toMatchObject({ outcome: 'cancelled', status: 'failed' });
    expect(feed.raw()).not.toContain('input-VALUE-never-in-events');
  });

  it('a queued async job cancelled before it starts: finished (cancelled), never started', async () => {
    // One slot for the tenant: the first job holds it, the second waits in the queue.
    await ok(wcore.call('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 1 }, { key: wcore.admin }));
    try {
      const holding = upcoming('invocation.started', (d) => d.mode === 'async');
      const first = await ok(wcore.call('POST', '/v1/invoke/evt', { sleep: 20_000 }, { headers: { 'x-invoke-mode': 'async' } }), 202);
      await holding;
      const second = await ok(wcore.call('POST', '/v1/invoke/evt', {}, { headers: { 'x-invoke-mode': 'async' } }), 202);
      const qid = second.json.invocation_id as string;
      const from = feed.frames.length;
      const cancelled = await expectEvent(
        'invocation.finished',
        (d) => d.id === qid,
        () => ok(wcore.call('POST', `/v1/invocations/${qid}/cancel`), 202),
      );
      expect(cancelled.data).toMatchObject({ status: 'failed', outcome: 'cancelled', error: { code: 'cancelled' }, duration_ms: null });
      await expectEvent(
        'invocation.finished',
        (d) => d.id === first.json.invocation_id,
        () => ok(wcore.call('POST', `/v1/invocations/${first.json.invocation_id as string}/cancel`), 202),
      );
      const startedQueued = feed.frames
        .slice(from)
        .filter((f) => f.event === 'invocation.started' && (JSON.parse(f.data) as { data: { id: string } }).data.id === qid);
      expect(startedQueued).toEqual([]);
    } finally {
      await ok(wcore.call('PATCH', '/_emu/tenants/local/limits', { max_concurrency: 10 }, { key: wcore.admin }));
    }
  });

  it('callback attempts and inbox deliveries', async () => {
    const delivered = upcoming('inbox.delivery', (d) => d.inbox === 'evt-hooks');
    const attempt = upcoming('callback.attempt', (d) => d.url.includes('evt-hooks'));
    const r = await ok(
      wcore.call(
        'POST',
        '/v1/invoke/evt',
        { callback_url: `${wcore.url}/_emu/inbox/evt-hooks` },
        { headers: { 'x-invoke-mode': 'async' } },
      ),
      202,
    );
    expect((await delivered).data).toMatchObject({ verified: true, answered: 200, delivery_id: expect.stringMatching(/^dlv_/) });
    expect((await attempt).data).toMatchObject({
      invocation_id: r.json.invocation_id,
      attempt: 1,
      status_code: 200,
      error: null,
      state: 'delivered',
    });
  });

  it('egress calls, every log entry', async () => {
    const call = upcoming('egress.call', (d) => d.path === '/hello');
    const r = await ok(wcore.call('POST', '/v1/invoke/evt', { fetch: upstreamUrl }));
    expect(r.json).toEqual({ got: 'upstream says hi' });
    expect((await call).data).toMatchObject({
      source: 'snippet',
      method: 'GET',
      status: 200,
      invocation_id: r.headers.get('x-invocation-id'),
    });
  });

  it('tenants, secrets (names only) and store keys (keys only, REST and snippets)', async () => {
    const t = await expectEvent(
      'tenant.changed',
      (d) => d.name === 'evt-tenant',
      () => ok(wcore.call('POST', '/_emu/tenants', { name: 'evt-tenant' }, { key: wcore.admin }), 201),
    );
    await expectEvent(
      'tenant.changed',
      (d) => d.tenant_id === t.data.tenant_id,
      () => ok(wcore.call('PATCH', '/_emu/tenants/evt-tenant/limits', { max_concurrency: 3 }, { key: wcore.admin })),
    );
    const s = await expectEvent(
      'secret.changed',
      (d) => d.name === 'EVT_SECRET',
      () => ok(wcore.call('PUT', '/v1/secrets/EVT_SECRET', { value: 'secret-VALUE-never-in-events' }), 201),
    );
    expect(s.data.deleted).toBe(false);
    await expectEvent(
      'secret.changed',
      (d) => d.name === 'EVT_SECRET' && d.deleted,
      () => ok(wcore.call('DELETE', '/v1/secrets/EVT_SECRET'), 204),
    );
    await expectEvent(
      'store.changed',
      (d) => d.key === 'evt-key' && !d.deleted,
      () => ok(wcore.call('PUT', '/v1/store/evt-key', { value: { v: 'store-VALUE-never-in-events' } }), 201),
    );
    await expectEvent(
      'store.changed',
      (d) => d.key === 'evt-key' && d.deleted,
      () => ok(wcore.call('DELETE', '/v1/store/evt-key'), 204),
    );
    await expectEvent(
      'store.changed',
      (d) => d.key === 'from-snippet',
      () => ok(wcore.call('POST', '/v1/invoke/evt', { store: 'from-snippet' })),
    );
    const key = await expectEvent(
      'tenant.changed',
      (d) => d.tenant_id === t.data.tenant_id,
      () => ok(wcore.call('POST', '/_emu/tenants/evt-tenant/keys', {}, { key: wcore.admin }), 201),
    );
    expect(key.data.name).toBe('evt-tenant');
    let rotated = '';
    await expectEvent(
      'tenant.changed',
      (d) => d.name === 'local',
      async () => (rotated = (await ok(wcore.call('POST', '/v1/tenant/webhook-secret'))).json.secret as string),
    );
    expect(rotated).toMatch(/^whsec_/);
    // A key whose TTL runs out is swept (every 50 ms in a test core): its expiry is a change too.
    await ok(wcore.call('PUT', '/v1/store/evt-ttl', { value: 1, ttl_seconds: 1 }), 201);
    await upcoming('store.changed', (d) => d.key === 'evt-ttl' && d.deleted, 5_000);
    const raw = feed.raw();
    expect(raw).not.toContain(rotated);
    for (const value of ['secret-VALUE-never-in-events', 'store-VALUE-never-in-events', 'store-VALUE-from-snippet']) {
      expect(raw, value).not.toContain(value);
    }
  });

  it('workspace folders: loaded (a version from the workspace), refused with file:line:col, deleted', async () => {
    const dir = join(workspace, 'snippets', 'wsevt');
    const versionMade = upcoming('version.created', (d) => d.snippet === 'wsevt');
    const loaded = await expectEvent(
      'workspace.folder',
      (d) => d.snippet === 'wsevt' && d.state === 'loaded',
      async () => {
        await mkdir(dir, { recursive: true });
        await writeFile(join(dir, 'index.ts'), 'export default async function handler() { return { v: 1 }; }\n');
      },
    );
    expect(loaded.data).toMatchObject({ version: 1, runtime: 'bun', error: null });
    expect((await versionMade).data).toMatchObject({ version: 1, source: 'workspace' });
    const refused = await expectEvent(
      'workspace.folder',
      (d) => d.snippet === 'wsevt' && d.state === 'error',
      () => writeFile(join(dir, 'index.ts'), 'export default async function handler() {\n  return { v: ;\n}\n'),
    );
    expect(refused.data.error).toMatchObject({ file: expect.stringContaining('index.ts'), line: 2 });
    expect(refused.data.error?.column).toEqual(expect.any(Number));
    await expectEvent(
      'workspace.folder',
      (d) => d.snippet === 'wsevt' && d.state === 'deleted',
      () => rm(dir, { recursive: true, force: true }),
    );
  });

  it('snippet deleted', async () => {
    await ok(wcore.call('POST', '/v1/snippets', { name: 'evt-gone', runtime: 'python' }), 201);
    const gone = await expectEvent(
      'snippet.deleted',
      (d) => d.snippet === 'evt-gone',
      () => ok(wcore.call('DELETE', '/v1/snippets/evt-gone'), 204),
    );
    expect(gone.data.snippet_id).toMatch(/^snp_/);
  });
});
