// The placeholder GUI (renderer/, built to out/renderer) in a real browser: Debian's Chromium driven by
// playwright-core, served by a real core. Browser mode (?token= in the URL), desktop mode (the preload
// bridge injected with addInitScript, since Electron never launches here) and the failure notices.
// Skips loudly when Chromium or the build is missing; `npm test` runs setup --for=test, which provides both.
import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SvcEmuBridge } from '../../main/bridge';
import { startEmulator, type RunningEmulator } from '../../server';
import { jsonLogger } from '../../server/logger';
import { tempDir } from '../helpers/core';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';
const RENDERER_DIR = join(ROOT, 'out/renderer');
const SCREENSHOT = join(ROOT, 'test/.tmp/gui-home.png');

const skipReason = !existsSync(CHROMIUM)
  ? `${CHROMIUM} is missing (run \`node scripts/setup.mjs --for=test\`, or \`npm test\`, to install it)`
  : !existsSync(join(RENDERER_DIR, 'index.html'))
    ? 'out/renderer/index.html is not built (run `npm run build`)'
    : null;
if (skipReason) console.warn(`\n[gui.test] SKIPPING every GUI test: ${skipReason}\n`);

/** What one page did: every request URL, console errors and uncaught page errors. */
interface Watched {
  page: Page;
  requests: string[];
  errors: string[];
}

let core: RunningEmulator;
let dataDir: string;
let browser: Browser;
const contexts: BrowserContext[] = [];
/** Every request any page of this file made, for the same-origin check. */
const allRequests: string[] = [];

/** A page in a fresh context (fresh sessionStorage), with its requests and errors recorded. */
async function openPage(init?: (context: BrowserContext) => Promise<void>): Promise<Watched> {
  const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1000, height: 700 } });
  contexts.push(context);
  context.setDefaultTimeout(10_000); // fail with a diagnosis (see shown()) well before the test timeout
  if (init) await init(context);
  const page = await context.newPage();
  const watched: Watched = { page, requests: [], errors: [] };
  page.on('request', (req) => {
    watched.requests.push(req.url());
    allRequests.push(req.url());
  });
  page.on('console', (msg) => {
    if (msg.type() === 'error') watched.errors.push(`console: ${msg.text()}`);
  });
  page.on('pageerror', (err) => watched.errors.push(`pageerror: ${err.message}`));
  return watched;
}

/** Injects `window.svcEmu` the way main/preload.ts exposes it (contextBridge copies the getter's promise). */
async function injectBridge(context: BrowserContext, token: string): Promise<void> {
  await context.addInitScript((adminToken: string) => {
    const bridge: SvcEmuBridge = {
      adminToken: Promise.resolve(adminToken),
      // The folder "picked": set window.__pickFolder in a test (null: the picker was cancelled).
      openFolder: () => Promise.resolve((window as unknown as { __pickFolder?: string }).__pickFolder ?? null),
      reveal: () => Promise.resolve(),
      openInEditor: () => Promise.resolve(''),
      switchWorkspace: (path: string) => {
        (window as unknown as { __switched: string[] }).__switched.push(path);
        return Promise.resolve(path.includes('nope') ? '/nope does not exist' : '');
      },
    };
    Object.defineProperty(window, '__switched', { value: [] });
    Object.defineProperty(window, 'svcEmu', { value: Object.freeze(bridge), enumerable: true });
  }, token);
}

const apiKey = (page: Page) => page.getByTestId('api-key');

/** Waits for `locator` to be visible and returns its text; on a timeout, says what the page shows instead. */
async function shown(w: Watched, locator: Locator, what: string): Promise<string> {
  try {
    await locator.first().waitFor({ state: 'visible' });
  } catch (err) {
    const body = await w.page
      .locator('body')
      .innerText({ timeout: 1000 })
      .catch((e: Error) => `<unreadable: ${e.message}>`);
    throw new Error(
      `${what} never appeared (${(err as Error).message.split('\n')[0]}).\n` +
        `url: ${w.page.url()}\npage text: ${JSON.stringify(body)}\nerrors: ${JSON.stringify(w.errors)}\nrequests: ${JSON.stringify(w.requests)}`,
    );
  }
  return await locator.first().innerText();
}

describe('GUI in Chromium', () => {
  beforeAll(async () => {
    if (skipReason) return;
    dataDir = await tempDir('svc-emu-gui-');
    core = await startEmulator({ dataDir, port: 0, rendererDir: RENDERER_DIR, logger: jsonLogger(() => {}) });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true, // launch() also gives the browser a fresh temporary user-data-dir
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 30_000);

  afterAll(async () => {
    for (const context of contexts) await context.close().catch(() => {});
    await browser?.close();
    await core?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it.skipIf(!!skipReason)(
    'browser mode: ?token= shows version, data dir, API key and caps; the token leaves the URL; a reload still works',
    async () => {
      const w = await openPage();
      const { page } = w;
      await page.goto(`${core.url}/?token=${core.adminToken}`);

      expect(core.localApiKey).toMatch(/\S/);
      expect(await shown(w, apiKey(page), 'the API key')).toBe(core.localApiKey);
      const info = (await (await fetch(`${core.url}/_emu/info`, { headers: { authorization: `Bearer ${core.adminToken}` } })).json()) as {
        version: string;
      };
      expect(await page.getByTestId('version').innerText()).toBe(info.version);
      expect(await page.getByTestId('data-dir').innerText()).toBe(core.dataDir);
      expect(await page.getByTestId('core-url').innerText()).toBe(`${core.url}/v1`);
      expect(await page.getByTestId('workspace').innerText()).toMatch(/^none: start with --workspace DIR/);
      const firstCall = await page.getByTestId('first-call').innerText();
      expect(firstCall).toContain(`${core.url}/v1/invoke/hello`);
      expect(firstCall).toContain(`Bearer ${core.localApiKey}`);
      expect(await page.getByTestId('switch-workspace').count()).toBe(0); // desktop app only

      const local = page.getByTestId('tenants').locator('tbody tr', { has: page.locator('td', { hasText: /^local$/ }) });
      expect(await local.locator('td').allInnerTexts()).toEqual(['local', '900,000 ms', '2,048 MB', '100 %', '10']);

      // The token left the address bar (the core's redirect) and the page holds no credential: the session is an HttpOnly cookie.
      expect(await page.evaluate(() => location.search)).toBe('');
      expect(page.url()).not.toContain(core.adminToken);
      expect(await page.evaluate(() => JSON.stringify({ ...sessionStorage, ...localStorage }) + document.cookie)).not.toContain(
        core.adminToken,
      );

      await mkdir(join(ROOT, 'test/.tmp'), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });

      await page.reload();
      expect(await shown(w, apiKey(page), 'the API key after a reload')).toBe(core.localApiKey);
      expect(page.url()).toBe(`${core.url}/`);
    },
  );

  it.skipIf(!!skipReason)('not signed in: tells the user to open the URL printed by npm start', async () => {
    const w = await openPage();
    await w.page.goto(`${core.url}/`);

    const alert = await shown(w, w.page.getByRole('alert'), 'the sign-in notice');
    expect(alert).toContain('Sign in');
    expect(alert).toContain('Open the URL that npm start (or svc-emu serve) printed, which carries the admin token as ?token=…');
    expect(await apiKey(w.page).count()).toBe(0);
    // Only the question "am I signed in?" (answered without a 401), nothing else of /_emu.
    expect(w.requests.filter((u) => u.includes('/_emu/'))).toEqual([`${core.url}/_emu/gui-session`]);
  });

  it.skipIf(!!skipReason)('wrong token: says the link is not this run’s and drops the token from the address bar', async () => {
    const w = await openPage();
    await w.page.goto(`${core.url}/?token=emu_wrong`);

    const alert = await shown(w, w.page.getByRole('alert'), 'the rejected-token notice');
    expect(alert).toContain('That link’s admin token is not this run’s');
    expect(alert).toContain('Open the URL that npm start');
    expect(await apiKey(w.page).count()).toBe(0);
    expect(await w.page.evaluate(() => location.search)).toBe('');
  });

  it.skipIf(!!skipReason)('desktop mode without the cookie (signed out while it ran): the preload bridge signs in again', async () => {
    const w = await openPage((context) => injectBridge(context, core.adminToken));
    await w.page.goto(`${core.url}/`);

    expect(await shown(w, apiKey(w.page), 'the API key')).toBe(core.localApiKey);
    expect(await w.page.evaluate(() => typeof window.svcEmu?.openFolder)).toBe('function');
    expect(w.page.url()).toBe(`${core.url}/`);

    // Switch workspace: the folder picker (here cancelled, then a folder), then the app restarts on it.
    await w.page.getByTestId('switch-workspace').click();
    expect(await w.page.evaluate(() => (window as unknown as { __switched: string[] }).__switched)).toEqual([]);
    const pick = (dir: string) => w.page.evaluate((d) => ((window as unknown as { __pickFolder?: string }).__pickFolder = d), dir);
    await pick('/nope');
    await w.page.getByTestId('switch-workspace').click();
    expect(await shown(w, w.page.getByRole('alert'), 'the refusal')).toBe('Cannot switch: /nope does not exist');
    await pick('/home/me/other-ws');
    await w.page.getByTestId('switch-workspace').click();
    // (The sidebar's live-feed sign is a status too.)
    const restart = w.page.getByRole('status').filter({ hasText: 'Restarting' });
    expect(await shown(w, restart, 'the restart notice')).toBe('Restarting on /home/me/other-ws…');
    expect(await w.page.evaluate(() => (window as unknown as { __switched: string[] }).__switched)).toEqual(['/nope', '/home/me/other-ws']);
    expect(await w.page.getByTestId('switch-workspace').isDisabled()).toBe(true);
    expect(w.errors).toEqual([]);
  });

  it.skipIf(!!skipReason)('talks to the core only, with no console errors (browser and desktop mode)', async () => {
    const origin = new URL(core.url).origin;
    for (const mode of ['browser', 'desktop'] as const) {
      const w = await openPage(mode === 'desktop' ? (context) => injectBridge(context, core.adminToken) : undefined);
      await w.page.goto(mode === 'browser' ? `${core.url}/?token=${core.adminToken}` : `${core.url}/`);
      expect(await shown(w, apiKey(w.page), `the API key (${mode} mode)`)).toBe(core.localApiKey);
      // Not networkidle: the live feed (GET /_emu/events) stays open. Its sign says it connected, after the page's first reads.
      await w.page.locator('[data-testid="live-indicator"][data-state="live"]').waitFor();

      expect(w.errors, mode).toEqual([]);
      expect(
        w.requests.some((u) => u.endsWith('/_emu/info')),
        mode,
      ).toBe(true);
      expect(
        w.requests.some((u) => /\/assets\/[^/]+\.js$/.test(u)),
        mode,
      ).toBe(true);
    }
    // Over every page this file opened (the rejected-token page included).
    const foreign = allRequests.filter((u) => !u.startsWith('data:') && new URL(u).origin !== origin);
    expect(foreign).toEqual([]);
  });
});
