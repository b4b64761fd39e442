/**
 * Record and replay of an agent's outbound calls (issue 18, "Done when"): the example workspace's Mastra
 * agent (Bun) and LangGraph agent (Python) run once in `record` against the project's fake provider, paced
 * like a model (a first-token wait, then 60–90 ms a token: an answer long enough that a loaded machine's
 * jitter at either end barely moves its length); the provider is stopped; a `replay` run then gives the
 * same output and the same frames in the same order, its tokens arriving at the recorded pace (within 10%,
 * judged on the whole sequence against the chunk times the cassette holds); a changed prompt finds no
 * recorded answer and fails naming the difference; no credential is in a cassette. Real core, real
 * runners, the real fake provider; one core and one recording for the file.
 *
 * Heavy (two framework cold starts, six agent runs, ~40 s): it runs in the suite like every file, in the
 * `alone` group (vitest.config.mts), since it judges timing.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSse } from '../../contract/sse';
import { startTestCore, type TestCore } from '../helpers/core';
import { AGENT_NAMES, deployAgentExamples, type AgentName } from '../helpers/agents';
import { startFakeProvider, type FakeProvider } from '../../fixtures/fake-openai/server';

const NAMES = AGENT_NAMES;
const PROMPT = 'What is the weather in Paris?';

/** One stream-mode run as the client saw it: every event in order, and when each chunk arrived (ms after the request). */
interface Run {
  id: string;
  events: { event: string; data: any }[];
  chunks: { at: number; data: unknown }[];
  result: { output: unknown } | null;
  error: { code: string; message: string } | null;
}

let fake: FakeProvider;
let core: TestCore;
let secrets: string[] = [];
const recorded = new Map<AgentName, Run>();

async function stream(name: string, prompt: string, mode: 'record' | 'replay'): Promise<Run> {
  const t0 = performance.now();
  const res = await fetch(`${core.url}/v1/invoke/${name}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${core.key}`,
      'content-type': 'application/json',
      'x-invoke-mode': 'stream',
      'x-emu-egress-mode': mode,
      'x-emu-admin': core.admin,
    },
    body: JSON.stringify({ prompt }),
  });
  if (res.status !== 200) throw new Error(`${name}: ${res.status} ${await res.text()}`);
  const run: Run = { id: res.headers.get('x-invocation-id')!, events: [], chunks: [], result: null, error: null };
  // The project's one SSE reader (contract/sse.ts); a `: ping` is a comment, never an event.
  for await (const { event, data: text } of parseSse(res.body!)) {
    const at = performance.now() - t0;
    const data = JSON.parse(text);
    run.events.push({ event, data });
    if (event === 'chunk') run.chunks.push({ at, data: data.data });
    if (event === 'result') run.result = data;
    if (event === 'error') run.error = data;
  }
  return run;
}

/** The frames with what names the run (its id) and measures it (usage) left out: what must be identical. */
const frames = (run: Run) =>
  run.events.map(({ event, data }) =>
    event === 'start'
      ? { event, snippet: data.snippet, version: data.version }
      : event === 'result'
        ? { event, output: data.output }
        : { event, data },
  );

/**
 * When each token of the model's streamed answer arrived while it was recorded (the proxy's clock, ms from
 * the call's start): the cassette's last chat completion of the run, its SSE frames that carry a token, each
 * at the `t_ms` of the recorded chunk that completed it.
 */
function recordedTokenTimes(cassette: any, invocationId: string): number[] {
  const calls = (cassette.log.entries as any[]).filter(
    (e) => e._svcEmu.invocation_id === invocationId && e.request.url.endsWith('/chat/completions'),
  );
  const answer = calls.sort((a, b) => a._svcEmu.seq - b._svcEmu.seq).at(-1);
  const body = Buffer.from(answer.response.content.text as string, 'utf8');
  const ends: number[] = []; // cumulative byte offsets at which each recorded chunk ends
  for (const c of answer._svcEmu.chunks as { bytes: number }[]) ends.push((ends.at(-1) ?? 0) + c.bytes);
  const times: number[] = [];
  let at = 0;
  for (const frame of body.toString('utf8').split('\n\n')) {
    at += Buffer.byteLength(frame, 'utf8') + 2;
    const data = /^data: (\{.*)$/m.exec(frame)?.[1];
    const token = data ? JSON.parse(data).choices?.[0]?.delta?.content : undefined;
    if (typeof token !== 'string' || token === '') continue;
    const chunk = ends.findIndex((end) => end >= at - 2); // the chunk holding the frame's last byte
    times.push(answer._svcEmu.chunks[chunk].t_ms);
  }
  return times;
}

/**
 * The replay's pace against the recording's: the sum of the gaps between consecutive tokens as the client
 * saw them in replay, over the same gaps as recorded, leaving out the one gap that differs most (a frame
 * held up by a loaded machine says nothing about the pace).
 */
function paceRatio(recordedAt: number[], replayedAt: number[]): { ratio: number; recordedMs: number; replayedMs: number } {
  const gaps = (xs: number[]) => xs.slice(1).map((x, i) => x - xs[i]!);
  const a = gaps(recordedAt);
  const b = gaps(replayedAt);
  let worst = 0;
  for (let i = 1; i < a.length; i++) if (Math.abs(b[i]! - a[i]!) > Math.abs(b[worst]! - a[worst]!)) worst = i;
  const sum = (xs: number[]) => xs.filter((_, i) => i !== worst).reduce((t, x) => t + x, 0);
  return { ratio: sum(b) / sum(a), recordedMs: sum(a), replayedMs: sum(b) };
}

beforeAll(async () => {
  fake = await startFakeProvider({ pace: { firstMs: 300, minMs: 60, maxMs: 90 } });
  secrets = [fake.apiKey, fake.restToken];
  core = await startTestCore();
  await deployAgentExamples(core, fake);
  // One recording of each, then the provider goes away: everything after this answers from the cassettes.
  for (const name of NAMES) {
    const run = await stream(name, PROMPT, 'record');
    expect(run.error, JSON.stringify(run.error)).toBeNull();
    recorded.set(name, run);
  }
  expect(fake.requests.filter((q) => q.path === '/v1/chat/completions')).toHaveLength(4); // two model calls per agent
  await fake.close();
}, 120_000);
afterAll(async () => {
  await core?.stop();
  await fake?.close().catch(() => undefined);
});

describe.each(NAMES)('%s', (name) => {
  it('replayed with the provider gone: the same output and frames in the same order, the chunks at the recorded pace (±10%)', async () => {
    const rec = recorded.get(name)!;
    expect(rec.chunks.length).toBeGreaterThanOrEqual(10);
    const rep = await stream(name, PROMPT, 'replay');
    expect(rep.error, JSON.stringify(rep.error)).toBeNull();
    expect(JSON.stringify(rep.result!.output)).toBe(JSON.stringify(rec.result!.output));
    expect(frames(rep)).toEqual(frames(rec));
    expect(rep.id).not.toBe(rec.id);

    // Chunk timing: the tokens' inter-arrival times in replay against those the proxy recorded.
    const cassette = (await core.call('GET', `/_emu/snippets/${name}/cassettes/default`, undefined, { key: core.admin })).json;
    const tokenTimes = recordedTokenTimes(cassette, rec.id);
    expect(tokenTimes).toHaveLength(rep.chunks.length);
    const pace = paceRatio(
      tokenTimes,
      rep.chunks.map((c) => c.at),
    );
    const asRecorded = paceRatio(
      tokenTimes,
      rec.chunks.map((c) => c.at),
    );
    console.log(
      `${name}: ${rep.chunks.length} chunks, recorded ${pace.recordedMs.toFixed(0)} ms, replayed ${pace.replayedMs.toFixed(0)} ms (ratio ${pace.ratio.toFixed(3)}; the recording run's client saw ${asRecorded.ratio.toFixed(3)})`,
    );
    expect(pace.ratio).toBeGreaterThanOrEqual(0.9);
    expect(pace.ratio).toBeLessThanOrEqual(1.1);

    // Every call was answered from the cassette: none went out, none missed.
    const inv = await core.call('GET', `/_emu/invocations/${rep.id}`, undefined, { key: core.admin });
    expect(inv.json.egress).toMatchObject({ mode: 'replay', source: 'run', calls: 3, replayed: 3, unmatched: 0 });
  }, 60_000);

  it('a changed prompt finds no recorded answer: the run fails, naming the closest recorded call and how it differs', async () => {
    const rep = await stream(name, 'What is the weather in Rome?', 'replay');
    expect(rep.result).toBeNull();
    expect(rep.error).not.toBeNull();
    const inv = await core.call('GET', `/_emu/invocations/${rep.id}`, undefined, { key: core.admin });
    expect(inv.json.egress).toMatchObject({ mode: 'replay', replayed: 0 });
    expect(inv.json.egress.unmatched).toBeGreaterThanOrEqual(1); // the model clients may retry the failed call
    // The miss (a 502 egress_replay_no_match to the client, which its framework turns into the run's error) is
    // in the egress log: the request, the closest recorded call, and the field that differs, in plain words.
    const log = (await core.call('GET', `/_emu/egress?invocation=${rep.id}`, undefined, { key: core.admin })).json.data as {
      path: string;
      status: number;
      error: string | null;
    }[];
    expect(log.length).toBeGreaterThanOrEqual(1);
    for (const call of log) {
      expect(call).toMatchObject({ path: '/v1/chat/completions', status: 502 });
      expect(call.error).toMatch(/^replay: no recorded call matches POST .*\/chat\/completions/);
      expect(call.error).toContain(`The closest in cassette "default" is call #0 of run ${recorded.get(name)!.id}`);
      expect(call.error).toContain(
        'body field messages[1].content: recorded "What is the weather in Paris?", got "What is the weather in Rome?"',
      );
    }
  }, 60_000);

  it('its cassette holds no credential: neither the API key nor the REST token, anywhere in the file', async () => {
    const list = await core.call('GET', `/_emu/snippets/${name}/cassettes`, undefined, { key: core.admin });
    expect(list.status, list.text).toBe(200);
    const cassette = list.json.data.find((c: { name: string }) => c.name === 'default');
    expect(cassette.entries).toBe(3);
    const text = await readFile(cassette.path, 'utf8');
    for (const secret of secrets) expect(text).not.toContain(secret);
  });
});
