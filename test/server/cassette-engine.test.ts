/**
 * The cassette engine (server/egress/cassette/*): a tape takes a call down, the store writes and reads it
 * back, the player answers the same call from it. Pure modules and a temp folder; no HTTP.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createPlayer,
  createRedactor,
  createTape,
  FileCassetteStore,
  type ReplayAnswer,
  type ReplayMiss,
} from '../../server/egress/cassette';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('cassette engine: record → file → replay', () => {
  it('plays back what a tape took down, chunk by chunk, with the secret redacted', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cassette-'));
    dirs.push(dir);
    const redactor = createRedactor({ OPENAI_KEY: 'sk-live-123456' });
    let clock = 0;
    const tape = createTape({ redactor, invocationId: 'inv_1', now: () => 1_700_000_000_000, perf: () => clock });
    const call = tape.begin({
      source: 'snippet',
      integration: null,
      method: 'POST',
      url: 'http://127.0.0.1:9999/v1/chat/completions?key=sk-live-123456',
      headers: [
        ['content-type', 'application/json'],
        ['authorization', 'Bearer sk-live-123456'],
      ],
      hostAdded: [],
    });
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Paris' }] });
    call.requestBody(Buffer.from(body));
    clock = 10;
    call.head({ status: 200, statusText: 'OK', headers: [['content-type', 'text/event-stream']] });
    clock = 20;
    call.chunk(Buffer.from('data: a\n\n'));
    clock = 70;
    call.chunk(Buffer.from('data: b\n\n'));
    clock = 75;
    call.end(null);
    const entries = tape.entries();
    expect(JSON.stringify(entries)).not.toContain('sk-live-123456');
    const store = new FileCassetteStore({ locate: (t, s) => join(dir, t, s), creatorVersion: '0.1.0' });
    const ref = { tenant: 't', snippet: 's', name: 'default' };
    await store.merge(ref, entries, { ignore_body_fields: [], ignore_query: [], host: false, order: false });
    const file = await store.read(ref);
    expect(file?.cassette.log.entries).toHaveLength(1);
    const player = createPlayer({ cassette: file!.cassette, speed: 1, redactor });
    const answer = player.answer({
      source: 'snippet',
      integration: null,
      method: 'POST',
      url: 'http://127.0.0.1:1234/v1/chat/completions?key=sk-live-123456',
      headers: [],
      hostAdded: [],
      body: Buffer.from(body),
    }) as ReplayAnswer;
    expect(answer.head.status).toBe(200);
    expect(answer.chunks.map((c) => [c.delayMs, c.data.toString()])).toEqual([
      [20, 'data: a\n\n'],
      [50, 'data: b\n\n'],
    ]);
    const miss = player.answer({
      source: 'snippet',
      integration: null,
      method: 'POST',
      url: 'http://127.0.0.1:1234/v1/chat/completions?key=sk-live-123456',
      headers: [],
      hostAdded: [],
      body: Buffer.from(body.replace('Paris', 'Rome')),
    }) as ReplayMiss;
    expect(miss.message).toContain('body field messages[0].content: recorded "Paris", got "Rome"');
  });
});
