// The GUI's Content Security Policy has no 'unsafe-inline' (issue 14), and the GUI still works under it:
// Chromium visits every sidebar page, a snippet's code view (CodeMirror) and a live terminal (xterm.js), and
// reports no `securitypolicyviolation` and no CSP console error; the <style> elements those libraries create
// carry the page's nonce (fresh per load) and are applied, while a parser-made <style> or a style="…"
// attribute an attacker could inject stays blocked. Skips loudly without Chromium or a build.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/core';
import { SCREENSHOTS, skipReason, startGui, type Gui } from '../helpers/gui';

if (skipReason) console.warn(`\n[csp.test] SKIPPING the GUI CSP tests: ${skipReason}\n`);

const realHome = process.env.HOME;
let gui: Gui;
let workspace: string;

interface Watched {
  page: Page;
  /** Violations reported to the page and CSP complaints on the console. */
  violations(): Promise<string[]>;
}

/** A page that records every CSP violation from its first script on. */
async function watchedPage(): Promise<Watched> {
  const context = await gui.browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 800 } });
  context.setDefaultTimeout(10_000);
  const page = await context.newPage();
  const console: string[] = [];
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) console.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => console.push(`pageerror: ${e.message}`));
  await page.addInitScript(() => {
    const seen: string[] = [];
    (window as unknown as { __cspViolations: string[] }).__cspViolations = seen;
    document.addEventListener(
      'securitypolicyviolation',
      (e) => seen.push(`${e.effectiveDirective} blocked ${e.blockedURI || 'inline'} at ${e.sourceFile}:${e.lineNumber}: ${e.sample}`),
      true,
    );
  });
  return {
    page,
    violations: async () => [
      ...(await page.evaluate(() => (window as unknown as { __cspViolations: string[] }).__cspViolations.splice(0))),
      ...console.splice(0),
    ],
  };
}

async function go(page: Page, route: string): Promise<void> {
  await page.evaluate((r) => (window.location.hash = `#/${r}`), route);
  await page.locator('main h1').first().waitFor();
  await page.waitForFunction(() => !document.querySelector('[data-loading]'), undefined, { timeout: 10_000 });
}

describe.skipIf(!!skipReason)('the GUI under a CSP without unsafe-inline', () => {
  beforeAll(async () => {
    workspace = await tempDir('svc-emu-gui-csp-');
    await mkdir(join(workspace, 'snippets', 'greeter'), { recursive: true });
    await writeFile(
      join(workspace, 'snippets', 'greeter', 'index.ts'),
      'export default async function handler(input) {\n  return { hi: input };\n}\n',
    );
    // The terminal's shell gets a HOME of its own (as test/gui/terminal.test.ts): this machine's ~/.bashrc is not
    // this test's business, and a shell stopped mid-`pyenv rehash` would leave its lock there for every later shell.
    process.env.HOME = await tempDir('svc-emu-csp-home-');
    gui = await startGui({ workspace, config: { terminal: true } });
    const r = await gui.core.call('POST', '/v1/invoke/greeter?env=dev', { a: 1 });
    expect(r.status, r.text).toBe(200);
  }, 30_000);

  afterAll(async () => {
    await gui?.close();
    process.env.HOME = realHome;
    if (workspace) await rm(workspace, { recursive: true, force: true });
  });

  it('index.html comes with a fresh nonce per load in the header and the meta policy, and neither allows unsafe-inline', async () => {
    const a = await fetch(`${gui.core.url}/`);
    const b = await fetch(`${gui.core.url}/`);
    const policies = [a.headers.get('content-security-policy') ?? '', b.headers.get('content-security-policy') ?? ''];
    const nonces = policies.map((p) => /style-src 'self' 'nonce-([A-Za-z0-9+/=]+)'/.exec(p)?.[1]);
    expect(nonces[0]).toMatch(/^[A-Za-z0-9+/]{24}$/);
    expect(nonces[1]).toMatch(/^[A-Za-z0-9+/]{24}$/);
    expect(nonces[0]).not.toBe(nonces[1]);
    const html = await a.text();
    expect(html).not.toContain('SVC_EMU_CSP_NONCE');
    expect(html).toContain(`nonce="${nonces[0]}"`);
    const meta = /http-equiv="Content-Security-Policy"\s+content="([^"]+)"/.exec(html)?.[1] ?? '';
    expect(meta).toContain(`'nonce-${nonces[0]}'`);
    for (const policy of [...policies, meta]) {
      expect(policy).not.toContain('unsafe-inline');
      expect(policy).not.toContain('unsafe-eval');
      expect(policy).toMatch(/script-src 'self'(;|$)/);
    }
    expect(policies[0]).toContain("frame-ancestors 'none'");
    const asset = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
    const js = await fetch(`${gui.core.url}/${asset}`);
    expect(js.headers.get('content-security-policy')).not.toContain('nonce-');
  });

  it('every page, the code view and a live terminal: no CSP violation, and the styles the libraries create apply', async () => {
    const w = await watchedPage();
    await w.page.goto(`${gui.core.url}/?token=${gui.core.admin}`);
    await w.page.getByTestId('version').waitFor();
    const routes = (
      await w.page.locator('nav[aria-label="Pages"] ul a').evaluateAll((as) => as.map((a) => a.getAttribute('href') ?? ''))
    ).map((h) => h.replace(/^#\/?/, ''));
    expect(routes).toContain('terminal');
    const invocations = (await gui.core.call('GET', '/v1/invocations')).json.data as { id: string }[];
    const more = [
      'snippet/greeter',
      'snippet/greeter/code',
      'snippet/greeter/versions',
      'snippet/greeter/settings',
      'snippet/greeter/run',
      `invocation/${invocations[0]!.id}`,
    ];
    const problems: string[] = [];
    for (const route of [...routes, ...more]) {
      await go(w.page, route);
      if (route === 'terminal') {
        await w.page.getByTestId('open-workspace').click();
        await w.page.locator('.xterm-rows').waitFor();
        await w.page.keyboard.type('echo csp-ok\n');
        await w.page.locator('.xterm-rows', { hasText: 'csp-ok' }).first().waitFor();
      }
      if (route === 'snippet/greeter/code') await w.page.locator('.cm-editor').first().waitFor();
      for (const v of await w.violations()) problems.push(`${route || 'overview'}: ${v}`);
    }
    await w.page.screenshot({ path: join(SCREENSHOTS, 'csp-terminal.png') });
    expect(problems).toEqual([]);

    // CodeMirror's and xterm.js's <style> elements were let in (a blocked one has no sheet).
    const styles = async () =>
      w.page.evaluate(() =>
        [...document.querySelectorAll('style')].map((s) => ({ applied: s.sheet !== null, css: (s.textContent ?? '').slice(0, 60) })),
      );
    await go(w.page, 'snippet/greeter/code');
    await w.page.locator('.cm-editor').first().waitFor();
    const editor = await styles();
    expect(editor.filter((s) => !s.applied)).toEqual([]);
    expect(editor.some((s) => /\.ͼ/.test(s.css))).toBe(true);
    await go(w.page, 'terminal');
    await w.page.locator('.xterm-rows').first().waitFor();
    const terminal = await styles();
    expect(terminal.filter((s) => !s.applied)).toEqual([]);
    expect(terminal.some((s) => s.css.includes('xterm'))).toBe(true);
    // The terminal looks like one: a rule from xterm.js's own <style> element (its theme) applies to the rows.
    const pointer = await w.page
      .locator('.xterm-rows')
      .first()
      .evaluate((el) => getComputedStyle(el).pointerEvents);
    expect(pointer).toBe('none');
    expect(await w.violations()).toEqual([]);
    await w.page.context().close();
  }, 90_000);

  it('markup an attacker could inject stays blocked: a parser-made <style> and a style="…" attribute', async () => {
    const w = await watchedPage();
    await w.page.goto(`${gui.core.url}/?token=${gui.core.admin}`);
    await w.page.getByTestId('version').waitFor();
    const result = await w.page.evaluate(() => {
      const host = document.createElement('div');
      document.body.append(host);
      host.innerHTML = '<style>body { --csp-probe: injected }</style><span id="csp-probe" style="--csp-probe: injected">x</span>';
      const style = host.querySelector('style')!;
      const probe = (el: Element) => getComputedStyle(el).getPropertyValue('--csp-probe');
      return { sheet: style.sheet !== null, body: probe(document.body), span: probe(document.getElementById('csp-probe')!) };
    });
    expect(result).toEqual({ sheet: false, body: '', span: '' });
    const violations = await w.violations();
    expect(violations.some((v) => v.startsWith('style-src-elem blocked inline'))).toBe(true);
    expect(violations.some((v) => v.startsWith('style-src-attr blocked inline'))).toBe(true);
    await w.page.context().close();
  });
});
