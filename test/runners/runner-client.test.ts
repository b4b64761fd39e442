// RunnerChannel against a scripted fake runner over an in-memory stream pair: framing, validation, host
// call answers, and what happens when the runner misbehaves or goes away. No runtime needed.
import { describe, expect, it } from 'vitest';
import { Duplex, PassThrough } from 'node:stream';
import { RunnerChannel, RunnerProtocolError } from '../../executor/runner-client';
import { MAX_FRAME_BYTES } from '../../executor/protocol';

function pair() {
  const toHost = new PassThrough();
  const fromHost = new PassThrough();
  const stream = Duplex.from({ readable: toHost, writable: fromHost });
  const channel = new RunnerChannel(stream);
  const errors: RunnerProtocolError[] = [];
  channel.on('error', (e: RunnerProtocolError) => errors.push(e));
  const received: any[] = [];
  let buf = '';
  const waiters: Array<() => void> = [];
  fromHost.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      received.push(JSON.parse(buf.slice(0, nl)));
      buf = buf.slice(nl + 1);
    }
    for (const w of waiters.splice(0)) w();
  });
  const runner = {
    send: (frame: unknown) => toHost.write(`${JSON.stringify(frame)}\n`),
    raw: (text: string | Buffer) => toHost.write(text),
    end: () => toHost.end(),
    received,
    /** Resolves once the host has sent at least n frames. */
    async frames(n: number) {
      while (received.length < n) await new Promise<void>((r) => waiters.push(r));
      return received;
    },
  };
  return { channel, runner, errors };
}

const READY = { t: 'ready', init_ms: 1.5, runtime: { name: 'bun', version: '1.4.4' } };
const tick = () => new Promise((r) => setTimeout(r, 10));

describe('RunnerChannel', () => {
  it('waits for ready, runs an invocation with logs, chunks and host calls, and answers calls in order', async () => {
    const { channel, runner, errors } = pair();
    const readyP = channel.waitReady(1000);
    runner.send(READY);
    expect(await readyP).toEqual(READY);

    const seen: string[] = [];
    const p = channel.invoke(
      'i1',
      { a: 1 },
      { S: 'x' },
      {
        onLog: (s, d) => seen.push(`log:${s}:${d}`),
        onChunk: (d) => seen.push(`chunk:${JSON.stringify(d)}`),
        onCall: async (op, args) => {
          seen.push(`call:${op}`);
          if (args.key === 'bad') throw Object.assign(new Error('nope'), { code: 'validation_failed' });
          if (args.key === 'boom') throw new Error('internal detail');
          return op === 'store.get' ? { v: args.key } : undefined;
        },
      },
    );
    const [, invoke] = await runner.frames(1).then((f) => [null, f[0]]);
    expect(invoke).toEqual({ t: 'invoke', id: 'i1', input: { a: 1 }, env: { S: 'x' } });
    runner.send({ t: 'log', id: 'i1', stream: 'stdout', data: 'hello\n' });
    runner.send({ t: 'call', id: 'i1', cid: 'c1', op: 'store.get', args: { key: 'k' } });
    runner.send({ t: 'call', id: 'i1', cid: 'c2', op: 'store.set', args: { key: 'bad', value: 1 } });
    runner.send({ t: 'call', id: 'i1', cid: 'c3', op: 'store.set', args: { key: 'boom', value: 1 } });
    runner.send({ t: 'call', id: 'i1', cid: 'c4', op: 'store.set', args: { key: 'ok', value: 1 } });
    await runner.frames(5);
    runner.send({ t: 'chunk', id: 'i1', data: [1] });
    runner.send({ t: 'result', id: 'i1', output: { done: true } });
    expect(await p).toEqual({ kind: 'result', output: { done: true } });
    expect(seen).toEqual(['log:stdout:hello\n', 'call:store.get', 'call:store.set', 'call:store.set', 'call:store.set', 'chunk:[1]']);
    const replies = runner.received.slice(1).sort((a, b) => (a.cid < b.cid ? -1 : 1));
    expect(replies).toEqual([
      { t: 'reply', cid: 'c1', ok: true, value: { v: 'k' } },
      { t: 'reply', cid: 'c2', ok: false, error: { code: 'validation_failed', message: 'nope' } },
      { t: 'reply', cid: 'c3', ok: false, error: { code: 'host_error', message: 'the host could not complete the call' } },
      { t: 'reply', cid: 'c4', ok: true, value: null },
    ]);
    expect(errors).toEqual([]);
  });

  it('an error frame resolves as kind error with message and stack', async () => {
    const { channel, runner } = pair();
    runner.send(READY);
    await channel.waitReady(1000);
    const p = channel.invoke('i2', {}, {}, { onCall: async () => null });
    runner.send({ t: 'error', id: 'i2', code: 'handler_error', message: 'boom', stack: 'Error: boom\n    at main.ts:1:1' });
    expect(await p).toEqual({ kind: 'error', message: 'boom', stack: 'Error: boom\n    at main.ts:1:1' });
  });

  it('step and graph frames reach onStep / onGraph as sent; an invalid one is a bad_frame and the run goes on', async () => {
    const { channel, runner, errors } = pair();
    runner.send(READY);
    await channel.waitReady(1000);
    const steps: unknown[] = [];
    const graphs: unknown[] = [];
    const p = channel.invoke('i4', {}, {}, { onCall: async () => null, onStep: (f) => steps.push(f), onGraph: (f) => graphs.push(f) });
    const start = {
      t: 'step',
      id: 'i4',
      phase: 'start',
      step_id: 's1',
      parent_id: null,
      kind: 'node',
      framework: 'langgraph',
      name: 'model',
      at_ms: 1.5,
      input: { messages: [] },
      meta: { langgraph_step: 1 },
    };
    const end = {
      t: 'step',
      id: 'i4',
      phase: 'end',
      step_id: 's1',
      kind: 'node',
      framework: 'langgraph',
      name: '',
      at_ms: 9,
      output: { ok: true },
    };
    const graph = {
      t: 'graph',
      id: 'i4',
      framework: 'langgraph',
      nodes: [{ id: '__start__', name: '__start__' }],
      edges: [{ from: '__start__', to: 'model', conditional: false }],
    };
    runner.send(graph);
    runner.send(start);
    runner.send({ ...start, step_id: 's2', kind: 'chain' }); // no such kind
    runner.send({ ...start, step_id: '', at_ms: 2 }); // an empty step id
    runner.send(end);
    runner.send({ t: 'result', id: 'i4', output: null });
    expect(await p).toEqual({ kind: 'result', output: null });
    expect(graphs).toEqual([graph]);
    expect(steps).toEqual([start, end]);
    expect(errors.map((e) => e.code)).toEqual(['bad_frame', 'bad_frame']);
  });

  it('init_error is returned by waitReady and invoke is refused', async () => {
    const { channel, runner } = pair();
    runner.send({ t: 'init_error', message: 'SyntaxError: x (main.ts:1:1)' });
    expect(await channel.waitReady(1000)).toEqual({ t: 'init_error', message: 'SyntaxError: x (main.ts:1:1)' });
    expect(() => channel.invoke('i', {}, {}, { onCall: async () => null })).toThrow(RunnerProtocolError);
  });

  it('waitReady times out, and rejects when the runner closes first', async () => {
    const a = pair();
    await expect(a.channel.waitReady(30)).rejects.toMatchObject({ code: 'ready_timeout' });
    const b = pair();
    const p = b.channel.waitReady(1000);
    b.runner.end();
    await expect(p).rejects.toMatchObject({ code: 'runner_exited' });
    await b.channel.closed;
  });

  it('bad lines are error events, never a crash, and the invocation goes on', async () => {
    const { channel, runner, errors } = pair();
    runner.send(READY);
    await channel.waitReady(1000);
    const p = channel.invoke('i3', {}, {}, { onCall: async () => null });
    runner.raw('not json\n');
    runner.raw('{"t":"result"}\n'); // no id
    runner.raw('{"t":"weird","id":"i3"}\n');
    runner.send({ t: 'log', id: 'other', stream: 'stdout', data: 'x' }); // not the running invocation
    runner.send(READY); // a second ready
    runner.raw('{"t":"res'); // split across writes
    await tick();
    runner.raw('ult","id":"i3","output":7}\n');
    expect(await p).toEqual({ kind: 'result', output: 7 });
    expect(errors.map((e) => e.code)).toEqual(['bad_frame', 'bad_frame', 'bad_frame', 'unexpected_frame', 'unexpected_frame']);
  });

  it('a channel without error listeners swallows bad frames', async () => {
    const toHost = new PassThrough();
    const channel = new RunnerChannel(Duplex.from({ readable: toHost, writable: new PassThrough() }));
    toHost.write('garbage\n');
    toHost.write(`${JSON.stringify(READY)}\n`);
    expect(await channel.waitReady(1000)).toEqual(READY);
  });

  it('a line over MAX_FRAME_BYTES is dropped, fails the running invocation, and later lines still parse', async () => {
    const { channel, runner, errors } = pair();
    runner.send(READY);
    await channel.waitReady(1000);
    const p = channel.invoke('i4', {}, {}, { onCall: async () => null });
    const big = Buffer.alloc(MAX_FRAME_BYTES + 10, 'a');
    runner.raw(big.subarray(0, 1024 * 1024));
    runner.raw(big.subarray(1024 * 1024));
    runner.raw('\n');
    await expect(p).rejects.toMatchObject({ code: 'frame_too_large' });
    expect(errors.map((e) => e.code)).toEqual(['frame_too_large']);
    const q = channel.invoke('i5', {}, {}, { onCall: async () => null });
    runner.send({ t: 'result', id: 'i5', output: 'fine' });
    expect(await q).toEqual({ kind: 'result', output: 'fine' });
  });

  it('a call for an invocation that is not running is refused with a reply', async () => {
    const { channel, runner, errors } = pair();
    runner.send(READY);
    await channel.waitReady(1000);
    runner.send({ t: 'call', id: 'gone', cid: 'c9', op: 'store.get', args: { key: 'k' } });
    const frames = await runner.frames(1);
    expect(frames[0]).toEqual({
      t: 'reply',
      cid: 'c9',
      ok: false,
      error: { code: 'invocation_ended', message: 'the invocation that made this call has ended' },
    });
    expect(errors[0]?.code).toBe('unexpected_frame');
  });

  it('refuses concurrent invocations; the runner closing rejects the running one and resolves closed', async () => {
    const { channel, runner } = pair();
    runner.send(READY);
    await channel.waitReady(1000);
    const p = channel.invoke('i6', {}, {}, { onCall: async () => null });
    expect(() => channel.invoke('i7', {}, {}, { onCall: async () => null })).toThrow(/still running/);
    runner.end();
    await expect(p).rejects.toMatchObject({ code: 'runner_exited' });
    await channel.closed;
    expect(() => channel.invoke('i8', {}, {}, { onCall: async () => null })).toThrow(/closed/);
  });
});
