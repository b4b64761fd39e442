// The Bun runner, for real: spawned as the executor spawns it, driven through RunnerChannel. The behaviours every
// runner shares are test/conformance/runner.ts's, run here with Bun's fixtures; only Bun's own stay below.
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { runnerConformance } from '../conformance/runner';
import { fakeStore, findBun, run, startRunner, BUN_RUNNER, type StartedRunner } from './helpers';

const bun = findBun();
const need = (ctx: TestContext): void => {
  if (!bun) ctx.skip('no bun runtime on this host (node scripts/setup.mjs --for=test installs it)');
};

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
    case "null":
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
    case "block":
      return await store.get("block");
    case "big-output":
      return "y".repeat(Number(input.bytes));
    case "host-outside": {
      const host = (globalThis as any)[Symbol.for("svc.host")];
      return { hasCall: typeof host?.call === "function" };
    }
    default:
      return { unknownCase: input.case ?? null };
  }
}
`;

runnerConformance('bun', {
  entry: 'main.ts',
  main: MAIN,
  trivial: 'export default () => 1;',
  nullName: 'undefined',
  ready: { version: '1.4.4' },
  handlerError: {
    message: "the snippet's own message",
    stack: [/^TypeError: the snippet's own message/, /\bmain\.ts:17:\d+/],
    stackNot: [BUN_RUNNER, 'runner.ts'],
  },
  nonJson: [
    ['bigint', /BigInt/],
    ['cycle', /circular/],
    ['function', /function/],
    ['symbol', /Symbol/],
  ],
  logs: {
    stdout: 'log line { a: 1 }\ncaptured ref\nraw out\ntag:first\n',
    stderr: 'error line\nwarn line\nraw err\n',
    leakMarker: 'log line',
  },
  hostError: { message: 'the host could not complete the call', stack: /main\.ts:\d+/ },
  asyncGenerator: {
    files: {
      'main.ts': `import { store } from "@svc/store";
export default async function* handler(input: { n: number }) {
  for (let i = 0; i < input.n; i++) {
    console.log("before", i);
    yield { i };
    await store.get("after-" + i);
  }
  return { total: input.n };
}
`,
    },
    output: { total: 4 },
  },
  syncGenerator: {
    files: { 'main.ts': 'export default function* handler() {\n  yield 1;\n  yield "two";\n  return "done";\n}\n' },
    store: {},
    chunks: [1, 'two'],
    output: 'done',
  },
  nonJsonYield: {
    files: { 'main.ts': 'export default async function* h() { yield 1; yield 2n; }' },
    message: /a yielded value is not JSON-serialisable: it is a BigInt/,
  },
  loadOnce: {
    'main.ts': `const LOADED_AT = performance.now();
let count = 0;
export default function handler() {
  count += 1;
  return { loaded_at: LOADED_AT, count };
}
`,
  },
  multiFile: {
    files: {
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
    },
    ok: { input: { name: 'Ada' }, output: { message: 'Hello, Ada!', version: 3 } },
    fail: { input: { name: 'x', fail: true }, message: /^failed in lib$/, stack: [/lib\/greet\.ts:4:\d+/, /main\.ts:4:\d+/] },
  },
  syntaxError: { files: { 'main.ts': 'export default function handler() {\n  return { a: 1 ;\n}\n' }, message: /main\.ts:2:\d+/ },
  noHandler: { files: { 'main.ts': 'export const notAHandler = 1;\n' }, message: /no handler/ },
  throwsWhileLoading: {
    files: { 'main.ts': 'const x = 1;\nthrow new Error("cannot start: " + x);\nexport default () => 1;\n' },
    message: /cannot start: 1/,
    stack: [/main\.ts:2/],
  },
  missingImport: { files: { 'main.ts': 'import { x } from "./nope";\nexport default () => x;\n' }, message: /nope/ },
});

describe('bun runner: its own behaviours', () => {
  let r: StartedRunner;

  beforeAll(async () => {
    if (!bun) return; // every test below skips, naming why
    r = await startRunner('bun', { 'main.ts': MAIN });
    if (r.ready.t !== 'ready') throw new Error(`init_error: ${JSON.stringify(r.ready)}`);
  });
  afterAll(async () => {
    await r?.stop();
  });

  it('a thrown non-Error is reported as its value', async (ctx) => {
    need(ctx);
    expect((await run(r, { case: 'throw-string' })).outcome).toEqual({ kind: 'error', message: 'a bare string' });
  });

  it("console.group / table / dir / count / assert / trace are captured in Node's format, trace with the tenant frames only", async (ctx) => {
    need(ctx);
    const res = await run(r, { case: 'console-extras' });
    expect(res.outcome).toEqual({ kind: 'result', output: null });
    expect(res.stdout).toBe(
      'group\n  inside\n  two lines\n' +
        '┌─────────┬───┐\n│ (index) │ a │\n├─────────┼───┤\n│    0    │ 1 │\n└─────────┴───┘\n' +
        '{ x: [Object] }\nc: 1\n',
    );
    expect(res.stderr).toMatch(/^Assertion failed: asserted\nTrace: traced\n {4}at handler \(main\.ts:\d+:\d+\)\n$/);
  });

  it('an uncaught error in a timer fails that invocation, and the runner survives', async (ctx) => {
    need(ctx);
    const res = await run(r, { case: 'uncaught' });
    expect(res.outcome).toMatchObject({ kind: 'error', message: 'thrown from a timer' });
    expect((await run(r, { case: 'hello' })).outcome).toEqual({ kind: 'result', output: { hello: 'world' } });
  });
});

describe('bun runner: its own handler shapes', () => {
  const withRunner = async (source: string, body: (r: StartedRunner) => Promise<void>): Promise<void> => {
    const r = await startRunner('bun', { 'main.ts': source });
    try {
      await body(r);
    } finally {
      await r.stop();
    }
  };

  it('a function returning a sync iterator or an async iterable streams too; no return value is null', async (ctx) => {
    need(ctx);
    await withRunner(
      `export default function handler(input: { kind: string }) {
  if (input.kind === "sync") return (function* () { yield 1; yield "two"; return "done"; })();
  return (async function* () { yield [3]; })();
}
`,
      async (r) => {
        const a = await run(r, { kind: 'sync' });
        expect(a.chunks).toEqual([1, 'two']);
        expect(a.outcome).toEqual({ kind: 'result', output: 'done' });
        const b = await run(r, { kind: 'async' });
        expect(b.chunks).toEqual([[3]]);
        expect(b.outcome).toEqual({ kind: 'result', output: null });
      },
    );
  });

  it('a plain (non-async) handler returning a promise can make host calls', async (ctx) => {
    need(ctx);
    await withRunner(
      `import { store } from "@svc/store";
export default function handler() { return store.get("k").then((v) => ({ v })); }
`,
      async (r) => {
        const res = await run(r, {}, {}, fakeStore({ k: 42 }).onCall);
        expect(res.outcome).toEqual({ kind: 'result', output: { v: 42 } });
      },
    );
  });

  it('a named export `handler` is accepted', async (ctx) => {
    need(ctx);
    await withRunner('export function handler(input: { a: number }) { return { doubled: input.a * 2 }; }', async (r) => {
      expect((await run(r, { a: 21 })).outcome).toEqual({ kind: 'result', output: { doubled: 42 } });
    });
  });
});
