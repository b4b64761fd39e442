// The invocation pages in Chromium against a real core running real Bun snippets: the history list, one
// invocation (output or error, logs, the memory/CPU timeline against its limits, the callback, cancel,
// run again) and the live stream inspector watching a stream while it runs. Screenshots of every page land
// in test/.tmp/gui/. Skips loudly when Chromium or the build is missing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { skipReason, startGui, until, type Gui, type GuiPage } from '../helpers/gui';

if (skipReason) console.warn(`\n[invocations.test] SKIPPING the invocation page tests: ${skipReason}\n`);

const TICKER = `
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default async function* handler(input) {
  const n = input.n ?? 5;
  for (let i = 1; i <= n; i++) {
    if (i > 1) await sleep(input.pause_ms ?? 300);
    yield { i, word: ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"][(i - 1) % 6] };
  }
  return { chunks: n };
}`;

const HELLO = `
export default async function handler(input) {
  console.log("hello from the snippet", JSON.stringify(input));
  if (input.sleep_ms) await new Promise((r) => setTimeout(r, input.sleep_ms));
  return { greeting: "Hello, " + (input.name ?? "world") };
}`;

const BROKEN = `
function parse(input) {
  throw new Error("boom: cannot parse " + JSON.stringify(input));
}
export default async function handler(input) {
  console.error("about to fail");
  return parse(input);
}`;

// Allocates `mb` MB in 16 MB steps (touching every byte), burning a little CPU between steps.
const HOG = `
export default async function handler(input) {
  const keep = [];
  for (let got = 0; got < input.mb; got += 16) {
    keep.push(Buffer.alloc(16 * 1024 * 1024, 1));
    const until = Date.now() + 15;
    while (Date.now() < until) {}
    await new Promise((r) => setTimeout(r, 50));
    console.log("allocated", got + 16, "MB");
  }
  return { held_mb: keep.length * 16 };
}`;

let gui: Gui;
const ids: Record<string, string> = {};

async function open(width = 1280, height = 800): Promise<GuiPage> {
  return gui.open({ width, height });
}

async function snippet(name: string, code: string, limits: Record<string, number> = {}) {
  expect((await gui.core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
  const v = await gui.core.call('POST', `/v1/snippets/${name}/versions`, { code, ...limits });
  expect(v.status, v.text).toBe(201);
}

async function invoke(name: string, input: unknown, headers: Record<string, string> = {}): Promise<string> {
  const r = await gui.core.call('POST', `/v1/invoke/${name}`, input, { headers });
  const id = r.headers.get('x-invocation-id');
  expect(id, r.text).toBeTruthy();
  return id!;
}

/** No horizontal scrolling at this width (the page reflows instead). */
async function fitsWidth(page: Page): Promise<void> {
  const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  expect(scroll).toBeLessThanOrEqual(client + 1);
}

describe.skipIf(!!skipReason)('invocation pages', () => {
  beforeAll(async () => {
    gui = await startGui();
    await Promise.all([
      snippet('ticker', TICKER),
      snippet('hello', HELLO),
      snippet('broken', BROKEN),
      snippet('hog', HOG, { max_memory_mb: 128 }),
    ]);
    // Before anything ran: the empty states say how to make one.
    const empty = await open();
    await empty.go('invocations');
    expect(await empty.page.getByTestId('howto').innerText()).toContain(`${gui.core.url}/v1/invoke/hello`);
    await empty.screenshot('invocations-empty');
    await empty.go('stream');
    expect(await empty.page.getByTestId('empty').innerText()).toContain('X-Invoke-Mode: stream');
    await empty.screenshot('stream-empty');
    expect(empty.errors).toEqual([]);

    ids.ticker = await invoke('ticker', { n: 3, pause_ms: 50 }, { 'X-Invoke-Mode': 'stream' });
    ids.broken = await invoke('broken', { n: 1 });
    ids.hog = await invoke('hog', { mb: 80 });
    ids.oom = await invoke('hog', { mb: 400 });
    ids.async = await invoke('hello', { name: 'async', callback_url: `${gui.core.url}/_emu/inbox/gui` }, { 'X-Invoke-Mode': 'async' });
    ids.hello = await invoke('hello', { name: 'Ada' });
    await until(
      'the async callback',
      async () => (await gui.core.call('GET', `/v1/invocations/${ids.async}`)).json?.callback?.status === 'delivered',
    );
  }, 30_000);

  afterAll(async () => {
    await gui?.close();
  });

  it('lists invocations newest first with their outcomes, filters them and opens one', async () => {
    const w = await open();
    const { page } = w;
    await w.go('invocations');
    const rows = page.getByTestId('invocation-row');
    await until('six rows', async () => (await rows.count()) >= 6);
    // Newest first: the runs made before these tests are listed in the reverse of the order they were made
    // (tests that ran earlier, in a shuffled order, may have added newer ones above them).
    const listed = await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-id')));
    const made = [ids.ticker, ids.broken, ids.hog, ids.oom, ids.async, ids.hello].map((id) => listed.indexOf(id!));
    expect(
      made.every((i) => i >= 0),
      JSON.stringify({ listed, ids }),
    ).toBe(true);
    expect(made).toEqual([...made].sort((a, b) => b - a));
    const outcomes = await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-outcome')));
    expect(outcomes).toEqual(expect.arrayContaining(['success', 'handler_error', 'oom_killed']));
    const hogRow = page.locator(`[data-testid=invocation-row][data-id="${ids.hog}"]`);
    expect(await hogRow.innerText()).toMatch(/hog[\s\S]*v1[\s\S]*sync[\s\S]*(just now|s ago)[\s\S]*MB/);
    expect(await page.locator(`[data-id="${ids.ticker}"] .inv-mode`).innerText()).toBe('stream');
    await w.screenshot('invocations');

    await page.getByTestId('filter-snippet').selectOption('broken');
    await until('only broken', async () => (await rows.count()) === 1 && (await rows.first().getAttribute('data-id')) === ids.broken);
    expect(page.url()).toContain('snippet=broken');
    // The sidebar's plain link clears the filter in place.
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Invocations' }).click();
    await until('all rows back', async () => (await rows.count()) >= 6);
    expect(await page.getByTestId('filter-snippet').inputValue()).toBe('');
    await page.getByTestId('filter-status').selectOption('failed');
    // The two failures made before these tests and none of their successes (other tests may have added failures).
    const shown = () => rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-id')));
    await until('the failed ones', async () => {
      const now = await shown();
      return now.includes(ids.broken!) && now.includes(ids.oom!) && ![ids.hello, ids.hog, ids.ticker].some((id) => now.includes(id!));
    });
    expect(await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-outcome')))).not.toContain('success');
    await page.getByTestId('filter-status').selectOption('');
    await until('all rows again', async () => (await rows.count()) >= 6);

    // Keyboard: the rows are links; Enter opens the invocation.
    await hogRow.focus();
    await page.keyboard.press('Enter');
    await page.getByTestId('timeline-chart').waitFor();
    expect(page.url()).toContain(`#/invocation/${ids.hog}`);

    const narrow = await open(600, 900);
    await narrow.go('invocations');
    await narrow.page.getByTestId('invocation-row').first().waitFor();
    await fitsWidth(narrow.page);
    await narrow.screenshot('invocations-narrow');
    expect([...w.errors, ...narrow.errors]).toEqual([]);
  });

  it('shows an invocation: usage against limits, the SVG timeline with its limit lines, output, logs', async () => {
    const w = await open();
    const { page } = w;
    await w.go(`invocation/${ids.hog}`);
    const chart = page.getByTestId('timeline-chart');
    await chart.waitFor();
    expect(await page.getByTestId('outcome').innerText()).toBe('success');
    expect(await page.getByTestId('limit-memory').getAttribute('data-limit')).toBe('128');
    expect(await page.getByTestId('limit-cpu').getAttribute('data-limit')).toBe('10');
    expect(await page.locator('[data-testid=limit-memory] line').count()).toBe(1); // drawn on the chart, not off scale
    expect(await page.getByTestId('memory-line').getAttribute('d')).toMatch(/^M[\d.]+ [\d.]+( L[\d.]+ [\d.]+){3,}/);
    expect(await page.getByTestId('inv-output').innerText()).toContain('"held_mb": 80');
    expect(await page.getByTestId('inv-logs').innerText()).toContain('allocated 80 MB');
    expect(await page.getByTestId('meter-memory').innerText()).toMatch(/of 128 MB/);
    // Hovering reads a sample.
    const box = (await chart.boundingBox())!;
    await page.mouse.move(box.x + box.width * 0.6, box.y + 60);
    expect(await page.getByTestId('timeline-readout').innerText()).toMatch(/memory [\d.]+ MB · CPU/);
    await w.screenshot('invocation');
    await page.emulateMedia({ colorScheme: 'dark' });
    await w.screenshot('invocation-dark');
    await page.emulateMedia({ colorScheme: 'light' });

    await w.go(`invocation/${ids.oom}`);
    await page.locator('[data-testid=invocation][data-outcome=oom_killed]').waitFor();
    await page.getByTestId('timeline-chart').waitFor();
    expect(await page.getByTestId('inv-error').innerText()).toContain('oom_killed');
    await w.screenshot('invocation-oom');

    await w.go(`invocation/${ids.broken}`);
    await page.locator('[data-testid=invocation][data-outcome=handler_error]').waitFor();
    const err = await page.getByTestId('inv-error').innerText();
    expect(err).toContain('boom: cannot parse {"n":1}');
    expect(err).toMatch(/at parse/); // the stack from the tenant's own code
    expect(await page.getByTestId('inv-logs').innerText()).toContain('about to fail');
    await w.screenshot('invocation-error');

    // The callback: its deliveries, and Redeliver adds one.
    await w.go(`invocation/${ids.async}`);
    const deliveries = page.locator('[data-testid=deliveries] tbody tr');
    await deliveries.first().waitFor();
    expect(await deliveries.count()).toBe(1);
    expect(await deliveries.first().innerText()).toMatch(/200[\s\S]*scheduled/);
    await page.getByTestId('redeliver').click();
    await until('a second delivery', async () => (await deliveries.count()) === 2);
    expect(await deliveries.first().innerText()).toContain('redelivery');
    expect(await page.getByTestId('parity-warnings').innerText()).toMatch(/\S/); // a loopback callback: production would refuse it
    await w.screenshot('invocation-callback');

    // The inbox link, and a missing invocation.
    expect(await page.getByRole('link', { name: 'open in the callback inbox' }).getAttribute('href')).toBe('#/inbox/gui');
    const missing = await open();
    await missing.go('invocation/inv_missing');
    expect(await missing.page.getByRole('alert').innerText()).toMatch(/Could not load this invocation[\s\S]*404/);
    expect(missing.errors.length).toBeGreaterThan(0);
    expect(missing.errors.filter((e) => !e.includes('status of 404'))).toEqual([]); // Chromium logs the 404 itself

    const narrow = await open(600, 900);
    await narrow.go(`invocation/${ids.hog}`);
    await narrow.page.getByTestId('timeline-chart').waitFor();
    await fitsWidth(narrow.page);
    await narrow.screenshot('invocation-narrow');
    expect([...w.errors, ...narrow.errors]).toEqual([]);
  });

  it('a stream that ended cancelled says Cancelled, not a green Ended', async () => {
    const w = await open();
    const { page } = w;
    const abort = new AbortController();
    const res = await fetch(`${gui.core.url}/v1/invoke/ticker`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gui.core.key}`, 'content-type': 'application/json', 'x-invoke-mode': 'stream' },
      body: JSON.stringify({ n: 20 }),
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-invocation-id')!;
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('event: chunk')) text += new TextDecoder().decode((await reader.read()).value);
    abort.abort(); // the invoking client goes away mid-stream: the run is cancelled
    await until('the run recorded as cancelled', async () => {
      const r = await fetch(`${gui.core.url}/v1/invocations/${id}`, { headers: { authorization: `Bearer ${gui.core.key}` } });
      return ((await r.json()) as { outcome?: string }).outcome === 'cancelled';
    });
    await w.go(`stream/${id}`);
    await page.locator('[data-testid=stream-inspector][data-state=ended]').waitFor();
    const pill = page.getByTestId('stream-state');
    expect(await pill.innerText()).toMatch(/^Cancelled/);
    expect(await pill.getAttribute('class')).toContain('stream-pill-bad');
    expect(w.errors).toEqual([]);
  });

  it('watches a streamed run live: chunks appear one by one before the result, then the result', async () => {
    const w = await open();
    const { page } = w;
    await w.go('stream');
    await page.locator(`[data-testid=stream-row][data-id="${ids.ticker}"]`).waitFor();
    await w.screenshot('stream-list');

    const res = await fetch(`${gui.core.url}/v1/invoke/ticker`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gui.core.key}`, 'content-type': 'application/json', 'x-invoke-mode': 'stream' },
      // 600 ms between chunks: slower than the page's sampling below even on a loaded machine (at 300 ms a
      // fresh-clone CI run's page opened late and saw only two counts).
      body: JSON.stringify({ n: 6, pause_ms: 600 }),
    });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-invocation-id')!;
    const whole = res.text(); // read it to the end meanwhile (a client that goes away cancels the stream)
    await w.go(`stream/${id}`);

    const chunks = page.locator('[data-testid=stream-event][data-event=chunk]');
    const result = page.getByTestId('stream-result');
    await chunks.first().waitFor();
    expect(await result.count()).toBe(0); // the first chunk is on screen before the run has ended
    expect(await page.getByTestId('stream-state').innerText()).toBe('Live');

    // Sample what the page shows until the result arrives: the chunk count climbs step by step.
    const seen: number[] = [];
    let shot = false;
    await until(
      'the result',
      async () => {
        const done = (await result.count()) > 0;
        if (!done) {
          const n = await chunks.count();
          if (seen.at(-1) !== n) seen.push(n);
          if (!shot && n >= 3) {
            shot = true;
            await w.screenshot('stream-live');
          }
        }
        return done;
      },
      15_000,
    );
    expect(seen.length).toBeGreaterThanOrEqual(3);
    expect(seen[0]).toBeLessThan(6);
    expect(shot).toBe(true);

    expect(await chunks.count()).toBe(6);
    expect(await chunks.nth(2).innerText()).toContain('{"i":3,"word":"charlie"}');
    expect(await result.innerText()).toContain('"chunks": 6');
    await page.locator('[data-testid=stream-inspector][data-state=ended]').waitFor();
    expect(await page.getByTestId('chunk-tick').count()).toBe(6);
    // Recorded times replace the estimates: the last chunk is about 5 × 300 ms after the first.
    await until('recorded times', async () => (await page.locator('.stream-t[data-exact=false]').count()) === 0);
    const times = (await page.locator('[data-event=chunk] .stream-t').allInnerTexts()).map((t) =>
      t.includes(' s') ? parseFloat(t.slice(1)) * 1000 : parseFloat(t.slice(1)),
    );
    expect(times.at(-1)! - times[0]!).toBeGreaterThan(1200);
    expect(await whole).toContain('event: result');
    await w.screenshot('stream-done');
    await page.emulateMedia({ colorScheme: 'dark' });
    await w.screenshot('stream-done-dark');
    await page.emulateMedia({ colorScheme: 'light' });

    await page.getByTestId('raw-toggle').click();
    const raw = await page.getByTestId('raw-sse').innerText();
    expect(raw).toContain('event: start');
    expect(raw).toMatch(/id: \d+\nevent: chunk\ndata: \{"data":\{"i":1/);
    expect(raw).toContain('event: result');
    await w.screenshot('stream-raw');

    // A finished stream replays its recorded events and ends.
    await w.go(`stream/${ids.ticker}`);
    await page.locator('[data-testid=stream-inspector][data-state=ended]').waitFor();
    expect(await page.getByTestId('raw-sse').count()).toBe(0); // a new page: the events view again
    expect(await chunks.count()).toBe(3);
    expect(await page.getByTestId('stream-state').innerText()).toContain('Ended');

    // An invocation that did not stream says so.
    await w.go(`stream/${ids.hello}`);
    await page.getByTestId('empty').filter({ hasText: 'This invocation ran in sync mode, so it has no stream.' }).waitFor();

    const narrow = await open(600, 900);
    await narrow.go(`stream/${id}`);
    await narrow.page.getByTestId('stream-result').waitFor();
    await fitsWidth(narrow.page);
    await narrow.screenshot('stream-narrow');
    expect([...w.errors, ...narrow.errors]).toEqual([]);
  });

  it('runs an invocation again (same version, mode and stored input) and cancels a running one', async () => {
    const w = await open();
    const { page } = w;
    await w.go(`invocation/${ids.hello}`);
    // The stored input, shown folded (its text is there before it is opened).
    expect(JSON.parse((await page.getByTestId('stored-input').locator('pre').textContent()) ?? '')).toEqual({ name: 'Ada' });
    await page.getByTestId('run-again').click();
    await until('a new invocation page', async () => {
      const m = /#\/invocation\/([^/?]+)$/.exec(page.url());
      return m && m[1] !== ids.hello ? m[1] : null;
    });
    const replayed = /#\/invocation\/([^/?]+)$/.exec(page.url())![1]!;
    await page.locator('[data-testid=invocation][data-outcome=success]').waitFor();
    expect(await page.getByTestId('inv-output').innerText()).toContain('Hello, Ada');
    const rec = (await gui.core.call('GET', `/v1/invocations/${replayed}`)).json;
    expect(rec).toMatchObject({ snippet: 'hello', version: 1, mode: 'sync', outcome: 'success' });

    // A stream runs again into the live inspector.
    await w.go(`invocation/${ids.ticker}`);
    await page.getByTestId('run-again').click();
    await page.getByTestId('stream-inspector').waitFor();
    await page.getByTestId('stream-result').waitFor();
    expect(await page.locator('[data-testid=stream-event][data-event=chunk]').count()).toBe(3);

    // Cancel: a slow sync run, found while it runs.
    const slow = gui.core.call('POST', '/v1/invoke/hello', { sleep_ms: 20_000 });
    const running = await until(
      'the slow run',
      async () => (await gui.core.call('GET', '/v1/invocations?status=running&snippet=hello')).json?.data?.[0]?.id as string | undefined,
    );
    await w.go(`invocation/${running}`);
    await page.getByTestId('cancel').click();
    await page.locator('[data-testid=invocation][data-outcome=cancelled]').waitFor();
    expect((await slow).status).toBe(409);
    await w.screenshot('invocation-cancelled');
    expect(w.errors).toEqual([]);
  });
});
