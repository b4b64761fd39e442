/**
 * The egress proxy answering a replaying run (issue 18, lane B), driven as a runner's relay drives it (the
 * preamble naming the invocation, then proxy traffic on the unix socket): a recorded streamed answer is
 * played with its head at once and each chunk at its recorded time, no connection made; a client that
 * goes away mid-play stops the play at once and leaves no timer behind; a miss is a 502 problem. The
 * session is opened the way services/egress-sessions.ts opens one (a real tape and a real player over a
 * cassette the real tape took down); no core.
 */
import { connect } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressProxy } from '../../server/egress/proxy';
import { EgressService } from '../../server/services/egress';
import { createPlayer, createRedactor, createTape, emptyCassette, type EgressSession } from '../../server/egress/cassette';

const URL_ = 'http://api.invalid:9/stream';
/** The recorded chunks: one every STEP_MS, the first after STEP_MS. */
const STEP_MS = 150;
const CHUNKS = 20;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-emu-replay-proxy-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A cassette holding one recorded GET of URL_: 20 chunks, STEP_MS apart (times from a clock the test moves). */
function recording() {
  let clock = 0;
  const tape = createTape({ redactor: createRedactor({}), invocationId: 'inv_rec', perf: () => clock });
  const call = tape.begin({
    source: 'snippet',
    integration: null,
    method: 'GET',
    url: URL_,
    headers: [['host', 'api.invalid:9']],
    hostAdded: [],
  });
  call.head({ status: 200, statusText: 'OK', headers: [['content-type', 'text/event-stream']] });
  for (let i = 0; i < CHUNKS; i++) {
    clock += STEP_MS;
    call.chunk(Buffer.from(`data: ${i}\n\n`));
  }
  call.end(null);
  const cassette = emptyCassette({ tenant: 'local', snippet: 's' }, 'test');
  cassette.log.entries = tape.entries();
  return cassette;
}

function session(id: string, egress: EgressService): EgressSession {
  const redactor = createRedactor({});
  const s: EgressSession = {
    invocationId: id,
    mode: 'replay',
    source: 'run',
    cassette: { tenant: 'local', snippet: 's', name: 'default' },
    tape: createTape({ redactor, invocationId: id }),
    player: createPlayer({ cassette: recording(), speed: 1, redactor, name: 'default' }),
    speed: 1,
    counts: { calls: 0, recorded: 0, replayed: 0, unmatched: 0, passthrough: 0 },
  };
  egress.sessions.set(id, s);
  return s;
}

async function withProxy(fn: (p: { egress: EgressService; socket: string }) => Promise<void>) {
  const egress = new EgressService(
    { profile: 'local', allow: [] },
    () => new Date(),
    () => 'local',
  );
  const socket = join(dir, `egress-${Math.random().toString(36).slice(2)}.sock`);
  const proxy = new EgressProxy(egress, socket);
  await proxy.listen();
  try {
    await fn({ egress, socket });
  } finally {
    await proxy.close();
  }
}

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

async function until<T>(what: string, fn: () => T | undefined | false, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('a replaying run through the proxy', () => {
  it('plays the recorded answer chunk by chunk at its recorded times, connecting nowhere', async () => {
    await withProxy(async ({ egress, socket }) => {
      const s = session('inv_play', egress);
      const lag = monitorEventLoopDelay({ resolution: 5 });
      lag.enable();
      const t0 = performance.now();
      const arrivals: { at: number; text: string }[] = [];
      await new Promise<void>((resolve, reject) => {
        const c = connect(socket);
        c.on('data', (d: Buffer) => arrivals.push({ at: performance.now() - t0, text: d.toString() }));
        c.on('close', () => resolve());
        c.on('error', reject);
        c.write(`SVC-EGRESS 1 inv_play\r\nGET ${URL_} HTTP/1.1\r\nHost: api.invalid:9\r\n\r\n`);
      });
      const all = arrivals.map((a) => a.text).join('');
      expect(all).toMatch(/^HTTP\/1.1 200 OK/);
      expect(all.toLowerCase()).toContain('x-svc-emu-egress: replayed');
      for (let i = 0; i < CHUNKS; i++) expect(all).toContain(`data: ${i}\n\n`);
      lag.disable();
      const lagMs = lag.max / 1e6;
      // Each chunk's arrival (the socket's data events after the head) within 10% of its recorded time, or late by
      // no more than this process's event loop was held up (a loaded machine: the next chunks are on time again).
      for (let i = 0; i < CHUNKS; i++) {
        const at = arrivals.find((a) => a.text.includes(`data: ${i}\n`))!.at;
        const want = (i + 1) * STEP_MS;
        expect(at - want, `chunk ${i} at ${at.toFixed(0)} ms, recorded ${want} ms (early)`).toBeGreaterThanOrEqual(-2);
        expect(
          at - want,
          `chunk ${i} at ${at.toFixed(0)} ms, recorded ${want} ms (loop held up ${lagMs.toFixed(0)} ms)`,
        ).toBeLessThanOrEqual(Math.max(want * 0.1 + 5, lagMs + 5));
      }
      expect(s.counts).toMatchObject({ replayed: 1, unmatched: 0 });
      const [entry] = egress.log.list();
      expect(entry).toMatchObject({ invocation_id: 'inv_play', host: 'api.invalid', status: 200, error: null });
      expect(s.tape.entries()[0]!._svcEmu.chunks).toHaveLength(CHUNKS);
    });
  });

  it('a client that goes away mid-play stops it at once, and no timer stays behind', async () => {
    await withProxy(async ({ egress, socket }) => {
      session('inv_gone', egress);
      const before = timers();
      const c = connect(socket);
      let got = '';
      c.on('data', (d: Buffer) => {
        got += d.toString();
        if (got.includes('data: 2\n')) c.destroy(); // after three of twenty chunks (~0.45 s of ~3 s)
      });
      c.write(`SVC-EGRESS 1 inv_gone\r\nGET ${URL_} HTTP/1.1\r\nHost: api.invalid:9\r\n\r\n`);
      const t0 = performance.now();
      const entry = await until('the call to be logged', () => egress.log.list()[0]);
      expect(performance.now() - t0).toBeLessThan(2000);
      expect(entry).toMatchObject({ invocation_id: 'inv_gone', status: 200, error: 'the client went away during the replay' });
      expect(got).not.toContain('data: 5\n');
      await until('the play timers to be gone', () => timers() <= before || undefined);
    });
  });

  it('a request with no recording is a 502 egress_replay_no_match naming the closest call', async () => {
    await withProxy(async ({ egress, socket }) => {
      const s = session('inv_miss', egress);
      const text = await new Promise<string>((resolve, reject) => {
        const c = connect(socket);
        let t = '';
        c.on('data', (d: Buffer) => (t += d.toString()));
        c.on('close', () => resolve(t));
        c.on('error', reject);
        c.write(`SVC-EGRESS 1 inv_miss\r\nGET http://api.invalid:9/other HTTP/1.1\r\nHost: api.invalid:9\r\n\r\n`);
      });
      expect(text).toMatch(/^HTTP\/1.1 502/);
      expect(text.toLowerCase()).toContain('x-svc-emu-egress: no-match');
      const problem = JSON.parse(
        text
          .slice(text.indexOf('\r\n\r\n') + 4)
          .replace(/^[0-9a-f]+\r\n/, '')
          .replace(/\r\n0\r\n\r\n$/, ''),
      );
      expect(problem).toMatchObject({ code: 'egress_replay_no_match', status: 502 });
      expect(problem.detail).toContain('/stream');
      expect(s.counts.unmatched).toBe(1);
      expect(egress.log.list()[0]!.error).toBe(problem.detail);
    });
  });
});
