// The GUI's live feed without a browser (renderer/src/live.ts): LiveFeed over the real followEvents and a
// real core (its state, events, reset after a restart of the core, listeners released), and coalesce.
import { describe, expect, it } from 'vitest';
import { followEvents } from '../../contract/events-client';
import { createClient } from '../../contract/client';
import type { EmuEvent } from '../../contract/schemas/events';
import { coalesce, LiveFeed, matches, snippetOf, type LiveMessage, type LiveState } from '../../renderer/src/live';
import { startTestCore, tempDir } from '../helpers/core';
import { until } from '../helpers/gui';

describe('LiveFeed over a real core', () => {
  it('goes live, passes events on, says reconnecting while the core is away and reset when it is back', async () => {
    const dataDir = await tempDir();
    let core = await startTestCore({ dataDir, keepDir: true });
    let url = core.url;
    // The client follows the core to its new port and admin token after the restart (as the GUI's session
    // cookie, which survives restarts, does).
    const fetchCurrent: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('authorization', `Bearer ${core.admin}`);
      return fetch(`${url}${String(input)}`, { ...init, headers });
    };
    const feed = new LiveFeed((opts) => followEvents(createClient({ fetch: fetchCurrent }), { ...opts, minRetryMs: 20, maxRetryMs: 50 }));
    const states: LiveState[] = [];
    const got: LiveMessage[] = [];
    feed.onState((s) => states.push(s));
    const off = feed.listen((m) => got.push(m));
    const stop = feed.connect();
    try {
      await until('live', async () => feed.state === 'live');
      await core.call('POST', '/v1/snippets', { name: 'from-feed', runtime: 'bun' });
      const created = await until('snippet.created', async () =>
        got.find((m): m is { kind: 'event'; event: EmuEvent } => m.kind === 'event' && m.event.type === 'snippet.created'),
      );
      expect(snippetOf(created.event)).toBe('from-feed');

      await core.stop();
      await until('reconnecting', async () => feed.state === 'reconnecting');
      core = await startTestCore({ dataDir, keepDir: true });
      url = core.url;
      await until('reset after the restart', async () => got.some((m) => m.kind === 'reset'));
      await until('live again', async () => feed.state === 'live');
      expect(states).toEqual(['live', 'reconnecting', 'live']);
    } finally {
      stop();
      off();
      await core.stop();
    }
    expect(feed.listenerCount).toBe(0);
    await until('the core to release the feed', async () => core.emu.events.listenerCount === 0);
  }, 30_000);
});

describe('matches, coalesce', () => {
  it('matches exact types and prefixes', () => {
    expect(matches(['invocation.*'], 'invocation.finished')).toBe(true);
    expect(matches(['version.created'], 'version.created')).toBe(true);
    expect(matches(['version.created', 'snippet.*'], 'deployment.changed')).toBe(false);
  });

  it('runs a burst as one call in flight and one after it', async () => {
    let calls = 0;
    const gates: (() => void)[] = [];
    const c = coalesce(() => {
      calls++;
      return new Promise<void>((resolve) => gates.push(resolve));
    });
    for (let i = 0; i < 10; i++) c.trigger();
    expect(calls).toBe(1);
    gates.shift()!();
    await until('the second call', async () => calls === 2);
    for (let i = 0; i < 5; i++) c.trigger();
    gates.shift()!();
    await until('the third call', async () => calls === 3);
    gates.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(calls).toBe(3);
    // Cancelled: a pending rerun is dropped.
    c.trigger();
    c.trigger();
    expect(calls).toBe(4);
    c.cancel();
    gates.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(calls).toBe(4);
  });
});
