// The Parity status page lists what a start quarantined (issue 14): a record that failed validation at
// load, with its problem and what to do, in a real Chromium against a core started on such a data dir.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { emptyDb } from '../../server/storage/schema';
import { tempDir } from '../helpers/core';
import { shownText, skipReason, startGui, type Gui, type GuiPage } from '../helpers/gui';

const T = '2026-11-01T00:00:00.000Z';
let gui: Gui;
let p: GuiPage;
let dir: string;

describe.skipIf(!!skipReason)('parity status: the quarantine', () => {
  beforeAll(async () => {
    dir = await tempDir('svc-emu-gui-quarantine-');
    // What a snippet's store.set(k, v, {ttlSeconds: 1e12}) once wrote: an expiry in the year 33715.
    const doc = {
      ...emptyDb(),
      store: [
        { tenant_id: 'ten_x', key: 'far-future', value: 1, size: 1, expires_at: '33715-06-01T00:00:00.000Z', created_at: T, updated_at: T },
        { tenant_id: 'ten_x', key: 'fine', value: 2, size: 1, expires_at: null, created_at: T, updated_at: T },
      ],
    };
    await writeFile(join(dir, 'db.json'), JSON.stringify(doc));
    gui = await startGui({ dataDir: dir });
    p = await gui.open();
  }, 30_000);

  afterAll(async () => {
    await gui?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('shows each quarantined record with its problem, where it is kept and what to do', async () => {
    await p.go('parity');
    const card = p.page.getByTestId('parity-quarantine');
    const shown = await shownText(p, card, 'the quarantine card');
    expect(await card.getAttribute('data-count')).toBe('1');
    expect(shown).toContain('1 kept aside');
    expect(shown).toContain(join(dir, 'quarantine'));
    const rows = card.getByTestId('quarantine-row');
    expect(await rows.count()).toBe(1);
    const row = await rows.first().innerText();
    expect(row).toContain('store key "far-future" of "ten_x"');
    expect(row).toMatch(/expires_at: /);
    expect(row).toContain('PUT /v1/store/{key}');
    expect(row).toMatch(/\.report\.json/);
    // The doctor's notes say it too.
    expect(await p.page.getByTestId('doctor-notes').innerText()).toMatch(/1 record\(s\) failed validation/);
    await p.screenshot('parity-quarantine');
    expect(p.errors).toEqual([]);
  });
});
