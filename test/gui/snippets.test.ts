// The Snippets list and a snippet's tabs (Code, Versions, Settings, Run) in a real browser against a
// real core watching a temp workspace (one good folder, one whose index.ts does not compile). Every
// change made in the GUI is checked through the API; every page is screenshotted to test/.tmp/gui/.
import { execFileSync } from 'node:child_process';
import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { tempDir } from '../helpers/core';
import { shownText as text, skipReason, startGui, type Gui } from '../helpers/gui';

if (skipReason) console.warn(`\n[snippets.test] SKIPPING the snippet page tests: ${skipReason}\n`);

const HELLO_V1 = {
  'index.ts':
    "import { greet } from './greet.ts';\n\nexport default async function handler(input: { name?: string }) {\n  const name = input.name ?? 'world';\n  return { greeting: greet(name), version: 1 };\n}\n",
  'greet.ts': 'export const greet = (name: string) => `Hello, ${name}!`;\n',
};
const HELLO_V2 = { ...HELLO_V1, 'index.ts': HELLO_V1['index.ts'].replace('version: 1', 'version: 2') };
const TICKER =
  'export default async function* handler(input: { n?: number }) {\n  const n = input.n ?? 3;\n  for (let i = 1; i <= n; i++) {\n    yield { tick: i };\n    await new Promise((r) => setTimeout(r, 40));\n  }\n  return { ticks: n };\n}\n';
const BOOM = 'export default async function handler() {\n  throw new Error("kaboom from the handler");\n}\n';
const BOOM_STREAM = 'export default async function* handler() {\n  yield { n: 1 };\n  throw new Error("kaboom mid-stream");\n}\n';
const PLAIN = 'export default async function handler(input: Record<string, unknown>) {\n  return { ok: true, got: input };\n}\n';

let gui: Gui;
let workspace: string;

async function api(method: string, path: string, body?: unknown) {
  const res = await gui.core.call(method, path, body);
  expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(300);
  return res.json;
}

/** Chromium logs every 4xx/5xx answer as a console error: the ones a test provokes on purpose. */
const answered = (status: number) => `console: Failed to load resource: the server responded with a status of ${status}`;
const unexpected = (errors: string[], ...statuses: number[]) => errors.filter((e) => !statuses.some((s) => e.startsWith(answered(s))));

describe.skipIf(!!skipReason)('snippet pages', () => {
  beforeAll(async () => {
    workspace = await tempDir('svc-emu-gui-ws-');
    await mkdir(join(workspace, 'snippets', 'good'), { recursive: true });
    await mkdir(join(workspace, 'snippets', 'bad'), { recursive: true });
    await writeFile(
      join(workspace, 'snippets', 'good', 'index.ts'),
      'export default async function handler(input: { name?: string }) {\n  return { hi: input.name ?? "there" };\n}\n',
    );
    await writeFile(
      join(workspace, 'snippets', 'bad', 'index.ts'),
      'export default async function handler(input) {\n  return { broken: ;\n}\n',
    );
    gui = await startGui({ workspace });

    await api('POST', '/v1/snippets', { name: 'hello', runtime: 'bun', description: 'Greets whoever it is given' });
    await api('POST', '/v1/snippets/hello/versions', { files: HELLO_V1, max_cpu_percent: 100 });
    await api('POST', '/v1/snippets/hello/versions', { files: HELLO_V2, max_cpu_percent: 100 });
    await api('POST', '/v1/snippets', { name: 'ticker', runtime: 'bun', description: 'Streams a few ticks' });
    await api('POST', '/v1/snippets/ticker/versions', { code: TICKER, max_cpu_percent: 100 });
    await api('POST', '/v1/snippets', { name: 'boom', runtime: 'bun' });
    await api('POST', '/v1/snippets/boom/versions', { code: BOOM, max_cpu_percent: 100 });
    await api('POST', '/v1/snippets', { name: 'boom-stream', runtime: 'bun' });
    await api('POST', '/v1/snippets/boom-stream/versions', { code: BOOM_STREAM, max_cpu_percent: 100 });
    await api('POST', '/v1/snippets', { name: 'tuned', runtime: 'bun' });
    await api('POST', '/v1/snippets/tuned/versions', { code: PLAIN, max_cpu_percent: 100 });

    // The loader has looked at both folders (one loaded, one refused).
    await vi.waitFor(
      async () => {
        const ws = (await gui.core.call('GET', '/_emu/workspace', undefined, { key: gui.core.admin })).json as {
          folders: { snippet: string; state: string }[];
        };
        expect(ws.folders.map((f) => `${f.snippet}:${f.state}`).sort()).toEqual(['bad:error', 'good:loaded']);
      },
      { timeout: 10_000, interval: 50 },
    );
  }, 30_000);

  afterAll(async () => {
    await gui?.close();
    if (workspace) await rm(workspace, { recursive: true, force: true });
  });

  it('lists every snippet with runtime, latest version, deployments and source, and shows the workspace load error with file and line', async () => {
    const p = await gui.open();
    await p.go('snippets');
    const table = p.page.getByTestId('snippets');
    await text(p, table.locator('[data-name="hello"]'), 'the hello row');
    const names = await table.getByTestId('snippet-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-name')));
    expect(names).toEqual(expect.arrayContaining(['bad', 'good', 'hello', 'ticker', 'tuned']));

    const hello = await text(p, table.locator('[data-name="hello"]'), 'hello');
    expect(hello).toContain('Bun');
    expect(hello).toContain('v2');
    expect(hello).toContain('Greets whoever it is given');
    expect(await table.locator('[data-name="hello"]').getByTestId('source').innerText()).toBe('API');

    // good comes from the workspace folder and runs in dev.
    const good = table.locator('[data-name="good"]');
    expect(await good.getByTestId('source').innerText()).toContain('snippets/good');
    expect(await good.getByTestId('deployed').innerText()).toMatch(/dev\s*v1/);

    // bad's save failed: the error, its file and line, prominently above the list and on its row.
    const err = p.page.getByTestId('workspace-error');
    expect(await text(p, err, 'the workspace load error')).toContain('snippets/bad');
    expect(await err.getByTestId('workspace-error-where').innerText()).toBe('index.ts, line 2, column 20');
    expect(await err.innerText()).toContain('Unexpected');
    expect(await table.locator('[data-name="bad"]').getByTestId('row-load-error').innerText()).toContain('index.ts, line 2');

    // Each row links to its snippet.
    await table.locator('[data-name="hello"]').getByRole('link', { name: 'hello' }).click();
    await text(p, p.page.getByTestId('snippet-name'), 'the snippet page');
    expect(p.page.url()).toMatch(/#\/snippet\/hello$/);

    await p.go('snippets');
    await text(p, p.page.getByTestId('workspace-error'), 'the list again');
    await p.screenshot('snippets');
    const narrow = await gui.open({ width: 600, height: 900 });
    await narrow.go('snippets');
    await text(narrow, narrow.page.getByTestId('workspace-error'), 'the narrow list');
    await narrow.screenshot('snippets-narrow');
    expect(p.errors).toEqual([]);
    expect(narrow.errors).toEqual([]);
  });

  it('workspace entries not read are listed with their reason (a FIFO, a link to /dev/zero), on the list and the snippet', async () => {
    const fifo = join(workspace, 'snippets', 'pipe');
    const zero = join(workspace, 'snippets', 'good', 'zero.ts');
    execFileSync('mkfifo', [fifo]);
    await symlink('/dev/zero', zero);
    try {
      await vi.waitFor(
        async () => {
          const ws = (await gui.core.call('GET', '/_emu/workspace', undefined, { key: gui.core.admin })).json;
          expect(ws.skipped.map((s: { path: string }) => s.path)).toContain('snippets/pipe');
          const good = ws.folders.find((f: { snippet: string }) => f.snippet === 'good');
          expect(good.skipped.map((s: { path: string }) => s.path)).toContain('zero.ts');
        },
        { timeout: 10_000, interval: 50 },
      );
      const p = await gui.open();
      await p.go('snippets');
      const box = p.page.getByTestId('workspace-skipped');
      expect(await text(p, box, 'the skipped entries')).toContain('not read');
      const pipe = box.locator('[data-path="snippets/pipe"]');
      expect(await pipe.getAttribute('data-code')).toBe('special_file');
      expect(await pipe.innerText()).toContain('a FIFO (named pipe), not a regular file');
      expect(await pipe.innerText()).toContain('replace it with a regular file');
      const link = box.locator('[data-path="snippets/good/zero.ts"]');
      expect(await link.getAttribute('data-code')).toBe('symlink_outside');
      expect(await link.innerText()).toContain('/dev/zero, outside the workspace');
      expect(await link.innerText()).toContain(join(workspace, 'snippets', 'good', 'zero.ts'));
      await p.screenshot('snippets-skipped');

      await p.go('snippet/good');
      expect(await text(p, p.page.getByTestId('snippet-skipped'), 'the skipped entries of good')).toContain('zero.ts');
      expect(p.errors).toEqual([]);
    } finally {
      await rm(fifo, { force: true });
      await rm(zero, { force: true });
    }
  });

  it('Code shows the files of a version with a file picker, and says where a workspace snippet lives', async () => {
    const p = await gui.open();
    await p.go('snippet/hello');
    expect(await text(p, p.page.getByTestId('code-file'), 'the code view')).toBe('index.ts');
    const code = await p.page.getByTestId('code-view').innerText();
    expect(code).toContain("import { greet } from './greet.ts';");
    expect(code).toContain('version: 2');
    expect(await p.page.getByTestId('tab-code').getAttribute('aria-current')).toBe('page');

    await p.page
      .getByTestId('file-picker')
      .getByRole('button', { name: /greet\.ts/ })
      .click();
    expect(await p.page.getByTestId('code-file').innerText()).toBe('greet.ts');
    expect(await p.page.getByTestId('code-view').innerText()).toContain('export const greet');

    await p.page.getByTestId('code-version').selectOption('1');
    await vi.waitFor(async () => expect(await p.page.getByTestId('code-view').innerText()).toContain('version: 1'), { timeout: 5000 });
    await p.page
      .getByTestId('file-picker')
      .getByRole('button', { name: /greet\.ts/ })
      .click();
    await p.page
      .getByTestId('file-picker')
      .getByRole('button', { name: /index\.ts/ })
      .click();
    await p.screenshot('snippet-code');

    await p.go('snippet/good/code');
    const goodFile = join(workspace, 'snippets', 'good', 'index.ts');
    expect(await text(p, p.page.getByTestId('editor-hint'), 'the editor hint')).toContain(goodFile);
    // In a browser: a VS Code link to the file (and the path to copy).
    expect(await p.page.getByTestId('open-in-vscode').getAttribute('href')).toBe(`vscode://file${encodeURI(goodFile)}`);
    await p.screenshot('snippet-code-workspace');

    // In the desktop app: the preload bridge opens it with the user's editor; a refusal is shown.
    await p.page.context().addInitScript(() => {
      const opened: string[] = [];
      Object.defineProperty(window, '__opened', { value: opened });
      Object.defineProperty(window, 'svcEmu', {
        value: Object.freeze({
          adminToken: Promise.resolve(''), // no token from the bridge: the session's stored one is used
          openFolder: () => Promise.resolve(null),
          reveal: () => Promise.resolve(),
          switchWorkspace: () => Promise.resolve(''),
          openInEditor: (path: string) => {
            opened.push(path);
            return Promise.resolve(opened.length === 1 ? '' : 'the file is gone');
          },
        }),
      });
    });
    await p.page.reload();
    await p.page.getByTestId('open-in-editor').click();
    await vi.waitFor(
      async () => expect(await p.page.evaluate(() => (window as unknown as { __opened: string[] }).__opened)).toEqual([goodFile]),
      { timeout: 5000 },
    );
    expect(await p.page.getByTestId('editor-hint').getByRole('alert').count()).toBe(0);
    await p.page.getByTestId('open-in-editor').click();
    expect(await text(p, p.page.getByTestId('editor-hint').getByRole('alert'), 'the refusal')).toBe('Could not open it: the file is gone');
    await p.screenshot('snippet-code-desktop');

    // A folder whose first save failed: the snippet exists without a version; its page shows the error.
    await p.go('snippet/bad');
    expect(await text(p, p.page.getByTestId('snippet-load-error'), 'the load error on the snippet page')).toContain('index.ts, line 2');
    expect(await p.page.getByTestId('empty').innerText()).toContain('No version yet');
    await p.screenshot('snippet-bad');
    expect(p.errors).toEqual([]);
  });

  it('Settings saves new limits as a new version (and deploys it); a value above the cap is refused before sending', async () => {
    const p = await gui.open();
    await p.go('snippet/tuned/settings');
    const timeout = p.page.getByLabel('Timeout', { exact: true });
    await timeout.waitFor();
    expect(await timeout.inputValue()).toBe('60000');
    expect(await p.page.getByLabel('Memory', { exact: true }).inputValue()).toBe('200');
    expect(await p.page.getByTestId('limit-max_memory_mb-cap').innerText()).toContain('tenant cap 2,048 MB');
    expect(await p.page.getByTestId('limit-max_cpu_percent-cap').innerText()).toContain('tenant cap 100 %');
    const save = p.page.getByTestId('settings-save');
    expect(await save.isDisabled()).toBe(true); // nothing changed yet

    // Above the cap: refused in the form, naming the cap; nothing is sent.
    await p.page.getByLabel('Memory', { exact: true }).fill('4096');
    expect(await text(p, p.page.getByTestId('limit-max_memory_mb-problem'), 'the cap message')).toContain(
      'above the tenant cap of 2048 MB',
    );
    expect(await save.isDisabled()).toBe(true);
    await p.page.getByLabel('CPU', { exact: true }).fill('1.5');
    expect(await p.page.getByTestId('limit-max_cpu_percent-problem').innerText()).toContain('whole number');
    await p.page.getByLabel('CPU', { exact: true }).fill('0');
    expect(await p.page.getByTestId('limit-max_cpu_percent-problem').innerText()).toContain('at least 1');
    await p.page.getByLabel('Memory', { exact: true }).press('Enter'); // submitting the form does not send either
    await p.screenshot('snippet-settings-cap');
    expect((await api('GET', '/v1/snippets/tuned/versions')).data).toHaveLength(1);

    // Valid values: saved as version 2, deployed to staging.
    await timeout.fill('1500');
    await p.page.getByLabel('Memory', { exact: true }).fill('256');
    await p.page.getByLabel('CPU', { exact: true }).fill('50');
    expect(await save.isDisabled()).toBe(false);
    await p.page.getByTestId('settings-deploy').check();
    await p.page.getByTestId('settings-env').selectOption('staging');
    await save.click();
    expect(await text(p, p.page.getByTestId('saved'), 'the saved message')).toBe('Saved as version 2 and deployed to staging.');
    const v2 = await api('GET', '/v1/snippets/tuned/versions/2');
    expect({ timeout_ms: v2.timeout_ms, max_memory_mb: v2.max_memory_mb, max_cpu_percent: v2.max_cpu_percent, files: v2.files }).toEqual({
      timeout_ms: 1500,
      max_memory_mb: 256,
      max_cpu_percent: 50,
      files: { 'index.ts': PLAIN },
    });
    expect((await api('GET', '/v1/snippets/tuned')).deployments).toMatchObject({ staging: 2 });
    // The form now starts from version 2, and the header knows it.
    await vi.waitFor(async () => expect(await p.page.getByTestId('latest-version').innerText()).toBe('latest v2'), { timeout: 5000 });
    expect(await p.page.getByLabel('Timeout', { exact: true }).inputValue()).toBe('1500');
    await p.screenshot('snippet-settings');
    expect(p.errors).toEqual([]);

    // The operator lowers the cap while the form is open: the form follows the live feed (tenant.changed),
    // names the lower cap at once and refuses 512 before sending.
    await p.page.getByLabel('Memory', { exact: true }).fill('512');
    const caps = (await gui.core.call('PATCH', '/_emu/tenants/local/limits', { max_memory_mb: 300 }, { key: gui.core.admin })).status;
    expect(caps).toBe(200);
    try {
      expect(await text(p, p.page.getByTestId('limit-max_memory_mb-problem').filter({ hasText: 'cap' }), 'the new cap')).toContain(
        'above the tenant cap of 300 MB',
      );
      expect(await save.isDisabled()).toBe(true);
      await p.screenshot('snippet-settings-422');
      expect((await api('GET', '/v1/snippets/tuned/versions')).data).toHaveLength(2);
    } finally {
      await gui.core.call('PATCH', '/_emu/tenants/local/limits', { max_memory_mb: 2048 }, { key: gui.core.admin });
    }
    expect(unexpected(p.errors, 422)).toEqual([]);
  });

  it('Versions deploys a version, rolls back, and diffs two versions', async () => {
    const p = await gui.open();
    await p.go('snippet/hello/versions');
    const rows = p.page.getByTestId('version-row');
    await text(p, rows, 'the versions table');
    expect(await rows.evaluateAll((r) => r.map((x) => x.getAttribute('data-version')))).toEqual(['2', '1']);

    // Deploy v1, then v2, to prod.
    await p.page.getByTestId('deploy-version').selectOption('1');
    await p.page.getByTestId('deploy-env').selectOption('prod');
    await p.page.getByTestId('deploy').click();
    expect(await text(p, p.page.getByTestId('deploy-done'), 'the deploy message')).toBe('Deployed v1 to prod.');
    await p.page.getByTestId('deploy-version').selectOption('2');
    await p.page.getByTestId('deploy').click();
    await vi.waitFor(async () => expect(await p.page.getByTestId('deploy-done').innerText()).toBe('Deployed v2 to prod.'), {
      timeout: 5000,
    });
    const prod = () =>
      gui.core
        .call('GET', '/v1/snippets/hello/environments')
        .then((r) => (r.json.data as { env: string; version: number | null }[]).find((d) => d.env === 'prod'));
    expect(await prod()).toMatchObject({ version: 2, previous_version: 1 });

    // Roll back: prod runs v1 again.
    const rollback = p.page.getByTestId('rollback-prod');
    expect(await text(p, rollback, 'the roll back button')).toBe('Roll back to v1');
    await rollback.click();
    await vi.waitFor(async () => expect(await p.page.getByTestId('deploy-done').innerText()).toContain('Rolled prod back to v1'), {
      timeout: 5000,
    });
    expect(await prod()).toMatchObject({ version: 1, previous_version: 2 });
    // the table reloads after the message: wait for it rather than read it once
    await vi.waitFor(
      async () =>
        expect(await p.page.locator('[data-testid="deployment"][data-env="prod"]').getByTestId('deployment-version').innerText()).toBe(
          'v1',
        ),
      { timeout: 5000 },
    );

    // The diff of v1 → v2 shows the changed line.
    const diff = p.page.getByTestId('diff');
    expect(await text(p, diff.getByTestId('diff-add'), 'an added line')).toContain('return { greeting: greet(name), version: 2 };');
    expect(await diff.getByTestId('diff-del').innerText()).toContain('version: 1');
    expect(await diff.getByTestId('diff-file').count()).toBe(1); // greet.ts did not change
    await p.screenshot('snippet-versions');
    expect(p.errors).toEqual([]);
  });

  it('Run: sync (with a per-run limit override), async and stream show the output', async () => {
    const p = await gui.open();
    await p.go('snippet/hello/run');
    const input = p.page.getByLabel('Input (a JSON object)');
    await input.waitFor();

    // Not an object: refused before sending.
    await input.fill('[1, 2]');
    expect(await p.page.getByTestId('run-input-problem').innerText()).toContain('must be a JSON object');
    expect(await p.page.getByTestId('run').isDisabled()).toBe(true);

    // sync, on an explicit version, with X-Emu-Limits.
    await input.fill('{"name": "Ada"}');
    await p.page.getByTestId('run-target').selectOption('v:2');
    await p.page.getByTestId('override-timeout_ms').fill('5000');
    await p.page.getByTestId('run').click();
    const output = p.page.getByTestId('run-output');
    expect(JSON.parse(await text(p, output.locator('pre'), 'the sync output'))).toEqual({ greeting: 'Hello, Ada!', version: 2 });
    expect(await p.page.getByTestId('run-status').innerText()).toBe('200');
    const invocationLink = p.page.getByTestId('run-invocation');
    const invocationId = await invocationLink.innerText();
    expect(await invocationLink.getAttribute('href')).toBe(`#/invocation/${invocationId}`);
    const record = await api('GET', `/v1/invocations/${invocationId}`);
    expect(record).toMatchObject({ version: 2, mode: 'sync', outcome: 'success', limits: { timeout_ms: 5000 } });
    await p.screenshot('snippet-run-sync');

    // async: 202, then polled until it ends.
    await p.page.getByTestId('override-timeout_ms').fill('');
    await p.page.getByTestId('run-mode').selectOption('async');
    await p.page.getByTestId('run-target').selectOption('v:1');
    await p.page.getByTestId('run').click();
    await text(p, p.page.locator('[data-testid="run-result"][data-mode="async"]'), 'the async result');
    expect(JSON.parse(await text(p, output.locator('pre'), 'the async output'))).toEqual({ greeting: 'Hello, Ada!', version: 1 });
    await p.screenshot('snippet-run-async');

    // stream: events as they arrive, then the result; a link to the live inspector.
    await p.go('snippet/ticker/run');
    await input.waitFor();
    await input.fill('{"n": 3}');
    await p.page.getByTestId('run-mode').selectOption('stream');
    await p.page.getByTestId('run').click();
    expect(JSON.parse(await text(p, output.locator('pre'), 'the stream output'))).toEqual({ ticks: 3 });
    const events = await p.page.getByTestId('stream-event').evaluateAll((r) => r.map((x) => x.getAttribute('data-event')));
    expect(events).toEqual(['start', 'chunk', 'chunk', 'chunk', 'result']);
    expect(await p.page.getByTestId('stream-events').innerText()).toContain('{"tick":2}');
    const inspector = await p.page.getByTestId('run-inspector').getAttribute('href');
    expect(inspector).toMatch(/^#\/stream\/inv_/);
    await p.screenshot('snippet-run-stream');
    expect(p.errors).toEqual([]);

    // Failures: sync answers the outcome's problem (coloured by its code); stream ends with an error event.
    await p.go('snippet/boom/run');
    await input.waitFor();
    await p.page.getByTestId('run').click();
    expect(await text(p, p.page.getByTestId('run-problem'), 'the sync problem')).toContain('kaboom from the handler');
    const badge = p.page.locator('[data-testid="run-result"] h2 .badge');
    expect(await badge.innerText()).toBe('handler error');
    expect(await badge.getAttribute('class')).toContain('outcome-handler_error');
    expect(await p.page.getByTestId('run-status').innerText()).toBe('500');
    await p.screenshot('snippet-run-sync-error');
    await p.go('snippet/boom-stream/run');
    await input.waitFor();
    await p.page.getByTestId('run-mode').selectOption('stream');
    await p.page.getByTestId('run').click();
    expect(await text(p, p.page.getByTestId('run-problem'), 'the stream error')).toContain('kaboom mid-stream');
    expect(await p.page.getByTestId('stream-event').evaluateAll((r) => r.map((x) => x.getAttribute('data-event')))).toEqual([
      'start',
      'chunk',
      'error',
    ]);
    expect(unexpected(p.errors, 500)).toEqual([]);
  });

  it('an empty tenant says how to make a snippet', async () => {
    const empty = await startGui();
    try {
      const p = await empty.open();
      await p.go('snippets');
      const state = await text(p, p.page.getByTestId('empty'), 'the empty state');
      expect(state).toContain('No snippets yet');
      expect(state).toContain('/snippets/<name>/index.ts');
      expect(state).toContain('POST /v1/snippets');
      await p.screenshot('snippets-empty');
      expect(p.errors).toEqual([]);
    } finally {
      await empty.close();
    }
  });

  it('works narrow (600 px): every tab fits the width, nothing scrolls sideways but code', async () => {
    const p = await gui.open({ width: 600, height: 900 });
    for (const tab of ['code', 'versions', 'settings', 'run'] as const) {
      await p.go(`snippet/hello/${tab}`);
      await text(p, p.page.getByTestId(`panel-${tab}`).locator('select, pre').first(), `the ${tab} tab`);
      // Not networkidle: the live feed (GET /_emu/events) stays open. Every loading placeholder gone instead.
      await p.page.locator('[data-loading]').first().waitFor({ state: 'detached' });
      const overflow = await p.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect(overflow, `${tab} overflows sideways by ${overflow}px`).toBeLessThanOrEqual(0);
      await p.screenshot(`snippet-${tab}-narrow`);
    }
    expect(p.errors).toEqual([]);
  });
});
