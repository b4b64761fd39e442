/**
 * Issue 14, "One validation for every way in", with real Bun and CPython snippets: what `@svc/store` /
 * `svc.store` refuse is what PUT /v1/store/{key} refuses, with the same message, raised in the snippet as
 * an error carrying `code`; nothing refused is stored, and a restart of the core on the same data dir
 * sets nothing aside. (The property test, test/server/one-validation.property.test.ts, covers the
 * arguments exhaustively over the same protocol with a scripted runner.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { RUNTIMES, ok, snippet, type Code } from './_helpers';

let dir: string;
let core: TestCore;
beforeAll(async () => {
  dir = await tempDir('svc-emu-hostcaps-');
  core = await startTestCore({ dataDir: dir });
}, 60_000);
afterAll(async () => {
  await core?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** Tries store.set with the input's key, value and TTL; answers what the library raised (or that it stored). */
const TRY_SET: Code = {
  bun: [
    'import { store } from "@svc/store";',
    'export default async function handler(input) {',
    '  const value = input.deep ? JSON.parse("[".repeat(input.deep) + "]".repeat(input.deep)) : input.value;',
    '  const ttl = input.ttl === "NaN" ? NaN : input.ttl;',
    '  try { await store.set(input.key, value, ttl === undefined ? {} : { ttlSeconds: ttl }); return { stored: true }; }',
    '  catch (e) { return { code: e.code ?? null, message: String(e.message) }; }',
    '}',
    '',
  ].join('\n'),
  python: [
    'import json',
    'from svc import store',
    '',
    'def handler(input):',
    '    value = json.loads("[" * input["deep"] + "]" * input["deep"]) if input.get("deep") else input.get("value")',
    '    ttl = float("nan") if input.get("ttl") == "NaN" else input.get("ttl")',
    '    try:',
    '        store.set(input["key"], value, ttl_seconds=ttl)',
    '        return {"stored": True}',
    '    except Exception as e:',
    '        return {"code": getattr(e, "code", None), "message": str(e)}',
    '',
  ].join('\n'),
};

describe.each(RUNTIMES)('%s: store.set meets the REST caps', (runtime) => {
  let name: string;
  beforeAll(async () => {
    name = await snippet(core, runtime, 'caps', TRY_SET[runtime]);
  }, 60_000);

  it('a TTL of 1e12 seconds is refused with the REST message, and nothing is stored', async () => {
    const key = `far-${runtime}`;
    expect(await ok(core, name, { key, value: 1, ttl: 1e12 })).toEqual({
      code: 'validation_failed',
      message: 'store.set.ttl_seconds: must be at most 10 years (315360000 seconds)',
    });
    const rest = await core.call('PUT', `/v1/store/${key}`, { value: 1, ttl_seconds: 1e12 });
    expect(rest.status).toBe(422);
    expect(rest.json.errors).toEqual([{ location: 'body.ttl_seconds', message: 'must be at most 10 years (315360000 seconds)' }]);
    expect((await core.call('GET', `/v1/store/${key}`)).status).toBe(404);
  });

  it('negative, zero and fractional TTLs, NaN, a 600-character key and a value nested 200 levels are refused; 10 years is accepted', async () => {
    const refused = [
      [{ key: 'k', value: 1, ttl: -1 }, /^store\.set\.ttl_seconds: must be at least 1$/],
      [{ key: 'k', value: 1, ttl: 0 }, /^store\.set\.ttl_seconds: must be at least 1$/],
      [{ key: 'k', value: 1, ttl: 1.5 }, /^store\.set\.ttl_seconds: must be an integer$/],
      // NaN cannot travel as JSON: Bun's library refuses it in the same words, Python's json refuses to encode it.
      [
        { key: 'k', value: 1, ttl: 'NaN' },
        runtime === 'bun'
          ? /^store\.set\.ttl_seconds: must be an integer \(got NaN\)$/
          : /not JSON-serialisable: Out of range float values/,
      ],
      [{ key: 'k'.repeat(600), value: 1 }, /^store\.set\.key: must be 1–512 printable ASCII characters without spaces$/],
      [{ key: 'k', deep: 200 }, /^store\.set\.value: must not nest arrays\/objects deeper than 127 levels$/],
    ] as const;
    for (const [input, message] of refused) {
      const got = await ok(core, name, input);
      expect(got.message, JSON.stringify(input)).toMatch(message);
      const nanInPython = runtime === 'python' && 'ttl' in input && input.ttl === 'NaN';
      expect(got.code).toBe(nanInPython ? 'bad_args' : 'validation_failed');
    }
    expect(await ok(core, name, { key: `ten-years-${runtime}`, value: { ok: 1 }, ttl: 315_360_000 })).toEqual({ stored: true });
    const got = await core.call('GET', `/v1/store/ten-years-${runtime}`);
    expect(got.status).toBe(200);
    expect(Date.parse(got.json.expires_at) - Date.now()).toBeGreaterThan(315_360_000_000 - 60_000);
  });
});

describe('after the refusals', () => {
  it('a restart on the same data dir sets nothing aside', async () => {
    // Its own refusal and its own 10-year record, so it proves something in any order; whatever the host-call
    // tests above stored (when they ran first) is on the same data dir too.
    expect((await core.call('PUT', '/v1/store/far-restart', { value: 1, ttl_seconds: 1e12 })).status).toBe(422);
    expect((await core.call('PUT', '/v1/store/ten-years-restart', { value: { ok: 1 }, ttl_seconds: 315_360_000 })).status).toBe(201);
    await core.stop();
    core = await startTestCore({ dataDir: dir });
    expect(await readdir(join(dir, 'quarantine')).catch(() => [])).toEqual([]);
    expect((await core.call('GET', '/v1/store/ten-years-restart')).status).toBe(200);
  }, 60_000);
});
