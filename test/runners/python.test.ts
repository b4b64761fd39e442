// The Python runner, for real: spawned as the executor spawns it, driven through RunnerChannel.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Duplex } from 'node:stream';
import { fakeStore, findPython, run, skipNote, startRunner, type StartedRunner } from './helpers';

const python = findPython();
if (!python) skipNote('python');

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
    if case == "none":
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
            error = {"code": e.code, "message": str(e)}
        api = integrations.call("github", method="GET", path="/user", query={"a": "1"})
        return {"got": got, "missing": missing, "list": keys, "deleted": deleted, "after": after, "error": error, "api": api}
    if case == "async-store":
        return astore(input)
    if case == "sys-exit":
        sys.exit(3)
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

describe.skipIf(!python)('python runner', () => {
  let r: StartedRunner;

  beforeAll(async () => {
    r = await startRunner('python', { 'main.py': MAIN });
    if (r.ready.t !== 'ready') throw new Error(`init_error: ${JSON.stringify(r.ready)}`);
  });
  afterAll(async () => {
    await r?.stop();
  });

  it('says ready with the runtime and init time', () => {
    expect(r.ready).toMatchObject({ t: 'ready', runtime: { name: 'python', version: expect.stringMatching(/^3\.1[1-9]\./) } });
    expect((r.ready as { init_ms: number }).init_ms).toBeGreaterThanOrEqual(0);
  });

  it('hello', async () => {
    expect((await run(r, { case: 'hello' })).outcome).toEqual({ kind: 'result', output: { hello: 'world' } });
  });

  it('echoes its input (unicode, nesting, numbers)', async () => {
    const input = { case: 'echo', s: 'héllo 🌍 "quoted"\n\u2028', n: [1, 2.5, -0.001, 1e21], o: { deep: { x: null, t: true } } };
    expect((await run(r, input)).outcome).toEqual({ kind: 'result', output: input });
  });

  it('None becomes null', async () => {
    expect((await run(r, { case: 'none' })).outcome).toEqual({ kind: 'result', output: null });
  });

  it("a handler error carries 'Type: message' and the tenant's traceback only", async () => {
    const res = await run(r, { case: 'throw' });
    expect(res.outcome.kind).toBe('error');
    const o = res.outcome as { message: string; stack?: string };
    expect(o.message).toBe("ValueError: the snippet's own message");
    expect(o.stack).toMatch(/^Traceback \(most recent call last\):\n {2}File "main\.py", line 27, in handler\n/);
    expect(o.stack).toContain('raise ValueError');
    expect(o.stack).toMatch(/ValueError: the snippet's own message$/);
    expect(o.stack).not.toContain('svc_runner');
    expect(o.stack).not.toContain(r.bundle);
  });

  it.each([
    ['set', /Object of type set is not JSON serializable/],
    ['nan', /Out of range float values/],
    ['cycle', /Circular reference/],
    ['object', /Object of type Thing/],
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

  it('print / sys.stdout / sys.stderr / logging become log frames of that invocation, line by line', async () => {
    const first = await run(r, { case: 'logs', tag: 'first' });
    expect(first.outcome).toEqual({ kind: 'result', output: { logged: true } });
    expect(first.stdout).toBe("print line {'a': 1}\npartial line\ntag:first\n");
    expect(first.stderr).toBe('to stderr\nlogged via a handler made at import\n');
    // print() writes its pieces separately; they arrive as whole lines
    const stdoutFrames = first.events.filter((e) => e.t === 'log' && e.stream === 'stdout');
    expect(stdoutFrames.length).toBeLessThanOrEqual(3);
    const second = await run(r, { case: 'logs', tag: 'second' });
    expect(second.stdout).toContain('tag:second');
    expect(second.stdout).not.toContain('tag:first');
    expect(r.stderr()).not.toContain('print line');
  });

  it('caps an invocation’s logs at 1 MiB and reports the bytes it dropped on the result, and the next invocation logs again', async () => {
    const res = await run(r, { case: 'big-logs' });
    // 2048 lines of 1024 bytes: 1 MiB kept, 1 MiB dropped (the host adds the mark with that count).
    expect(res.outcome).toEqual({ kind: 'result', output: { ok: true }, logsDropped: 2048 * 1024 - 1024 * 1024 });
    expect(Buffer.byteLength(res.stdout)).toBe(1024 * 1024);
    expect((await run(r, { case: 'logs', tag: 'after' })).stdout).toContain('tag:after');
  });

  it('sync host calls through svc.store and svc.integrations, with error codes', async () => {
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
        error: { code: 'validation_failed', message: 'that key is not allowed' },
        api: { status: 200, headers: { 'content-type': 'application/json' }, body: { echo: { name: 'github', method: 'GET', path: '/user', query: { a: '1' } } } },
      },
    });
    const calls = res.events.filter((e) => e.t === 'call');
    expect(calls[0]).toEqual({ t: 'call', op: 'store.set', args: { key: 'greeting', value: { hello: 'QA' }, ttl_seconds: 60 } });
  });

  it('async host calls (aget/aset/acall, concurrently with gather) on one event loop kept across invocations', async () => {
    const first = await run(r, { case: 'async-store', v: [1, 2] });
    expect(first.outcome).toEqual({
      kind: 'result',
      output: { got: [1, 2], both: [[1, 2], null], api_body: { echo: { name: 'x', method: 'POST', path: '/p', body: { b: 1 } } }, same_loop: true, runs: 1 },
    });
    const second = await run(r, { case: 'async-store', v: 'x' });
    expect(second.outcome).toMatchObject({ kind: 'result', output: { got: 'x', same_loop: true, runs: 2 } });
  });

  it('an onCall that throws without a code is answered host_error, raised as HostCallError with the tenant frames', async () => {
    const res = await run(r, { case: 'store', who: 'x' }, {}, async () => {
      throw new Error('database exploded at /secret/path');
    });
    expect(res.outcome).toMatchObject({ kind: 'error', message: 'HostCallError: the host could not complete the call' });
    const { stack } = res.outcome as { stack: string };
    expect(stack).toContain('File "main.py"');
    expect(stack).not.toContain('/secret/path');
  });

  it('sys.exit in a handler is a handler_error, and the runner survives', async () => {
    expect((await run(r, { case: 'sys-exit' })).outcome).toMatchObject({ kind: 'error', message: 'SystemExit: 3' });
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
    fd3.write('[1,2]\n');
    expect((await run(r, { case: 'hello' })).outcome).toEqual({ kind: 'result', output: { hello: 'world' } });
    // stderr is its own pipe: its note may land after the result frame on fd 3.
    await vi.waitFor(() => expect(r.stderr()).toMatch(/ignored a line that is not JSON/), { timeout: 2000 });
    // stderr is its own pipe: its note may land after the result frame on fd 3.
    await vi.waitFor(() => expect(r.stderr()).toMatch(/malformed invoke/), { timeout: 2000 });
  });

  it('exits when fd 3 closes', async () => {
    const other = await startRunner('python', { 'main.py': 'def handler(input):\n    return 1\n' });
    const exited = new Promise<number | null>((resolve) => other.child.once('exit', (code) => resolve(code)));
    other.channel.close();
    expect(await exited).toBe(0);
    await other.stop();
  });
});

describe.skipIf(!python)('python runner: handler shapes and bundles', () => {
  it('an async generator streams chunks in order, each flushed as yielded', async () => {
    const r = await startRunner('python', {
      'main.py': `import asyncio

async def handler(input):
    for i in range(input["n"]):
        print("before", i)
        yield {"i": i}
        await asyncio.sleep(0.3 if i == 0 else 0.005)
`,
    });
    try {
      const order: string[] = [];
      const times: number[] = [];
      const t0 = performance.now();
      const chunks: unknown[] = [];
      const outcome = await r.channel.invoke('gen', { n: 4 }, {}, {
        onChunk: (d) => {
          chunks.push(d);
          order.push('chunk');
          times.push(performance.now() - t0);
        },
        onLog: (_s, d) => order.push(`log:${d.trim()}`),
        onCall: async () => null,
      });
      order.push('result');
      expect(chunks).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
      expect(order).toEqual(['log:before 0', 'chunk', 'log:before 1', 'chunk', 'log:before 2', 'chunk', 'log:before 3', 'chunk', 'result']);
      expect(outcome).toEqual({ kind: 'result', output: null });
      expect(performance.now() - t0 - times[0]!).toBeGreaterThan(200);
    } finally {
      await r.stop();
    }
  });

  it("a sync generator streams, and its return value (StopIteration's) is the output", async () => {
    const r = await startRunner('python', {
      'main.py': `from svc import store

def handler(input):
    yield 1
    yield store.get("k")
    return {"done": True}
`,
    });
    try {
      const res = await run(r, {}, {}, fakeStore({ k: 'two' }).onCall);
      expect(res.chunks).toEqual([1, 'two']);
      expect(res.outcome).toEqual({ kind: 'result', output: { done: true } });
    } finally {
      await r.stop();
    }
  });

  it('an async def handler, and a non-JSON yielded value is a handler_error', async () => {
    const r = await startRunner('python', {
      'main.py': `import asyncio

async def handler(input):
    if input.get("gen"):
        return None
    await asyncio.sleep(0.001)
    return {"async": True, "x": input.get("x")}
`,
      'gen.py': '',
    });
    const g = await startRunner('python', { 'main.py': 'def handler(input):\n    yield 1\n    yield {1, 2}\n' });
    try {
      expect((await run(r, { x: 5 })).outcome).toEqual({ kind: 'result', output: { async: true, x: 5 } });
      const res = await run(g);
      expect(res.chunks).toEqual([1]);
      expect(res.outcome).toMatchObject({ kind: 'error', message: expect.stringMatching(/^a yielded value is not JSON-serialisable: Object of type set/) });
    } finally {
      await r.stop();
      await g.stop();
    }
  });

  it('an exception in an async handler keeps only the tenant frames (no asyncio, no runner)', async () => {
    const r = await startRunner('python', {
      'main.py': `import asyncio

async def inner():
    await asyncio.sleep(0)
    raise KeyError("missing")

async def handler(input):
    await inner()
`,
    });
    try {
      const res = await run(r);
      expect(res.outcome).toMatchObject({ kind: 'error', message: "KeyError: 'missing'" });
      const { stack } = res.outcome as { stack: string };
      expect(stack).toMatch(/File "main\.py", line 8, in handler[\s\S]*File "main\.py", line 5, in inner/);
      expect(stack).not.toMatch(/asyncio|svc_runner/);
    } finally {
      await r.stop();
    }
  });

  it('multi-file bundle: sibling modules and packages import, and a module named like a stdlib one the runner uses works', async () => {
    const r = await startRunner('python', {
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
    });
    try {
      expect((await run(r, { name: 'Ada' })).outcome).toEqual({ kind: 'result', output: { message: 'Hello, Ada!', version: 3, stdjson: '[1]' } });
      const err = await run(r, { fail: true });
      expect(err.outcome).toMatchObject({ kind: 'error', message: expect.stringMatching(/^TypeError: can only concatenate str/) });
      expect((err.outcome as { stack: string }).stack).toMatch(/File "main\.py", line 7, in handler[\s\S]*File "helpers\.py", line 2, in greet/);
    } finally {
      await r.stop();
    }
  });

  it('the entry module is loaded once per runner', async () => {
    const r = await startRunner('python', {
      'main.py': `import time
LOADED_AT = time.monotonic()
COUNT = [0]

def handler(input):
    COUNT[0] += 1
    return {"loaded_at": LOADED_AT, "count": COUNT[0]}
`,
    });
    try {
      const a = (await run(r)).outcome as { output: { loaded_at: number; count: number } };
      const b = (await run(r)).outcome as { output: { loaded_at: number; count: number } };
      expect(b.output.loaded_at).toBe(a.output.loaded_at);
      expect([a.output.count, b.output.count]).toEqual([1, 2]);
    } finally {
      await r.stop();
    }
  });

  it('a syntax error is init_error naming the file and line', async () => {
    const r = await startRunner('python', { 'main.py': 'def handler(input):\n    return {"a": 1\n' });
    try {
      expect(r.ready.t).toBe('init_error');
      const f = r.ready as { message: string; stack?: string };
      expect(f.message).toMatch(/^SyntaxError: .*\(main\.py, line 2\)/);
      expect(f.stack).toContain('File "main.py", line 2');
      expect(f.stack).not.toContain(r.bundle);
      expect(f.stack).not.toMatch(/svc_runner|importlib/);
    } finally {
      await r.stop();
    }
  });

  it('a bundle without a handler is init_error', async () => {
    const r = await startRunner('python', { 'main.py': 'def not_a_handler(input):\n    return 1\nhandler = 5\n' });
    try {
      expect(r.ready).toMatchObject({ t: 'init_error', message: expect.stringMatching(/defines no handler/) });
    } finally {
      await r.stop();
    }
  });

  it('a bundle that raises while importing (a missing module) is init_error with the tenant frames', async () => {
    const r = await startRunner('python', { 'main.py': 'import os\nimport definitely_not_installed\n\ndef handler(input):\n    return 1\n' });
    try {
      expect(r.ready).toMatchObject({ t: 'init_error', message: "ModuleNotFoundError: No module named 'definitely_not_installed'" });
      expect((r.ready as { stack: string }).stack).toMatch(/File "main\.py", line 2, in <module>/);
    } finally {
      await r.stop();
    }
  });
});
