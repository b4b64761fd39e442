/**
 * Debug runs over the API (issue 19): `X-Emu-Debug` on /v1/invoke is an admin power, never answered from an
 * Idempotency-Key; a debug run's session is listed at GET /_emu/debug/sessions while it runs and announced as
 * `debug.session` events (waiting → attached → detached → ended); its record carries `debug` and a parity warning
 * naming what was relaxed; its debugger port is closed when it ends. Real core, real Bun and Python runners, a real
 * WebSocket to Bun's inspector.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followEvents } from '../../contract/events-client';
import type { DebugSession } from '../../contract/schemas/debug';
import { startTestCore, type TestCore } from '../helpers/core';
import { InspectorSession } from '../helpers/inspector-client';
import { expectProblem } from './_util';

let core: TestCore;

/** Waits on the store key `go` (set by the test), so the test decides when the run ends. */
const BUN_GATED = `import { store } from "@svc/store";
export default async function handler(input) {
  const doubled = (input.x ?? 1) * 2;
  while (!(await store.get("go-" + input.tag))) await new Promise((r) => setTimeout(r, 20));
  return { doubled };
}
`;
const PY_PLAIN = 'def handler(input):\n    return {"doubled": input.get("x", 1) * 2}\n';

/** Every debug.session event since the test core started, in order. */
const seen: DebugSession[] = [];
const stopFeed = new AbortController();
let feedDone: Promise<void>;

const admin = () => ({ 'x-emu-admin': core.admin });

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const sessionsNow = async (): Promise<DebugSession[]> => {
  const r = await core.call('GET', '/_emu/debug/sessions', undefined, { key: core.admin });
  expect(r.status, r.text).toBe(200);
  return r.json.data as DebugSession[];
};

/** The session of the run started with this X-Request-Id, once it is in `state`. */
const sessionOf = (requestId: string, state: DebugSession['state'], timeoutMs?: number) =>
  until(
    `the ${state} session of ${requestId}`,
    async () => (await sessionsNow()).find((s) => s.request_id === requestId && s.state === state),
    timeoutMs,
  );

const portClosed = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => (s.destroy(), resolve(false)));
    s.once('error', () => resolve(true));
  });

const record = async (id: string) => {
  const r = await core.call('GET', `/_emu/invocations/${id}`, undefined, { key: core.admin });
  expect(r.status, r.text).toBe(200);
  return r.json;
};

beforeAll(async () => {
  core = await startTestCore();
  for (const [name, runtime, code] of [
    ['gated', 'bun', BUN_GATED],
    ['plain-py', 'python', PY_PLAIN],
  ] as const) {
    expect((await core.call('POST', '/v1/snippets', { name, runtime })).status).toBe(201);
    const v = await core.call('POST', `/v1/snippets/${name}/versions`, { code, timeout_ms: 1000 });
    expect(v.status, v.text).toBe(201);
  }
  let opened!: () => void;
  const open = new Promise<void>((r) => (opened = r));
  feedDone = (async () => {
    for await (const e of followEvents(core.client, {
      types: ['debug.session'],
      signal: stopFeed.signal,
      onState: (s) => s.state === 'open' && opened(),
    })) {
      if (e.type === 'debug.session') seen.push(e.data);
    }
  })();
  await open;
}, 60_000);

afterAll(async () => {
  stopFeed.abort();
  await feedDone?.catch(() => {});
  await core?.stop();
});

describe('X-Emu-Debug is refused', () => {
  it('without the admin token (403 forbidden), with a wrong one, and in a bad form (400)', async () => {
    const count = async () => (await core.call('GET', '/v1/invocations?snippet=gated&limit=100')).json.data.length as number;
    const before = await count();
    const none = await core.call('POST', '/v1/invoke/gated', { tag: 'x' }, { headers: { 'x-emu-debug': '1' } });
    expectProblem(none, 403, 'forbidden');
    expect(none.json.detail).toMatch(/X-Emu-Debug.*X-Emu-Admin/);
    const wrong = await core.call('POST', '/v1/invoke/gated', {}, { headers: { 'x-emu-debug': '1', 'x-emu-admin': 'nope' } });
    expectProblem(wrong, 403, 'forbidden');
    for (const mode of ['async', 'stream']) {
      const r = await core.call('POST', '/v1/invoke/gated', {}, { headers: { 'x-emu-debug': 'port=9229', 'x-invoke-mode': mode } });
      expectProblem(r, 403, 'forbidden');
    }
    const bad = await core.call('POST', '/v1/invoke/gated', {}, { headers: { 'x-emu-debug': 'port=80', ...admin() } });
    expectProblem(bad, 400, 'validation_failed');
    // Nothing ran: no invocation was recorded for these.
    expect(await count()).toBe(before);
  });

  it('with an Idempotency-Key: a debug run never answers from the key’s earlier run', async () => {
    const r = await core.call('POST', '/v1/invoke/gated', {}, { headers: { 'x-emu-debug': '1', 'idempotency-key': 'k1', ...admin() } });
    expectProblem(r, 400, 'validation_failed');
    expect(r.json.detail).toMatch(/Idempotency-Key/);
    expect(r.json.errors).toEqual([{ location: 'header.idempotency-key', message: 'not allowed with X-Emu-Debug' }]);
  });
});

describe('a Bun debug run', () => {
  it('is listed while it waits, held by a debugger, released, recorded with what it relaxed, and leaves nothing behind', async () => {
    const requestId = 'test-debug-bun-1';
    const tag = 'bun1';
    const run = core.call(
      'POST',
      '/v1/invoke/gated',
      { x: 21, tag },
      { headers: { 'x-emu-debug': '1', 'x-request-id': requestId, ...admin() } },
    );
    const waiting = await sessionOf(requestId, 'waiting');
    expect(waiting).toMatchObject({ snippet: 'gated', version: 1, runtime: 'bun', protocol: 'inspector', host: '127.0.0.1', held_ms: 0 });
    expect(waiting.url).toMatch(new RegExp(`^ws://127\\.0\\.0\\.1:${waiting.port}/`));
    expect(waiting.remote_root).toMatch(/^\//);

    // Attach: Bun (--inspect-wait) runs nothing until its debugger says it is ready.
    const ws = await InspectorSession.connect(waiting.url);
    await ws.call('Inspector.enable');
    await ws.call('Runtime.enable');
    await ws.call('Inspector.initialized');
    const attached = await sessionOf(requestId, 'attached');
    expect(attached.invocation_id).toBe(waiting.invocation_id);

    // Leave: the run goes on under its limits until the test lets it end.
    await ws.close();
    const detached = await sessionOf(requestId, 'detached');
    expect(detached.held_ms).toBeGreaterThanOrEqual(0);
    expect((await core.call('PUT', `/v1/store/go-${tag}`, { value: true })).status).toBe(201);

    const res = await run;
    expect(res.status, res.text).toBe(200);
    expect(res.json).toEqual({ doubled: 42 });
    const id = res.headers.get('x-invocation-id')!;
    expect(id).toBe(waiting.invocation_id);

    // Nothing outlives the run: no session, the port closed, the event sequence complete.
    expect((await sessionsNow()).filter((s) => s.invocation_id === id)).toEqual([]);
    expect(await portClosed(waiting.port)).toBe(true);
    const states = await until('the ended event', () => {
      const mine = seen.filter((s) => s.invocation_id === id).map((s) => s.state);
      return mine.at(-1) === 'ended' ? mine : undefined;
    });
    expect(states).toEqual(['waiting', 'attached', 'detached', 'ended']);

    const rec = await record(id);
    expect(rec.debug).toMatchObject({ protocol: 'inspector', relaxed: ['timeout_ms', 'max_cpu_percent'], attached: true });
    expect(rec.debug.held_ms).toBeGreaterThanOrEqual(0);
    const warning = rec.parity_warnings.find((w: string) => w.startsWith('debug run:'));
    expect(warning).toMatch(
      /^debug run: timeout_ms paused for [\d,]+ ms while a debugger held it, CPU cap \(10%\) lifted for the whole run; memory enforced/,
    );
    // The /v1 record says it too (parity warnings are part of production's shape; `debug` is the emulator's).
    const v1 = await core.call('GET', `/v1/invocations/${id}`);
    expect(v1.json.parity_warnings).toContain(warning);
    expect(v1.json).not.toHaveProperty('debug');
  }, 60_000);

  it('an ordinary run of the same snippet is no debug run', async () => {
    expect((await core.call('PUT', '/v1/store/go-plain', { value: true })).status).toBe(201);
    const res = await core.call('POST', '/v1/invoke/gated', { x: 1, tag: 'plain' });
    expect(res.status, res.text).toBe(200);
    const rec = await record(res.headers.get('x-invocation-id')!);
    expect(rec.debug).toBeNull();
    expect(rec.parity_warnings.filter((w: string) => w.startsWith('debug run:'))).toEqual([]);
  }, 30_000);

  it('async: the session carries the request id, and a cancel while it waits ends it and closes the port', async () => {
    const requestId = 'test-debug-bun-async';
    const res = await core.call(
      'POST',
      '/v1/invoke/gated',
      { tag: 'never' },
      {
        headers: { 'x-emu-debug': '1', 'x-invoke-mode': 'async', 'x-request-id': requestId, ...admin() },
      },
    );
    expect(res.status, res.text).toBe(202);
    const id = res.json.invocation_id as string;
    const waiting = await sessionOf(requestId, 'waiting');
    expect(waiting.invocation_id).toBe(id);
    const cancel = await core.call('POST', `/v1/invocations/${id}/cancel`);
    expect(cancel.status, cancel.text).toBe(202);
    const rec = await until('the cancelled record', async () => {
      const r = await record(id);
      return r.status === 'failed' ? r : undefined;
    });
    expect(rec.outcome).toBe('cancelled');
    expect(rec.debug).toMatchObject({ protocol: 'inspector', attached: false, held_ms: 0 });
    expect(rec.parity_warnings).toContainEqual(expect.stringMatching(/^debug run: no debugger attached/));
    expect((await sessionsNow()).filter((s) => s.invocation_id === id)).toEqual([]);
    expect(await portClosed(waiting.port)).toBe(true);
  }, 60_000);
});

describe('a Python debug run', () => {
  it('listens for a DAP client at a fixed port with the bundle’s path, and a cancel ends it', async () => {
    const requestId = 'test-debug-py-1';
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const run = core.call(
      'POST',
      '/v1/invoke/plain-py',
      { x: 2 },
      {
        headers: { 'x-emu-debug': `port=${port}`, 'x-request-id': requestId, ...admin() },
      },
    );
    const waiting = await sessionOf(requestId, 'waiting', 40_000);
    expect(waiting).toMatchObject({ runtime: 'python', protocol: 'dap', host: '127.0.0.1', port, url: `tcp://127.0.0.1:${port}` });
    expect(waiting.remote_root).toMatch(/^\//);
    const cancel = await core.call('POST', `/v1/invocations/${waiting.invocation_id}/cancel`);
    expect(cancel.status, cancel.text).toBe(202);
    const res = await run;
    expectProblem(res, 409, 'cancelled');
    const rec = await record(waiting.invocation_id);
    expect(rec.debug).toMatchObject({ protocol: 'dap', attached: false });
    expect((await sessionsNow()).filter((s) => s.invocation_id === waiting.invocation_id)).toEqual([]);
    expect(await portClosed(port)).toBe(true);
  }, 60_000);
});
