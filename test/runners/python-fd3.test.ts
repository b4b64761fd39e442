// The Python runner's fd 3: between invocations the main thread reads it (a warm call wakes one thread), while a
// host call waits a helper thread does (executor/runtimes/python/_svc_runner_core.py, "frames in"). These drive the
// hand-over both ways, for real: the runner spawned as the executor spawns it, through RunnerChannel.
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi, type TestContext } from 'vitest';
import type { HostOp } from '../../executor/protocol';
import { fakeStore, findPython, run, startRunner, type StartedRunner } from './helpers';

const python = findPython();
const need = (ctx: TestContext): void => {
  if (!python) ctx.skip('no python runtime on this host (node scripts/setup.mjs --for=test installs it)');
};

const MAIN = `import asyncio
import sys
import threading

from svc import store

_late = {}


def handler(input):
    case = input["case"]
    print("before " + case)
    out = None
    if case == "sync-call":
        out = store.get(input["key"])
    elif case == "two-calls":
        out = [store.get(input["key"]), store.get(input["key"])]
    elif case == "async-call":
        return _async_call(input)
    elif case == "async-plain":
        return _async_plain()
    elif case == "stray":
        # A thread's call still waiting when the invocation ends (its reply comes later).
        t = threading.Thread(target=lambda: _late.update(value=store.get("late")))
        t.start()
        _late["thread"] = t
        out = store.get("ping")  # answered once the thread's call has reached the host
    elif case == "late-value":
        _late["thread"].join(10)
        out = _late.get("value")
    print("after " + case, file=sys.stderr)
    return {"case": case, "out": out}


async def _async_call(input):
    out = await store.aget(input["key"])
    await asyncio.sleep(0)
    print("after async-call", file=sys.stderr)
    return {"case": "async-call", "out": out}


async def _async_plain():
    await asyncio.sleep(0)
    print("after async-plain", file=sys.stderr)
    return {"case": "async-plain", "out": None}
`;

/** Each thread of the runner (its main thread first) with the system call it is in, from /proc ('0 0x3 …' is
 * read(3, …) on x86-64). */
const threads = (pid: number) =>
  [String(pid), ...readdirSync(`/proc/${pid}/task`).filter((t) => t !== String(pid))].map((tid) => {
    try {
      return readFileSync(`/proc/${pid}/task/${tid}/syscall`, 'utf8');
    } catch {
      return 'unreadable';
    }
  });
const readsFd3 = (s: string) => s.startsWith('0 0x3 ');

describe('python runner: who reads fd 3', () => {
  let r: StartedRunner;

  beforeAll(async () => {
    if (!python) return; // every test below skips, naming why
    r = await startRunner('python', { 'main.py': MAIN });
    if (r.ready.t !== 'ready') throw new Error(`init_error: ${JSON.stringify(r.ready)}`);
  });
  afterAll(async () => {
    await r?.stop();
  });

  const expectRun = async (input: Record<string, unknown>, out: unknown, onCall = fakeStore({ k: 'v' }).onCall) => {
    const res = await run(r, input, {}, onCall);
    expect(res.outcome).toEqual({ kind: 'result', output: { case: input.case, out } });
    expect(res.stdout).toBe(`before ${String(input.case)}\n`);
    expect(res.stderr).toBe(`after ${String(input.case)}\n`);
  };

  it('sync and async handlers, with and without host calls, one after another: each answers with its own logs', async (ctx) => {
    need(ctx);
    for (let round = 0; round < 3; round++) {
      await expectRun({ case: 'plain' }, null);
      await expectRun({ case: 'sync-call', key: 'k' }, 'v');
      await expectRun({ case: 'plain' }, null);
      await expectRun({ case: 'two-calls', key: 'k' }, ['v', 'v']);
      await expectRun({ case: 'async-call', key: 'k' }, 'v');
      await expectRun({ case: 'async-plain' }, null);
      await expectRun({ case: 'sync-call', key: 'nope' }, null);
    }
    expect(r.stderr()).not.toMatch(/svc-runner/);
  });

  it("a thread's host call answered after its invocation ended: later invocations run meanwhile and after, and the reply reaches the thread", async (ctx) => {
    need(ctx);
    let lateArrived!: () => void;
    const arrived = new Promise<void>((res) => (lateArrived = res));
    let answerLate!: (v: unknown) => void;
    const late = new Promise<unknown>((res) => (answerLate = res));
    const onCall = async (op: HostOp, args: Record<string, unknown>): Promise<unknown> => {
      if (args.key === 'late') {
        lateArrived();
        return late;
      }
      if (args.key === 'ping') {
        await arrived;
        return 'pong';
      }
      return fakeStore({ k: 'v' }).onCall(op, args);
    };
    await expectRun({ case: 'stray' }, 'pong', onCall);
    // The thread's call is still pending: these are read while it waits.
    await expectRun({ case: 'plain' }, null);
    await expectRun({ case: 'sync-call', key: 'k' }, 'v');
    await expectRun({ case: 'async-call', key: 'k' }, 'v');
    answerLate('at last');
    // The reply lands on its own, before the next invoke is sent: the helper reads it and parks while the main
    // thread waits on the queue; that wait must end with the main thread reading fd 3 again. Seen from /proc on
    // x86-64 (where read is system call 0): the caller thread gone, the main thread in read(3), no other one.
    if (process.arch === 'x64' && !threads(r.child.pid!).includes('unreadable')) {
      await vi.waitFor(
        () => {
          const [main, ...others] = threads(r.child.pid!);
          expect({ main: readsFd3(main!), others: others.length, othersReading: others.filter(readsFd3).length }).toEqual({
            main: true,
            others: 1,
            othersReading: 0,
          });
        },
        { timeout: 5000, interval: 5 },
      );
    }
    await expectRun({ case: 'late-value' }, 'at last');
    // And after it: plain calls and calls again.
    await expectRun({ case: 'plain' }, null);
    await expectRun({ case: 'sync-call', key: 'k' }, 'v');
    await expectRun({ case: 'plain' }, null);
    expect(r.stderr()).not.toMatch(/svc-runner/);
  });

  it('fd 3 closing while a host call waits ends the runner (the helper reads the end), and at rest ends it too', async (ctx) => {
    need(ctx);
    const other = await startRunner('python', { 'main.py': MAIN });
    try {
      const exited = new Promise<number | null>((res) => other.child.once('exit', (code) => res(code)));
      let called!: () => void;
      const calling = new Promise<void>((res) => (called = res));
      void other.channel
        .invoke(
          'blocked',
          { case: 'sync-call', key: 'k' },
          {},
          {
            onCall: () => {
              called();
              return new Promise<never>(() => {});
            },
          },
        )
        .catch(() => {});
      await calling;
      other.channel.close();
      expect(await exited).toBe(0);
    } finally {
      await other.stop();
    }
  });
});
