/**
 * Sync invoke end to end, in real Bun and real CPython (issue 3, "Tests"): hello and input echo with the
 * run's headers, the resolution rule, handler errors with the snippet's own message and stack, non-JSON
 * returns, invocation records, the list, logs (capped at 1 MiB), version-creation code checks, cancel.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, type TestCore } from '../helpers/core';
import { expectProblem } from '../api/_util';
import {
  RUNTIMES,
  createSnippet,
  createVersion,
  deploy,
  invocationId,
  invoke,
  snippet,
  uniqueName,
  waitFor,
  type Code,
  type Runtime,
} from './_helpers';

let core: TestCore;
beforeAll(async () => {
  core = await startTestCore();
}, 60_000);
afterAll(async () => {
  await core?.stop();
});

const HELLO: Code = {
  bun: 'export default async function handler(input) {\n  return { hello: "world", runtime: "bun", input };\n}\n',
  python: 'def handler(input):\n    return {"hello": "world", "runtime": "python", "input": input}\n',
};

/** Returns which version runs (each version's code differs by its number). */
const versionCode = (runtime: Runtime, n: number) =>
  runtime === 'bun'
    ? `export default async function handler() {\n  return { v: ${n} };\n}\n`
    : `def handler(input):\n    return {"v": ${n}}\n`;

/** Line 3 throws an error with the snippet's own message. */
const THROWS: Code = {
  bun: 'export default async function handler(input) {\n  const n = input.n;\n  throw new Error(`snippet says no to ${n}`);\n}\n',
  python: 'def handler(input):\n    n = input["n"]\n    raise ValueError(f"snippet says no to {n}")\n',
};
const STACK_LINE: Record<Runtime, RegExp> = {
  bun: /index\.ts:3\b/,
  python: /main\.py", line 3\b/,
};

/** Compiles and has a handler, but line 3 throws while the module loads. */
const IMPORT_ERROR: Code = {
  bun: 'export default async function handler() { return {}; }\nconst when = "at import";\nthrow new Error(`broken ${when}`);\n',
  python: 'def handler(input):\n    return {}\nraise RuntimeError("broken at import")\n',
};

/** Compiles and has a handler, but the module ends the process while it loads (exit status 3). */
const EXIT_AT_LOAD: Code = {
  bun: 'process.exit(3);\nexport default async function handler() {\n  return {};\n}\n',
  python: 'import os\nos._exit(3)\n\ndef handler(input):\n    return {}\n',
};

const SLEEPS: Code = {
  bun: 'export default async function handler(input) {\n  await new Promise((r) => setTimeout(r, input.ms));\n  return { slept: input.ms };\n}\n',
  python: 'import time\n\ndef handler(input):\n    time.sleep(input["ms"] / 1000)\n    return {"slept": input["ms"]}\n',
};

/** SLEEPS whose module takes 1 s to load (a cold start as slow as a framework import). */
const SLOW_LOAD_SLEEPS: Code = {
  bun: `await new Promise((r) => setTimeout(r, 1000));\n${SLEEPS.bun}`,
  python: `import time\ntime.sleep(1)\n${SLEEPS.python}`,
};

const NOT_JSON: Code = {
  bun: 'export default async function handler() {\n  return { big: 10n };\n}\n',
  python: 'def handler(input):\n    return {"s": {1, 2, 3}}\n',
};
const NOT_JSON_WHY: Record<Runtime, RegExp> = { bun: /BigInt/, python: /\bset\b/ };

const PRINTS: Code = {
  bun: 'export default async function handler(input) {\n  console.log("out-line " + input.tag);\n  console.error("err-line " + input.tag);\n  return { printed: true };\n}\n',
  python:
    'import sys\n\ndef handler(input):\n    print("out-line " + input["tag"])\n    print("err-line " + input["tag"], file=sys.stderr)\n    return {"printed": True}\n',
};

/** Prints 2 MiB: 2048 lines of 1023 'x' + newline. */
const PRINTS_2MIB: Code = {
  bun: 'export default async function handler() {\n  const line = "x".repeat(1023);\n  for (let i = 0; i < 2048; i++) console.log(line);\n  return { done: true };\n}\n',
  python: 'def handler(input):\n    line = "x" * 1023\n    for _ in range(2048):\n        print(line)\n    return {"done": True}\n',
};

/** Does not compile: the error is on line 2. */
const BROKEN: Code = {
  bun: 'export default async function handler(input) {\n  const x = = 1;\n  return x;\n}\n',
  python: 'def handler(input):\n    x = = 1\n    return x\n',
};
const BROKEN_FILE: Record<Runtime, string> = { bun: 'index.ts', python: 'main.py' };

const NO_HANDLER: Code = {
  bun: 'export const notTheHandler = 1;\nexport function helper() { return 2; }\n',
  python: 'x = 1\n\ndef helper(input):\n    return x\n',
};

describe.each(RUNTIMES)('%s: sync invoke', (runtime) => {
  it('hello: 200, body = the return value, headers name the run', async () => {
    const name = await snippet(core, runtime, 'hello', HELLO[runtime]);
    const r = await invoke(core, name, { a: 1, nested: { b: [1, 2, 'three'] }, s: 'héllo ✓' });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.json).toEqual({ hello: 'world', runtime, input: { a: 1, nested: { b: [1, 2, 'three'] }, s: 'héllo ✓' } });
    expect(r.headers.get('x-invocation-id')).toMatch(/\S/);
    expect(r.headers.get('x-snippet-version')).toBe('1');
    expect(r.headers.get('x-snippet-env')).toBeTruthy();
    // An empty body is an empty input.
    const empty = await core.call('POST', `/v1/invoke/${name}`);
    expect(empty.status, empty.text).toBe(200);
    expect(empty.json.input).toEqual({});
  });

  it('resolution: version > env > prod > latest; 404 for unknown snippet, env without deployment, missing version', async () => {
    const name = uniqueName(`resolve-${runtime}`);
    await createSnippet(core, runtime, name);
    for (const n of [1, 2, 3, 4]) expect(await createVersion(core, name, versionCode(runtime, n))).toBe(n);

    // Nothing deployed: the latest version.
    let r = await invoke(core, name);
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ v: 4 });
    expect(r.headers.get('x-snippet-version')).toBe('4');

    await deploy(core, name, 'prod', 1);
    await deploy(core, name, 'dev', 2);

    r = await invoke(core, name); // prod, because it is deployed
    expect([r.status, r.json]).toEqual([200, { v: 1 }]);
    expect(r.headers.get('x-snippet-version')).toBe('1');
    expect(r.headers.get('x-snippet-env')).toBe('prod');

    r = await invoke(core, name, {}, { query: 'env=dev' }); // explicit env wins over prod
    expect([r.status, r.json]).toEqual([200, { v: 2 }]);
    expect(r.headers.get('x-snippet-version')).toBe('2');
    expect(r.headers.get('x-snippet-env')).toBe('dev');

    r = await invoke(core, name, {}, { query: 'version=3' }); // explicit version wins over prod
    expect([r.status, r.json]).toEqual([200, { v: 3 }]);
    expect(r.headers.get('x-snippet-version')).toBe('3');

    r = await invoke(core, name, {}, { query: 'env=dev&version=4' }); // version wins over env
    expect([r.status, r.json]).toEqual([200, { v: 4 }]);
    expect(r.headers.get('x-snippet-version')).toBe('4');

    // Rolling prod forward changes what runs without parameters.
    await deploy(core, name, 'prod', 3);
    r = await invoke(core, name);
    expect([r.status, r.json]).toEqual([200, { v: 3 }]);

    expectProblem(await invoke(core, uniqueName('no-such-snippet')), 404, 'not_found');
    expectProblem(await invoke(core, name, {}, { query: 'env=staging' }), 404, 'not_found'); // exists, nothing deployed
    expectProblem(await invoke(core, name, {}, { query: 'env=no-such-env' }), 404, 'not_found');
    expectProblem(await invoke(core, name, {}, { query: 'version=9' }), 404, 'not_found');
    expectProblem(await invoke(core, name, {}, { query: 'env=prod&version=9' }), 404, 'not_found');
  });

  it.each(['bogus', 'ASYNC', 'async,stream', 'sync'])(
    'X-Invoke-Mode: %s (not absent, async or stream) → 400; nothing runs',
    async (mode) => {
      const name = await snippet(core, runtime, 'mode', HELLO[runtime]);
      const r = await invoke(core, name, {}, { headers: { 'x-invoke-mode': mode } });
      expectProblem(r, 400, 'validation_failed');
      const list = await core.call('GET', `/v1/invocations?snippet=${name}`);
      expect(list.status, list.text).toBe(200);
      expect(list.json.data).toEqual([]);
    },
  );

  it("handler error → 500 handler_error with invocation_id, the snippet's message and a stack naming its file and line", async () => {
    const name = await snippet(core, runtime, 'throws', THROWS[runtime]);
    const r = await invoke(core, name, { n: 42 });
    expectProblem(r, 500, 'handler_error');
    const id = invocationId(r);
    expect(r.json.invocation_id).toBe(id);
    expect(r.json.detail).toContain('snippet says no to 42');
    expect(typeof r.json.stack, r.text).toBe('string');
    expect(r.json.stack).toMatch(STACK_LINE[runtime]);
    expect(r.headers.get('x-snippet-version')).toBe('1');

    const rec = await core.call('GET', `/v1/invocations/${id}`);
    expect(rec.status, rec.text).toBe(200);
    expect(rec.json).toMatchObject({ id, status: 'failed', outcome: 'handler_error', error: { code: 'handler_error' } });
    expect(rec.json.error.message).toContain('snippet says no to 42');

    // A handler error does not poison the sandbox: the next call runs (and fails the same way).
    const again = await invoke(core, name, { n: 7 });
    expectProblem(again, 500, 'handler_error');
    expect(again.json.detail).toContain('snippet says no to 7');
  });

  it('an error while the module loads (top level) → 500 handler_error with its message and line', async () => {
    const name = await snippet(core, runtime, 'import-error', IMPORT_ERROR[runtime]);
    const r = await invoke(core, name);
    expectProblem(r, 500, 'handler_error');
    expect(r.json.invocation_id).toBe(invocationId(r));
    expect(r.json.detail).toContain('broken at import');
    expect(`${r.json.stack ?? ''}\n${r.json.detail}`).toMatch(STACK_LINE[runtime]);
    // It fails the same way every time (no half-loaded sandbox is kept).
    const again = await invoke(core, name);
    expectProblem(again, 500, 'handler_error');
    expect(again.json.detail).toContain('broken at import');
  });

  it("a module that exits the process while it loads → 500 handler_error (the snippet's fault), not 503 failed", async () => {
    const name = await snippet(core, runtime, 'exit-at-load', EXIT_AT_LOAD[runtime]);
    const r = await invoke(core, name);
    expectProblem(r, 500, 'handler_error');
    expect(r.json.invocation_id).toBe(invocationId(r));
  });

  /** Starts a 4 s sleep, waits until it is listed as running (+ `delayMs`), cancels it; returns both answers. */
  async function cancelWhileRunning(name: string, delayMs: number) {
    const pending = invoke(core, name, { ms: 4000 });
    const id = await waitFor('the invocation to be listed as running', async () => {
      const l = await core.call('GET', `/v1/invocations?snippet=${name}&status=running`);
      return l.json.data[0]?.id as string | undefined;
    });
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    const cancel = await core.call('POST', `/v1/invocations/${id}/cancel`);
    return { id, cancel, run: await pending };
  }

  async function expectCancelled({ id, cancel, run }: Awaited<ReturnType<typeof cancelWhileRunning>>) {
    expect(cancel.status, cancel.text).toBe(202);
    expect(cancel.json).toMatchObject({ id });
    expectProblem(run, 409, 'cancelled');
    expect(run.json.invocation_id).toBe(id);
    expect(run.ms, 'the run ended at the cancel (or right after its 1 s start), not after its 4 s sleep').toBeLessThan(3000);
    const rec = await core.call('GET', `/v1/invocations/${id}`);
    expect(rec.json).toMatchObject({ status: 'failed', outcome: 'cancelled' });
    expectProblem(await core.call('POST', `/v1/invocations/${id}/cancel`), 409, 'conflict');
  }

  it('cancel of a running invocation (warm sandbox, handler sleeping) → 202; the sync caller gets 409 cancelled', async () => {
    const name = await snippet(core, runtime, 'cancel-warm', SLEEPS[runtime]);
    expect((await invoke(core, name, { ms: 1 })).status).toBe(200); // warm it
    await expectCancelled(await cancelWhileRunning(name, 300));
  });

  it('cancel while its sandbox is still starting (a module that takes 1 s to load) → 202 and it is cancelled', async () => {
    const name = await snippet(core, runtime, 'cancel-cold', SLOW_LOAD_SLEEPS[runtime]);
    await expectCancelled(await cancelWhileRunning(name, 0));
  });

  it('a non-JSON-serialisable return is handler_error saying so', async () => {
    const name = await snippet(core, runtime, 'notjson', NOT_JSON[runtime]);
    const r = await invoke(core, name);
    expectProblem(r, 500, 'handler_error');
    expect(r.json.invocation_id).toBe(invocationId(r));
    expect(r.json.detail).toMatch(/JSON/);
    expect(r.json.detail).toMatch(/serial/i);
    expect(r.json.detail).toMatch(NOT_JSON_WHY[runtime]);
  });

  it('GET /v1/invocations/{id}: status, outcome, output, usage and parity', async () => {
    const name = await snippet(core, runtime, 'record', HELLO[runtime]);
    const r = await invoke(core, name, { x: 1 });
    expect(r.status, r.text).toBe(200);
    const id = invocationId(r);
    const rec = await core.call('GET', `/v1/invocations/${id}`);
    expect(rec.status, rec.text).toBe(200);
    const v = rec.json;
    expect(v).toMatchObject({
      id,
      snippet: name,
      version: 1,
      mode: 'sync',
      status: 'succeeded',
      outcome: 'success',
      output: { hello: 'world', runtime, input: { x: 1 } },
      error: null,
    });
    for (const f of ['duration_ms', 'init_ms', 'cpu_ms', 'cpu_throttled_ms', 'peak_memory_mb']) {
      expect(typeof v.usage?.[f], `usage.${f}`).toBe('number');
      expect(v.usage[f], `usage.${f}`).toBeGreaterThanOrEqual(0);
    }
    expect(v.usage.peak_memory_mb, 'a real runtime uses some memory').toBeGreaterThan(1);
    expect(v.usage.init_ms, 'a cold start takes time').toBeGreaterThan(0);
    expect(['full', 'degraded']).toContain(v.parity.status);
    expect(Array.isArray(v.parity.reasons)).toBe(true);
    if (v.parity.status === 'full') expect(v.parity.reasons).toEqual([]);
    else expect(v.parity.reasons.length).toBeGreaterThan(0);
    for (const t of ['created_at', 'started_at', 'finished_at']) expect(Date.parse(v[t]), t).not.toBeNaN();
    expect(Date.parse(v.finished_at)).toBeGreaterThanOrEqual(Date.parse(v.started_at));
  });

  it('GET /v1/invocations lists newest first and filters by snippet and status', async () => {
    const good = await snippet(core, runtime, 'list-good', HELLO[runtime]);
    const bad = await snippet(core, runtime, 'list-bad', THROWS[runtime]);
    const ids: { id: string; name: string; ok: boolean }[] = [];
    for (const [name, isOk] of [
      [good, true],
      [bad, false],
      [good, true],
      [bad, false],
      [good, true],
    ] as const) {
      const r = await invoke(core, name, { n: 1 });
      expect(r.status, r.text).toBe(isOk ? 200 : 500);
      ids.push({ id: invocationId(r), name, ok: isOk });
    }
    const expectIds = (res: { status: number; text: string; json: any }, want: string[]) => {
      expect(res.status, res.text).toBe(200);
      expect(res.json.data.map((x: { id: string }) => x.id)).toEqual(want);
    };
    const newestFirst = [...ids].reverse();
    expectIds(
      await core.call('GET', `/v1/invocations?snippet=${good}`),
      newestFirst.filter((x) => x.name === good).map((x) => x.id),
    );
    expectIds(
      await core.call('GET', `/v1/invocations?snippet=${bad}`),
      newestFirst.filter((x) => x.name === bad).map((x) => x.id),
    );
    expectIds(
      await core.call('GET', `/v1/invocations?snippet=${bad}&status=failed`),
      newestFirst.filter((x) => !x.ok).map((x) => x.id),
    );
    expectIds(await core.call('GET', `/v1/invocations?snippet=${good}&status=failed`), []);
    expectIds(
      await core.call('GET', `/v1/invocations?snippet=${good}&status=succeeded`),
      newestFirst.filter((x) => x.ok).map((x) => x.id),
    );

    // Page by page (limit 2, following next_cursor): the same newest-first order, nothing repeated or lost.
    const paged: string[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 10; i++) {
      const page = await core.call(
        'GET',
        `/v1/invocations?snippet=${good}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(page.status, page.text).toBe(200);
      expect(page.json.data.length).toBeLessThanOrEqual(2);
      paged.push(...page.json.data.map((x: { id: string }) => x.id));
      cursor = page.json.next_cursor ?? null;
      if (!cursor) break;
    }
    expect(paged).toEqual(newestFirst.filter((x) => x.name === good).map((x) => x.id));

    const all = await core.call('GET', '/v1/invocations?status=failed');
    expect(all.status, all.text).toBe(200);
    expect(all.json.data.length).toBeGreaterThanOrEqual(2);
    for (const x of all.json.data) expect(x.status).toBe('failed');
    const unfiltered = await core.call('GET', '/v1/invocations');
    expect(unfiltered.json.data[0].id, 'the newest invocation of the tenant comes first').toBe(ids.at(-1)!.id);
  });

  it('/logs holds what the handler printed (stdout and stderr)', async () => {
    const name = await snippet(core, runtime, 'prints', PRINTS[runtime]);
    const r = await invoke(core, name, { tag: 'tag-one' });
    expect(r.status, r.text).toBe(200);
    const logs = await core.call('GET', `/v1/invocations/${invocationId(r)}/logs`);
    expect(logs.status, logs.text).toBe(200);
    expect(logs.json.invocation_id).toBe(invocationId(r));
    expect(logs.json.logs).toContain('out-line tag-one');
    expect(logs.json.logs).toContain('err-line tag-one');
    expect(logs.json.truncated).toBe(false);

    // Logs are per invocation: the next run (same warm sandbox) has only its own lines.
    const r2 = await invoke(core, name, { tag: 'tag-two' });
    const logs2 = await core.call('GET', `/v1/invocations/${invocationId(r2)}/logs`);
    expect(logs2.json.logs).toContain('out-line tag-two');
    expect(logs2.json.logs).not.toContain('tag-one');
  });

  it('/logs is capped at 1 MiB with a truncation mark when the handler prints 2 MiB', async () => {
    const name = await snippet(core, runtime, 'prints-2mib', PRINTS_2MIB[runtime]);
    const r = await invoke(core, name);
    expect(r.status, r.text.slice(0, 500)).toBe(200);
    const logs = await core.call('GET', `/v1/invocations/${invocationId(r)}/logs`);
    expect(logs.status).toBe(200);
    expect(logs.json.truncated).toBe(true);
    const text: string = logs.json.logs;
    const bytes = Buffer.byteLength(text);
    expect(bytes, 'at most 1 MiB plus the mark').toBeLessThanOrEqual(1024 * 1024 + 200);
    expect(bytes, 'the first MiB is kept').toBeGreaterThanOrEqual(1024 * 1024 - 2048);
    expect(text.startsWith('x'.repeat(1023) + '\n')).toBe(true);
    expect(text.slice(-200)).toMatch(/truncat/i);
  });

  it("/logs' truncation mark, when it counts the dropped bytes, counts them right (~1 MiB of the 2 MiB printed)", async () => {
    const name = await snippet(core, runtime, 'prints-2mib-count', PRINTS_2MIB[runtime]);
    const r = await invoke(core, name);
    expect(r.status, r.text.slice(0, 500)).toBe(200);
    const text: string = (await core.call('GET', `/v1/invocations/${invocationId(r)}/logs`)).json.logs;
    const counted = /(\d+) (?:more )?bytes dropped/.exec(text.slice(-200));
    if (counted) expect(Number(counted[1]), `the mark: ${JSON.stringify(text.slice(-120))}`).toBeGreaterThanOrEqual(1024 * 1024 - 4096);
  });

  it('version creation: code that does not compile → 422 naming the file and line', async () => {
    const name = uniqueName(`broken-${runtime}`);
    await createSnippet(core, runtime, name);
    const r = await core.call('POST', `/v1/snippets/${name}/versions`, { code: BROKEN[runtime] });
    expectProblem(r, 422, 'validation_failed');
    const messages = JSON.stringify(r.json.errors) + r.json.detail;
    expect(messages).toContain(BROKEN_FILE[runtime]);
    expect(messages).toMatch(new RegExp(`${BROKEN_FILE[runtime].replace('.', '\\.')}:2\\b`));
    const versions = await core.call('GET', `/v1/snippets/${name}/versions`);
    expect(versions.json.data ?? versions.json).toEqual([]);
  });

  it('version creation: code without a handler → 422', async () => {
    const name = uniqueName(`nohandler-${runtime}`);
    await createSnippet(core, runtime, name);
    const r = await core.call('POST', `/v1/snippets/${name}/versions`, { code: NO_HANDLER[runtime] });
    expectProblem(r, 422, 'validation_failed');
    expect(JSON.stringify(r.json.errors) + r.json.detail).toMatch(/handler/);
  });

  it('cancel of a finished invocation → 409', async () => {
    const name = await snippet(core, runtime, 'cancel', HELLO[runtime]);
    const r = await invoke(core, name);
    expect(r.status).toBe(200);
    const c = await core.call('POST', `/v1/invocations/${invocationId(r)}/cancel`);
    expectProblem(c, 409, 'conflict');
    expectProblem(await core.call('POST', '/v1/invocations/inv_doesnotexist/cancel'), 404, 'not_found');
  });
});
