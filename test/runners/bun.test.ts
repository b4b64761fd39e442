// The Bun runner, for real: spawned as the executor spawns it, driven through RunnerChannel.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Duplex } from 'node:stream';
import { fakeStore, findBun, run, skipNote, startRunner, BUN_RUNNER, type StartedRunner } from './helpers';

const bun = findBun();
if (!bun) skipNote('bun');

const MAIN = `import { store } from "@svc/store";
import { integrations } from "@svc/integrations";

type Input = { case?: string; [k: string]: unknown };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const capturedLog = console.log; // a reference taken at import time is captured too

export default async function handler(input: Input) {
  switch (input.case) {
    case "hello":
      return { hello: "world" };
    case "echo":
      return input;
    case "undefined":
      return undefined;
    case "throw":
      throw new TypeError("the snippet's own message"); // line 17
    case "throw-string":
      throw "a bare string";
    case "bigint":
      return { n: 10n };
    case "cycle": {
      const a: Record<string, unknown> = { name: "a" };
      a.self = a;
      return a;
    }
    case "function":
      return () => 1;
    case "symbol":
      return Symbol("s");
    case "env":
      return { secret: process.env.SECRET ?? null, other: process.env.OTHER ?? null, own: process.env.RUNNER_OWN ?? null };
    case "logs":
      console.log("log line", { a: 1 });
      console.error("error line");
      console.warn("warn line");
      capturedLog("captured ref");
      process.stdout.write("raw out\\n");
      process.stderr.write("raw err\\n");
      console.info("tag:" + input.tag);
      return { logged: true };
    case "console-extras":
      console.group("group");
      console.log("inside\\ntwo lines");
      console.groupEnd();
      console.table([{ a: 1 }]);
      console.dir({ x: { y: { z: 1 } } }, { depth: 0 });
      console.count("c");
      console.assert(false, "asserted");
      console.trace("traced");
      return null;
    case "big-logs":
      for (let i = 0; i < 2048; i++) console.log("x".repeat(1023));
      return { ok: true };
    case "store": {
      await store.set("greeting", { hello: input.who }, { ttlSeconds: 60 });
      const got = await store.get("greeting");
      const missing = await store.get("nope");
      const list = await store.list({ prefix: "gr" });
      const deleted = await store.delete("greeting");
      const after = await store.get("greeting");
      let error: unknown = null;
      try {
        await store.set("forbidden", 1);
      } catch (e: any) {
        error = { code: e.code, message: e.message, isError: e instanceof Error };
      }
      const api = await integrations.call("github", { method: "GET", path: "/user", query: { a: "1" } });
      return { got, missing, list, deleted, after, error, api };
    }
    case "uncaught":
      setTimeout(() => {
        throw new Error("thrown from a timer");
      }, 5);
      await sleep(2000);
      return { unreachable: true };
    case "host-outside": {
      const host = (globalThis as any)[Symbol.for("svc.host")];
      return { hasCall: typeof host?.call === "function" };
    }
    default:
      return { unknownCase: input.case ?? null };
  }
}
`;

describe.skipIf(!bun)('bun runner', () => {
  let r: StartedRunner;

  beforeAll(async () => {
    r = await startRunner('bun', { 'main.ts': MAIN });
    if (r.ready.t !== 'ready') throw new Error(`init_error: ${JSON.stringify(r.ready)}`);
  });
  afterAll(async () => {
    await r?.stop();
  });

  it('says ready with the runtime and init time', () => {
    expect(r.ready).toMatchObject({ t: 'ready', runtime: { name: 'bun', version: '1.4.4' } });
    expect((r.ready as { init_ms: number }).init_ms).toBeGreaterThanOrEqual(0);
  });

  it('hello', async () => {
    const res = await run(r, { case: 'hello' });
    expect(res.outcome).toEqual({ kind: 'result', output: { hello: 'world' } });
  });

  it('echoes its input (unicode, nesting, numbers)', async () => {
    const input = { case: 'echo', s: 'héllo 🌍 "quoted"\n\u2028', n: [1, 2.5, -0.001, 1e21], o: { deep: { x: null, t: true } } };
    const res = await run(r, input);
    expect(res.outcome).toEqual({ kind: 'result', output: input });
  });

  it('undefined becomes null', async () => {
    expect((await run(r, { case: 'undefined' })).outcome).toEqual({ kind: 'result', output: null });
  });

  it("a handler error carries the snippet's message and a stack naming its file and line", async () => {
    const res = await run(r, { case: 'throw' });
    expect(res.outcome.kind).toBe('error');
    const o = res.outcome as { message: string; stack?: string };
    expect(o.message).toBe("the snippet's own message");
    expect(o.stack).toMatch(/^TypeError: the snippet's own message/);
    expect(o.stack).toMatch(/\bmain\.ts:17:\d+/);
    expect(o.stack).not.toContain(r.bundle); // relative to the bundle
    expect(o.stack).not.toContain(BUN_RUNNER); // the runner's own frames are gone
    expect(o.stack).not.toContain('runner.ts');
  });

  it('a thrown non-Error is reported as its value', async () => {
    expect((await run(r, { case: 'throw-string' })).outcome).toEqual({ kind: 'error', message: 'a bare string' });
  });

  it.each([
    ['bigint', /BigInt/],
    ['cycle', /circular/],
    ['function', /function/],
    ['symbol', /Symbol/],
  ])('a %s return value is a handler_error saying it is not JSON-serialisable', async (kase, why) => {
    const res = await run(r, { case: kase });
    expect(res.outcome.kind).toBe('error');
    const { message } = res.outcome as { message: string };
    expect(message).toMatch(/^the return value is not JSON-serialisable: /);
    expect(message).toMatch(why);
  });

  it('sets env per invoke, removes it on the next, restores its own variables, and an edited value reaches the warm runner', async () => {
    const a = await run(r, { case: 'env' }, { SECRET: 'one', OTHER: 'x', RUNNER_OWN: 'overridden' });
    expect(a.outcome).toEqual({ kind: 'result', output: { secret: 'one', other: 'x', own: 'overridden' } });
    const b = await run(r, { case: 'env' }, { SECRET: 'two' });
    expect(b.outcome).toEqual({ kind: 'result', output: { secret: 'two', other: null, own: 'kept' } });
    const c = await run(r, { case: 'env' }, {});
    expect(c.outcome).toEqual({ kind: 'result', output: { secret: null, other: null, own: 'kept' } });
  });

  it('console and process.stdout/stderr output become log frames of that invocation', async () => {
    const first = await run(r, { case: 'logs', tag: 'first' });
    expect(first.outcome).toEqual({ kind: 'result', output: { logged: true } });
    expect(first.stdout).toBe('log line { a: 1 }\ncaptured ref\nraw out\ntag:first\n');
    expect(first.stderr).toBe('error line\nwarn line\nraw err\n');
    const second = await run(r, { case: 'logs', tag: 'second' });
    expect(second.stdout).toContain('tag:second');
    expect(second.stdout).not.toContain('tag:first');
    expect(r.stderr()).not.toContain('log line'); // nothing leaked to the runner's real streams
  });

  it('console.group / table / dir / count / assert / trace are captured in Node\'s format, trace with the tenant frames only', async () => {
    const res = await run(r, { case: 'console-extras' });
    expect(res.outcome).toEqual({ kind: 'result', output: null });
    expect(res.stdout).toBe(
      'group\n  inside\n  two lines\n' +
        '┌─────────┬───┐\n│ (index) │ a │\n├─────────┼───┤\n│    0    │ 1 │\n└─────────┴───┘\n' +
        '{ x: [Object] }\nc: 1\n',
    );
    expect(res.stderr).toMatch(/^Assertion failed: asserted\nTrace: traced\n {4}at handler \(main\.ts:\d+:\d+\)\n$/);
  });

  it('caps an invocation’s logs at 1 MiB and reports the bytes it dropped on the result, and the next invocation logs again', async () => {
    const res = await run(r, { case: 'big-logs' });
    // 2048 lines of 1024 bytes: 1 MiB kept, 1 MiB dropped (the host adds the mark with that count).
    expect(res.outcome).toEqual({ kind: 'result', output: { ok: true }, logsDropped: 2048 * 1024 - 1024 * 1024 });
    expect(Buffer.byteLength(res.stdout)).toBe(1024 * 1024);
    const next = await run(r, { case: 'logs', tag: 'after' });
    expect(next.stdout).toContain('tag:after');
  });

  it('host calls through @svc/store and @svc/integrations, with error codes', async () => {
    const store = fakeStore();
    const res = await run(r, { case: 'store', who: 'QA' }, {}, store.onCall);
    expect(res.outcome).toEqual({
      kind: 'result',
      output: {
        got: { hello: 'QA' },
        missing: null,
        list: ['greeting'],
        deleted: true,
        after: null,
        error: { code: 'validation_failed', message: 'that key is not allowed', isError: true },
        api: { status: 200, headers: { 'content-type': 'application/json' }, body: { echo: { name: 'github', method: 'GET', path: '/user', query: { a: '1' } } } },
      },
    });
    const calls = res.events.filter((e) => e.t === 'call');
    expect(calls[0]).toEqual({ t: 'call', op: 'store.set', args: { key: 'greeting', value: { hello: 'QA' }, ttl_seconds: 60 } });
    expect(calls.map((c) => (c as { op: string }).op)).toEqual([
      'store.set',
      'store.get',
      'store.get',
      'store.list',
      'store.delete',
      'store.get',
      'store.set',
      'integrations.call',
    ]);
  });

  it('an onCall that throws without a code is answered host_error', async () => {
    const res = await run(r, { case: 'store', who: 'x' }, {}, async () => {
      throw new Error('database exploded at /secret/path');
    });
    expect(res.outcome.kind).toBe('error');
    const o = res.outcome as { message: string; stack?: string };
    expect(o.message).toBe('the host could not complete the call');
    expect(o.message).not.toContain('/secret/path');
    expect(o.stack).toMatch(/main\.ts:\d+/); // the failed call's stack names the tenant's line
  });

  it('an uncaught error in a timer fails that invocation, and the runner survives', async () => {
    const res = await run(r, { case: 'uncaught' });
    expect(res.outcome).toMatchObject({ kind: 'error', message: 'thrown from a timer' });
    expect((await run(r, { case: 'hello' })).outcome).toEqual({ kind: 'result', output: { hello: 'world' } });
  });

  it('an invocation after a handler error still works', async () => {
    await run(r, { case: 'throw' });
    expect((await run(r, { case: 'echo', n: 1 })).outcome).toEqual({ kind: 'result', output: { case: 'echo', n: 1 } });
  });

  it('ignores a bad frame (with a note on stderr) and keeps serving', async () => {
    const fd3 = r.child.stdio[3] as Duplex;
    fd3.write('this is not json\n');
    fd3.write('{"t":"invoke","id":7}\n');
    fd3.write('{"t":"nonsense"}\n');
    expect((await run(r, { case: 'hello' })).outcome).toEqual({ kind: 'result', output: { hello: 'world' } });
    // stderr is its own pipe: its note may land after the result frame on fd 3.
    await vi.waitFor(() => expect(r.stderr()).toMatch(/ignored a line that is not JSON/), { timeout: 2000 });
    // stderr is its own pipe: its note may land after the result frame on fd 3.
    await vi.waitFor(() => expect(r.stderr()).toMatch(/malformed invoke/), { timeout: 2000 });
  });

  it('refuses a second concurrent invocation on the channel', async () => {
    const first = run(r, { case: 'hello' });
    expect(() => r.channel.invoke('again', {}, {}, { onCall: async () => null })).toThrow(/still running/);
    await first;
  });

  it('exits when fd 3 closes', async () => {
    const other = await startRunner('bun', { 'main.ts': 'export default () => 1;' });
    const exited = new Promise<number | null>((resolve) => other.child.once('exit', (code) => resolve(code)));
    other.channel.close();
    expect(await exited).toBe(0);
    await other.stop();
  });
});

describe.skipIf(!bun)('bun runner: handler shapes and bundles', () => {
  it('an async generator streams chunks in order, each flushed as yielded, then its return value', async () => {
    const r = await startRunner('bun', {
      'main.ts': `export default async function* handler(input: { n: number }) {
  for (let i = 0; i < input.n; i++) {
    yield { i };
    await new Promise((res) => setTimeout(res, i === 0 ? 300 : 5));
  }
  return { total: input.n };
}
`,
    });
    try {
      const times: number[] = [];
      const t0 = performance.now();
      const chunks: unknown[] = [];
      const order: string[] = [];
      const outcome = await r.channel.invoke('gen', { n: 4 }, {}, {
        onChunk: (d) => {
          chunks.push(d);
          order.push('chunk');
          times.push(performance.now() - t0);
        },
        onCall: async () => null,
      });
      order.push('result');
      const resultAt = performance.now() - t0;
      expect(chunks).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
      expect(order).toEqual(['chunk', 'chunk', 'chunk', 'chunk', 'result']);
      expect(outcome).toEqual({ kind: 'result', output: { total: 4 } });
      expect(resultAt - times[0]!).toBeGreaterThan(200); // the first chunk did not wait for the end
    } finally {
      await r.stop();
    }
  });

  it('a sync generator and a function returning an async iterable stream too; no return value is null', async () => {
    const r = await startRunner('bun', {
      'main.ts': `export default function handler(input: { kind: string }) {
  if (input.kind === "sync") return (function* () { yield 1; yield "two"; return "done"; })();
  return (async function* () { yield [3]; })();
}
`,
    });
    try {
      const a = await run(r, { kind: 'sync' });
      expect(a.chunks).toEqual([1, 'two']);
      expect(a.outcome).toEqual({ kind: 'result', output: 'done' });
      const b = await run(r, { kind: 'async' });
      expect(b.chunks).toEqual([[3]]);
      expect(b.outcome).toEqual({ kind: 'result', output: null });
    } finally {
      await r.stop();
    }
  });

  it('a non-JSON yielded value is a handler_error', async () => {
    const r = await startRunner('bun', { 'main.ts': 'export default async function* h() { yield 1; yield 2n; }' });
    try {
      const res = await run(r);
      expect(res.chunks).toEqual([1]);
      expect(res.outcome).toMatchObject({ kind: 'error', message: expect.stringMatching(/a yielded value is not JSON-serialisable: it is a BigInt/) });
    } finally {
      await r.stop();
    }
  });

  it('a plain (non-async) handler returning a promise can make host calls', async () => {
    const r = await startRunner('bun', {
      'main.ts': `import { store } from "@svc/store";
export default function handler() { return store.get("k").then((v) => ({ v })); }
`,
    });
    try {
      const res = await run(r, {}, {}, fakeStore({ k: 42 }).onCall);
      expect(res.outcome).toEqual({ kind: 'result', output: { v: 42 } });
    } finally {
      await r.stop();
    }
  });

  it('a named export `handler` is accepted', async () => {
    const r = await startRunner('bun', { 'main.ts': 'export function handler(input: { a: number }) { return { doubled: input.a * 2 }; }' });
    try {
      expect((await run(r, { a: 21 })).outcome).toEqual({ kind: 'result', output: { doubled: 42 } });
    } finally {
      await r.stop();
    }
  });

  it('multi-file bundle: TS relative imports (and JSON) work, and an error in an imported file names that file', async () => {
    const r = await startRunner('bun', {
      'main.ts': `import { greet, fail } from "./lib/greet";
import data from "./data.json";
export default async function handler(input: { name: string; fail?: boolean }) {
  if (input.fail) fail();
  return { message: greet(input.name), version: data.version };
}
`,
      'lib/greet.ts': `import { punctuate } from "./punct";
export function greet(name: string): string { return punctuate("Hello, " + name); }
export function fail(): never {
  throw new Error("failed in lib");
}
`,
      'lib/punct.ts': 'export const punctuate = (s: string) => s + "!";\n',
      'data.json': '{"version": 3}',
    });
    try {
      expect((await run(r, { name: 'Ada' })).outcome).toEqual({ kind: 'result', output: { message: 'Hello, Ada!', version: 3 } });
      const err = await run(r, { name: 'x', fail: true });
      expect(err.outcome).toMatchObject({ kind: 'error', message: 'failed in lib' });
      expect((err.outcome as { stack: string }).stack).toMatch(/lib\/greet\.ts:4:\d+/);
      expect((err.outcome as { stack: string }).stack).toMatch(/main\.ts:4:\d+/);
    } finally {
      await r.stop();
    }
  });

  it('a syntax error is init_error naming the file and line', async () => {
    const r = await startRunner('bun', { 'main.ts': 'export default function handler() {\n  return { a: 1 ;\n}\n' });
    try {
      expect(r.ready.t).toBe('init_error');
      const f = r.ready as { message: string; stack?: string };
      expect(f.message).toMatch(/main\.ts:2:\d+/);
      expect(f.message).not.toContain(r.bundle);
      expect(() => r.channel.invoke('x', {}, {}, { onCall: async () => null })).toThrow(/failed to load/);
    } finally {
      await r.stop();
    }
  });

  it('a bundle without a handler is init_error', async () => {
    const r = await startRunner('bun', { 'main.ts': 'export const notAHandler = 1;\n' });
    try {
      expect(r.ready).toMatchObject({ t: 'init_error', message: expect.stringMatching(/no handler/) });
    } finally {
      await r.stop();
    }
  });

  it('a bundle that throws while loading is init_error with its message and stack', async () => {
    const r = await startRunner('bun', { 'main.ts': 'const x = 1;\nthrow new Error("cannot start: " + x);\nexport default () => 1;\n' });
    try {
      expect(r.ready).toMatchObject({ t: 'init_error', message: expect.stringMatching(/cannot start: 1/) });
      expect((r.ready as { stack?: string }).stack).toMatch(/main\.ts:2/);
    } finally {
      await r.stop();
    }
  });

  it('a missing import is init_error', async () => {
    const r = await startRunner('bun', { 'main.ts': 'import { x } from "./nope";\nexport default () => x;\n' });
    try {
      expect(r.ready).toMatchObject({ t: 'init_error', message: expect.stringMatching(/nope/) });
    } finally {
      await r.stop();
    }
  });
});
