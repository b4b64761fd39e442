import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { createClient } from '../contract/client';
import { operations as ops } from '../contract';
import { client, ROOT, serveCore, stats } from './lib';

/**
 * Issue 8's figures: what the GUI costs to load (bundle sizes; time from opening the printed URL to the
 * first page, and a page switch, in Debian's Chromium), and how a terminal keystroke feels (input POST
 * → its echo on the output SSE, through a real pty and bash).
 */
const CHROMIUM = '/usr/bin/chromium';

function bundles() {
  const dir = join(ROOT, 'out', 'renderer', 'assets');
  const html = readFileSync(join(ROOT, 'out', 'renderer', 'index.html'), 'utf8');
  const out: Record<string, { kb: number; gzip_kb: number; loaded: 'at start' | 'on demand' }> = {};
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.js') || f.endsWith('.css'))) {
    const bytes = readFileSync(join(dir, file));
    const name = file.replace(/-[\w-]{8}\.(js|css)$/, '.$1');
    out[name] = {
      kb: Math.round(statSync(join(dir, file)).size / 102.4) / 10,
      gzip_kb: Math.round(gzipSync(bytes).length / 102.4) / 10,
      loaded: html.includes(file) ? 'at start' : 'on demand',
    };
  }
  return out;
}

/** In the page, as source text (tsx would wrap named functions in a helper the page does not have). */
const TIMED_SWITCH = `new Promise((resolve) => {
  const t = performance.now();
  const observer = new MutationObserver(() => {
    const h1 = document.querySelector('main h1');
    if (h1 && h1.textContent === 'Invocations' && !document.querySelector('[data-loading]')) {
      observer.disconnect();
      resolve(performance.now() - t);
    }
  });
  observer.observe(document.body, { childList: true, subtree: true, characterData: true });
  document.querySelector('nav a[href="#/invocations"]').click();
})`;

async function pageLoads(url: string, token: string, n: number) {
  if (!existsSync(CHROMIUM)) return { skipped: `${CHROMIUM} is missing` };
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const first: number[] = [];
    const switches: number[] = [];
    for (let i = 0; i < n; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const t0 = performance.now();
      await page.goto(`${url}/?token=${token}`);
      await page.getByTestId('version').waitFor();
      first.push(performance.now() - t0);
      // Timed inside the page (no driver round trips): the click, until the new page's h1 shows with no
      // loading placeholder left.
      switches.push(await page.evaluate<number>(TIMED_SWITCH));
      await context.close();
    }
    return { open_to_overview: stats(first), switch_to_invocations: stats(switches) };
  } finally {
    await browser.close();
  }
}

/** Keystroke → echo: one character POSTed to the terminal's input, timed until the pty's echo arrives. */
async function terminalEcho(url: string, token: string, n: number) {
  const admin = client(url, token);
  const created = await admin('POST', '/_emu/terminals', { cols: 120, rows: 30 });
  if (created.status !== 201) return { skipped: `POST /_emu/terminals answered ${created.status}: ${created.body}` };
  const id = (JSON.parse(created.body) as { id: string }).id;
  let seen = '';
  let wake = null as (() => void) | null;
  // The output's events through the one client, read in the background until the bench aborts them.
  const ac = new AbortController();
  const output = await createClient({ baseUrl: url, adminToken: token }).stream(ops.emuTerminalOutput, {
    params: { id },
    signal: ac.signal,
  });
  const reading = (async () => {
    for await (const e of output) {
      if (e.event === 'output') seen += (e.data as { data?: string }).data ?? '';
      wake?.();
    }
  })().catch(() => undefined);
  const until = async (pred: () => boolean) => {
    while (!pred()) await new Promise<void>((r) => (wake = r));
  };
  await admin('POST', `/_emu/terminals/${id}/input`, { data: 'echo ready-$((1+1))\n' });
  await until(() => seen.includes('ready-2'));
  const samples: number[] = [];
  for (let i = 0; i < n + 20; i++) {
    if (i % 40 === 0) await admin('POST', `/_emu/terminals/${id}/input`, { data: '\x15' }); // Ctrl-U: keep the line short
    const before = seen.length;
    const t0 = performance.now();
    await admin('POST', `/_emu/terminals/${id}/input`, { data: 'x' });
    await until(() => seen.slice(before).includes('x'));
    if (i >= 20) samples.push(performance.now() - t0); // the first 20 warm up
  }
  ac.abort();
  await reading;
  await admin('DELETE', `/_emu/terminals/${id}`);
  return stats(samples);
}

export async function guiBench(opts: { loads: number; keystrokes: number }) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-emu-bench-gui-'));
  const core = await serveCore(dir);
  try {
    const token = (JSON.parse(readFileSync(join(dir, 'emulator.json'), 'utf8')) as { admin_token: string }).admin_token;
    return {
      bundles: bundles(),
      chromium: await pageLoads(core.url, token, opts.loads),
      terminal_keystroke_echo: await terminalEcho(core.url, token, opts.keystrokes),
    };
  } finally {
    await core.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
