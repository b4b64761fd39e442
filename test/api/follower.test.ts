/**
 * Watching is read-only (server/api/v1/stream.ts followInvocation, server/services/stream-log.ts): followers
 * of `/_emu/invocations/{id}/events?follow=1` that leave — before any event, mid-stream, several at once —
 * never end the run; only the invoking client's disconnect does. A real core and a real Bun runner.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../../contract';
import { startTestCore, type TestCore } from '../helpers/core';

const SLOW = `
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default async function* handler(input) {
  for (let i = 1; i <= input.n; i++) {
    if (i > 1) await sleep(input.pause_ms);
    yield { i };
  }
  return { chunks: input.n };
}`;

let core: TestCore;
beforeAll(async () => {
  core = await startTestCore();
  expect((await core.call('POST', '/v1/snippets', { name: 'slow', runtime: 'bun' })).status).toBe(201);
  expect((await core.call('POST', '/v1/snippets/slow/versions', { code: SLOW })).status).toBe(201);
}, 30_000);
afterAll(async () => {
  await core?.stop();
});

/** Reads an SSE body until `stopAfter` frames (then aborts) or its end; returns the event names. */
async function read(res: Response, stopAfter = Infinity, abort?: AbortController): Promise<string[]> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const names: string[] = [];
  for (;;) {
    const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true as const }));
    if (done) return names;
    buf += dec.decode(value, { stream: true });
    let at: number;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, at);
      buf = buf.slice(at + 2);
      const name = /^event: (.+)$/m.exec(frame)?.[1];
      if (name) names.push(name);
      if (names.length >= stopAfter) {
        abort?.abort();
        await reader.cancel().catch(() => {});
        return names;
      }
    }
  }
}

describe('followers of a stream', () => {
  it('leaving (at once, mid-stream, several together) never cancels the run; the caller gets everything', async () => {
    const n = 8;
    const caller = await core.client.fetchPath('POST', '/v1/invoke/slow', {
      body: { n, pause_ms: 150 },
      headers: { 'x-invoke-mode': 'stream' },
    });
    expect(caller.status).toBe(200);
    const id = caller.headers.get('x-invocation-id')!;
    const callerEvents = read(caller);

    const follow = async (stopAfter: number) => {
      const abort = new AbortController();
      const res = await core.client.fetchPath('GET', `/_emu/invocations/${id}/events?follow=1`, { auth: 'admin', signal: abort.signal });
      expect(res.status).toBe(200);
      if (stopAfter === 0) {
        abort.abort(); // gone before reading anything
        await res.body?.cancel().catch(() => {});
        return [];
      }
      return read(res, stopAfter, abort);
    };
    const [none, early, mid, whole] = await Promise.all([follow(0), follow(2), follow(4), follow(Infinity)]);
    expect(none).toEqual([]);
    expect(early).toEqual(['start', 'chunk']);
    expect(mid).toEqual(['start', 'chunk', 'chunk', 'chunk']);
    const expected = ['start', ...Array<string>(n).fill('chunk'), 'result'];
    expect(whole, 'a follower that stays sees it all').toEqual(expected);
    expect(await callerEvents, 'the caller sees it all').toEqual(expected);
    const rec = await core.client.call(operations.emuGetInvocation, { params: { id } });
    expect(rec.outcome).toBe('success');
  });

  it('the invoking client leaving does cancel, whoever follows', async () => {
    const abort = new AbortController();
    const caller = await core.client.fetchPath('POST', '/v1/invoke/slow', {
      body: { n: 50, pause_ms: 100 },
      headers: { 'x-invoke-mode': 'stream' },
      signal: abort.signal,
    });
    const id = caller.headers.get('x-invocation-id')!;
    const watcher = await core.client.fetchPath('GET', `/_emu/invocations/${id}/events?follow=1`, { auth: 'admin' });
    const watched = read(watcher);
    await read(caller, 2, abort);
    const names = await watched;
    expect(names.at(-1)).toBe('error');
    const rec = await core.client.call(operations.emuGetInvocation, { params: { id } });
    expect(rec.outcome).toBe('cancelled');
  });
});
