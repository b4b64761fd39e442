// The Terminal page in a real browser against a real core with real shells on real ptys: open a
// workspace shell, type into xterm.js with the keyboard, see the shell's answer, leave the page and come
// back to the same shell (its scrollback replayed), resize with the window, exit, close. Screenshots
// (light, dark, narrow) land in test/.tmp/gui/.
import { mkdir, realpath, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { tempDir } from '../helpers/core';
import { skipReason, startGui, type Gui, type GuiPage } from '../helpers/gui';

if (skipReason) console.warn(`\n[terminal.test] SKIPPING the Terminal page tests: ${skipReason}\n`);

let gui: Gui;
let p: GuiPage;
let workspace: string;
// The shells get a HOME of their own (no ~/.bashrc of this machine: its start-up time or its prompt).
const realHome = process.env.HOME;
let home: string;

/** The terminal's visible text (xterm's DOM renderer: one div per row). */
const screenText = (page: GuiPage) => page.page.locator('.term-screen .xterm-rows').innerText();

async function shows(page: GuiPage, re: RegExp, what: string, timeout = 10_000): Promise<void> {
  await vi.waitFor(
    async () => {
      const text = await screenText(page).catch(() => '<no terminal>');
      if (!re.test(text))
        throw new Error(
          `${what}: no ${re} on the terminal; it shows ${JSON.stringify(text.slice(-800))}; errors: ${JSON.stringify(page.errors)}`,
        );
    },
    { timeout, interval: 50 },
  );
}

async function text(locator: Locator): Promise<string> {
  await locator.first().waitFor({ state: 'visible' });
  return locator.first().innerText();
}

async function terminals() {
  const r = await gui.core.call('GET', '/_emu/terminals', undefined, { key: gui.core.admin });
  expect(r.status, r.text).toBe(200);
  return r.json as { data: { id: string; status: string; cols: number; rows: number; exit_code: number | null }[] };
}

// One user's session, in its order (each step works on the shells the one before opened): not shuffled.
describe.skipIf(!!skipReason)('the Terminal page', { shuffle: false }, () => {
  beforeAll(async () => {
    home = await tempDir('svc-emu-gui-term-home-');
    process.env.HOME = home;
    workspace = await realpath(await tempDir('svc-emu-gui-term-ws-'));
    await mkdir(join(workspace, 'snippets'));
    gui = await startGui({ workspace });
    p = await gui.open();
  }, 30_000);

  afterAll(async () => {
    await gui?.close();
    process.env.HOME = realHome;
    if (workspace) await rm(workspace, { recursive: true, force: true });
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('empty at first; the VM button is disabled with the reason', async () => {
    await p.go('terminal');
    expect(await text(p.page.getByTestId('empty'))).toContain('No shells open');
    expect(await p.page.getByTestId('open-workspace').isEnabled()).toBe(true);
    expect(await p.page.getByTestId('open-vm').isDisabled()).toBe(true);
    expect(await text(p.page.getByTestId('vm-reason'))).toContain('limactl is not on PATH');
    expect(await p.page.getByTestId('open-vm').getAttribute('aria-describedby')).toBe('term-vm-reason');
    await p.screenshot('terminal-empty');
    expect(p.errors).toEqual([]);
  });

  it('opens a workspace shell, runs what is typed, and keeps it across a page change', async () => {
    await p.page.getByTestId('open-workspace').click();
    const screen = p.page.getByTestId('term-screen');
    await screen.waitFor();
    await vi.waitFor(async () => expect(await screen.getAttribute('data-conn')).toBe('open'), { timeout: 10_000 });
    expect(await text(p.page.getByTestId('term-status'))).toMatch(/running .*sh · pid \d+/);
    // The new shell has the keyboard focus: type straight away, as a person would.
    await p.page.keyboard.type('echo $((6*7))-gui', { delay: 15 });
    await p.page.keyboard.press('Enter');
    await shows(p, /^42-gui$/m, 'the answer');
    await shows(p, /echo \$\(\(6\*7\)\)-gui/, 'the typed line, in order');
    // The pty got the size of the box, not the 80×24 it started with.
    const [t] = (await terminals()).data;
    expect(t!.status).toBe('running');
    expect(t!.cols).toBeGreaterThan(80);
    await p.page.keyboard.type('stty size\n');
    await shows(p, new RegExp(`^${t!.rows} ${t!.cols}$`, 'm'), 'stty size after the fit');
    expect(await text(p.page.getByTestId('term-status'))).toContain(`${t!.cols}×${t!.rows}`);
    // Colours, for the screenshots (the ANSI palette in both schemes).
    await p.page.keyboard.type(
      "printf '\\e[31mred \\e[32mgreen \\e[33myellow \\e[34mblue \\e[35mmagenta \\e[36mcyan \\e[1mbold\\e[0m\\n'\n",
    );
    await shows(p, /^red green yellow blue magenta cyan bold$/m, 'the colour line');
    await p.screenshot('terminal');

    // Away and back: the same shell, its scrollback replayed, still taking input.
    await p.go('egress');
    await p.page.getByRole('heading', { name: 'Egress' }).waitFor();
    await p.go('terminal');
    await shows(p, /^42-gui$/m, 'the scrollback after coming back');
    expect((await terminals()).data).toHaveLength(1);
    await screen.click();
    await p.page.keyboard.type('echo back-$((40+2))\n');
    await shows(p, /^back-42$/m, 'input after coming back');

    // Keyboard: Tab stays in the shell (completion), Shift+Escape leaves it for the tab strip.
    const focusInTerminal = () => p.page.evaluate(() => !!document.activeElement?.closest('.term-screen'));
    await p.page.keyboard.press('Tab');
    expect(await focusInTerminal()).toBe(true);
    await p.page.keyboard.press('Shift+Escape');
    expect(await focusInTerminal()).toBe(false);
    expect(await p.page.evaluate(() => document.activeElement?.getAttribute('role'))).toBe('tab');
    await screen.click();
    await p.page.keyboard.press('Control+U'); // the Tab typed above, gone from the line

    // Dark mode.
    await p.page.emulateMedia({ colorScheme: 'dark' });
    await shows(p, /^back-42$/m, 'the terminal in dark mode');
    // xterm.js paints its theme's background on its scrollable element: the card's, in either scheme.
    const bg = () => p.page.locator('.term-screen .xterm-scrollable-element').evaluate((el) => getComputedStyle(el).backgroundColor);
    const card = () => p.page.locator('.term-frame').evaluate((el) => getComputedStyle(el).backgroundColor);
    const lightCard = 'rgb(255, 255, 255)';
    await vi.waitFor(async () => expect(await card()).not.toBe(lightCard));
    await vi.waitFor(async () => expect(await bg()).toBe(await card()));
    await p.screenshot('terminal-dark');
    await p.page.emulateMedia({ colorScheme: 'light' });
    await vi.waitFor(async () => expect(await bg()).toBe(lightCard));
    expect(p.errors).toEqual([]);
  });

  it('follows the window size, at narrow widths too', async () => {
    const before = (await terminals()).data[0]!;
    await p.page.setViewportSize({ width: 600, height: 900 });
    await vi.waitFor(async () => expect((await terminals()).data[0]!.cols).toBeLessThan(before.cols), { timeout: 5000, interval: 100 });
    const after = (await terminals()).data[0]!;
    await p.page.getByTestId('term-screen').click();
    await p.page.keyboard.type('stty size\n');
    await shows(p, new RegExp(`^${after.rows} ${after.cols}$`, 'm'), 'stty size after the window shrank');
    const [scroll, inner] = await p.page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    expect(scroll).toBeLessThanOrEqual(inner);
    await p.screenshot('terminal-narrow');
    await p.page.setViewportSize({ width: 1280, height: 800 });
    expect(p.errors).toEqual([]);
  });

  it('a second shell gets a tab; `exit` shows "exited with 0"; Close removes it', async () => {
    await p.page.getByTestId('open-workspace').click();
    const tabs = p.page.getByTestId('term-tabs').getByRole('tab');
    await vi.waitFor(async () => expect(await tabs.count()).toBe(2));
    expect(await tabs.nth(1).getAttribute('aria-selected')).toBe('true');
    await vi.waitFor(async () => expect(await p.page.getByTestId('term-screen').getAttribute('data-conn')).toBe('open'), {
      timeout: 10_000,
    });
    await p.page.keyboard.type('exit 0\n');
    expect(await text(p.page.getByTestId('term-status').getByText('exited with 0'))).toBe('exited with 0');
    await shows(p, /\[exited with 0\]/, 'the exit on the screen');
    expect(await tabs.nth(1).getAttribute('data-status')).toBe('exited');
    expect((await terminals()).data.map((s) => s.status)).toEqual(['running', 'exited']);
    await p.screenshot('terminal-exited');

    // Back to the first by keyboard (the tablist's arrow keys), then close the exited one.
    await tabs.nth(1).focus();
    await p.page.keyboard.press('ArrowLeft');
    expect(await tabs.nth(0).getAttribute('aria-selected')).toBe('true');
    await shows(p, /^back-42$/m, 'the first shell again');
    await tabs.nth(1).click();
    await p.page.getByTestId('term-close').click();
    await vi.waitFor(async () => expect(await tabs.count()).toBe(1));
    expect((await terminals()).data.map((s) => s.status)).toEqual(['running']);

    // Closing a running shell ends it.
    await p.page.getByTestId('term-close').click();
    await text(p.page.getByTestId('empty'));
    expect((await terminals()).data).toEqual([]);
    expect(p.errors).toEqual([]);
  });

  it('a core without terminals says so, naming the flag', async () => {
    const off = await startGui({ config: { terminal: false } });
    try {
      const page = await off.open();
      await page.go('terminal');
      const notice = page.page.getByRole('alert');
      expect(await text(notice)).toContain('Terminals are off on this emulator');
      expect(await notice.innerText()).toContain('--no-terminal');
      // The 403 the page read is the only console line (the browser logs every failed request).
      expect(page.errors.filter((e) => !/403/.test(e))).toEqual([]);
      await page.screenshot('terminal-disabled');
    } finally {
      await off.close();
    }
  });
});
