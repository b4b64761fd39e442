/**
 * A cassette is a HAR file other tools read as is (docs/cassettes.md, "Opening a cassette elsewhere"): a
 * cassette written by the real tape and store is handed, unchanged, to Playwright's HAR replay
 * (`routeFromHAR`) in Debian's Chromium, and a page fetches from it: text, a streamed answer (whole), a
 * binary body kept in base64, a redacted request. Skips (saying why) where Chromium is not installed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { createRedactor, createTape, FileCassetteStore } from '../../server/egress/cassette';
import { CassetteMatch } from '../../contract/schemas/cassette';
import { CHROMIUM } from '../helpers/gui';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('cassette files in other HAR tools', () => {
  it('Playwright’s routeFromHAR in Chromium serves a page’s requests from a cassette, unchanged', async (ctx) => {
    if (!existsSync(CHROMIUM)) ctx.skip(`${CHROMIUM} is missing (node scripts/setup.mjs --for=test installs it)`);
    const dir = await mkdtemp(join(tmpdir(), 'cassette-har-'));
    dirs.push(dir);
    const redactor = createRedactor({ TOKEN: 'tok-secret-123456' });
    let clock = 0;
    const tape = createTape({ redactor, invocationId: 'inv_h', perf: () => (clock += 10) });
    const calls: { method: string; url: string; type: string; body?: string; chunks: Buffer[] }[] = [
      { method: 'GET', url: 'http://app.test/', type: 'text/html', chunks: [Buffer.from('<!doctype html><title>t</title><p>page</p>')] },
      {
        method: 'GET',
        url: 'http://app.test/api/stream',
        type: 'text/event-stream',
        chunks: [Buffer.from('data: one\n\n'), Buffer.from('data: two\n\n')],
      },
      { method: 'GET', url: 'http://app.test/img.bin', type: 'application/octet-stream', chunks: [Buffer.from([0xff, 0x00, 0xfe, 0x01])] },
      {
        method: 'POST',
        url: 'http://app.test/api/echo',
        type: 'application/json',
        body: '{"q":"hi"}',
        chunks: [Buffer.from('{"answer":"hello"}')],
      },
    ];
    for (const c of calls) {
      const call = tape.begin({
        source: 'snippet',
        integration: null,
        method: c.method,
        url: c.url,
        headers: [['authorization', 'Bearer tok-secret-123456']],
        hostAdded: [],
      });
      if (c.body) call.requestBody(Buffer.from(c.body));
      call.head({
        status: 200,
        statusText: 'OK',
        headers: [
          ['content-type', c.type],
          ['access-control-allow-origin', '*'],
        ],
      });
      for (const chunk of c.chunks) call.chunk(chunk);
      call.end(null);
    }
    const store = new FileCassetteStore({ locate: () => dir, creatorVersion: 't' });
    const file = await store.merge({ tenant: 't', snippet: 's', name: 'default' }, tape.entries(), CassetteMatch.parse({}));

    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    try {
      const context = await browser.newContext();
      await context.routeFromHAR(file.path, { notFound: 'abort' });
      const page = await context.newPage();
      await page.goto('http://app.test/');
      expect(await page.textContent('p')).toBe('page');
      const got = await page.evaluate(async () => {
        const stream = await (await fetch('/api/stream')).text();
        const bin = [...new Uint8Array(await (await fetch('/img.bin')).arrayBuffer())];
        const echo = (await (
          await fetch('/api/echo', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"q":"hi"}' })
        ).json()) as unknown;
        return { stream, bin, echo };
      });
      expect(got).toEqual({ stream: 'data: one\n\ndata: two\n\n', bin: [0xff, 0x00, 0xfe, 0x01], echo: { answer: 'hello' } });
    } finally {
      await browser.close();
    }
  }, 60_000);
});
