// The GUI of record/replay, run reports and export/import, in a real browser (Chromium) against a real core
// with a real Bun runner: the Egress page's mode switch and the sidebar badge (which follows a switch made
// through the API without a reload); a run recorded through the API shows in the snippet's Cassettes tab and
// its calls open (a secret sent as credential and in the body is marked, never shown) and download as .har; the Run panel's egress choice replays it (the
// invocation page shows it); a report downloads as HTML, for one run and for a selection; an export
// downloads an archive, and a damaged archive's import shows the core's refusal. Screenshots land in
// test/.tmp/gui/.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { Download, Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shownText, skipReason, startGui, until, type Gui, type GuiPage } from '../helpers/gui';
import { tempDir } from '../helpers/core';

if (skipReason) console.warn(`\n[record-replay gui test] SKIPPING: ${skipReason}\n`);

/** Calls the given URL (through the egress proxy: HTTP_PROXY) with a secret as its credential and in its body. */
const CALLER = `export default async function handler(input: { url: string }) {
  const token = process.env.WEATHER_TOKEN ?? '';
  const res = await fetch(input.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer ' + token },
    body: JSON.stringify({ q: 'weather', key: token }),
  });
  return { status: res.status, body: await res.text() };
}
`;
const TOKEN = 'wt-live-93b1c7e2a4f6d8';

let gui: Gui;
let p: GuiPage;
let upstream: Server;
let upstreamUrl: string;
let upstreamHits = 0;
let workspace: string;

async function api(method: string, path: string, body?: unknown, headers?: Record<string, string>) {
  const res = await gui.core.call(method, path, body, { key: path.startsWith('/_emu') ? gui.core.admin : undefined, headers });
  expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(300);
  return res.json;
}

const text = (locator: Locator, what: string) => shownText(p, locator, what);

/**
 * Clicks `button` and returns the download it starts; when none comes (the page showed the core's refusal
 * instead, or a loaded machine is slow past 30 s) says what the page shows.
 */
async function downloadOf(page: GuiPage, button: Locator): Promise<Download> {
  try {
    const [d] = await Promise.all([page.page.waitForEvent('download', { timeout: 30_000 }), button.click()]);
    return d;
  } catch (err) {
    await page.screenshot('record-replay-no-download').catch(() => {});
    const body = await page.page
      .locator('body')
      .innerText({ timeout: 1000 })
      .catch(() => '<unreadable>');
    throw new Error(
      `no download came (${(err as Error).message.split('\n')[0]})\npage: ${body.slice(0, 1500)}\nerrors: ${JSON.stringify(page.errors)}`,
    );
  }
}

/** Opens `route` on the shared page mounted anew (a page already shown keeps its form state across tests). */
async function freshPage(route: string) {
  await p.go('');
  await p.page.getByTestId('version').waitFor();
  await p.go(route);
}

async function saved(download: Download): Promise<Buffer> {
  const path = await download.path();
  return readFile(path);
}

describe.skipIf(!!skipReason)('record / replay, reports and export / import in the GUI', () => {
  beforeAll(async () => {
    // A provider on loopback that streams its answer in three chunks (the cassette keeps their timing).
    upstream = createServer((req, res) => {
      upstreamHits++;
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('sunny ');
        setTimeout(() => res.write('and '), 30);
        setTimeout(() => res.end('warm'), 60);
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/forecast?city=oslo`;
    // A workspace snippet whose snippet.json says how its calls are handled (shown on its Settings).
    workspace = await tempDir('svc-emu-gui-rr-');
    await mkdir(join(workspace, 'snippets', 'demo'), { recursive: true });
    await writeFile(join(workspace, 'snippets', 'demo', 'index.ts'), 'export default async function handler() { return { ok: true }; }\n');
    await writeFile(
      join(workspace, 'snippets', 'demo', 'snippet.json'),
      JSON.stringify({ egress: { mode: 'replay', cassette: 'offline', match: { ignore_body_fields: ['metadata.user_id'] } } }),
    );
    gui = await startGui({ workspace });
    p = await gui.open();
    await api('PUT', '/v1/secrets/WEATHER_TOKEN', { value: TOKEN });
    await api('POST', '/v1/snippets', { name: 'caller', runtime: 'bun' });
    await api('POST', '/v1/snippets/caller/versions', { code: CALLER });
  }, 60_000);

  afterAll(async () => {
    await gui?.close();
    await new Promise((r) => upstream?.close(r));
    if (workspace) await rm(workspace, { recursive: true, force: true });
  });

  it('a snippet’s Settings shows its own egress (snippet.json) against the server’s mode', async () => {
    await until('the demo folder loaded', async () => {
      const ws = (await api('GET', '/_emu/workspace')) as { folders: { snippet: string; version: number | null }[] };
      return ws.folders.some((f) => f.snippet === 'demo' && f.version !== null);
    });
    await p.go('snippet/demo/settings');
    const card = p.page.getByTestId('snippet-egress');
    expect(await text(card, 'the egress card')).toContain('snippet.json');
    expect(await card.getByTestId('snippet-egress-mode').getAttribute('data-mode')).toBe('replay');
    expect(await card.getByTestId('snippet-egress-cassette').innerText()).toContain('offline');
    expect(await card.innerText()).toContain('ignore_body_fields');
    // An API snippet has none: its runs use the server's mode.
    await p.go('snippet/caller/settings');
    expect(await text(p.page.getByTestId('snippet-egress-mode'), 'the API snippet’s egress')).toContain('server');
    // The Run panel's default says what a run without a choice of its own gets.
    await p.go('snippet/demo/run');
    const firstOption = () => p.page.getByTestId('run-egress-mode').locator('option').first().innerText();
    await p.page.getByTestId('run-egress-mode').waitFor();
    await until('the default from snippet.json', async () => (await firstOption()).includes('replay (its snippet.json)'));
    await p.go('snippet/caller/run');
    await p.page.getByTestId('run-egress-mode').waitFor();
    await until('the server’s default', async () => /\((the server’s)\)/.test(await firstOption()));
    expect(p.errors).toEqual([]);
  }, 60_000);

  it('the mode switch sets /_emu/egress/mode; the badge follows a switch made elsewhere, without a reload', async () => {
    await p.go('egress');
    const badge = p.page.getByTestId('egress-mode-badge');
    await p.page.getByTestId('egress-mode-live').waitFor();
    expect(await badge.count()).toBe(0); // live: no badge
    expect(await p.page.getByTestId('egress-mode-live').getAttribute('aria-checked')).toBe('true');

    await p.page.getByTestId('egress-mode-replay').click();
    await until('the server in replay mode', async () => (await api('GET', '/_emu/egress/mode')).mode === 'replay');
    expect(await text(badge, 'the replay badge')).toContain('Replaying from cassettes');
    await p.page.getByTestId('egress-replay-speed').selectOption('2');
    await until('replay speed 2', async () => (await api('GET', '/_emu/egress/mode')).replay_speed === 2);
    await until('the badge with its speed', async () => (await badge.innerText()).includes('2×'));
    await p.screenshot('egress-mode-replay');
    // A narrow window's top bar shows it too, and nothing scrolls sideways.
    const narrow = await gui.open({ width: 560, height: 800 });
    try {
      await narrow.go('egress');
      expect(await shownText(narrow, narrow.page.getByTestId('egress-mode-badge'), 'the badge at 560 px')).toContain('Replaying');
      await narrow.page.getByTestId('egress-mode-replay').waitFor();
      expect(
        await narrow.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth),
      ).toBeLessThanOrEqual(0);
      await narrow.screenshot('egress-mode-replay-narrow');
      expect(narrow.errors).toEqual([]);
    } finally {
      await narrow.page.context().close();
    }

    // From elsewhere (the API, as the CLI does): the badge changes by the live feed, on another page too.
    await p.go('snippets');
    await api('PUT', '/_emu/egress/mode', { mode: 'record', replay_speed: 1 });
    await until('the record badge', async () => (await badge.count()) === 1 && (await badge.getAttribute('data-mode')) === 'record');
    expect(await badge.innerText()).toContain('Recording');
    await api('PUT', '/_emu/egress/mode', { mode: 'live' });
    await until('the badge gone', async () => (await badge.count()) === 0);

    // The keyboard: the switch is one tab stop, and the arrow keys move the choice.
    await p.go('egress');
    const live = p.page.getByTestId('egress-mode-live');
    await until('live checked', async () => (await live.getAttribute('aria-checked')) === 'true');
    await live.focus();
    await p.page.keyboard.press('ArrowRight');
    await until('record by the keyboard', async () => (await api('GET', '/_emu/egress/mode')).mode === 'record');
    await until('record checked', async () => (await p.page.getByTestId('egress-mode-record').getAttribute('aria-checked')) === 'true');
    await until('the record badge', async () => (await badge.getAttribute('data-mode').catch(() => null)) === 'record');
    expect(await p.page.getByTestId('egress-mode-record').evaluate((el) => el === document.activeElement)).toBe(true);
    await p.page.keyboard.press('ArrowLeft');
    await until('live again', async () => (await api('GET', '/_emu/egress/mode')).mode === 'live');
    await until('the badge gone again', async () => (await badge.count()) === 0);
    expect(p.errors).toEqual([]);
  }, 60_000);

  it('a run recorded through the API shows in the Cassettes tab; its calls open, download as .har; the Run panel replays it', async () => {
    await p.go('snippet/caller/cassettes');
    await text(p.page.getByTestId('empty').filter({ hasText: 'No cassettes yet' }), 'the empty cassette list');

    // Recorded through the API: the run's own X-Emu-Egress-Mode (admin) — the list follows cassette.changed.
    const rec = await gui.core.call(
      'POST',
      '/v1/invoke/caller',
      { url: upstreamUrl },
      {
        headers: { 'x-emu-egress-mode': 'record', 'x-emu-admin': gui.core.admin },
      },
    );
    expect(rec.status, rec.text).toBe(200);
    expect(rec.json.body).toBe('sunny and warm');
    const recId = rec.headers.get('x-invocation-id')!;
    const row = p.page.locator('[data-testid="cassette-row"][data-name="default"]');
    await text(row, 'the recorded cassette in the list');
    expect(await row.getByTestId('cassette-entries').innerText()).toBe('1');

    const har = await downloadOf(p, row.getByTestId('cassette-download'));
    expect(har.suggestedFilename()).toBe('caller-default.har');
    const doc = JSON.parse((await saved(har)).toString('utf8'));
    expect(doc.log.version).toBe('1.2');
    expect(doc.log.entries).toHaveLength(1);

    await row.getByTestId('cassette-open').click();
    const entry = p.page.getByTestId('cassette-entry').first();
    expect(await text(entry, 'the recorded call')).toContain('POST');
    expect(await entry.innerText()).toContain('/forecast?city=oslo');
    expect(await entry.getByTestId('cassette-entry-status').innerText()).toBe('200');
    expect(await entry.getByTestId('cassette-strip').locator('line').count()).toBeGreaterThan(1); // axis + a tick per chunk
    await entry.locator('summary').first().click();
    expect(await text(entry.getByTestId('cassette-response-body'), 'the response body')).toContain('sunny and warm');
    expect(await entry.getByTestId('cassette-request-body').innerText()).toContain('weather');
    // The credential never reached the cassette: the secret's place is marked, and the page holds no value.
    expect(await entry.getByTestId('cassette-request-body').getByTestId('redaction-marker').innerText()).toBe('[secret WEATHER_TOKEN]');
    expect(await text(entry.getByTestId('cassette-redacted'), 'the list of what was redacted')).toMatch(/authorization/i);
    expect(await p.page.content()).not.toContain(TOKEN);
    expect(JSON.stringify(doc)).not.toContain(TOKEN);
    await p.screenshot('cassette-open');

    // The recording run's page says what happened to its calls.
    await p.go(`invocation/${recId}`);
    const card = p.page.getByTestId('inv-egress');
    expect(await text(card, 'the outbound calls card')).toContain('record');
    expect(await card.getByTestId('egress-counts').innerText()).toMatch(/1 made.*1 recorded/);

    // The Run panel replays it: the upstream is not called again.
    const hits = upstreamHits;
    await p.go('snippet/caller/run');
    await p.page.getByTestId('run-input').fill(JSON.stringify({ url: upstreamUrl }));
    await p.page.getByTestId('run-egress-mode').selectOption('replay');
    expect(await text(p.page.getByTestId('egress-note'), 'the egress note')).toContain('replay');
    await p.screenshot('run-egress-choice');
    await p.page.getByTestId('run').click();
    expect(await text(p.page.getByTestId('run-output'), 'the replayed output')).toContain('sunny and warm');
    expect(upstreamHits).toBe(hits);
    await p.page.getByTestId('run-invocation').click();
    const replayed = p.page.getByTestId('inv-egress');
    expect(await text(replayed, 'the replayed run’s card')).toContain('chosen by this run');
    expect(await replayed.getByTestId('egress-counts').innerText()).toMatch(/1 replayed/);

    // A call the cassette has no answer for: the run's page lists it with the message naming the closest one.
    const miss = await gui.core.call(
      'POST',
      '/v1/invoke/caller',
      { url: upstreamUrl.replace('oslo', 'bergen') },
      { headers: { 'x-emu-egress-mode': 'replay', 'x-emu-admin': gui.core.admin } },
    );
    expect(miss.status, miss.text).toBe(200);
    expect(miss.json.status).toBe(502); // the proxy's answer to a miss
    expect(upstreamHits).toBe(hits);
    await p.go(`invocation/${miss.headers.get('x-invocation-id')}`);
    expect(await text(p.page.getByTestId('egress-counts'), 'the counts')).toContain('1 unmatched');
    await text(p.page.getByTestId('egress-unmatched'), 'the unmatched call');
    // The miss's message comes from the egress log, read once the card shows.
    const unmatched = await until('the miss message', async () => {
      const t = await p.page.getByTestId('egress-unmatched').innerText();
      return t.includes('city=bergen') ? t : null;
    });
    expect(unmatched).toMatch(/oslo/); // the closest recording, and how it differs
    await p.screenshot('invocation-egress-unmatched');
    expect(p.errors).toEqual([]);
  }, 90_000);

  it('a report downloads as one HTML file, for one run and for a selection', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await gui.core.call('POST', '/v1/invoke/caller', { url: upstreamUrl });
      ids.push(r.headers.get('x-invocation-id')!);
    }
    await p.go(`invocation/${ids[0]}`);
    const one = await downloadOf(p, p.page.getByTestId('download-report'));
    expect(one.suggestedFilename()).toMatch(/\.html$/);
    const html = (await saved(one)).toString('utf8');
    expect(html.slice(0, 200).toLowerCase()).toContain('<!doctype html');
    expect(html).toContain(ids[0]);

    await p.go('invocations');
    await p.page.getByTestId('select-toggle').click();
    for (const id of ids) await p.page.locator(`[data-testid="select-invocation"][data-id="${id}"]`).check();
    expect(await p.page.getByTestId('selected-count').innerText()).toContain('2 selected');
    const both = await downloadOf(p, p.page.getByTestId('report-selection'));
    const html2 = (await saved(both)).toString('utf8');
    for (const id of ids) expect(html2).toContain(id);
    await p.screenshot('invocations-report-selection');
    expect(p.errors).toEqual([]);
  }, 60_000);

  it('export downloads an archive (secrets left out, said); a damaged archive’s import shows the refusal and changes nothing', async () => {
    await api('PUT', '/v1/secrets/WEATHER_KEY', { value: 'wk-live-8d7f6e5d4c3b2a19' });
    const seen = p.errors.length;
    await freshPage('data');
    expect(await text(p.page.getByTestId('export-secrets-warning'), 'the secrets warning')).toContain('No secret values');
    const file = await downloadOf(p, p.page.getByTestId('export-submit'));
    expect(file.suggestedFilename()).toMatch(/\.svcemu$/);
    const archive = await saved(file);
    expect(archive[0]).toBe(0x1f); // gzip
    expect(archive[1]).toBe(0x8b);
    for (const secret of ['wk-live-8d7f6e5d4c3b2a19', TOKEN]) expect(gunzipSync(archive).includes(Buffer.from(secret))).toBe(false);
    expect(await text(p.page.getByTestId('export-done'), 'the export note')).toContain('secrets left out');

    // The passphrase is typed twice: two different ones are refused before anything is sent.
    await p.page.getByTestId('export-with-secrets').check();
    await p.page.getByTestId('export-passphrase').fill('correct horse battery');
    await p.page.getByTestId('export-passphrase-again').fill('correct horse battery staple');
    await p.page.getByTestId('export-submit').click();
    await text(p.page.getByText('The two passphrases differ'), 'the mismatch');

    // A damaged archive: the real one, cut in half. Its manifest still reads (it is first), the core refuses it.
    const snippetsBefore = (await api('GET', '/v1/snippets')).data.map((s: { name: string }) => s.name);
    await p.page.getByTestId('import-file').setInputFiles({
      name: 'damaged.svcemu',
      mimeType: 'application/gzip',
      buffer: archive.subarray(0, Math.floor(archive.length / 2)),
    });
    await p.page.getByTestId('import-submit').click();
    expect(await text(p.page.getByTestId('import-confirm-box'), 'the confirmation')).toContain('kept aside');
    await p.page.getByTestId('import-confirm').click();
    const refusal = p.page.getByRole('alert').filter({ hasText: 'The archive was not imported' });
    expect(await text(refusal, 'the refusal')).toContain('archive_invalid');
    await p.screenshot('data-import-refused');
    expect((await api('GET', '/v1/snippets')).data.map((s: { name: string }) => s.name)).toEqual(snippetsBefore);

    // A file that is no archive at all says so before the upload, and the core's answer says what to fix.
    await p.page
      .getByTestId('import-file')
      .setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('not an archive') });
    expect(await text(p.page.getByTestId('import-preview-unreadable'), 'the preview note')).toContain('not gzip');
    // The refused upload logged a 422 in the console (the browser's "Failed to load resource"): that is the
    // test's point, so it is taken off the page's list (the other tests here share the page and expect none).
    const mine = p.errors.splice(seen);
    expect(mine.filter((e) => !/status of 422/.test(e))).toEqual([]);
    expect(mine.length).toBeGreaterThan(0);
  }, 60_000);

  it('secrets encrypted with a passphrase typed twice travel; a wrong passphrase is refused, the right one restores them', async () => {
    const VALUE = 'enc-live-5e4d3c2b1a09f8e7';
    await api('PUT', '/v1/secrets/CARRIED', { value: VALUE });
    await freshPage('data');
    await p.page.getByTestId('export-with-secrets').check();
    await p.page.getByTestId('export-passphrase').fill('tall ships sail at dawn');
    await p.page.getByTestId('export-passphrase-again').fill('tall ships sail at dawn');
    const file = await downloadOf(p, p.page.getByTestId('export-submit'));
    const archive = await saved(file);
    expect(await text(p.page.getByTestId('export-done'), 'the export note')).toContain('encrypted with your passphrase');
    expect(gunzipSync(archive).includes(Buffer.from(VALUE))).toBe(false); // encrypted, not in clear

    const other = await startGui();
    try {
      const q = await other.open();
      await q.go('data');
      await q.page.getByTestId('import-file').setInputFiles({ name: 'sealed.svcemu', mimeType: 'application/gzip', buffer: archive });
      expect(await shownText(q, q.page.getByTestId('import-preview'), 'the preview')).toContain('passphrase needed');
      await q.page.getByTestId('import-passphrase').fill('tall ships sail at noon');
      await q.page.getByTestId('import-submit').click();
      await q.page.getByTestId('import-confirm').click();
      const refusal = q.page.getByRole('alert').filter({ hasText: 'The archive was not imported' });
      expect(await shownText(q, refusal, 'the wrong passphrase’s refusal')).toContain('passphrase_wrong');
      await q.page.getByTestId('import-passphrase').fill('tall ships sail at dawn');
      await q.page.getByTestId('import-submit').click();
      await q.page.getByTestId('import-confirm').click();
      const report = q.page.getByTestId('import-report');
      expect(await shownText(q, report, 'the import report')).toContain('Imported');
      expect(await report.getByTestId('import-secrets-left-out').count()).toBe(0);
      // The secret came back: the imported key (the first emulator's) reads its name on the second.
      const secrets = await other.core.call('GET', '/v1/secrets', undefined, { key: gui.core.key });
      expect((secrets.json as { data: { name: string }[] }).data.map((x) => x.name)).toContain('CARRIED');
      expect(q.errors.filter((e) => !/status of 422/.test(e))).toEqual([]);
    } finally {
      await other.close();
    }
  }, 90_000);

  it('an archive imported into another emulator shows the import’s report (counts, secrets left out)', async () => {
    await api('PUT', '/v1/secrets/IMPORT_ME', { value: 'im-live-0a9b8c7d6e5f' });
    await freshPage('data');
    const file = await downloadOf(p, p.page.getByTestId('export-submit'));
    const archive = await saved(file);
    const other = await startGui();
    try {
      const q = await other.open();
      await q.go('data');
      await q.page.getByTestId('import-file').setInputFiles({ name: 'state.svcemu', mimeType: 'application/gzip', buffer: archive });
      expect(await shownText(q, q.page.getByTestId('import-preview'), 'the archive preview')).toMatch(/secrets left out/);
      await q.page.getByTestId('import-submit').click();
      await q.page.getByTestId('import-confirm').click();
      const report = q.page.getByTestId('import-report');
      expect(await shownText(q, report, 'the import report')).toContain('Imported');
      expect(await report.getByTestId('import-counts').innerText()).toMatch(/\d+ snippets/);
      expect(await report.getByTestId('import-secrets-left-out').innerText()).toContain('IMPORT_ME');
      await q.screenshot('data-import-report');
      // The keys came with it (hashed): the first emulator's key now works here.
      const listed = await other.core.call('GET', '/v1/snippets', undefined, { key: gui.core.key });
      expect(listed.status, listed.text).toBe(200);
      expect((listed.json as { data: { name: string }[] }).data.map((x) => x.name)).toContain('caller');
      // The key this GUI showed for tenant local was left out with the secrets: the import made a new one, and said so.
      const info = (await other.core.call('GET', '/_emu/info', undefined, { key: other.core.admin })).json as {
        local_api_key: string | null;
      };
      expect(info.local_api_key).not.toBeNull();
      expect(await report.innerText()).toMatch(/a new key was made for it/);
      expect(q.errors).toEqual([]);
    } finally {
      await other.close();
    }
  }, 90_000);
});
