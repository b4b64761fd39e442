// The Python runner, for real: spawned as the executor spawns it, driven through RunnerChannel. The behaviours every
// runner shares are test/conformance/runner.ts's, run here with Python's fixtures; only Python's own stay below.
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { runnerConformance } from '../conformance/runner';
import { findPython, run, startRunner, type StartedRunner } from './helpers';

const python = findPython();
const need = (ctx: TestContext): void => {
  if (!python) ctx.skip('no python runtime on this host (node scripts/setup.mjs --for=test installs it)');
};

const MAIN = `import asyncio
import logging
import os
import sys

from svc import store, integrations, HostCallError

log = logging.getLogger("snippet")
log.addHandler(logging.StreamHandler(sys.stderr))  # holds the stderr of import time
log.setLevel(logging.INFO)
_loops = []


class Thing:
    pass


def handler(input):
    case = input.get("case")
    if case == "hello":
        return {"hello": "world"}
    if case == "echo":
        return input
    if case == "null":
        return None
    if case == "throw":
        raise ValueError("the snippet's own message")  # line 27
    if case == "set":
        return {1, 2}
    if case == "nan":
        return {"x": float("nan")}
    if case == "cycle":
        a = {}
        a["self"] = a
        return a
    if case == "object":
        return Thing()
    if case == "env":
        return {"secret": os.environ.get("SECRET"), "other": os.environ.get("OTHER"), "own": os.environ.get("RUNNER_OWN")}
    if case == "logs":
        print("print line", {"a": 1})
        print("to stderr", file=sys.stderr)
        sys.stdout.write("partial ")
        sys.stdout.write("line\\n")
        log.info("logged via a handler made at import")
        print("tag:" + input["tag"])
        return {"logged": True}
    if case == "big-logs":
        for _ in range(2048):
            print("x" * 1023)
        return {"ok": True}
    if case == "store":
        store.set("greeting", {"hello": input["who"]}, ttl_seconds=60)
        got = store.get("greeting")
        missing = store.get("nope")
        keys = store.list(prefix="gr")
        deleted = store.delete("greeting")
        after = store.get("greeting")
        error = None
        try:
            store.set("forbidden", 1)
        except HostCallError as e:
            error = {"code": e.code, "message": str(e), "isError": isinstance(e, Exception)}
        api = integrations.call("github", method="GET", path="/user", query={"a": "1"})
        return {"got": got, "missing": missing, "list": keys, "deleted": deleted, "after": after, "error": error, "api": api}
    if case == "async-store":
        return astore(input)
    if case == "sys-exit":
        sys.exit(3)
    if case == "block":
        return store.get("block")
    if case == "big-output":
        return "y" * input["bytes"]
    return {"unknownCase": case}


async def astore(input):
    await asyncio.sleep(0)
    await store.aset("k", input["v"])
    got = await store.aget("k")
    both = await asyncio.gather(store.aget("k"), store.aget("missing"))
    api = await integrations.acall("x", method="POST", path="/p", json={"b": 1})
    _loops.append(id(asyncio.get_running_loop()))
    return {"got": got, "both": both, "api_body": api["body"], "same_loop": len(set(_loops)) == 1, "runs": len(_loops)}
`;

runnerConformance('python', {
  entry: 'main.py',
  main: MAIN,
  trivial: 'def handler(input):\n    return 1\n',
  nullName: 'None',
  ready: { version: /^3\.1[1-9]\./ },
  handlerError: {
    message: "ValueError: the snippet's own message",
    stack: [
      /^Traceback \(most recent call last\):\n {2}File "main\.py", line 27, in handler\n/,
      'raise ValueError',
      /ValueError: the snippet's own message$/,
    ],
    stackNot: ['svc_runner'],
  },
  nonJson: [
    ['set', /Object of type set is not JSON serializable/],
    ['nan', /Out of range float values/],
    ['cycle', /Circular reference/],
    ['object', /Object of type Thing/],
  ],
  logs: {
    stdout: "print line {'a': 1}\npartial line\ntag:first\n",
    stderr: 'to stderr\nlogged via a handler made at import\n',
    leakMarker: 'print line',
  },
  hostError: { message: 'HostCallError: the host could not complete the call', stack: 'File "main.py"' },
  asyncGenerator: {
    files: {
      'main.py': `from svc import store

async def handler(input):
    for i in range(input["n"]):
        print("before", i)
        yield {"i": i}
        await store.aget("after-%d" % i)
`,
    },
    // An async generator cannot return a value in Python.
    output: null,
  },
  syncGenerator: {
    files: {
      'main.py': `from svc import store

def handler(input):
    yield 1
    yield store.get("k")
    return {"done": True}
`,
    },
    store: { k: 'two' },
    chunks: [1, 'two'],
    output: { done: true },
  },
  nonJsonYield: {
    files: { 'main.py': 'def handler(input):\n    yield 1\n    yield {1, 2}\n' },
    message: /^a yielded value is not JSON-serialisable: Object of type set/,
  },
  loadOnce: {
    'main.py': `import time
LOADED_AT = time.monotonic()
COUNT = [0]

def handler(input):
    COUNT[0] += 1
    return {"loaded_at": LOADED_AT, "count": COUNT[0]}
`,
  },
  multiFile: {
    // json is a stdlib module the runner itself uses: the bundle's own import of it must still work.
    files: {
      'main.py': `from helpers import greet
from pkg.data import VERSION
import json as stdjson

def handler(input):
    if input.get("fail"):
        greet(None)
    return {"message": greet(input["name"]), "version": VERSION, "stdjson": stdjson.dumps([1])}
`,
      'helpers.py': `def greet(name):
    return "Hello, " + name + "!"
`,
      'pkg/__init__.py': '',
      'pkg/data.py': 'VERSION = 3\n',
    },
    ok: { input: { name: 'Ada' }, output: { message: 'Hello, Ada!', version: 3, stdjson: '[1]' } },
    fail: {
      input: { fail: true },
      message: /^TypeError: can only concatenate str/,
      stack: [/File "main\.py", line 7, in handler[\s\S]*File "helpers\.py", line 2, in greet/],
    },
  },
  syntaxError: {
    files: { 'main.py': 'def handler(input):\n    return {"a": 1\n' },
    message: /^SyntaxError: .*\(main\.py, line 2\)/,
    stack: [/File "main\.py", line 2/],
    stackNot: /svc_runner|importlib/,
  },
  noHandler: { files: { 'main.py': 'def not_a_handler(input):\n    return 1\nhandler = 5\n' }, message: /defines no handler/ },
  throwsWhileLoading: {
    files: { 'main.py': 'x = 1\nraise RuntimeError("cannot start: " + str(x))\n\ndef handler(input):\n    return 1\n' },
    message: /^RuntimeError: cannot start: 1$/,
    stack: [/File "main\.py", line 2, in <module>/],
    stackNot: /svc_runner|importlib/,
  },
  missingImport: {
    files: { 'main.py': 'import os\nimport definitely_not_installed\n\ndef handler(input):\n    return 1\n' },
    message: /^ModuleNotFoundError: No module named 'definitely_not_installed'$/,
    stack: [/File "main\.py", line 2, in <module>/],
    stackNot: /svc_runner|importlib/,
  },
});

describe('python runner: its own behaviours', () => {
  let r: StartedRunner;

  beforeAll(async () => {
    if (!python) return; // every test below skips, naming why
    r = await startRunner('python', { 'main.py': MAIN });
    if (r.ready.t !== 'ready') throw new Error(`init_error: ${JSON.stringify(r.ready)}`);
  });
  afterAll(async () => {
    await r?.stop();
  });

  it('async host calls (aget/aset/acall, concurrently with gather) on one event loop kept across invocations', async (ctx) => {
    need(ctx);
    const first = await run(r, { case: 'async-store', v: [1, 2] });
    expect(first.outcome).toEqual({
      kind: 'result',
      output: {
        got: [1, 2],
        both: [[1, 2], null],
        api_body: { echo: { name: 'x', method: 'POST', path: '/p', body: { b: 1 } } },
        same_loop: true,
        runs: 1,
      },
    });
    const second = await run(r, { case: 'async-store', v: 'x' });
    expect(second.outcome).toMatchObject({ kind: 'result', output: { got: 'x', same_loop: true, runs: 2 } });
  });

  it('sys.exit in a handler is a handler_error, and the runner survives', async (ctx) => {
    need(ctx);
    expect((await run(r, { case: 'sys-exit' })).outcome).toMatchObject({ kind: 'error', message: 'SystemExit: 3' });
    expect((await run(r, { case: 'hello' })).outcome).toEqual({ kind: 'result', output: { hello: 'world' } });
  });
});

describe('python runner: its own handler shapes', () => {
  const withRunner = async (files: Record<string, string>, body: (r: StartedRunner) => Promise<void>): Promise<void> => {
    const r = await startRunner('python', files);
    try {
      await body(r);
    } finally {
      await r.stop();
    }
  };

  it('an async def handler', async (ctx) => {
    need(ctx);
    await withRunner(
      {
        'main.py': `import asyncio

async def handler(input):
    await asyncio.sleep(0)
    return {"async": True, "x": input.get("x")}
`,
      },
      async (r) => {
        expect((await run(r, { x: 5 })).outcome).toEqual({ kind: 'result', output: { async: true, x: 5 } });
      },
    );
  });

  it('an exception in an async handler keeps only the tenant frames (no asyncio, no runner)', async (ctx) => {
    need(ctx);
    await withRunner(
      {
        'main.py': `import asyncio

async def inner():
    await asyncio.sleep(0)
    raise KeyError("missing")

async def handler(input):
    await inner()
`,
      },
      async (r) => {
        const res = await run(r);
        expect(res.outcome).toMatchObject({ kind: 'error', message: "KeyError: 'missing'" });
        const { stack } = res.outcome as { stack: string };
        expect(stack).toMatch(/File "main\.py", line 8, in handler[\s\S]*File "main\.py", line 5, in inner/);
        expect(stack).not.toMatch(/asyncio|svc_runner/);
      },
    );
  });
});
