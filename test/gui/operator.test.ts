// The operator pages (Secrets, Store, Callback inbox, Egress, Tenants and caps, Parity status) in a real
// browser against a real core (egress profile `production`, so a call to loopback is refused and shows
// highlighted). Every change made in the GUI is checked through the API; a secret's value never reaches
// the page's HTML. Every page is screenshotted at 1280 px and ~600 px to test/.tmp/gui/.
import { createHmac } from 'node:crypto';
import type { Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { shownText, skipReason, startGui, type Gui, type GuiPage } from '../helpers/gui';

if (skipReason) console.warn(`\n[operator.test] SKIPPING the operator page tests: ${skipReason}\n`);

/** Calls out to each URL and reports what happened: the egress log's rows. */
const FETCHER = `export default async function handler(input: { urls: string[] }) {
  const out: unknown[] = [];
  for (const url of input.urls) {
    try {
      const res = await fetch(url);
      out.push(res.status);
    } catch (err) {
      out.push(String(err));
    }
  }
  return { out };
}
`;

let gui: Gui;
let p: GuiPage;

async function api(method: string, path: string, body?: unknown, admin = false) {
  const res = await gui.core.call(method, path, body, admin ? { key: gui.core.admin } : {});
  expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(300);
  return res.json;
}

/** The text of `locator` once shown on the page under test. */
const text = (locator: Locator, what: string) => shownText(p, locator, what);

/** A delivery signed the way the service signs callbacks (Standard Webhooks, the tenant's secret). */
async function signedDelivery(inbox: string, payload: unknown) {
  const { secret } = (await api('GET', '/v1/tenant/webhook-secret')) as { secret: string };
  const body = JSON.stringify(payload);
  const id = 'msg_operator_test_1';
  const ts = Math.floor(Date.now() / 1000);
  const mac = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
    .update(`${id}.${ts}.${body}`)
    .digest('base64');
  const res = await fetch(`${gui.core.url}/_emu/inbox/${inbox}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': `v1,${mac}` },
    body,
  });
  expect(res.status).toBe(200);
}

async function unsignedDelivery(inbox: string, payload: unknown): Promise<number> {
  const res = await fetch(`${gui.core.url}/_emu/inbox/${inbox}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  return res.status;
}

/** Screenshots the current page at 1280 px, then the same route at 600 px (on a second, narrow page). */
async function screenshots(name: string, route: string, ready: string) {
  await p.screenshot(name);
  const narrow = await gui.open({ width: 600, height: 900 });
  await narrow.go(route);
  await narrow.page.getByTestId(ready).first().waitFor();
  await narrow.screenshot(`${name}-narrow`);
  expect(narrow.errors).toEqual([]);
  await narrow.page.context().close();
}

describe.skipIf(!!skipReason)('operator pages', () => {
  beforeAll(async () => {
    gui = await startGui({ config: { egressProfile: 'production' } });
    p = await gui.open();
  }, 30_000);

  afterAll(async () => {
    await gui?.close();
  });

  it('empty states say what to do', async () => {
    // An emulator of its own: the other tests here fill the secrets, the store, the inbox and the egress log,
    // and may run first (the order is shuffled).
    const fresh = await startGui({ config: { egressProfile: 'production' } });
    try {
      const q = await fresh.open();
      const expected: [string, string][] = [
        ['secrets', 'No secrets yet'],
        ['store', 'The store is empty'],
        ['inbox', 'No deliveries yet'],
        ['inbox/fresh', 'Nothing delivered yet'],
        ['egress', 'No outbound calls yet'],
      ];
      for (const [route, title] of expected) {
        await q.go(route);
        const empty = q.page.getByTestId('empty').filter({ hasText: title });
        expect(await text(empty, `the empty state of ${route}`)).toMatch(/\S+\s*\n?.+/);
        await q.screenshot(`${route.replace('/', '-')}-empty`);
      }
      expect(await q.page.getByTestId('empty').filter({ hasText: 'No fault rules' }).count()).toBe(1);
      expect(q.errors).toEqual([]);
    } finally {
      await fresh.close();
    }
  }, 60_000);

  it('secrets: set through the form, listed by name and never by value; replace; delete', async () => {
    const VALUE = 'sk-live-Zq8vX2-operator-secret-value';
    const VALUE2 = 'sk-live-Wn4kP7-replacement-value';
    await api('PUT', '/v1/secrets/EXISTING_ONE', { value: 'seeded-value-aaa111' });
    await p.go('secrets');
    const list = p.page.getByTestId('secrets-list');
    await text(list.locator('[data-name="EXISTING_ONE"]'), 'the seeded secret');

    // The name rule is checked before anything is sent.
    await p.page.getByLabel('Name').fill('svc_token');
    expect(await p.page.getByLabel('Name').inputValue()).toBe('SVC_TOKEN'); // typed in upper case
    expect(await text(p.page.getByText('reserved for the service'), 'the SVC_ rule')).toContain('SVC_');
    await p.page.getByLabel('Name').fill('9LIVES');
    await text(p.page.getByText('not starting with a digit'), 'the name rule');

    await p.page.getByLabel('Name').fill('OPENAI_API_KEY');
    await p.page.getByLabel('Value').fill(VALUE);
    expect(await p.page.content()).not.toContain(VALUE); // typed, not yet saved: not in the HTML
    await p.page.getByTestId('secret-save').click();
    expect(await text(p.page.getByTestId('secret-flash'), 'the saved message')).toContain('Saved OPENAI_API_KEY');
    const row = list.locator('[data-name="OPENAI_API_KEY"]');
    await text(row, 'the new secret row');
    expect(await p.page.getByLabel('Value').inputValue()).toBe(''); // the input was emptied
    expect(await p.page.getByLabel('Name').inputValue()).toBe('');
    expect(await p.page.content()).not.toContain(VALUE);
    expect(await list.innerHTML()).not.toContain(VALUE);
    const listed = (await api('GET', '/v1/secrets')) as { data: { name: string; updated_at: string }[] };
    expect(listed.data.map((s) => s.name).sort()).toEqual(['EXISTING_ONE', 'OPENAI_API_KEY']);
    const before = listed.data.find((s) => s.name === 'OPENAI_API_KEY')!.updated_at;

    await p.page.waitForTimeout(5); // a later updated_at
    await row.getByTestId('secret-replace').click();
    expect(await p.page.getByLabel('Name').inputValue()).toBe('OPENAI_API_KEY');
    expect(await p.page.getByTestId('secret-save').innerText()).toBe('Replace secret');
    await p.page.getByLabel('Value').fill(VALUE2);
    await p.page.getByTestId('secret-save').click();
    expect(await text(p.page.getByTestId('secret-flash'), 'the replaced message')).toContain('Replaced OPENAI_API_KEY');
    const after = ((await api('GET', '/v1/secrets')) as { data: { name: string; updated_at: string }[] }).data.find(
      (s) => s.name === 'OPENAI_API_KEY',
    )!;
    expect(after.updated_at > before).toBe(true);
    const html = await p.page.content();
    expect(html).not.toContain(VALUE);
    expect(html).not.toContain(VALUE2);
    expect(html).not.toContain('seeded-value-aaa111');
    await screenshots('secrets', 'secrets', 'secrets-list');

    await row.getByTestId('secret-delete').click();
    await row.getByTestId('secret-delete-confirm').click();
    await row.waitFor({ state: 'detached' });
    expect(((await api('GET', '/v1/secrets')) as { data: { name: string }[] }).data.map((s) => s.name)).toEqual(['EXISTING_ONE']);
    expect(await p.page.content()).not.toContain(VALUE2);
    expect(p.errors).toEqual([]);
  });

  it('store: set a JSON value with a TTL, filter by prefix, view it, delete it', async () => {
    await api('PUT', `/v1/store/${encodeURIComponent('user:2')}`, { value: { name: 'Grace', langs: ['COBOL'] } });
    await api('PUT', `/v1/store/${encodeURIComponent('config/theme')}`, { value: 'dark' });
    await p.go('store');
    const keys = p.page.getByTestId('store-keys');
    await text(keys.locator('[data-key="config/theme"]'), 'the seeded keys');

    await p.page.getByLabel('Key', { exact: true }).fill('user:1');
    await p.page.getByLabel('Value (JSON)').fill('{"name": "Ada", "langs": [');
    await text(p.page.getByText(/^Not JSON/), 'the JSON error');
    await p.page.getByLabel('Value (JSON)').fill('{"name": "Ada", "langs": ["Analytical Engine"], "n": 1}');
    await p.page.getByLabel('TTL').fill('3600');
    await p.page.getByTestId('store-save').click();
    expect(await text(p.page.getByTestId('store-flash'), 'the saved message')).toContain('Created user:1');
    await text(keys.locator('[data-key="user:1"]'), 'the new key');
    expect(await text(p.page.getByTestId('store-value'), 'the value')).toContain('"Analytical Engine"');
    const stored = (await api('GET', `/v1/store/${encodeURIComponent('user:1')}`)) as { value: unknown; expires_at: string | null };
    expect(stored.value).toEqual({ name: 'Ada', langs: ['Analytical Engine'], n: 1 });
    expect(stored.expires_at).not.toBeNull();

    // The prefix filter.
    await p.page.getByLabel('Prefix').fill('user:');
    await keys.locator('[data-key="config/theme"]').waitFor({ state: 'detached' });
    expect(await keys.getByTestId('store-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-key')))).toEqual([
      'user:1',
      'user:2',
    ]);

    // View another key (a key with a slash goes URL-encoded).
    await p.page.getByLabel('Prefix').fill('');
    await keys.locator('[data-key="config/theme"]').getByRole('button').click();
    expect(await text(p.page.getByTestId('store-value').getByText('"dark"'), 'the config/theme value')).toBe('"dark"');
    await keys.locator('[data-key="user:1"]').getByRole('button').click();
    await text(p.page.getByTestId('store-value').getByText('Analytical Engine'), 'the user:1 value');
    await screenshots('store', 'store', 'store-keys');

    await p.page.getByTestId('store-delete').click();
    await p.page.getByTestId('store-delete-confirm').click();
    await keys.locator('[data-key="user:1"]').waitFor({ state: 'detached' });
    expect((await gui.core.call('GET', `/v1/store/${encodeURIComponent('user:1')}`)).status).toBe(404);
    expect(p.errors).toEqual([]);
  });

  it('callback inbox: deliveries newest first with their signature state; choose the answer; refreshes by itself', async () => {
    expect(await unsignedDelivery('test', { hello: 'unsigned' })).toBe(200);
    await signedDelivery('test', { id: 'inv_operatorTest01', outcome: 'success', output: { ok: true } });
    await p.go('inbox');
    const row = p.page.getByTestId('inbox-list').locator('[data-name="test"]');
    expect(await text(row, 'the inbox row')).toContain('2');
    await screenshots('inbox-list', 'inbox', 'inbox-list');

    await row.getByRole('link', { name: 'test' }).click();
    expect(await text(p.page.getByTestId('inbox-url'), 'the callback URL')).toBe(`${gui.core.url}/_emu/inbox/test`);
    const deliveries = p.page.getByTestId('delivery');
    await text(deliveries, 'the deliveries');
    expect(await deliveries.count()).toBe(2);
    expect(await deliveries.nth(0).getByTestId('signature').innerText()).toBe('signature verified · tenant local');
    expect(await deliveries.nth(1).getByTestId('signature').innerText()).toBe('not verified: missing webhook-id header');
    // The newest is open: its JSON body, pretty, and the invocation it is about.
    expect(await deliveries.nth(0).locator('.json').innerText()).toContain('"outcome": "success"');
    expect(await deliveries.nth(0).getByRole('link', { name: 'inv_operatorTest01' }).getAttribute('href')).toBe(
      '#/invocation/inv_operatorTest01',
    );

    await p.page.getByLabel('Status').selectOption('500');
    await p.page.getByLabel('Times').fill('2');
    await p.page.getByLabel('Retry-After').fill('30');
    await p.page.getByTestId('inbox-response-save').click();
    expect(await text(p.page.getByTestId('inbox-answer').getByText('Answers 500 to the next 2 deliveries'), 'the chosen answer')).toBe(
      'Answers 500 to the next 2 deliveries, then 200; Retry-After: 30 s',
    );
    expect(((await api('GET', '/_emu/inbox/test', undefined, true)) as { response: unknown }).response).toEqual({
      status: 500,
      times: 2,
      retry_after_seconds: 30,
    });

    // A new delivery is answered 500 and appears on its own (2 s refresh).
    expect(await unsignedDelivery('test', { attempt: 3 })).toBe(500);
    await vi.waitFor(async () => expect(await deliveries.count()).toBe(3), { timeout: 5000, interval: 100 });
    expect(await deliveries.nth(0).getByTestId('answered').innerText()).toBe('answered 500');
    await deliveries.nth(0).locator('.op-delivery-head').click(); // open the newest too, for the picture
    await screenshots('inbox', 'inbox/test', 'delivery');
    expect(p.errors).toEqual([]);
  });

  it('egress: the profile, the log with refused calls highlighted, a latency fault rule added, listed and deleted', async () => {
    // A snippet calls out twice: to loopback (refused under the production profile) and to a host a fault rule fails.
    await api('POST', '/_emu/egress/faults', { host: 'api.flaky.test', action: { type: 'status', status: 503, body: 'overloaded' } }, true);
    await api('POST', '/v1/snippets', { name: 'fetcher', runtime: 'bun' });
    await api('POST', '/v1/snippets/fetcher/versions', { code: FETCHER, max_cpu_percent: 100 });
    const run = await gui.core.call('POST', '/v1/invoke/fetcher', { urls: [`${gui.core.url}/healthz`, 'http://api.flaky.test/v1/items'] });
    expect(run.status, run.text).toBe(200);

    await p.go('egress');
    expect(await text(p.page.getByTestId('egress-profile'), 'the profile')).toContain('production');
    const log = p.page.getByTestId('egress-log');
    await text(log.locator('[data-refused="true"]'), 'the refused row');
    expect(await log.getByTestId('egress-row').count()).toBeGreaterThanOrEqual(2);
    const refusedRow = await log.locator('[data-refused="true"]').first().innerText();
    expect(refusedRow).toContain('127.0.0.1');
    expect(await log.getByTestId('egress-row').filter({ hasText: 'api.flaky.test:80' }).count()).toBe(1);
    expect(await log.locator('tr', { hasText: 'api.flaky.test' }).getByRole('link').getAttribute('href')).toBe(
      `#/invocation/${run.headers.get('x-invocation-id')}`,
    );

    const faults = p.page.getByTestId('faults-list');
    await text(faults.getByText('answer 503'), 'the seeded fault rule');
    await p.page.getByLabel('Host', { exact: true }).fill('slow.example.com');
    await p.page.getByLabel('Action').selectOption('latency');
    await p.page.getByLabel('Delay').fill('1500');
    await p.page.getByLabel('Times').fill('3');
    await p.page.getByTestId('fault-add').click();
    const rule = faults.locator('tr', { hasText: 'slow.example.com' });
    expect(await text(rule, 'the new rule')).toContain('delay 1,500 ms');
    expect(await rule.innerText()).toContain('3 more of 3');
    const rules = (await api('GET', '/_emu/egress/faults', undefined, true)) as {
      data: { id: string; host?: string; action: unknown; times: number | null }[];
    };
    const added = rules.data.find((r) => r.host === 'slow.example.com');
    expect(added).toMatchObject({ action: { type: 'latency', ms: 1500 }, times: 3 });
    await screenshots('egress', 'egress', 'egress-log');

    await rule.getByTestId('fault-delete').click();
    await rule.getByTestId('fault-delete-confirm').click();
    await rule.waitFor({ state: 'detached' });
    const left = (await api('GET', '/_emu/egress/faults', undefined, true)) as { data: { host?: string }[] };
    expect(left.data.map((r) => r.host)).toEqual(['api.flaky.test']);
    expect(p.errors).toEqual([]);
  });

  it('tenants and caps: create a tenant, change a cap, issue a key shown once', async () => {
    await p.go('tenants');
    await text(p.page.locator('[data-testid="tenant-card"][data-tenant="local"]'), 'the local tenant');
    await p.page.getByLabel('Tenant name').fill('acme');
    await p.page.getByTestId('tenant-create').click();
    expect(await text(p.page.getByTestId('tenant-created'), 'the created message')).toContain('Created tenant acme');
    const card = p.page.locator('[data-testid="tenant-card"][data-tenant="acme"]');
    await text(card, 'the acme card');

    expect(await card.getByLabel('Timeout cap').inputValue()).toBe('900000');
    await card.getByLabel('Timeout cap').fill('120000');
    await card.getByLabel('Max concurrency').fill('3');
    await card.getByTestId('caps-save').click();
    await text(card.getByTestId('caps-saved'), 'the saved message');
    const acme = (await api('GET', '/_emu/tenants/acme', undefined, true)) as { caps: Record<string, number>; keys: unknown[] };
    expect(acme.caps).toEqual({ timeout_ms: 120000, max_memory_mb: 2048, max_cpu_percent: 100, max_concurrency: 3 });
    expect(await card.getByLabel('Timeout cap').inputValue()).toBe('120000');
    expect(acme.keys).toEqual([]);

    await card.getByTestId('issue-key').click();
    const key = await text(card.getByTestId('issued-key'), 'the issued key');
    expect(key).toMatch(/^svc_[A-Za-z0-9]+$/);
    expect(await card.getByTestId('issued-key-box').innerText()).toContain('shown this once');
    await card
      .getByTestId('tenant-keys')
      .getByText(`${key.slice(0, 8)}…`)
      .waitFor();
    // The key works for /v1 as acme.
    const limits = await gui.core.call('GET', '/v1/tenant/runtime-limits', undefined, { key });
    expect(limits.json).toMatchObject({ timeout_ms: 120000, max_concurrency: 3 });
    await screenshots('tenants', 'tenants', 'tenant-card');

    // Dismissed, it is gone for good.
    await card.getByRole('button', { name: 'I have copied it' }).click();
    expect(await p.page.content()).not.toContain(key);
    expect(p.errors).toEqual([]);
  });

  it('parity status: the limit backend, the sandbox, full or degraded with reasons, runtimes against the manifest', async () => {
    const executor = (await api('GET', '/_emu/executor', undefined, true)) as {
      backend: string;
      sandbox: string;
      parity: { status: string; reasons: string[] };
    };
    await p.go('parity');
    const banner = p.page.getByTestId('parity-banner');
    await text(banner, 'the parity banner');
    expect(await banner.getAttribute('data-parity')).toBe(executor.parity.status);
    expect(await p.page.getByTestId('parity').innerText()).toBe(executor.parity.status === 'full' ? 'Full parity' : 'Degraded parity');
    for (const reason of executor.parity.reasons) expect(await banner.innerText()).toContain(reason);
    const labels: Record<string, string> = {
      'cgroup-v2': 'cgroup v2',
      'cgroup-v1': 'cgroup v1',
      'systemd-scope': 'systemd user scopes',
      none: 'none (timeout only)',
    };
    expect(await p.page.getByTestId('limit-backend').innerText()).toBe(labels[executor.backend] ?? executor.backend);
    expect(await p.page.getByTestId('sandbox').innerText()).toBe(executor.sandbox === 'bwrap' ? 'bubblewrap' : 'none');
    if (executor.sandbox === 'bwrap') {
      // Who a snippet is on this host, from doctor's probe of the host's /proc.
      const doctor = (await api('GET', '/_emu/doctor', undefined, true)) as { sandbox: { identity: { host_uid: number[] } } };
      const identity = p.page.getByTestId('sandbox-identity');
      await text(identity, 'the sandbox identity');
      const shown = await identity.innerText();
      expect(shown).toContain(`host uid ${doctor.sandbox.identity.host_uid[0]}`);
      expect(shown).not.toMatch(/host uid 0\b/);
      expect(shown).toMatch(/Capabilities\s+none/);
      expect(shown).toMatch(/seccomp\s+filter \(\d+ system calls refused\)/);
    }

    const runtime = (await api('GET', '/_emu/runtime', undefined, true)) as { mismatches?: { name: string }[] };
    const table = p.page.getByTestId('runtime-table');
    await text(table, 'the runtime table');
    expect(await table.locator('tr', { has: p.page.locator('code', { hasText: /^bun$/ }) }).innerText()).toContain('1.');
    expect(await table.locator('[data-mismatch="true"]').count()).toBe(runtime.mismatches?.length ?? 0);
    await p.page.getByTestId('host-facts').waitFor();
    await screenshots('parity', 'parity', 'host-facts');
    expect(p.errors).toEqual([]);
  });

  it('parity status, degraded: each reason explained, a runtime mismatch highlighted', async () => {
    // What a host without cgroups or bubblewrap, with a drifted package, answers (this host may be at full
    // parity): the core's real answers, rewritten in the browser.
    const NO_LIMITS = 'no cgroup backend on this host: only the timeout is enforced';
    const NO_SANDBOX = 'no parity sandbox (bubblewrap not found): snippets can see host files and the network';
    const d = await gui.open();
    const rewrite = (path: string, change: (body: any) => unknown) =>
      d.page.route(`**${path}`, async (route) => {
        const res = await route.fetch();
        await route.fulfill({ response: res, json: change(await res.json()) });
      });
    await rewrite('/_emu/executor', (b) => ({
      ...b,
      backend: 'none',
      sandbox: 'none',
      parity: { status: 'degraded', reasons: [NO_LIMITS, NO_SANDBOX] },
    }));
    await rewrite('/_emu/doctor', (b) => ({
      ...b,
      parity: 'degraded',
      limits: { backend: 'none', reason: `none — ${NO_LIMITS}`, checked: [], notes: [] },
      sandbox: { bubblewrap: false, bin: null, version: null, reason: 'bubblewrap not found' },
    }));
    await rewrite('/_emu/runtime', (b) => ({
      ...b,
      installed: { ...b.installed, bun: { ...b.installed.bun, packages: { ...b.installed.bun.packages, zod: '4.5.0' } } },
      mismatches: [{ name: 'zod', expected: b.manifest.bun.packages.zod, actual: '4.5.0' }],
    }));
    await d.go('parity');
    await d.page.getByTestId('host-facts').waitFor();
    const banner = d.page.getByTestId('parity-banner');
    await banner.waitFor();
    expect(await banner.getAttribute('data-parity')).toBe('degraded');
    const reasons = await d.page.getByTestId('parity-reasons').innerText();
    expect(reasons).toContain(NO_LIMITS);
    expect(reasons).toContain('only timeout_ms holds');
    expect(reasons).toContain(NO_SANDBOX);
    expect(reasons).toContain('apt install bubblewrap');
    expect(await d.page.getByTestId('limit-backend').innerText()).toBe('none (timeout only)');
    expect(await d.page.getByTestId('sandbox').innerText()).toBe('none');
    const mismatched = d.page.getByTestId('runtime-table').locator('[data-mismatch="true"]');
    await mismatched.first().waitFor();
    expect(await mismatched.count()).toBe(1);
    expect(await mismatched.innerText()).toContain('4.5.0');
    expect(await d.page.getByTestId('runtime-summary').innerText()).toBe('1 mismatch');
    await d.screenshot('parity-degraded');
    expect(d.errors).toEqual([]);
    await d.page.context().close();
  });
});
