/**
 * The GUI in a real browser for page tests: Debian's Chromium driven by playwright-core against a core
 * that serves the built renderer (out/renderer). `skipReason` says why GUI tests cannot run here (they
 * skip loudly); `npm test` runs setup --for=test, which installs Chromium and builds.
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { PROJECT_ROOT, startTestCore, type TestCore } from './core';
import type { EmulatorConfig } from '../../server';

export const CHROMIUM = '/usr/bin/chromium';
const RENDERER_DIR = join(PROJECT_ROOT, 'out', 'renderer');
/** Screenshots of every page land here (test artifacts; look at them). */
export const SCREENSHOTS = join(PROJECT_ROOT, 'test', '.tmp', 'gui');

export const skipReason = !existsSync(CHROMIUM)
  ? `${CHROMIUM} is missing (run \`node scripts/setup.mjs --for=test\`, or \`npm test\`, to install it)`
  : !existsSync(join(RENDERER_DIR, 'index.html'))
    ? 'out/renderer/index.html is not built (run `npm run build`)'
    : null;

export interface GuiPage {
  page: Page;
  /** Console errors and uncaught page errors so far (a page test expects none). */
  errors: string[];
  /** Goes to a hash route, e.g. `snippets` or `snippet/hello/settings`. */
  go(route: string): Promise<void>;
  screenshot(name: string): Promise<void>;
}

export interface Gui {
  core: TestCore;
  browser: Browser;
  open(opts?: { width?: number; height?: number }): Promise<GuiPage>;
  close(): Promise<void>;
}

export async function startGui(opts: { workspace?: string; config?: Partial<EmulatorConfig>; dataDir?: string } = {}): Promise<Gui> {
  const core = await startTestCore({
    workspace: opts.workspace,
    dataDir: opts.dataDir,
    config: { rendererDir: RENDERER_DIR, ...opts.config },
  });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  await mkdir(SCREENSHOTS, { recursive: true });
  return {
    core,
    browser,
    async open({ width = 1280, height = 800 } = {}) {
      const context = await browser.newContext({ locale: 'en-US', viewport: { width, height } });
      context.setDefaultTimeout(10_000);
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(`console: ${m.text()}`);
      });
      page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
      await page.goto(`${core.url}/?token=${core.admin}`);
      await page.getByTestId('version').waitFor();
      return {
        page,
        errors,
        go: async (route) => {
          await page.evaluate((r) => (window.location.hash = `#/${r}`), route);
        },
        screenshot: async (name) => {
          await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
        },
      };
    },
    async close() {
      await browser.close();
      await core.stop();
    },
  };
}

/** Polls `fn` until it answers something truthy (then returns it), or fails saying what never came. */
export async function until<T>(what: string, fn: () => Promise<T | null | undefined | false>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits for `locator` and returns its text; on a timeout says what the page shows instead. */
export async function shownText(p: GuiPage, locator: Locator, what: string): Promise<string> {
  try {
    await locator.first().waitFor({ state: 'visible' });
  } catch (err) {
    const body = await p.page
      .locator('body')
      .innerText({ timeout: 1000 })
      .catch(() => '<unreadable>');
    throw new Error(
      `${what} never appeared (${(err as Error).message.split('\n')[0]})\npage: ${JSON.stringify(body.slice(0, 2000))}\nerrors: ${JSON.stringify(p.errors)}`,
    );
  }
  return locator.first().innerText();
}
