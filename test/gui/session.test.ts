// Sign in once (server/http/gui-session.ts, renderer/src/session.ts), in Chromium against real cores: the token
// URL signs the browser in and leaves the address bar; a second tab is signed in; a restart of the core on the
// same data dir keeps a deep link signed in; `gui-token rotate` signs it out; a page of another port of this host
// cannot use the cookie.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rotateGuiToken } from '../../server/cli/gui-token';
import { PROJECT_ROOT, startTestCore, tempDir, type TestCore } from '../helpers/core';
import { CHROMIUM, skipReason, until } from '../helpers/gui';

const RENDERER_DIR = join(PROJECT_ROOT, 'out', 'renderer');

let browser: Browser;
let dataDir: string;
let core: TestCore;
const closers: (() => Promise<unknown>)[] = [];

const startCore = () => startTestCore({ dataDir, config: { rendererDir: RENDERER_DIR } });

async function newContext(): Promise<BrowserContext> {
  const context = await browser.newContext({ locale: 'en-US' });
  context.setDefaultTimeout(10_000);
  closers.push(() => context.close());
  return context;
}

/** The page once it shows the overview (signed in) or the sign-in page, with what it shows. */
async function outcome(page: Page): Promise<'signed-in' | 'sign-in'> {
  const signedIn = page.getByTestId('version');
  const signIn = page.getByTestId('sign-in');
  await signedIn
    .or(signIn)
    .or(page.getByRole('heading', { level: 1 }).filter({ hasNotText: 'Snippet Emulator' }))
    .first()
    // A first page in a fresh browser context can take >10 s on a loaded 2-core machine (a full run at load ~15).
    .waitFor({ timeout: 30_000 });
  return (await signIn.count()) > 0 ? 'sign-in' : 'signed-in';
}

describe.skipIf(!!skipReason)('sign in once (Chromium)', () => {
  beforeAll(async () => {
    dataDir = await tempDir('svc-emu-session-');
    core = await startCore();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 30_000);

  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => {});
    await browser?.close();
    await core?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('the token URL signs in tab 1 and leaves the address bar, tab 2 is signed in, and the cookie is HttpOnly and SameSite=Strict', async () => {
    const context = await newContext();
    const tab1 = await context.newPage();
    const landed = await tab1.goto(`${core.url}/?token=${core.admin}`);
    expect(await outcome(tab1)).toBe('signed-in');
    expect(tab1.url()).toBe(`${core.url}/`);
    expect(await tab1.evaluate(() => location.search)).toBe('');
    // The flags, from the redirect's own Set-Cookie header…
    const redirect = await landed!.request().redirectedFrom()!.response();
    expect(redirect!.status()).toBe(303);
    const setCookie = (await redirect!.headersArray()).find((h) => h.name.toLowerCase() === 'set-cookie')!.value;
    expect(setCookie).toMatch(/^svc_emu_session=[\w-]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Strict$/);
    // …and as the browser keeps it: no script can read it.
    const [cookie] = await context.cookies(core.url);
    expect(cookie).toMatchObject({ name: 'svc_emu_session', httpOnly: true, sameSite: 'Strict', secure: false, path: '/' });
    expect(cookie!.expires).toBeGreaterThan(Date.now() / 1000 + 300 * 24 * 3600);
    expect(await tab1.evaluate(() => document.cookie)).toBe('');
    expect(await tab1.evaluate(() => JSON.stringify({ ...sessionStorage }))).not.toContain(core.admin);

    const tab2 = await context.newPage();
    await tab2.goto(`${core.url}/#/tenants`);
    expect(await outcome(tab2)).toBe('signed-in');
    await expect.poll(() => tab2.getByRole('heading', { level: 1 }).innerText()).toBe('Tenants and caps');
  });

  it('without a session: the sign-in page says what to do, with no failed request; a stale token link says why', async () => {
    const context = await newContext();
    const page = await context.newPage();
    const failed: string[] = [];
    page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
    });
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    await page.goto(`${core.url}/#/snippets`);
    expect(await outcome(page)).toBe('sign-in');
    const text = await page.getByTestId('sign-in').innerText();
    expect(text).toContain('npm start');
    expect(text).toContain('svc-emu gui-token rotate');
    expect(text).toContain('admin token');
    expect(failed).toEqual([]);
    expect(errors).toEqual([]);

    await page.goto(`${core.url}/?token=emu_from_an_earlier_start#/snippets`);
    expect(await outcome(page)).toBe('sign-in');
    expect(await page.getByTestId('sign-in').innerText()).toContain('changes every time the emulator starts');
    expect(page.url()).toBe(`${core.url}/#/snippets`); // the stale token left the address bar too
  });

  it('a restart on the same data dir keeps a deep link signed in; gui-token rotate signs it out', async () => {
    const context = await newContext();
    const page = await context.newPage();
    await page.goto(`${core.url}/?token=${core.admin}`);
    expect(await outcome(page)).toBe('signed-in');

    const oldAdmin = core.admin;
    await core.stop();
    core = await startCore();
    expect(core.admin).not.toBe(oldAdmin);
    // Another port (port 0) on the same host: cookies are per host, so the bookmark of the new URL works.
    await page.goto(`${core.url}/#/tenants`);
    expect(await outcome(page)).toBe('signed-in');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Tenants and caps');

    // The CLI's rotation (server/cli/gui-token.ts) through the running core: signed out at once.
    const rotated = await rotateGuiToken({ dataDir });
    expect(rotated).toMatchObject({ running: true, sign_in_url: `${core.url}/?token=${core.admin}` });
    await page.reload();
    expect(await outcome(page)).toBe('sign-in');
    // The printed URL signs in again, and the deep link survives it.
    await page.goto(`${rotated.sign_in_url!}#/tenants`);
    expect(await outcome(page)).toBe('signed-in');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Tenants and caps');
    expect(page.url()).toBe(`${core.url}/#/tenants`);
  });

  it('a page on another port of this host cannot use the cookie (same-site for the browser, refused by the core)', async () => {
    const context = await newContext();
    const page = await context.newPage();
    await page.goto(`${core.url}/?token=${core.admin}`);
    expect(await outcome(page)).toBe('signed-in');

    // An "attacker" page on 127.0.0.1:<another port>: SameSite does not stop the cookie there (cookies are not per port).
    const evil: Server = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end('<!doctype html><title>evil</title>');
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => evil.close(r)));
    const evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
    await page.goto(evilUrl);
    const statuses = new Map<string, number>();
    page.on('response', (r) => {
      if (r.url().startsWith(core.url)) statuses.set(`${r.request().method()} ${new URL(r.url()).pathname}`, r.status());
    });
    await page.evaluate(async (target) => {
      // A simple POST (no preflight) that would sign everyone out, and a no-CORS read (no Origin header at all).
      await fetch(`${target}/_emu/gui-session/rotate`, { method: 'POST', mode: 'no-cors', credentials: 'include' }).catch(() => {});
      await fetch(`${target}/_emu/info`, { mode: 'no-cors', credentials: 'include' }).catch(() => {});
    }, core.url);
    await until('both requests answered', async () => statuses.size >= 2 || null);
    expect(statuses.get('POST /_emu/gui-session/rotate')).toBe(403);
    expect(statuses.get('GET /_emu/info')).toBe(403);
    // Nothing rotated: the GUI is still signed in.
    await page.goto(`${core.url}/`);
    expect(await outcome(page)).toBe('signed-in');
    // And a request naming another site's Origin, with the cookie, from outside a browser.
    const cookie = (await context.cookies(core.url)).find((c) => c.name === 'svc_emu_session')!;
    const res = await fetch(`${core.url}/_emu/info`, {
      headers: { cookie: `${cookie.name}=${cookie.value}`, origin: 'https://evil.example' },
    });
    expect(res.status).toBe(403);
  });
});
