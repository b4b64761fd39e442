import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { parseSse, type SseEvent } from '../../contract/sse';
import type { EmuEvent } from '../../contract/schemas/events';
import { followEvents } from '../../contract/events-client';

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
  raw: () => string;
  comments: string[];
  /** The first frame (from `from` on) that matches, within `ms`. */
  next(match: (f: SseEvent) => boolean, ms?: number, from?: number): Promise<SseEvent>;
  close(): void;
  done: Promise<void>;
}

async function openFeed(query = '', headers: Record<string, string> = {}): Promise<Feed> {
  const ac = new AbortController();
  const res = await fetch(`${core.url}/_emu/events${query}`, {
    headers: { authorization: `Bearer ${core.admin}`, accept: 'text/event-stream', ...headers },
    signal: ac.signal,
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const frames: SseEvent[] = [];
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
        for (const w of waiters) w();
      }
    } catch {
      // aborted by close()
    }
  })();
  return {
    frames,
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

  it('keeps only the types asked for (exact or prefix*)', async () => {
    const feed = await openFeed('?types=secret.changed,store.*');
    core.emu.events.publish('environment.created', { tenant_id: 't_x', env: 'filtered-out' });
    core.emu.events.publish('store.changed', { tenant_id: 't_x', key: 'k', deleted: false });
    core.emu.events.publish('secret.changed', { tenant_id: 't_x', name: 'N', deleted: true });
    await feed.next((f) => f.event === 'secret.changed');
    expect(feed.frames.map((f) => f.event)).toEqual(['store.changed', 'secret.changed']);
    feed.close();
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

  it('throws the refusal when retrying cannot help (a bad token)', async () => {
    const it = followEvents({ baseUrl: core.url, adminToken: 'emu_wrong' });
    await expect(it.next()).rejects.toMatchObject({ name: 'ProblemError', status: 401 });
  });
});
