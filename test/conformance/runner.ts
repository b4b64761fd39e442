// The runner protocol's conformance suite (executor/protocol.ts, driven through executor/runner-client.ts): every
// behaviour a runtime's runner promises the executor, declared once and run against each implementation
// (executor/runtimes/bun/runner.ts from test/runners/bun.test.ts, executor/runtimes/python/_svc_runner_core.py from
// test/runners/python.test.ts). What differs between runtimes is data in `RunnerFixtures`: the snippet source that
// exercises a behaviour in that language and the messages that language words its errors with. Egress is not here:
// test/runners/egress.test.ts owns it.
import { afterAll, beforeAll, describe, expect, it, vi, type TestContext } from 'vitest';
import type { Duplex } from 'node:stream';
import { RunnerProtocolError } from '../../executor/runner-client';
import type { HostOp } from '../../executor/protocol';
import { fakeStore, run, runtimeBinary, skipNote, startRunner, type Runtime, type StartedRunner } from '../runners/helpers';

type Files = Record<string, string>;

/** An init_error a bundle must produce: its message, and (where the runtime has one) what its stack names. */
export interface InitErrorCase {
  files: Files;
  message: RegExp | string;
  stack?: RegExp[];
  /** Never in the stack: the runner's own frames. */
  stackNot?: RegExp;
}

export interface RunnerFixtures {
  /** The entry file's name (main.ts, main.py). */
  entry: string;
  /**
   * The warm runner's entry source. Its handler switches on `input.case`:
   *   hello → {hello:'world'}; echo → input; null → the language's nothing (undefined / None);
   *   throw → raises the language's error with "the snippet's own message" (see `handlerError`);
   *   env → {secret: env.SECRET, other: env.OTHER, own: env.RUNNER_OWN} (null when unset);
   *   logs → writes `logs.stdout` / `logs.stderr` (its last stdout line is "tag:" + input.tag) and returns {logged:true};
   *   big-logs → 2048 stdout lines of 1023 'x' + newline, returns {ok:true};
   *   store → the host-call round trip (see the 'host calls' test) returning {got, missing, list, deleted, after, error, api};
   *   block → returns store.get("block") (a host call the test never answers);
   *   big-output → returns a string of input.bytes 'y's;
   *   each key of `nonJson` → a return value JSON cannot encode.
   */
  main: string;
  /** The source of a handler returning 1. */
  trivial: string;
  /** What the language calls the value that becomes null ('undefined', 'None'). */
  nullName: string;
  ready: { version: RegExp | string };
  /** The `throw` case's error: exact message, what its stack shows (the tenant's file and line), what it never shows. */
  handlerError: { message: string; stack: Array<RegExp | string>; stackNot: Array<RegExp | string> };
  /** Return values JSON cannot encode: case → what the message names. */
  nonJson: Array<[string, RegExp]>;
  /** The `logs` case's output (tag "first"), and a string of it that must never reach the runner's own stderr. */
  logs: { stdout: string; stderr: string; leakMarker: string };
  /** A host call the core fails without a code: the message the tenant sees, and what its stack names. */
  hostError: { message: string; stack: RegExp | string };
  /**
   * An async generator handler: for i < input.n it logs "before <i>" on stdout, yields {i}, then awaits
   * store.get("after-<i>") before going on; `output` is what it returns.
   */
  asyncGenerator: { files: Files; output: unknown };
  /** A synchronous generator handler: what it yields (with `store` preset) and returns. */
  syncGenerator: { files: Files; store: Record<string, unknown>; chunks: unknown[]; output: unknown };
  /** A generator yielding 1, then a value JSON cannot encode (`message` names it). */
  nonJsonYield: { files: Files; message: RegExp };
  /** A handler counting its calls in a module-level variable and reporting {loaded_at, count} (the module's load time). */
  loadOnce: Files;
  /** Relative imports across files: `ok` runs clean, `fail` fails in an imported file and the stack names both lines. */
  multiFile: {
    files: Files;
    ok: { input: Record<string, unknown>; output: unknown };
    fail: { input: Record<string, unknown>; message: RegExp | string; stack: RegExp[] };
  };
  syntaxError: InitErrorCase;
  noHandler: InitErrorCase;
  throwsWhileLoading: InitErrorCase;
  missingImport: InitErrorCase;
}

const ECHO_INPUT = { case: 'echo', s: 'héllo 🌍 "quoted"\n\u2028', n: [1, 2.5, -0.001, 1e21], o: { deep: { x: null, t: true } } };

function matches(text: string | undefined, m: RegExp | string): void {
  if (typeof m === 'string') expect(text).toContain(m);
  else expect(text).toMatch(m);
}

function notMatches(text: string | undefined, m: RegExp | string): void {
  if (typeof m === 'string') expect(text).not.toContain(m);
  else expect(text).not.toMatch(m);
}

export function runnerConformance(runtime: Runtime, fx: RunnerFixtures): void {
  const bin = runtimeBinary(runtime);
  if (!bin) skipNote(runtime);
  const need = (ctx: TestContext): void => {
    if (!bin) ctx.skip(`no ${runtime} runtime on this host (node scripts/setup.mjs --for=test installs it)`);
  };
  /** Starts a runner on `files`, runs `body`, stops it. */
  const withRunner = async (files: Files, body: (r: StartedRunner) => Promise<void>): Promise<void> => {
    const r = await startRunner(runtime, files, fx.entry);
    try {
      await body(r);
    } finally {
      await r.stop();
    }
  };

  describe(`${runtime} runner: conformance (warm runner)`, () => {
    let r: StartedRunner;

    beforeAll(async () => {
      if (!bin) return; // every test below skips, naming why
      r = await startRunner(runtime, { [fx.entry]: fx.main }, fx.entry);
      if (r.ready.t !== 'ready') throw new Error(`init_error: ${JSON.stringify(r.ready)}`);
    });
    afterAll(async () => {
      await r?.stop();
    });

    it('says ready with the runtime and init time', (ctx) => {
      need(ctx);
      expect(r.ready).toMatchObject({
        t: 'ready',
        runtime: {
          name: runtime,
          version: typeof fx.ready.version === 'string' ? fx.ready.version : expect.stringMatching(fx.ready.version),
        },
      });
      expect((r.ready as { init_ms: number }).init_ms).toBeGreaterThanOrEqual(0);
    });

    it('hello', async (ctx) => {
      need(ctx);
      expect((await run(r, { case: 'hello' })).outcome).toEqual({ kind: 'result', output: { hello: 'world' } });
    });

    it('echoes its input (unicode, nesting, numbers)', async (ctx) => {
      need(ctx);
      expect((await run(r, ECHO_INPUT)).outcome).toEqual({ kind: 'result', output: ECHO_INPUT });
    });

    it(`${fx.nullName} becomes null`, async (ctx) => {
      need(ctx);
      expect((await run(r, { case: 'null' })).outcome).toEqual({ kind: 'result', output: null });
    });

    it("a handler error carries the snippet's message and a stack naming its file and line, without the runner's frames", async (ctx) => {
      need(ctx);
      const res = await run(r, { case: 'throw' });
      expect(res.outcome.kind).toBe('error');
      const o = res.outcome as { message: string; stack?: string };
      expect(o.message).toBe(fx.handlerError.message);
      for (const m of fx.handlerError.stack) matches(o.stack, m);
      for (const m of fx.handlerError.stackNot) notMatches(o.stack, m);
      expect(o.stack).not.toContain(r.bundle); // paths are relative to the bundle
    });

    it.for(fx.nonJson)('a %s return value is a handler_error saying it is not JSON-serialisable', async ([kase, why], ctx) => {
      need(ctx);
      const res = await run(r, { case: kase });
      expect(res.outcome.kind).toBe('error');
      const { message } = res.outcome as { message: string };
      expect(message).toMatch(/^the return value is not JSON-serialisable: /);
      expect(message).toMatch(why);
    });

    it('sets env per invoke, removes it on the next, restores its own variables, and an edited value reaches the warm runner', async (ctx) => {
      need(ctx);
      const a = await run(r, { case: 'env' }, { SECRET: 'one', OTHER: 'x', RUNNER_OWN: 'overridden' });
      expect(a.outcome).toEqual({ kind: 'result', output: { secret: 'one', other: 'x', own: 'overridden' } });
      const b = await run(r, { case: 'env' }, { SECRET: 'two' });
      expect(b.outcome).toEqual({ kind: 'result', output: { secret: 'two', other: null, own: 'kept' } });
      const c = await run(r, { case: 'env' }, {});
      expect(c.outcome).toEqual({ kind: 'result', output: { secret: null, other: null, own: 'kept' } });
    });

    it('stdout and stderr output become log frames of that invocation, each stream its own, in whole lines', async (ctx) => {
      need(ctx);
      const first = await run(r, { case: 'logs', tag: 'first' });
      expect(first.outcome).toEqual({ kind: 'result', output: { logged: true } });
      expect(first.stdout).toBe(fx.logs.stdout);
      expect(first.stderr).toBe(fx.logs.stderr);
      // Pieces of a line (print's separate writes, a partial write) arrive joined: never more frames than lines.
      const frames = (s: 'stdout' | 'stderr') => first.events.filter((e) => e.t === 'log' && e.stream === s);
      expect(frames('stdout').length).toBeLessThanOrEqual(fx.logs.stdout.split('\n').length - 1);
      expect(frames('stderr').length).toBeLessThanOrEqual(fx.logs.stderr.split('\n').length - 1);
      for (const e of first.events) if (e.t === 'log') expect(e.data.endsWith('\n')).toBe(true);
      const second = await run(r, { case: 'logs', tag: 'second' });
      expect(second.stdout).toContain('tag:second');
      expect(second.stdout).not.toContain('tag:first');
      expect(r.stderr()).not.toContain(fx.logs.leakMarker); // nothing leaked to the runner's real streams
    });

    it('caps an invocation’s logs at 1 MiB and reports the bytes it dropped on the result, and the next invocation logs again', async (ctx) => {
      need(ctx);
      const res = await run(r, { case: 'big-logs' });
      // 2048 lines of 1024 bytes: 1 MiB kept, 1 MiB dropped (the host adds the mark with that count).
      expect(res.outcome).toEqual({ kind: 'result', output: { ok: true }, logsDropped: 2048 * 1024 - 1024 * 1024 });
      expect(Buffer.byteLength(res.stdout)).toBe(1024 * 1024);
      expect((await run(r, { case: 'logs', tag: 'after' })).stdout).toContain('tag:after');
    });

    it('host calls through the store and integrations libraries round-trip, and a failed call raises an error with its code', async (ctx) => {
      need(ctx);
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
          api: {
            status: 200,
            headers: { 'content-type': 'application/json' },
            body: { echo: { name: 'github', method: 'GET', path: '/user', query: { a: '1' } } },
          },
        },
      });
      const calls = res.events.filter((e): e is Extract<typeof e, { t: 'call' }> => e.t === 'call');
      expect(calls[0]).toEqual({ t: 'call', op: 'store.set', args: { key: 'greeting', value: { hello: 'QA' }, ttl_seconds: 60 } });
      expect(calls.map((c) => c.op)).toEqual<HostOp[]>([
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

    it('an onCall that throws without a code is answered host_error, with the tenant’s frames and none of the host’s detail', async (ctx) => {
      need(ctx);
      const res = await run(r, { case: 'store', who: 'x' }, {}, async () => {
        throw new Error('database exploded at /secret/path');
      });
      expect(res.outcome).toMatchObject({ kind: 'error', message: fx.hostError.message });
      const { stack } = res.outcome as { stack?: string };
      matches(stack, fx.hostError.stack); // the failed call's stack names the tenant's line
      expect(stack).not.toContain('/secret/path');
    });

    it('an invocation after a handler error still works', async (ctx) => {
      need(ctx);
      await run(r, { case: 'throw' });
      expect((await run(r, { case: 'echo', n: 1 })).outcome).toEqual({ kind: 'result', output: { case: 'echo', n: 1 } });
    });

    it('returns a 4 MiB output whole', async (ctx) => {
      need(ctx);
      const bytes = 4 * 1024 * 1024;
      const res = await run(r, { case: 'big-output', bytes });
      expect(res.outcome.kind).toBe('result');
      const { output } = res.outcome as { output: string };
      expect(output.length).toBe(bytes);
      expect(/^y+$/.test(output)).toBe(true);
    });

    it('ignores a bad frame (with a note on stderr) and keeps serving', async (ctx) => {
      need(ctx);
      const fd3 = r.child.stdio[3] as Duplex;
      fd3.write('this is not json\n');
      fd3.write('{"t":"invoke","id":7}\n');
      fd3.write('{"t":"nonsense"}\n');
      fd3.write('[1,2]\n');
      expect((await run(r, { case: 'hello' })).outcome).toEqual({ kind: 'result', output: { hello: 'world' } });
      // stderr is its own pipe: its note may land after the result frame on fd 3.
      await vi.waitFor(() => expect(r.stderr()).toMatch(/ignored a line that is not JSON/), { timeout: 2000 });
      await vi.waitFor(() => expect(r.stderr()).toMatch(/malformed invoke/), { timeout: 2000 });
    });

    it('refuses a second concurrent invocation on the channel', async (ctx) => {
      need(ctx);
      const first = run(r, { case: 'hello' });
      expect(() => r.channel.invoke('again', {}, {}, { onCall: async () => null })).toThrow(/still running/);
      await first;
    });
  });

  describe(`${runtime} runner: conformance (lifecycle, handler shapes and bundles)`, () => {
    it('exits when fd 3 closes', async (ctx) => {
      need(ctx);
      const other = await startRunner(runtime, { [fx.entry]: fx.trivial }, fx.entry);
      const exited = new Promise<number | null>((resolve) => other.child.once('exit', (code) => resolve(code)));
      other.channel.close();
      expect(await exited).toBe(0);
      await other.stop();
    });

    it('cancelled mid-invocation (the executor kills it), the invocation fails runner_exited and nothing hangs', async (ctx) => {
      need(ctx);
      await withRunner({ [fx.entry]: fx.main }, async (r) => {
        let killed = false;
        const outcome = run(r, { case: 'block' }, {}, async (op, args) => {
          // The handler is now waiting on the host: cancel it the way the executor does.
          expect({ op, key: args.key }).toEqual({ op: 'store.get', key: 'block' });
          killed = r.child.kill('SIGKILL');
          return new Promise<never>(() => {}); // never answered
        });
        const err = await outcome.then(
          () => null,
          (e: unknown) => e,
        );
        expect(killed).toBe(true);
        expect(err).toBeInstanceOf(RunnerProtocolError);
        expect((err as RunnerProtocolError).code).toBe('runner_exited');
        await r.channel.closed;
        expect(() => r.channel.invoke('after', {}, {}, { onCall: async () => null })).toThrow(/closed/);
      });
    });

    it('an async generator streams chunks in order, each on the wire before the handler goes on, logs between them, then its return value', async (ctx) => {
      need(ctx);
      await withRunner(fx.asyncGenerator.files, async (r) => {
        const order: string[] = [];
        const chunks: unknown[] = [];
        const outcome = await r.channel.invoke(
          'gen',
          { n: 4 },
          {},
          {
            onChunk: (d) => {
              chunks.push(d);
              order.push(`chunk:${JSON.stringify(d)}`);
            },
            onLog: (_s, d) => order.push(`log:${d.trim()}`),
            // The handler awaits this call after each yield: the chunk must already have arrived (a runner that held
            // chunks back until the end would show the call first).
            onCall: async (op, args) => {
              order.push(`call:${String(args.key)}`);
              return null;
            },
          },
        );
        order.push('result');
        expect(chunks).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }, { i: 3 }]);
        expect(order).toEqual([...[0, 1, 2, 3].flatMap((i) => [`log:before ${i}`, `chunk:{"i":${i}}`, `call:after-${i}`]), 'result']);
        expect(outcome).toEqual({ kind: 'result', output: fx.asyncGenerator.output });
      });
    });

    it('a sync generator streams, and its return value is the output', async (ctx) => {
      need(ctx);
      await withRunner(fx.syncGenerator.files, async (r) => {
        const res = await run(r, {}, {}, fakeStore(fx.syncGenerator.store).onCall);
        expect(res.chunks).toEqual(fx.syncGenerator.chunks);
        expect(res.outcome).toEqual({ kind: 'result', output: fx.syncGenerator.output });
      });
    });

    it('a non-JSON yielded value is a handler_error, after the chunks before it', async (ctx) => {
      need(ctx);
      await withRunner(fx.nonJsonYield.files, async (r) => {
        const res = await run(r);
        expect(res.chunks).toEqual([1]);
        expect(res.outcome).toMatchObject({ kind: 'error', message: expect.stringMatching(fx.nonJsonYield.message) });
      });
    });

    it('the entry module is loaded once per runner', async (ctx) => {
      need(ctx);
      await withRunner(fx.loadOnce, async (r) => {
        const a = (await run(r)).outcome as { output: { loaded_at: number; count: number } };
        const b = (await run(r)).outcome as { output: { loaded_at: number; count: number } };
        expect(typeof a.output.loaded_at).toBe('number');
        expect(b.output.loaded_at).toBe(a.output.loaded_at);
        expect([a.output.count, b.output.count]).toEqual([1, 2]);
      });
    });

    it('multi-file bundle: relative imports work, and an error in an imported file names that file and the caller’s line', async (ctx) => {
      need(ctx);
      await withRunner(fx.multiFile.files, async (r) => {
        expect((await run(r, fx.multiFile.ok.input)).outcome).toEqual({ kind: 'result', output: fx.multiFile.ok.output });
        const err = await run(r, fx.multiFile.fail.input);
        expect(err.outcome.kind).toBe('error');
        const o = err.outcome as { message: string; stack: string };
        matches(o.message, fx.multiFile.fail.message);
        for (const m of fx.multiFile.fail.stack) expect(o.stack).toMatch(m);
      });
    });

    const initError = (title: string, c: () => InitErrorCase) =>
      it(title, async (ctx) => {
        need(ctx);
        const k = c();
        await withRunner(k.files, async (r) => {
          expect(r.ready.t).toBe('init_error');
          const f = r.ready as { message: string; stack?: string };
          matches(f.message, k.message);
          for (const m of k.stack ?? []) expect(f.stack).toMatch(m);
          if (k.stackNot) expect(f.stack ?? '').not.toMatch(k.stackNot);
          expect(f.message).not.toContain(r.bundle);
          expect(f.stack ?? '').not.toContain(r.bundle);
          // Every invocation of a runner that failed to load fails with it.
          expect(() => r.channel.invoke('x', {}, {}, { onCall: async () => null })).toThrow(/failed to load/);
        });
      });
    initError('a syntax error is init_error naming the file and line', () => fx.syntaxError);
    initError('a bundle without a handler is init_error', () => fx.noHandler);
    initError('a bundle that throws while loading is init_error with its message and stack', () => fx.throwsWhileLoading);
    initError('a missing import is init_error', () => fx.missingImport);
  });
}
