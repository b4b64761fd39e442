// The Executor VM section of the Parity status page in a real browser against a real core with the fake
// limactl: missing → Create (the log tails live, then Stopped) → Start (Running) → Stop; the buttons
// enabled by state and reachable from the keyboard; and on this Linux host without a limactl, the reason
// shown plainly with no buttons. Screenshots: test/.tmp/gui/parity-vm*.png.
import type { Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { skipReason, startGui, type Gui, type GuiPage } from '../helpers/gui';
import { fakeLimactl, type FakeLimactl } from '../helpers/fake-limactl';

if (skipReason) console.warn(`\n[vm.test] SKIPPING the executor VM page tests: ${skipReason}\n`);

async function waitText(p: GuiPage, locator: Locator, expected: string | RegExp, what: string) {
  try {
    await expect
      .poll(async () => (await locator.count()) > 0 && (await locator.first().innerText()), { timeout: 10_000, interval: 100 })
      .toMatch(expected);
  } catch (err) {
    const body = await p.page
      .locator('body')
      .innerText({ timeout: 1000 })
      .catch(() => '<unreadable>');
    throw new Error(
      `${what}: ${(err as Error).message.split('\n')[0]}\npage: ${JSON.stringify(body.slice(0, 2500))}\nerrors: ${JSON.stringify(p.errors)}`,
    );
  }
}

// The steps of one fake VM's life, in their order (each starts where the one before left the VM): not shuffled.
describe.skipIf(!!skipReason)('executor VM on the Parity status page (fake limactl)', { shuffle: false }, () => {
  let gui: Gui;
  let fake: FakeLimactl;
  let p: GuiPage;

  beforeAll(async () => {
    fake = await fakeLimactl();
    // Slow enough that the log is seen growing while the operation runs (the GUI polls every second).
    await fake.patch({ delay_ms: 900 });
    gui = await startGui({ config: { limactl: fake.path } });
    p = await gui.open();
  }, 60_000);
  afterAll(async () => {
    await gui?.close();
    await fake?.remove();
  });

  it('missing → Create: the log tails while it runs, then Stopped; Start → Running; Stop → Stopped', async () => {
    await p.go('parity');
    const card = p.page.getByTestId('parity-vm');
    const badge = card.getByTestId('vm-status');
    await waitText(p, badge, 'missing', 'the VM badge');
    expect(await badge.getAttribute('data-status')).toBe('missing');
    await expect.poll(() => card.getByTestId('vm-facts').innerText()).toContain(fake.path);

    const create = card.getByRole('button', { name: 'Create' });
    const start = card.getByRole('button', { name: 'Start' });
    const stop = card.getByRole('button', { name: 'Stop' });
    expect(await create.isEnabled()).toBe(true);
    expect(await start.isDisabled()).toBe(true);
    expect(await stop.isDisabled()).toBe(true);

    // The fake holds create after its first line until released: the running state is seen whatever the load.
    const release = join(fake.dir, 'release-create');
    await fake.patch({ release_file: release });
    // From the keyboard: focus Create and press Enter.
    await create.focus();
    await p.page.keyboard.press('Enter');
    const op = card.getByTestId('vm-operation');
    await waitText(p, op.getByTestId('vm-operation-state'), 'running', 'the running operation');
    const log = card.getByTestId('vm-log');
    // Lines arrive while it runs: the first limactl line is shown before the operation ends.
    await waitText(p, log, /Terminal is not available/, 'the first lines of limactl create');
    expect(await op.getAttribute('data-state')).toBe('running');
    expect(await card.getByTestId('vm-create').isDisabled(), 'no second operation while one runs').toBe(true);
    expect(await card.getByTestId('vm-create').innerText()).toBe('Creating…');
    await writeFile(release, '');

    await waitText(p, op.getByTestId('vm-operation-state'), /succeeded/, 'the end of create');
    await waitText(p, badge, 'Stopped', 'the VM badge after create');
    expect(await log.innerText()).toContain('Run `limactl start svc-emu`');
    expect(await log.getAttribute('role')).toBe('log');
    expect(await create.isDisabled()).toBe(true);
    expect(await start.isEnabled()).toBe(true);
    expect((await fake.state()).templates['svc-emu']).toContain('mountPoint:');
    await p.screenshot('parity-vm');

    await fake.patch({ delay_ms: 40 });
    await start.click();
    await waitText(p, card.getByTestId('vm-operation'), /Last operation: start/, 'the end of start');
    await waitText(p, badge, 'Running', 'the VM badge after start');
    expect(await log.innerText()).toContain('READY');
    expect(await card.getByTestId('vm-restart').count(), 'this core runs snippets locally: no restart needed').toBe(0);
    expect(await stop.isEnabled()).toBe(true);
    expect(await start.isDisabled()).toBe(true);
    await p.screenshot('parity-vm-running');

    await stop.click();
    await waitText(p, card.getByTestId('vm-operation'), /Last operation: stop/, 'the end of stop');
    await waitText(p, badge, 'Stopped', 'the VM badge after stop');
    expect(await card.getByTestId('vm-operation').getAttribute('data-kind')).toBe('stop');
    expect(p.errors).toEqual([]);
  });

  it('a failing operation: failed with its exit code and limactl’s message, the VM unchanged', async () => {
    await fake.patch({ fail: { start: 'did not receive an event with the "running" status' } });
    const card = p.page.getByTestId('parity-vm');
    await card.getByRole('button', { name: 'Start' }).click();
    await waitText(p, card.getByTestId('vm-operation-state'), /failed · exit 1/, 'the failed operation');
    expect(await card.getByTestId('vm-log').innerText()).toContain('did not receive an event');
    expect(await card.getByRole('alert').first().innerText()).toContain('limactl start exited with code 1');
    expect(await card.getByTestId('vm-status').innerText()).toBe('Stopped');
    await p.screenshot('parity-vm-failed');
    expect(p.errors).toEqual([]);
  });

  it('a running VM behind an emulator that is not connected to its agent: Connect is offered', async () => {
    await fake.patch({ fail: {}, instances: { 'svc-emu': { status: 'Running', cpus: 2, memory: 4 * 1024 ** 3 } } });
    const d = await gui.open();
    // What a Mac's core answers when the VM was not running at its start (the executor could not start).
    await d.page.route('**/_emu/executor', async (route) => {
      const res = await route.fetch();
      await route.fulfill({ response: res, json: { ...(await res.json()), transport: 'none', backend: 'none' } });
    });
    await d.go('parity');
    await waitText(d, d.page.getByTestId('vm-status'), 'Running', 'the VM badge');
    await waitText(d, d.page.getByTestId('vm-restart'), /not connected to its agent[\s\S]*restart the emulator/, 'the connect hint');
    // This core runs snippets on this host, so the core refuses, and the page says why.
    await d.page.getByTestId('vm-connect').click();
    await waitText(d, d.page.getByTestId('parity-vm').getByRole('alert'), /runs snippets on this host/, 'the refusal');
    expect(d.errors.filter((e) => !/409/.test(e))).toEqual([]);
    await d.page.context().close();
    await fake.patch({ instances: { 'svc-emu': { status: 'Stopped', cpus: 2, memory: 4 * 1024 ** 3 } } });
  });

  it('narrow and dark: the card stays readable', async () => {
    const narrow = await gui.open({ width: 600, height: 900 });
    await narrow.page.emulateMedia({ colorScheme: 'dark' });
    await narrow.go('parity');
    await waitText(narrow, narrow.page.getByTestId('vm-status'), 'Stopped', 'the VM badge (narrow)');
    await narrow.page.getByTestId('parity-vm').scrollIntoViewIfNeeded();
    await narrow.screenshot('parity-vm-narrow-dark');
    expect(narrow.errors).toEqual([]);
    await narrow.page.context().close();
  });
});

describe.skipIf(!!skipReason)('executor VM on this Linux host (no limactl)', () => {
  let gui: Gui;
  beforeAll(async () => {
    gui = await startGui();
  }, 60_000);
  afterAll(async () => {
    await gui?.close();
  });

  it('says plainly that the VM is not needed here and why; no buttons', async () => {
    const p = await gui.open();
    await p.go('parity');
    const card = p.page.getByTestId('parity-vm');
    const note = card.getByTestId('vm-unavailable');
    await waitText(p, note, /Not needed on this host/, 'the unavailable note');
    expect(await note.innerText()).toMatch(/Lima is only used on macOS: on Linux /);
    expect(await card.getByRole('button').count()).toBe(0);
    await p.screenshot('parity-vm-linux');
    expect(p.errors).toEqual([]);
  });
});
