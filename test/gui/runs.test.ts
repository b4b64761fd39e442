// Runs you can repeat, and watching never cancels (issue 17), in Chromium against a real core running real
// Bun snippets: "Run again" and "Edit and run" on an invocation's page (its stored input and overrides),
// per-run overrides that reset after a run unless pinned (the pin kept per snippet in localStorage), and a
// stream started in the Run panel that goes on while this tab watches it in the live inspector, a second
// tab watches and leaves, and the first navigates around (renderer/src/runs.ts holds it); Cancel ends it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../../contract';
import { shownText, skipReason, startGui, until, type Gui } from '../helpers/gui';

if (skipReason) console.warn(`\n[runs.test] SKIPPING the run GUI tests: ${skipReason}\n`);

const HELLO = `
export default async function handler(input) {
  return { greeting: "Hello, " + (input.name ?? "world"), got: input };
}`;

const SLOW = `
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default async function* handler(input) {
  const n = input.n ?? 5;
  for (let i = 1; i <= n; i++) {
    if (i > 1) await sleep(input.pause_ms ?? 200);
    yield { i };
  }
  return { chunks: n };
}`;

let gui: Gui;

async function snippet(name: string, code: string, create = true) {
  if (create) expect((await gui.core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
  const v = await gui.core.call('POST', `/v1/snippets/${name}/versions`, { code });
  expect(v.status, v.text).toBe(201);
}

const record = (id: string) => gui.core.client.call(operations.emuGetInvocation, { params: { id } });
const eventsOf = async (id: string) => (await gui.core.client.call(operations.emuInvocationEvents, { params: { id } })).data;
const idIn = (url: string, page: string) => new RegExp(`#/${page}/([^/?]+)$`).exec(url)?.[1] ?? null;

describe.skipIf(!!skipReason)('runs you can repeat', () => {
  beforeAll(async () => {
    gui = await startGui();
    await snippet('hello', HELLO);
    await snippet('hello', HELLO.replace('Hello, ', 'Hi, '), false); // v2: Run again must still run v1
    await snippet('slow', SLOW);
    expect((await gui.core.call('PUT', '/v1/snippets/hello/environments/dev', { version: 1 })).status).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await gui?.close();
  });

  it('Run again makes a new invocation with the same input, version, env and overrides', async () => {
    const first = await gui.core.call(
      'POST',
      '/v1/invoke/hello?env=dev',
      { name: 'Ada', list: [1, 2, 3] },
      { headers: { 'X-Emu-Limits': 'timeout_ms=4000', 'X-Emu-Admin': gui.core.admin } },
    );
    expect(first.status, first.text).toBe(200);
    const id = first.headers.get('x-invocation-id')!;
    const p = await gui.open();
    await p.go(`invocation/${id}`);
    expect(await shownText(p, p.page.getByTestId('stored-overrides'), 'the stored overrides')).toContain('timeout_ms=4000');
    await p.page.getByTestId('run-again').click();
    const again = await until('the new invocation’s page', async () => {
      const m = idIn(p.page.url(), 'invocation');
      return m && m !== id ? m : null;
    });
    await p.page.locator('[data-testid=invocation][data-outcome=success]').waitFor();
    const rec = await record(again);
    expect({ version: rec.version, env: rec.env, mode: rec.mode, input: rec.input, overrides: rec.overrides, output: rec.output }).toEqual({
      version: 1,
      env: 'dev',
      mode: 'sync',
      input: { name: 'Ada', list: [1, 2, 3] },
      overrides: { timeout_ms: 4000 },
      output: first.json,
    });
    expect(rec.limits.timeout_ms).toBe(4000);
    await p.screenshot('runs-run-again');

    // An input over 64 KiB was not kept: Run again says so and waits for Edit and run.
    const big = await gui.core.call('POST', '/v1/invoke/hello', { s: 'x'.repeat(70 * 1024) });
    await p.go(`invocation/${big.headers.get('x-invocation-id')}`);
    expect(await shownText(p, p.page.getByTestId('stored-input-missing'), 'the missing input note')).toContain('over 64 KiB');
    expect(await p.page.getByTestId('run-again').isDisabled()).toBe(true);
    expect(await p.page.getByTestId('edit-and-run').getAttribute('href')).toBe(
      `#/snippet/hello/run/from/${big.headers.get('x-invocation-id')}`,
    );
    expect(p.errors).toEqual([]);
  });

  it('Edit and run opens the Run panel prefilled, and runs the edited input', async () => {
    const first = await gui.core.call(
      'POST',
      '/v1/invoke/hello?version=1',
      { name: 'Ada' },
      { headers: { 'X-Emu-Limits': 'max_cpu_percent=50', 'X-Emu-Admin': gui.core.admin } },
    );
    const id = first.headers.get('x-invocation-id')!;
    const p = await gui.open();
    await p.go(`invocation/${id}`);
    await p.page.getByTestId('edit-and-run').click();
    await until('the Run panel', async () => p.page.url().endsWith(`#/snippet/hello/run/from/${id}`));
    await shownText(p, p.page.getByTestId('run-prefill'), 'the prefill note');
    const input = p.page.getByTestId('run-input');
    await until('the prefilled input', async () => (await input.inputValue()).includes('Ada'));
    expect(JSON.parse(await input.inputValue())).toEqual({ name: 'Ada' });
    expect(await p.page.getByTestId('run-mode').inputValue()).toBe('sync');
    expect(await p.page.getByTestId('run-target').inputValue()).toBe('v:1');
    expect(await p.page.getByTestId('override-max_cpu_percent').inputValue()).toBe('50');
    await p.screenshot('runs-edit-and-run');

    await input.fill('{"name": "Grace"}');
    await p.page.getByTestId('run').click();
    const output = JSON.parse(await shownText(p, p.page.getByTestId('run-output').locator('pre'), 'the output')) as { greeting: string };
    expect(output.greeting).toBe('Hello, Grace'); // v1, not the latest v2
    const newId = await p.page.getByTestId('run-invocation').innerText();
    const rec = await record(newId);
    expect({ input: rec.input, overrides: rec.overrides, version: rec.version }).toEqual({
      input: { name: 'Grace' },
      overrides: { max_cpu_percent: 50 },
      version: 1,
    });
    // The override applied to that run only: the field is empty again.
    expect(await p.page.getByTestId('override-max_cpu_percent').inputValue()).toBe('');
    expect(p.errors).toEqual([]);
  });

  it('per-run overrides reset after a run unless pinned; the pin is kept per snippet', async () => {
    const p = await gui.open();
    await p.go('snippet/hello/run');
    const timeout = p.page.getByTestId('override-timeout_ms');
    await timeout.waitFor();
    const runOnce = async () => {
      const before = await p.page
        .getByTestId('run-invocation')
        .innerText({ timeout: 200 })
        .catch(() => '');
      await p.page.getByTestId('run').click();
      const id = await until('the run’s invocation', async () => {
        const t = await p.page
          .getByTestId('run-invocation')
          .innerText({ timeout: 200 })
          .catch(() => '');
        return t && t !== before ? t : null;
      });
      return record(id);
    };

    await timeout.fill('3000');
    const one = await runOnce();
    expect(one.limits.timeout_ms).toBe(3000);
    expect(await p.page.getByTestId('run-overrides').innerText()).toBe('timeout_ms=3000');
    expect(await timeout.inputValue()).toBe('');
    const two = await runOnce();
    expect(two.overrides).toBeNull();
    expect(two.limits.timeout_ms).toBe(60000);

    await timeout.fill('3500');
    await p.page.getByTestId('override-pin').check();
    expect((await runOnce()).limits.timeout_ms).toBe(3500);
    expect(await timeout.inputValue()).toBe('3500');
    expect((await runOnce()).limits.timeout_ms).toBe(3500);

    // Kept across a reload, for this snippet only.
    await p.page.reload();
    await p.go('snippet/hello/run');
    await until('the pinned value', async () => (await timeout.inputValue().catch(() => '')) === '3500');
    expect(await p.page.getByTestId('override-pin').isChecked()).toBe(true);
    await p.go('snippet/slow/run');
    await until('the other snippet’s form', async () => (await p.page.getByTestId('run-target').innerText()).includes('v1'));
    expect(await timeout.inputValue()).toBe('');
    expect(await p.page.getByTestId('override-pin').isChecked()).toBe(false);

    // Unpinned: the next run resets it.
    await p.go('snippet/hello/run');
    await until('the pinned value', async () => (await timeout.inputValue().catch(() => '')) === '3500');
    await p.page.getByTestId('override-pin').uncheck();
    expect((await runOnce()).limits.timeout_ms).toBe(3500);
    expect(await timeout.inputValue()).toBe('');
    expect(await p.page.evaluate(() => window.localStorage.getItem('svc-emu.run-overrides-pin.hello'))).toBeNull();
    expect(p.errors).toEqual([]);
  });

  it('watching never cancels: live inspector here and in a second tab, navigating around, then back to a complete run', async () => {
    const n = 20;
    const p = await gui.open();
    await p.go('snippet/slow/run');
    const input = p.page.getByTestId('run-input');
    await input.waitFor();
    await input.fill(JSON.stringify({ n, pause_ms: 300 }));
    await p.page.getByTestId('run-mode').selectOption('stream');
    await p.page.getByTestId('run').click();
    await p.page.locator('[data-testid=stream-event][data-event=chunk]').first().waitFor();
    const id = (await p.page.getByTestId('run-invocation').innerText()).trim();

    // The live inspector in this tab: the Run panel unmounts, the run goes on.
    await p.page.getByTestId('run-inspector').click();
    await until('the inspector', async () => idIn(p.page.url(), 'stream') === id);
    await p.page.getByTestId('stream-inspector').waitFor();
    await until(
      'chunks arriving in the inspector',
      async () => (await p.page.locator('[data-testid=stream-event][data-event=chunk]').count()) >= 2,
    );

    // A second tab watches, and leaves.
    const second = await p.page.context().newPage();
    await second.goto(`${gui.core.url}/#/stream/${id}`);
    await second.getByTestId('stream-inspector').waitFor();
    await until(
      'chunks in the second tab',
      async () => (await second.locator('[data-testid=stream-event][data-event=chunk]').count()) >= 1,
    );
    await second.close();
    expect((await record(id)).status, 'the second tab left while it ran').toBe('running');

    // Around the GUI, while it runs.
    for (const route of ['invocations', 'snippets', `invocation/${id}`, 'stream']) {
      await p.go(route);
      await p.page.waitForFunction((r) => window.location.hash === `#/${r}`, route);
    }
    expect(['running', 'succeeded'], 'not cancelled by the watchers leaving').toContain((await record(id)).status);

    // Back in the Run panel: the same run, complete.
    await p.go('snippet/slow/run');
    await p.page.locator('[data-testid=run-result][data-mode=stream] h2 .badge.outcome-success').waitFor({ timeout: 15_000 });
    const shown = await p.page.getByTestId('stream-event').evaluateAll((r) => r.map((x) => x.getAttribute('data-event')));
    expect(shown).toEqual(['start', ...Array<string>(n).fill('chunk'), 'result']);
    const rec = await until('the record', async () => {
      const r = await record(id);
      return r.status === 'running' ? null : r;
    });
    expect(rec.outcome).toBe('success');
    expect((await eventsOf(id)).filter((e) => e.event === 'chunk')).toHaveLength(n);
    await p.screenshot('runs-stream-after-watching');
    expect(p.errors).toEqual([]);
  });

  it('Cancel does cancel a stream started in the Run panel', async () => {
    const p = await gui.open();
    await p.go('snippet/slow/run');
    const input = p.page.getByTestId('run-input');
    await input.waitFor();
    await input.fill(JSON.stringify({ n: 50, pause_ms: 200 }));
    await p.page.getByTestId('run-mode').selectOption('stream');
    await p.page.getByTestId('run').click();
    await p.page.locator('[data-testid=stream-event][data-event=chunk]').first().waitFor();
    const id = (await p.page.getByTestId('run-invocation').innerText()).trim();
    await p.page.getByTestId('run-cancel').click();
    await p.page.locator('[data-testid=run-result][data-mode=stream] h2 .badge.outcome-cancelled').waitFor();
    const rec = await until('the cancelled record', async () => {
      const r = await record(id);
      return r.status === 'running' ? null : r;
    });
    expect(rec.outcome).toBe('cancelled');
    expect((await eventsOf(id)).filter((e) => e.event === 'chunk').length).toBeLessThan(50);
    await p.screenshot('runs-stream-cancelled');
    expect(p.errors).toEqual([]);
  });
});
