/**
 * Secrets and the store from inside real Bun and CPython snippets (issue 3, "Tests"): a secret reaches the
 * handler as an env var (never argv or the initial environment), an edited secret reaches the SAME warm
 * sandbox, a deleted one disappears; the store persists across invocations and across the two runtimes of
 * one tenant (@svc/store, svc.store sync and async), is visible over /v1/store, and is invisible to another
 * tenant.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { RUNTIMES, emuInvocation, invocationId, invoke, newTenant, ok, snippet, type Code } from './_helpers';

let core: TestCore;
beforeAll(async () => {
  core = await startTestCore();
}, 60_000);
afterAll(async () => {
  await core?.stop();
});

/** Reports a secret as the handler sees it, plus where else its value shows up in the process. */
const SEES_SECRET: Code = {
  bun: [
    'import fs from "node:fs";',
    'const MODULE_ID = crypto.randomUUID();',
    'export default async function handler(input) {',
    '  const initialEnv = fs.readFileSync("/proc/self/environ", "utf8");',
    '  const cmdline = fs.readFileSync("/proc/self/cmdline", "utf8");',
    '  return {',
    '    module: MODULE_ID,',
    '    value: process.env[input.name] ?? null,',
    '    invocation: process.env.SVC_INVOCATION_ID ?? null,',
    '    present: Object.prototype.hasOwnProperty.call(process.env, input.name),',
    '    in_initial_env: input.probe ? initialEnv.includes(input.probe) : null,',
    '    in_argv: input.probe ? cmdline.includes(input.probe) || process.argv.join(" ").includes(input.probe) : null,',
    '  };',
    '}',
    '',
  ].join('\n'),
  python: [
    'import os, sys, uuid',
    'MODULE_ID = uuid.uuid4().hex',
    '',
    'def handler(input):',
    '    with open("/proc/self/environ", "rb") as f:',
    '        initial_env = f.read()',
    '    with open("/proc/self/cmdline", "rb") as f:',
    '        cmdline = f.read()',
    '    probe = input.get("probe")',
    '    return {',
    '        "module": MODULE_ID,',
    '        "value": os.environ.get(input["name"]),',
    '        "invocation": os.environ.get("SVC_INVOCATION_ID"),',
    '        "present": input["name"] in os.environ,',
    '        "in_initial_env": (probe.encode() in initial_env) if probe else None,',
    '        "in_argv": (probe.encode() in cmdline or probe in " ".join(sys.argv)) if probe else None,',
    '    }',
    '',
  ].join('\n'),
};

type StoreFlavour = 'bun' | 'python-sync' | 'python-async';
const STORE_FLAVOURS: StoreFlavour[] = ['bun', 'python-sync', 'python-async'];

const STORE_CODE: Record<StoreFlavour, string> = {
  bun: [
    'import { store } from "@svc/store";',
    'export default async function handler(input) {',
    '  switch (input.op) {',
    '    case "set": await store.set(input.key, input.value); return { ok: true };',
    '    case "get": return { value: await store.get(input.key) };',
    '    case "delete": return { deleted: await store.delete(input.key) };',
    '    case "list": return { keys: (await store.list({ prefix: input.prefix })).map((e) => (typeof e === "string" ? e : e.key)) };',
    '  }',
    '  throw new Error("unknown op " + input.op);',
    '}',
    '',
  ].join('\n'),
  'python-sync': [
    'from svc import store',
    '',
    'def handler(input):',
    '    op = input["op"]',
    '    if op == "set":',
    '        store.set(input["key"], input["value"])',
    '        return {"ok": True}',
    '    if op == "get":',
    '        return {"value": store.get(input["key"])}',
    '    if op == "delete":',
    '        return {"deleted": store.delete(input["key"])}',
    '    if op == "list":',
    '        return {"keys": [e if isinstance(e, str) else e["key"] for e in store.list(prefix=input.get("prefix", ""))]}',
    '    raise ValueError("unknown op " + op)',
    '',
  ].join('\n'),
  'python-async': [
    'import asyncio',
    'from svc import store',
    '',
    'async def handler(input):',
    '    op = input["op"]',
    '    await asyncio.sleep(0)',
    '    if op == "set":',
    '        await store.aset(input["key"], input["value"])',
    '        return {"ok": True}',
    '    if op == "get":',
    '        return {"value": await store.aget(input["key"])}',
    '    if op == "delete":',
    '        return {"deleted": await store.adelete(input["key"])}',
    '    if op == "list":',
    '        return {"keys": [e if isinstance(e, str) else e["key"] for e in await store.alist(prefix=input.get("prefix", ""))]}',
    '    raise ValueError("unknown op " + op)',
    '',
  ].join('\n'),
};
const runtimeOf = (f: StoreFlavour) => (f === 'bun' ? 'bun' : 'python');

describe.each(RUNTIMES)('%s: secrets', (runtime) => {
  it('a secret reaches the handler as an env var (not argv, not the initial environment); an edit reaches the SAME warm sandbox; a delete removes it', async () => {
    const secret = `TEST_SECRET_${runtime.toUpperCase()}`;
    const v1 = `first-value-${runtime}-${Math.random().toString(36).slice(2)}`;
    const v2 = `second-value-${runtime}-${Math.random().toString(36).slice(2)}`;
    const put1 = await core.call('PUT', `/v1/secrets/${secret}`, { value: v1 });
    expect(put1.status, put1.text).toBe(201);
    const name = await snippet(core, runtime, 'secret', SEES_SECRET[runtime]);

    const r1 = await invoke(core, name, { name: secret, probe: v1 });
    expect(r1.status, r1.text).toBe(200);
    expect(r1.json).toMatchObject({ value: v1, present: true });
    expect(r1.json.in_initial_env, 'the secret is not in the initial environment of the runner').toBe(false);
    expect(r1.json.in_argv, 'the secret is not on the command line').toBe(false);
    expect((await emuInvocation(core, invocationId(r1))).warm).toBe(false);

    const put2 = await core.call('PUT', `/v1/secrets/${secret}`, { value: v2 });
    expect(put2.status, put2.text).toBe(200);
    const r2 = await invoke(core, name, { name: secret, probe: v2 });
    expect(r2.status, r2.text).toBe(200);
    expect(r2.json.value, 'the edited secret reaches the warm sandbox').toBe(v2);
    expect([r1.json.invocation, r2.json.invocation], 'SVC_INVOCATION_ID is set per invocation').toEqual([
      invocationId(r1),
      invocationId(r2),
    ]);
    expect(r2.json.module, 'the same sandbox (module loaded once)').toBe(r1.json.module);
    expect((await emuInvocation(core, invocationId(r2))).warm).toBe(true);

    const del = await core.call('DELETE', `/v1/secrets/${secret}`);
    expect(del.status, del.text).toBe(204);
    const r3 = await invoke(core, name, { name: secret });
    expect(r3.status, r3.text).toBe(200);
    expect(r3.json.module, 'still the same warm sandbox').toBe(r1.json.module);
    expect((await emuInvocation(core, invocationId(r3))).warm).toBe(true);
    expect(r3.json, 'a deleted secret disappears from the env').toMatchObject({ value: null, present: false });
  });
});

describe('secrets across tenants', () => {
  it("another tenant's secret never reaches our handler, nor ours theirs", async () => {
    const theirKey = await newTenant(core, 'secret-neighbour');
    const put = await core.call('PUT', '/v1/secrets/NEIGHBOUR_ONLY', { value: 'their-secret-value' }, { key: theirKey });
    expect(put.status, put.text).toBe(201);
    const ours = await core.call('PUT', '/v1/secrets/OURS_ONLY', { value: 'our-secret-value' });
    expect(ours.status, ours.text).toBe(201);
    for (const runtime of RUNTIMES) {
      const mine = await snippet(core, runtime, 'secret-x', SEES_SECRET[runtime]);
      const theirs = await snippet(core, runtime, 'secret-x', SEES_SECRET[runtime], {}, theirKey);
      expect(await ok(core, mine, { name: 'NEIGHBOUR_ONLY' }), runtime).toMatchObject({ value: null, present: false });
      expect(await ok(core, mine, { name: 'OURS_ONLY' }), runtime).toMatchObject({ value: 'our-secret-value' });
      expect(await ok(core, theirs, { name: 'OURS_ONLY' }, { key: theirKey }), runtime).toMatchObject({ value: null, present: false });
      expect(await ok(core, theirs, { name: 'NEIGHBOUR_ONLY' }, { key: theirKey }), runtime).toMatchObject({ value: 'their-secret-value' });
    }
  });
});

describe('the store', () => {
  const names = {} as Record<StoreFlavour, string>;
  let otherKey: string;
  const otherNames = {} as Record<'bun' | 'python-sync', string>;

  beforeAll(async () => {
    for (const f of STORE_FLAVOURS) names[f] = await snippet(core, runtimeOf(f), `store-${f}`, STORE_CODE[f]);
    otherKey = await newTenant(core, 'other-tenant');
    for (const f of ['bun', 'python-sync'] as const) {
      otherNames[f] = await snippet(core, runtimeOf(f), `store-${f}`, STORE_CODE[f], {}, otherKey);
    }
  }, 60_000);

  const pairs = STORE_FLAVOURS.flatMap((w) => STORE_FLAVOURS.filter((r) => r !== w).map((r) => [w, r] as const));

  it.each(pairs)('what %s sets, %s reads (another invocation, another snippet)', async (writer, reader) => {
    const key = `k-${writer}-${reader}`;
    const value = { from: writer, n: [1, 2.5, null], nested: { s: 'ünïcode ✓', t: true } };
    expect(await ok(core, names[writer], { op: 'set', key, value })).toEqual({ ok: true });
    expect(await ok(core, names[reader], { op: 'get', key })).toEqual({ value });
    // and the writer itself, in a later invocation
    expect(await ok(core, names[writer], { op: 'get', key })).toEqual({ value });
    const api = await core.call('GET', `/v1/store/${encodeURIComponent(key)}`);
    expect(api.status, api.text).toBe(200);
    expect(api.json).toMatchObject({ key, value, expires_at: null });
  });

  it('is visible via /v1/store, and the API and snippets share it both ways', async () => {
    // The keys the pair tests write, written here too: this test may run before them (shuffled order).
    for (const [w, r] of pairs)
      expect(await ok(core, names[w], { op: 'set', key: `k-${w}-${r}`, value: { from: w } })).toEqual({ ok: true });
    const list = await core.call('GET', '/v1/store?prefix=k-');
    expect(list.status, list.text).toBe(200);
    expect(list.json.data.map((e: { key: string }) => e.key).sort()).toEqual(pairs.map(([w, r]) => `k-${w}-${r}`).sort());

    const put = await core.call('PUT', '/v1/store/from-api', { value: { via: 'api' } });
    expect(put.status, put.text).toBe(201);
    for (const f of STORE_FLAVOURS) {
      expect(await ok(core, names[f], { op: 'get', key: 'from-api' }), f).toEqual({ value: { via: 'api' } });
      const keys = (await ok(core, names[f], { op: 'list', prefix: 'k-bun-' })).keys;
      expect([...keys].sort(), f).toEqual(['k-bun-python-async', 'k-bun-python-sync']);
    }
    expect(await ok(core, names['python-async'], { op: 'get', key: 'never-set' })).toEqual({ value: null });

    expect(await ok(core, names['python-sync'], { op: 'delete', key: 'from-api' })).toEqual({ deleted: true });
    expect((await core.call('GET', '/v1/store/from-api')).status).toBe(404);
    expect(await ok(core, names.bun, { op: 'get', key: 'from-api' })).toEqual({ value: null });
    expect(await ok(core, names.bun, { op: 'delete', key: 'from-api' })).toEqual({ deleted: false });
  });

  it('is invisible to another tenant (snippets and API), and its writes do not touch ours', async () => {
    const key = 'k-bun-python-sync';
    if ((await core.call('GET', `/v1/store/${key}`)).status === 404) {
      // The pair test that writes it has not run yet (shuffled order): write it the same way.
      expect(await ok(core, names.bun, { op: 'set', key, value: { from: 'bun' } })).toEqual({ ok: true });
    }
    const ours = (await core.call('GET', `/v1/store/${key}`)).json.value;
    expect(ours).toBeTruthy();
    for (const f of ['bun', 'python-sync'] as const) {
      expect(await ok(core, otherNames[f], { op: 'get', key }, { key: otherKey }), f).toEqual({ value: null });
      expect(await ok(core, otherNames[f], { op: 'list', prefix: 'k-' }, { key: otherKey }), f).toEqual({ keys: [] });
    }
    expect((await core.call('GET', `/v1/store/${key}`, undefined, { key: otherKey })).status).toBe(404);
    const otherList = await core.call('GET', '/v1/store', undefined, { key: otherKey });
    expect(otherList.json.data).toEqual([]);

    expect(await ok(core, otherNames.bun, { op: 'set', key, value: 'theirs' }, { key: otherKey })).toEqual({ ok: true });
    expect(await ok(core, otherNames['python-sync'], { op: 'get', key }, { key: otherKey })).toEqual({ value: 'theirs' });
    // Ours is untouched, seen from our snippets and our API.
    expect(await ok(core, names['python-async'], { op: 'get', key })).toEqual({ value: ours });
    expect((await core.call('GET', `/v1/store/${key}`)).json.value).toEqual(ours);
    // Their delete does not delete ours.
    expect(await ok(core, otherNames['python-sync'], { op: 'delete', key }, { key: otherKey })).toEqual({ deleted: true });
    expect(await ok(core, names.bun, { op: 'get', key })).toEqual({ value: ours });
  });
});
