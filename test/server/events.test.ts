import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { parseSse, type SseEvent } from '../../contract/sse';
import type { EmuEvent } from '../../contract/schemas/events';

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
