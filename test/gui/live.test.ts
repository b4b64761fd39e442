// Every event-driven page follows the live feed (GET /_emu/events, renderer/src/live-react.tsx) in a real
// browser against a real core: a change made from outside the page (an API call, a file saved in the
// watched workspace, an inbox POST, a snippet's outbound call) shows on the page, timed from just before the
// change to the DOM mutation that shows it (a MutationObserver in the page). And no page polls: over a quiet
// 2-second window, counted with the browser's request events, a page makes no /_emu or /v1 request beyond
// the tab's one feed connection.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type Browser, type Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { PROJECT_ROOT, startTestCore, tempDir, type TestCore } from '../helpers/core';
import { CHROMIUM, SCREENSHOTS, shownText, skipReason, startGui, until, type Gui, type GuiPage } from '../helpers/gui';

if (skipReason) console.warn(`\n[live.test] SKIPPING the live GUI tests: ${skipReason}\n`);

const HELLO = (n: number) =>
  `export default async function handler(input: { name?: string }) {\n  return { hello: input.name ?? 'world', rev: ${n} };\n}\n`;
const BROKEN = 'export default async function handler(input) {\n  return { broken: ;\n}\n';
const SLOW = 'export default async function handler() {\n  await new Promise((r) => setTimeout(r, 2500));\n  return { slept: true };\n}\n';
const FETCH =
  'export default async function handler(input: { url: string }) {\n  const res = await fetch(input.url);\n  return { status: res.status };\n}\n';

let gui: Gui;
let p: GuiPage;
let requests: ReturnType<typeof watchRequests>;
let workspace: string;
/**
 * change → DOM times, by what changed (printed at the end, for the report): `ms` from just before the change
 * to the DOM showing it, `changeMs` the change itself (the API call or the file write), `eventMs` from the
 * core publishing the last event before the DOM changed (server/events/bus.ts) to the DOM: the GUI's own part
 * (the event over the feed, the page's reload, React's render). Wall clocks of one host (Date.now in both).
 */
const timings: { what: string; ms: number; changeMs: number; eventMs?: number }[] = [];
/** When the core published each event (the bus, in this process). */
const published: { type: string; at: number }[] = [];

async function api(method: string, path: string, body?: unknown, admin = false) {
  const res = await gui.core.call(method, path, body, admin ? { key: gui.core.admin } : {});
  expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(300);
  return res.json as Record<string, unknown>;
}

/**
 * Arms a MutationObserver for "`count` elements matching `selector` contain `text`" (it must not hold yet),
 * makes the change, and answers how long after the arming the page showed it (`ms`) and how long the change
 * itself took to make (`changeMs`: the API call or the file write).
 */
async function timeTo(what: string, selector: string, text: string, change: () => Promise<unknown>, count = 1): Promise<number> {
  await p.page.evaluate(
    ({ selector, text, count }) => {
      const w = window as unknown as { __liveSeen: number | null; __liveSeenWall: number; __liveStart: number };
      const holds = () => [...document.querySelectorAll(selector)].filter((el) => (el.textContent ?? '').includes(text)).length >= count;
      if (holds()) throw new Error(`already shown before the change: ${selector} with “${text}”`);
      w.__liveSeen = null;
      const observer = new MutationObserver(() => {
        if (holds()) {
          w.__liveSeen = performance.now();
          w.__liveSeenWall = Date.now();
          observer.disconnect();
        }
      });
      observer.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
      w.__liveStart = performance.now();
    },
    { selector, text, count },
  );
  const t0 = performance.now();
  const wall0 = Date.now();
  await change();
  const changeMs = performance.now() - t0;
  try {
    await p.page.waitForFunction(() => (window as unknown as { __liveSeen: number | null }).__liveSeen !== null, undefined, {
      timeout: 5_000,
    });
  } catch {
    const body = await p.page.locator('body').innerText();
    throw new Error(`${what}: the page never showed ${selector} with “${text}”\npage: ${body.slice(0, 1500)}`);
  }
  const [ms, seenWall] = await p.page.evaluate(() => {
    const w = window as unknown as { __liveSeen: number; __liveSeenWall: number; __liveStart: number };
    return [w.__liveSeen - w.__liveStart, w.__liveSeenWall];
  });
  const last = published.filter((e) => e.at >= wall0 && e.at <= seenWall).at(-1);
  if (process.env.LIVE_TEST_TRACE) {
    const fetches = await p.page.evaluate(() => (window as unknown as { __fetches: string[] }).__fetches.splice(0));
    const trace = [
      ...published.filter((e) => e.at >= wall0 && e.at <= seenWall).map((e) => ({ at: e.at, what: `event ${e.type}` })),
      ...fetches
        .map((f) => ({ at: Number(f.split(' ')[0]), what: f.split(' ').slice(1).join(' ') }))
        .filter((r) => r.at >= wall0 && r.at <= seenWall),
    ].sort((x, y) => x.at - y.at);
    console.log(`${what}:\n${trace.map((t) => `  +${t.at - wall0} ms ${t.what}`).join('\n')}\n  +${seenWall - wall0} ms shown`);
  }
  timings.push({ what, ms: Math.round(ms), changeMs: Math.round(changeMs), ...(last ? { eventMs: seenWall - last.at } : {}) });
  return ms;
}

// ---- request accounting ------------------------------------------------------------------------------

const FEED = '/_emu/events';
const isApi = (r: Request) => /^\/(_emu|v1)(\/|$)/.test(new URL(r.url()).pathname);
const isFeed = (r: Request) => new URL(r.url()).pathname === FEED;

/** Every /_emu and /v1 request the page makes (with when), and those not answered yet (the feed never is). */
function watchRequests(page: GuiPage['page']) {
  const all: string[] = [];
  const at: number[] = [];
  const inFlight = new Set<Request>();
  page.on('request', (r) => {
    if (!isApi(r)) return;
    all.push(`${r.method()} ${new URL(r.url()).pathname}`);
    at.push(Date.now());
    if (!isFeed(r)) inFlight.add(r);
  });
  const done = (r: Request) => inFlight.delete(r);
  page.on('requestfinished', done);
  page.on('requestfailed', done);
  return { all, at, inFlight };
}

// In order: the last test walks the pages the others filled (an inbox with a delivery, a store key…).
describe.skipIf(!!skipReason)('live pages (one feed, no polling)', { shuffle: false }, () => {
  let subscription: { close(): void } | undefined;

  beforeAll(async () => {
    workspace = await tempDir('svc-emu-gui-live-');
    await mkdir(join(workspace, 'snippets', 'hello'), { recursive: true });
    await writeFile(join(workspace, 'snippets', 'hello', 'index.ts'), HELLO(1));
    gui = await startGui({ workspace });
    subscription = gui.core.emu.events.subscribe((e) => published.push({ type: e.type, at: Date.now() }));
    await api('POST', '/v1/snippets', { name: 'slow', runtime: 'bun' });
    await api('POST', '/v1/snippets/slow/versions', { code: SLOW, max_cpu_percent: 100 });
    await api('POST', '/v1/snippets', { name: 'fetcher', runtime: 'bun' });
    await api('POST', '/v1/snippets/fetcher/versions', { code: FETCH, max_cpu_percent: 100 });
    await until('the workspace snippet hello', async () => {
      const ws = (await api('GET', '/_emu/workspace', undefined, true)) as { folders: { snippet: string; state: string }[] };
      return ws.folders.some((f) => f.snippet === 'hello' && f.state === 'loaded');
    });
    // Signed in (the session cookie), then a page of the same browser watched from its very first request.
    const first = await gui.open();
    const page = await first.page.context().newPage();
    requests = watchRequests(page);
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
    p = {
      page,
      errors,
      go: async (route) => {
        await page.evaluate((r) => (window.location.hash = `#/${r}`), route);
      },
      screenshot: async (name) => {
        await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
      },
    };
    if (process.env.LIVE_TEST_TRACE) {
      // Each of the page's fetches, started and answered, on the page's own clock (Date.now).
      await page.addInitScript(() => {
        const w = window as unknown as { __fetches: string[] };
        w.__fetches = [];
        const real = window.fetch.bind(window);
        window.fetch = async (input, init) => {
          const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
          const path = new URL(url, location.href).pathname;
          w.__fetches.push(`${Date.now()} start ${path}`);
          const res = await real(input, init);
          w.__fetches.push(`${Date.now()} answered ${path}`);
          return res;
        };
      });
    }
    await page.goto(`${gui.core.url}/`);
    await page.getByTestId('live-indicator').and(page.locator('[data-state="live"]')).waitFor();
  }, 60_000);

  afterAll(async () => {
    if (timings.length) {
      console.log('\n[live.test] change → DOM (from just before the change; the change itself; the last event published → DOM):');
      for (const t of timings)
        console.log(
          `  ${t.what.padEnd(44)} ${String(t.ms).padStart(5)} ms   change ${String(t.changeMs).padStart(4)} ms   event → DOM ${t.eventMs ?? '—'} ms`,
        );
    }
    subscription?.close();
    await gui?.close();
    if (workspace) await rm(workspace, { recursive: true, force: true });
  });

  it('Code tab: a save in the workspace shows the new version; a bad save shows the compile error with file and line', async () => {
    await p.go('snippet/hello/code');
    await shownText(p, p.page.getByTestId('code-view'), 'the code of v1');
    const save = await timeTo('Code tab: workspace save → new code', '[data-testid="code-view"]', 'rev: 2', () =>
      writeFile(join(workspace, 'snippets', 'hello', 'index.ts'), HELLO(2)),
    );
    expect(save).toBeLessThan(3000); // a bound, not the figure (see the bad save below)
    expect(await shownText(p, p.page.getByTestId('latest-version'), 'the latest version')).toContain('v2');
    const bad = await timeTo('Code tab: bad save → compile error', '[data-testid="snippet-load-error"]', 'line 2', () =>
      writeFile(join(workspace, 'snippets', 'hello', 'index.ts'), BROKEN),
    );
    // A bound, not the figure (the table above and the bench have those): the page followed the event. 1 s was
    // too tight for a fresh-clone CI run with the linters beside it (1,226 ms); a reload or a poll would be seconds.
    expect(bad).toBeLessThan(3000);
    expect(await shownText(p, p.page.getByTestId('snippet-load-error'), 'the error')).toContain('index.ts');
    await p.screenshot('live-code-error');
    // Fixed again: the error goes and v3 shows.
    await timeTo('Code tab: fixed save → new code', '[data-testid="code-view"]', 'rev: 3', () =>
      writeFile(join(workspace, 'snippets', 'hello', 'index.ts'), HELLO(3)),
    );
    await until('the error to go', async () => (await p.page.getByTestId('snippet-load-error').count()) === 0, 2000);
  });

  it('Snippets list: a snippet created through the API appears; Versions tab: a deploy through the API shows', async () => {
    await p.go('snippets');
    await shownText(p, p.page.getByTestId('snippet-row').filter({ hasText: 'hello' }), 'the hello row');
    const created = await timeTo('Snippets: API create → row', '[data-testid="snippet-row"]', 'made-live', async () => {
      await api('POST', '/v1/snippets', { name: 'made-live', runtime: 'bun' });
    });
    expect(created).toBeLessThan(1000);

    await p.go('snippet/hello/versions');
    await shownText(p, p.page.getByTestId('deployments'), 'what runs where');
    const deployed = await timeTo(
      'Versions: API deploy → what runs where',
      '[data-testid="deployment"][data-env="staging"] [data-testid="deployment-version"]',
      'v1',
      async () => {
        await api('PUT', '/v1/snippets/hello/environments/staging', { version: 1 });
      },
    );
    expect(deployed).toBeLessThan(1000);
  });

  it('Invocations list and one invocation: a run appears, and its status turns into its outcome without a reload', async () => {
    await p.go('invocations');
    await p.page.getByRole('heading', { name: 'Invocations' }).waitFor();
    let id = '';
    const listed = await timeTo('Invocations: async invoke → row', '[data-testid="invocation-row"]', 'slow', async () => {
      const res = await gui.core.call('POST', '/v1/invoke/slow', {}, { headers: { 'x-invoke-mode': 'async' } });
      id = (res.json as { invocation_id: string }).invocation_id;
    });
    expect(listed).toBeLessThan(1000);

    await p.go(`invocation/${id}`);
    await p.page.locator('[data-testid="invocation"][data-status="running"]').waitFor();
    await until('the page to settle', async () => requests.inFlight.size === 0, 5000);
    const settled = Date.now();
    const ended = await timeTo('Invocation: running → outcome', '[data-testid="outcome"]', 'success', async () => {
      await until('the run to end', async () => ((await api('GET', `/v1/invocations/${id}`)).status as string) === 'succeeded', 5000);
    });
    // Nothing was asked while it ran (the old page polled every second): the first read after the page
    // settled came after the run ended (invocation.finished), on the same host clock.
    const finishedAt = Date.parse((await api('GET', `/v1/invocations/${id}`)).finished_at as string);
    expect(finishedAt - settled).toBeGreaterThan(1000); // a real window of running
    const whileRunning = requests.all.filter((_, i) => requests.at[i]! > settled && requests.at[i]! < finishedAt);
    expect(whileRunning, 'requests while the run went on').toEqual([]);
    const shownAt = await p.page.evaluate(() => {
      const w = window as unknown as { __liveSeen: number };
      return performance.timeOrigin + w.__liveSeen;
    });
    timings.push({ what: 'Invocation: finished_at → outcome shown', ms: Math.round(shownAt - finishedAt), changeMs: 0 });
    expect(shownAt - finishedAt).toBeLessThan(1000);
    expect(ended).toBeLessThan(5000);
  });

  it('Inbox and Egress: a delivery and an outbound call show as they happen', async () => {
    await p.go('inbox/live');
    await p.page.getByTestId('inbox-url').waitFor();
    const delivered = await timeTo('Inbox: POST → delivery', '[data-testid="delivery"]', 'POST', async () => {
      const res = await fetch(`${gui.core.url}/_emu/inbox/live`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ hello: 'inbox' }),
      });
      expect(res.status).toBeLessThan(300);
    });
    expect(delivered).toBeLessThan(1000);

    await p.go('egress');
    await p.page.getByTestId('egress-profile').waitFor();
    const host = new URL(gui.core.url).host;
    const called = await timeTo('Egress: snippet fetch → log row', '[data-testid="egress-row"]', host, async () => {
      await api('POST', '/v1/invoke/fetcher', { url: `${gui.core.url}/healthz` });
    });
    expect(called).toBeLessThan(1000);
    // Fault rules added and the log cleared elsewhere (the API, the CLI, another tab).
    const ruled = await timeTo('Egress: API fault rule → listed', '[data-testid="fault-row"]', 'api.live.test', () =>
      api('POST', '/_emu/egress/faults', { host: 'api.live.test', action: { type: 'latency', ms: 5 } }, true),
    );
    expect(ruled).toBeLessThan(1000);
    await gui.core.call('DELETE', '/_emu/egress', undefined, { key: gui.core.admin });
    await until('the log to empty', async () => (await p.page.getByTestId('egress-row').count()) === 0, 2000);
  });

  it('Tenants, Secrets, Store and the Overview follow changes made through the API', async () => {
    await p.go('tenants');
    await p.page.getByTestId('tenant-list').waitFor();
    expect(
      await timeTo('Tenants: API create → card', '[data-testid="tenant-card"]', 'acme-live', () =>
        api('POST', '/_emu/tenants', { name: 'acme-live' }, true),
      ),
    ).toBeLessThan(1000);

    await p.go('secrets');
    await p.page.getByTestId('secret-form').waitFor();
    expect(
      await timeTo('Secrets: API put → row', '[data-testid="secret-row"]', 'LIVE_TOKEN', () =>
        api('PUT', '/v1/secrets/LIVE_TOKEN', { value: 'not-shown' }),
      ),
    ).toBeLessThan(1000);
    expect(await p.page.locator('body').innerText()).not.toContain('not-shown');

    await p.go('store');
    await p.page.getByTestId('store-form').waitFor();
    expect(
      await timeTo('Store: API put → key', '[data-testid="store-row"]', 'live-key', () =>
        api('PUT', '/v1/store/live-key', { value: { n: 1 } }),
      ),
    ).toBeLessThan(1000);

    await p.go('');
    await p.page.getByTestId('tenants').waitFor();
    expect(
      await timeTo('Overview: caps change → table', '[data-testid="tenants"] tr', '4,321', () =>
        api('PATCH', '/_emu/tenants/local/limits', { max_memory_mb: 4321 }, true),
      ),
    ).toBeLessThan(1000);
  });

  it('Terminal: a shell opened and closed elsewhere (the API, another tab) shows and goes', async () => {
    // A HOME of its own (as test/gui/terminal.test.ts): a shell closed while this machine's ~/.bashrc still runs
    // `pyenv rehash` leaves its lock file there, and every later shell on the machine then waits on it.
    const realHome = process.env.HOME;
    process.env.HOME = await tempDir('svc-emu-live-home-');
    onTestFinished(() => void (process.env.HOME = realHome));
    await p.go('terminal');
    await p.page.getByTestId('open-workspace').waitFor();
    const tabs = '[data-testid="term-tabs"] [role="tab"]';
    let id = '';
    const opened = await timeTo('Terminal: API open → tab', tabs, '', async () => {
      id = (await api('POST', '/_emu/terminals', { target: 'workspace' }, true)).id as string;
    });
    expect(opened).toBeLessThan(1000);
    await api('DELETE', `/_emu/terminals/${id}`, undefined, true);
    await until('the tab to go', async () => (await p.page.locator(tabs).count()) === 0, 2000);
  });

  it('no page polls: over a quiet 2 s window each page makes no /_emu or /v1 request beyond the one feed', async () => {
    const inv = (await api('GET', '/v1/invocations?limit=1')) as { data: { id: string }[] };
    const pages: [string, string][] = [
      ['', 'tenants'],
      ['snippets', 'snippet-row'],
      ['snippet/hello/code', 'code-view'],
      ['snippet/hello/versions', 'deployments'],
      ['snippet/hello/settings', 'panel-settings'],
      ['snippet/hello/run', 'panel-run'],
      ['invocations', 'invocation-row'],
      [`invocation/${inv.data[0]!.id}`, 'outcome'],
      ['stream', 'text=No streamed invocations yet'],
      ['inbox', 'inbox-list'],
      ['inbox/live', 'delivery'],
      ['egress', 'fault-row'],
      ['tenants', 'tenant-list'],
      ['secrets', 'secret-row'],
      ['store', 'store-row'],
      ['parity', 'parity-vm'],
      ['terminal', 'open-workspace'],
    ];
    const report: string[] = [];
    for (const [route, ready] of pages) {
      await p.go(route);
      await (ready.startsWith('text=') ? p.page.getByText(ready.slice(5)) : p.page.getByTestId(ready)).first().waitFor();
      await until(`${route || 'overview'}'s loads to end`, async () => requests.inFlight.size === 0, 5000);
      const start = requests.all.length;
      await p.page.waitForTimeout(2000); // the window itself: what is counted are request events within it
      const made = requests.all.slice(start);
      report.push(`${route || 'overview'}: ${made.length}`);
      expect(made, `#/${route} asked during a quiet 2 s: ${made.join(', ')}`).toEqual([]);
    }
    console.log(`\n[live.test] requests in a quiet 2 s window, by page: ${report.join(' · ')}`);
    // One feed for the whole tab, opened once and kept across every page of every test here.
    expect(requests.all.filter((r) => r.endsWith(FEED))).toEqual([`GET ${FEED}`]);
    expect(await p.page.getByTestId('live-indicator').getAttribute('data-state')).toBe('live');
    expect(p.errors.filter((e) => !/status of 4\d\d/.test(e))).toEqual([]);
  }, 90_000);
});

// The feed across a restart of the core on the same port and data dir: the sign says Reconnecting…, and once
// the core is back every page reads again (the feed's `reset`: the old ids are from another start) and
// follows the new core's events.
describe.skipIf(!!skipReason)('the live feed across a restart of the core', () => {
  let dataDir: string;
  let core: TestCore | undefined;
  let browser: Browser | undefined;

  afterAll(async () => {
    await browser?.close();
    await core?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('says Reconnecting… while the core is away, then reads the page again and follows the new core', async () => {
    dataDir = await tempDir('svc-emu-gui-live-restart-');
    const rendererDir = join(PROJECT_ROOT, 'out', 'renderer');
    core = await startTestCore({ dataDir, keepDir: true, config: { rendererDir } });
    const port = core.emu.port;
    await core.call('POST', '/v1/snippets', { name: 'before-restart', runtime: 'bun' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
    const page = await (await browser.newContext({ locale: 'en-US' })).newPage();
    const reads: number[] = [];
    page.on('request', (r) => {
      if (new URL(r.url()).pathname === '/v1/snippets') reads.push(Date.now());
    });
    await page.goto(`${core.url}/?token=${core.admin}#/snippets`);
    const sign = page.getByTestId('live-indicator');
    await page.getByTestId('snippet-row').filter({ hasText: 'before-restart' }).waitFor();
    await sign.and(page.locator('[data-state="live"]')).waitFor();

    await core.stop();
    await sign.and(page.locator('[data-state="reconnecting"]')).waitFor();
    expect(await sign.innerText()).toContain('Reconnecting');

    const readsBefore = reads.length;
    core = await startTestCore({ dataDir, keepDir: true, config: { rendererDir, port } });
    await sign.and(page.locator('[data-state="live"]')).waitFor({ timeout: 15_000 });
    // The reset made the page read its list again, with no event to say so.
    await until('the list read again after the reset', async () => reads.length > readsBefore, 5000);
    // And the new core's events reach it.
    await core.call('POST', '/v1/snippets', { name: 'after-restart', runtime: 'bun' });
    await page.getByTestId('snippet-row').filter({ hasText: 'after-restart' }).waitFor({ timeout: 2000 });
  }, 60_000);
});
