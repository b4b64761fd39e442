/**
 * Every invocation keeps its input for replay (server/services/stored-input.ts): as the handler received
 * it (async: without `callback_url`), with each tenant secret's value replaced by `[secret NAME]`, up to
 * 64 KiB of JSON (above: `input: null, input_truncated: true`), in a blob beside the record; the run's
 * X-Emu-Limits overrides as `overrides`. GET /_emu/invocations/{id} shows them; a record trimmed from the
 * history takes its blob with it (the running core's blob sweep). A real core and a real Bun runner.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { readdir, readFile, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { redactSecrets, storedInputOf, STORED_INPUT_MAX_BYTES } from '../../server/services/stored-input';
import { sha256Hex } from '../../server/ids';
import { operations } from '../../contract';
import { startTestCore, type TestCore } from '../helpers/core';

let core: TestCore | null = null;
afterEach(async () => {
  await core?.stop();
  core = null;
});

const CODE = `export default async function handler(input) {
  return { keys: Object.keys(input).length, token_seen: input.token === process.env.API_TOKEN };
}`;

async function withSnippet(c: TestCore, name = 'echo'): Promise<void> {
  expect((await c.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
  const v = await c.call('POST', `/v1/snippets/${name}/versions`, { code: CODE });
  expect(v.status, v.text).toBe(201);
}

const emuView = (c: TestCore, id: string) => c.client.call(operations.emuGetInvocation, { params: { id } });

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await filesUnder(p)));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

/** Stops the core (everything flushed, the data dir kept) and reads every file it wrote but the sandboxes'. */
async function expectNowhereOnDisk(secret: string): Promise<void> {
  const stopped = core!;
  core = null;
  await stopped.emu.stop();
  const files = (await filesUnder(stopped.dataDir)).filter((f) => !f.startsWith(join(stopped.dataDir, 'sandboxes')));
  expect(files.some((f) => f.endsWith('db.json'))).toBe(true);
  for (const f of files) expect((await readFile(f)).includes(secret), `the secret's value is in ${f}`).toBe(false);
  await stopped.stop();
}

describe('redaction and the cap (unit)', () => {
  it('replaces values inside strings, keys and equal numbers; longer values first; nothing else changes', () => {
    const secrets = { SHORT: 'abc', LONG: 'abcdef', PIN: '4242', EMPTY: '' };
    expect(redactSecrets({ a: 'xabcdefx', b: ['abc', 4242, 42], abc: { n: null, t: true }, e: '' }, secrets)).toEqual({
      a: 'x[secret LONG]x',
      b: ['[secret SHORT]', '[secret PIN]', 42],
      '[secret SHORT]': { n: null, t: true },
      e: '',
    });
    // A value found inside another's replacement text is not replaced again.
    expect(redactSecrets({ s: 'secret' }, { SECRET: 'secret', S2: 'ecr' })).toEqual({ s: '[secret SECRET]' });
    expect(redactSecrets({ s: 'a.b' }, { DOT: '.' })).toEqual({ s: 'a[secret DOT]b' });
  });

  it('keeps up to 64 KiB of JSON, and says when it did not', () => {
    const under = { s: 'x'.repeat(STORED_INPUT_MAX_BYTES - 10) };
    expect(storedInputOf(under, {})).toEqual({ text: JSON.stringify(under) });
    expect(storedInputOf({ s: 'x'.repeat(STORED_INPUT_MAX_BYTES) }, {})).toEqual({ truncated: true });
    // measured in bytes: 2-byte characters count twice
    expect(storedInputOf({ s: 'é'.repeat(STORED_INPUT_MAX_BYTES / 2) }, {})).toEqual({ truncated: true });
  });
});

describe('stored inputs on a running core', () => {
  it('keeps a sync run’s input and overrides, with a secret’s value redacted everywhere on disk', async () => {
    core = await startTestCore();
    await withSnippet(core);
    const secret = 'sk-live-9f8e7d6c5b4a';
    expect((await core.call('PUT', '/v1/secrets/API_TOKEN', { value: secret })).status).toBe(201);
    const input = { token: secret, header: `Bearer ${secret}`, nested: [{ [secret]: 1 }], plain: 'hello' };
    const r = await core.call('POST', '/v1/invoke/echo', input, {
      headers: { 'X-Emu-Limits': 'timeout_ms=5000,max_cpu_percent=50', 'X-Emu-Admin': core.admin },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ keys: 4, token_seen: true }); // the handler got the real value
    const id = r.headers.get('x-invocation-id')!;
    const view = await emuView(core, id);
    expect(view.input).toEqual({
      token: '[secret API_TOKEN]',
      header: 'Bearer [secret API_TOKEN]',
      nested: [{ '[secret API_TOKEN]': 1 }],
      plain: 'hello',
    });
    expect(view.input_truncated).toBe(false);
    expect(view.overrides).toEqual({ timeout_ms: 5000, max_cpu_percent: 50 });
    // The copy is a blob beside the record, not db.json.
    const hash = sha256Hex(JSON.stringify(view.input));
    expect(existsSync(join(core.dataDir, 'blobs', hash.slice(0, 2), hash))).toBe(true);

    // Without overrides: null; the plain /v1 record stays production's shape.
    const plain = await core.call('POST', '/v1/invoke/echo', { a: 1 });
    const plainView = await emuView(core, plain.headers.get('x-invocation-id')!);
    expect(plainView.overrides).toBeNull();
    expect(plainView.input).toEqual({ a: 1 });
    const v1 = await core.call('GET', `/v1/invocations/${id}`);
    expect(v1.json).not.toHaveProperty('input');
    expect(v1.json).not.toHaveProperty('overrides');

    await expectNowhereOnDisk(secret);
  });

  it('an async job: the input without callback_url; the job’s own copy (with secrets) goes once it has run', async () => {
    core = await startTestCore();
    await withSnippet(core);
    const secret = 'whsec-like-0123456789';
    await core.call('PUT', '/v1/secrets/API_TOKEN', { value: secret });
    const cb = `${core.url}/_emu/inbox/stored-input`;
    const r = await core.call(
      'POST',
      '/v1/invoke/echo',
      { token: secret, n: 1, callback_url: cb },
      { headers: { 'X-Invoke-Mode': 'async' } },
    );
    expect(r.status, r.text).toBe(202);
    const id = r.json.invocation_id as string;
    const deadline = Date.now() + 20_000;
    let view = await emuView(core, id);
    while (view.status !== 'succeeded' && view.status !== 'failed' && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 25));
      view = await emuView(core, id);
    }
    expect(view.outcome).toBe('success');
    expect(view.output).toEqual({ keys: 2, token_seen: true });
    expect(view.input).toEqual({ token: '[secret API_TOKEN]', n: 1 });
    const rec = core.emu.services.invocations.byId(id);
    expect(rec.input, 'the job input is dropped after the run').toBeUndefined();
    expect(rec.input_blob).toBeUndefined();
    await expectNowhereOnDisk(secret);
  });

  it('an input over 64 KiB is not kept, and says so', async () => {
    core = await startTestCore();
    await withSnippet(core);
    const big = await core.call('POST', '/v1/invoke/echo', { s: 'x'.repeat(70 * 1024) });
    expect(big.status, big.text).toBe(200);
    const view = await emuView(core, big.headers.get('x-invocation-id')!);
    expect(view.input).toBeNull();
    expect(view.input_truncated).toBe(true);
    expect(core.emu.services.invocations.byId(view.id).stored_input_blob).toBeUndefined();
  });

  it('a stream run keeps its input too', async () => {
    core = await startTestCore();
    expect((await core.call('POST', '/v1/snippets', { name: 'gen', runtime: 'bun' })).status).toBe(201);
    const code = `export default async function* handler(input) { for (let i = 0; i < input.n; i++) yield i; }`;
    expect((await core.call('POST', '/v1/snippets/gen/versions', { code })).status).toBe(201);
    const r = await core.call('POST', '/v1/invoke/gen', { n: 3 }, { headers: { 'X-Invoke-Mode': 'stream' } });
    expect(r.status).toBe(200);
    expect(r.text).toContain('event: result');
    const view = await emuView(core, r.headers.get('x-invocation-id')!);
    expect(view.mode).toBe('stream');
    expect(view.input).toEqual({ n: 3 });
  });

  it('a record trimmed from the history takes its input blob with it; kept records keep theirs', async () => {
    core = await startTestCore({ config: { historyLimit: 2, blobSweepMs: 20 } });
    await withSnippet(core);
    const blobOf = (input: unknown) => {
      const hash = sha256Hex(JSON.stringify(input));
      return join(core!.dataDir, 'blobs', hash.slice(0, 2), hash);
    };
    const first = { only: 'the first run' };
    const r1 = await core.call('POST', '/v1/invoke/echo', first);
    expect(r1.status).toBe(200);
    expect(existsSync(blobOf(first))).toBe(true);
    for (const n of [2, 3]) expect((await core.call('POST', '/v1/invoke/echo', { n })).status).toBe(200);
    expect((await core.call('GET', `/v1/invocations/${r1.headers.get('x-invocation-id')}`)).status, 'trimmed').toBe(404);
    // past the sweep's minimum age (60 s) without waiting for it
    const then = new Date(Date.now() - 120_000);
    for (const input of [first, { n: 3 }]) await utimes(blobOf(input), then, then);
    const deadline = Date.now() + 10_000;
    while (existsSync(blobOf(first)) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    expect(existsSync(blobOf(first)), 'the trimmed record’s input blob was swept').toBe(false);
    expect(existsSync(blobOf({ n: 3 })), 'a kept record’s input blob stays').toBe(true);
  });
});
