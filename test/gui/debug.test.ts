// The Debug button (issue 19), in Chromium against a real core running a real Bun snippet: it starts the run
// with X-Emu-Debug (the GUI has the admin token), the Run panel shows the session from the live feed — the
// inspector's URL with a copy button, the state (waiting for a debugger → held by a debugger → detached → ended)
// and the note on what is relaxed — while a raw WebSocket attaches to Bun's inspector and leaves; the run's
// invocation page then shows the "debug run" badge and the parity warning naming what was relaxed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../../contract';
import { shownText, skipReason, startGui, until, type Gui } from '../helpers/gui';
import { InspectorSession } from '../helpers/inspector-client';

if (skipReason) console.warn(`\n[debug.test] SKIPPING the Debug button GUI tests: ${skipReason}\n`);

/** Waits on the store key `go` (set by the test), so the test decides when the run ends. */
const GATED = `import { store } from "@svc/store";
export default async function handler(input) {
  const seen = input.name ?? "nobody";
  while (!(await store.get("go"))) await new Promise((r) => setTimeout(r, 20));
  return { hello: seen };
}`;

let gui: Gui;

describe.skipIf(!!skipReason)('the Debug button', () => {
  beforeAll(async () => {
    gui = await startGui();
    expect((await gui.core.call('POST', '/v1/snippets', { name: 'gated', runtime: 'bun' })).status).toBe(201);
    const v = await gui.core.call('POST', '/v1/snippets/gated/versions', { code: GATED });
    expect(v.status, v.text).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await gui?.close();
  });

  it('starts a debug run, shows where to attach and who holds it, and the record shows the debug run', async () => {
    const p = await gui.open();
    await p.go('snippet/gated/run');
    await p.page.getByTestId('run-input').fill('{"name": "Ada"}');
    await p.page.getByTestId('run-debug').click();

    const panel = p.page.getByTestId('debug-session');
    const url = await shownText(p, p.page.getByTestId('debug-url'), 'the attach URL');
    expect(url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/$/);
    await p.page.locator('[data-testid=debug-session][data-state=waiting]').waitFor();
    expect(await panel.textContent()).toContain('waiting for a debugger');
    expect(await p.page.getByTestId('debug-protocol').textContent()).toContain('Bun inspector');
    expect(await p.page.getByTestId('debug-bun-link').getAttribute('href')).toBe(`https://debug.bun.sh/#${url.slice('ws://'.length)}`);
    expect(await p.page.getByTestId('debug-note').textContent()).toMatch(
      /timeout is paused; a debug run has no CPU cap; memory stays enforced/,
    );
    await p.page.getByTestId('debug-copy').waitFor();
    await p.screenshot('debug-waiting');

    // Attach as a debugger would: Bun (--inspect-wait) runs the snippet once its debugger says it is ready.
    const ws = await InspectorSession.connect(url);
    await ws.call('Inspector.enable');
    await ws.call('Inspector.initialized');
    await p.page.locator('[data-testid=debug-session][data-state=attached]').waitFor();
    expect(await panel.textContent()).toMatch(/held by a debugger for \d/);
    await p.screenshot('debug-held');

    await ws.close();
    await p.page.locator('[data-testid=debug-session][data-state=detached]').waitFor();
    expect((await gui.core.call('PUT', '/v1/store/go', { value: true })).status).toBe(201);
    await p.page.locator('[data-testid=debug-session][data-state=ended]').waitFor();
    expect(await shownText(p, p.page.getByTestId('run-output'), 'the output')).toContain('"Ada"');

    // The invocation's page: the badge and the warning naming what was relaxed.
    const id = (await p.page.getByTestId('run-invocation').textContent())!.trim();
    const rec = await gui.core.client.call(operations.emuGetInvocation, { params: { id } });
    expect(rec.debug).toMatchObject({ protocol: 'inspector', attached: true });
    await p.page.getByTestId('run-invocation').click();
    expect(await shownText(p, p.page.getByTestId('debug-badge'), 'the debug run badge')).toBe('debug run');
    const warnings = await shownText(p, p.page.getByTestId('parity-warnings'), 'the parity warnings');
    expect(warnings).toMatch(
      /debug run: timeout_ms paused for [\d,]+ ms while a debugger held it, CPU cap \(10%\) lifted for the whole run; memory enforced/,
    );
    await p.screenshot('debug-invocation');
    expect(p.errors).toEqual([]);

    // Nothing outlives the run.
    await until('no debug sessions', async () => (await gui.core.client.call(operations.emuListDebugSessions)).data.length === 0);
  }, 90_000);
});
