/**
 * Egress modes wired through the core (issue 18, lane B): real Bun and Python snippets (fetch, urllib) call
 * the project's fake OpenAI-compatible provider through the egress proxy for a streamed chat completion
 * paced like a model, and an integration through `integrations.call`. Recorded once, the provider stopped,
 * then replayed: the same output, every chunk at the recorded pace (within 10%, measured where the proxy
 * writes it: the run's egress_blob), scaled by the replay speed; a changed request fails naming the
 * difference; the mode's precedence (run > snippet.json > server); the admin-only headers; no secret in any
 * cassette or egress_blob; a cassette written into the workspace makes no new version.
 */
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { startFakeProvider, type FakeProvider } from '../../fixtures/fake-openai/server';
import type { HarEntry } from '../../contract/schemas/cassette';

const API_KEY = `sk-test-${Math.random().toString(36).slice(2, 12)}`;
const REST_TOKEN = `rest-${Math.random().toString(36).slice(2, 12)}`;
const ECHO_SECRET = `echo-${Math.random().toString(36).slice(2, 12)}`;
const SECRETS = [API_KEY, REST_TOKEN, ECHO_SECRET];
/** The model's pace: the first frame after this long, then one every PACE.minMs. */
const PACE = { firstMs: 250, minMs: 70, maxMs: 70 };

const BUN_CHAT = `export default async function handler(input) {
  const res = await fetch(input.base + "/chat/completions", {
    method: "POST",
    headers: { authorization: "Bearer " + process.env.OPENAI_API_KEY, "content-type": "application/json" },
    body: JSON.stringify({ model: "fake-model", stream: true, messages: [{ role: "user", content: input.prompt }] }),
  });
  const out = { status: res.status, replayed: res.headers.get("x-svc-emu-egress"), text: await res.text() };
  if (input.echo) {
    const e = await fetch(input.echo, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ token: process.env.ECHO_SECRET }) });
    out.echo = e.status;
  }
  return out;
}
`;

const PY_CHAT = `import json, os, urllib.request, urllib.error

def handler(input):
    body = json.dumps({"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": input["prompt"]}]}).encode()
    req = urllib.request.Request(input["base"] + "/chat/completions", data=body, method="POST",
        headers={"authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return {"status": r.status, "text": r.read().decode()}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "text": e.read().decode()}
`;

const BUN_WEATHER = `import { integrations } from "@svc/integrations";
export default async function handler(input) {
  try {
    const res = await integrations.call(input.via ?? "weather", { method: "GET", path: "/api/weather", query: { city: input.city } });
    return { ok: true, status: res.status, body: res.body };
  } catch (err) {
    return { ok: false, code: err.code, message: err.message };
  }
}
`;

let fake: FakeProvider;
let core: TestCore;
let workspace: string;
let base: string;
const recorded = new Map<string, { id: string; output: any; record: any }>();

const adminHeaders = (mode?: string, cassette?: string) => ({
  'x-emu-admin': core.admin,
  ...(mode ? { 'x-emu-egress-mode': mode } : {}),
  ...(cassette ? { 'x-emu-cassette': cassette } : {}),
});

async function invoke(name: string, input: unknown, headers: Record<string, string> = {}) {
  const r = await core.call('POST', `/v1/invoke/${name}`, input, { headers });
  expect(r.status, r.text).toBe(200);
  const id = r.headers.get('x-invocation-id')!;
  const rec = await core.call('GET', `/_emu/invocations/${id}`, undefined, { key: null, headers: { 'x-emu-admin': core.admin } });
  expect(rec.status, rec.text).toBe(200);
  return { id, output: r.json, record: rec.json };
}

const callsOf = (id: string): Promise<HarEntry[]> => core.emu.services.egressSessions.calls(core.emu.services.invocations.byId(id));

/** Cumulative chunk times (ms from the call's start) of the run's first call, as the proxy took them down. */
async function chunkTimes(id: string): Promise<number[]> {
  const [entry] = await callsOf(id);
  expect(entry, `run ${id} made no call`).toBeDefined();
  return entry!._svcEmu.chunks.map((c) => c.t_ms);
}

/** Runs `fn` and says how long the core's event loop (this process) was held up at most meanwhile, in ms. */
async function withLoopLag<T>(fn: () => Promise<T>): Promise<{ value: T; lagMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  try {
    const value = await fn();
    return { value, lagMs: h.max / 1e6 };
  } finally {
    h.disable();
  }
}

/**
 * Each replayed chunk at its recorded time: never early, and late by at most 10% (+2 ms), or by no more than
 * the core's event loop was held up during the replay (a 2-core machine shared with other work stalls the
 * loop now and then: the chunk goes as soon as it runs again, and the next ones catch up). And the pace: the
 * gaps between chunks add up to the recorded ones within 10%, leaving out the one gap a stall stretched.
 */
function expectOnPace(what: string, want: number[], got: number[], lagMs: number): void {
  expect(got.length, what).toBe(want.length);
  expect(want.length).toBeGreaterThan(3);
  for (let i = 0; i < want.length; i++) {
    const late = got[i]! - want[i]!;
    expect(late, `${what} chunk ${i}: ${got[i]} ms, recorded ${want[i]} ms (early)`).toBeGreaterThanOrEqual(-2);
    expect(late, `${what} chunk ${i}: ${got[i]} ms, recorded ${want[i]} ms (loop held up ${lagMs.toFixed(0)} ms)`).toBeLessThanOrEqual(
      Math.max(want[i]! * 0.1 + 2, lagMs + 5),
    );
  }
  const gaps = (xs: number[]) => xs.slice(1).map((x, i) => x - xs[i]!);
  const [a, b] = [gaps(want), gaps(got)];
  let worst = 0;
  for (let i = 1; i < a.length; i++) if (Math.abs(b[i]! - a[i]!) > Math.abs(b[worst]! - a[worst]!)) worst = i;
  const sum = (xs: number[]) => xs.reduce((t, x, i) => (i === worst ? t : t + x), 0);
  const ratio = sum(b) / sum(a);
  expect(ratio, `${what}: the gaps add up to ${sum(b).toFixed(0)} ms, recorded ${sum(a).toFixed(0)} ms`).toBeGreaterThanOrEqual(0.9);
  expect(ratio).toBeLessThanOrEqual(1.1);
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined | null | false>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function versionsOf(name: string): Promise<number[]> {
  const r = await core.call('GET', `/v1/snippets/${name}/versions`);
  expect(r.status, r.text).toBe(200);
  return (r.json.data as { version: number }[]).map((v) => v.version).sort();
}

/** Resolves at the next `cassette.changed` of the snippet (subscribed before the run that writes it). */
function nextCassetteWrite(name: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const sub = core.emu.events.subscribe((e) => {
      if (e.type === 'cassette.changed' && e.data.snippet === name) {
        sub.close();
        resolve();
      }
    });
  });
}

/** The versions before the recordings, by snippet (a cassette written into the workspace must make none). */
const versionsBefore = new Map<string, number[]>();

beforeAll(async () => {
  fake = await startFakeProvider({ apiKey: API_KEY, restToken: REST_TOKEN, pace: PACE });
  base = `http://localhost:${new URL(fake.url).port}/v1`;
  workspace = await tempDir('svc-emu-rr-ws-');
  const folders: Record<string, Record<string, string>> = {
    'chat-bun': { 'index.ts': BUN_CHAT },
    'chat-py': { 'main.py': PY_CHAT },
    weather: { 'index.ts': BUN_WEATHER },
    // snippet.json chooses replay from a cassette of its own: nothing recorded there, so every call misses.
    pinned: { 'index.ts': BUN_CHAT, 'snippet.json': JSON.stringify({ egress: { mode: 'replay', cassette: 'pinned-take' } }) },
    // snippet.json's matchers: the messages do not count, so another prompt still finds the recording.
    loose: { 'index.ts': BUN_CHAT, 'snippet.json': JSON.stringify({ egress: { match: { ignore_body_fields: ['messages'] } } }) },
  };
  for (const [name, files] of Object.entries(folders)) {
    await mkdir(join(workspace, 'snippets', name), { recursive: true });
    for (const [file, text] of Object.entries(files)) await writeFile(join(workspace, 'snippets', name, file), text);
  }
  core = await startTestCore({ workspace });
  for (const [name, value] of Object.entries({ OPENAI_API_KEY: API_KEY, WEATHER_TOKEN: REST_TOKEN, ECHO_SECRET }))
    expect((await core.call('PUT', `/v1/secrets/${name}`, { value })).status).toBeLessThan(300);
  const i = await core.call('PUT', '/v1/integrations/weather', {
    provider: 'http',
    base_url: fake.url,
    auth: { type: 'bearer', secret: 'WEATHER_TOKEN' },
  });
  expect(i.status, i.text).toBe(201);
  // One recording per snippet, with the provider up; then the provider goes: every replay below has nothing to reach.
  for (const name of ['chat-bun', 'chat-py', 'weather']) versionsBefore.set(name, await versionsOf(name));
  for (const [name, input, cassette] of [
    ['chat-bun', { base, prompt: 'Tell me about Paris' }, undefined],
    ['chat-py', { base, prompt: 'Tell me about Paris' }, undefined],
    ['weather', { city: 'Paris' }, undefined],
    ['loose', { base, prompt: 'Tell me about Paris' }, undefined],
    ['echo', { base, prompt: 'Tell me about Paris', echo: `${fake.url}/api/echo` }, 'echo'],
  ] as const) {
    const snippet = name === 'echo' ? 'chat-bun' : name;
    const written = nextCassetteWrite(snippet);
    recorded.set(name, await invoke(snippet, input, adminHeaders('record', cassette)));
    await written;
  }
  await fake.close();
}, 90_000);

afterAll(async () => {
  await core?.stop();
  await fake?.close().catch(() => {});
  if (workspace) await rm(workspace, { recursive: true, force: true });
});

describe('record, then replay with the provider gone', () => {
  it('the run headers are an admin power: without X-Emu-Admin → 403 forbidden', async () => {
    const tries: Record<string, string>[] = [
      { 'x-emu-egress-mode': 'replay' },
      { 'x-emu-cassette': 'other' },
      { 'x-emu-egress-mode': 'record', 'x-emu-admin': 'nope' },
    ];
    for (const h of tries) {
      const r = await core.call('POST', '/v1/invoke/chat-bun', { base, prompt: 'hi' }, { headers: h });
      expect(r.status, r.text).toBe(403);
      expect(r.json.code).toBe('forbidden');
    }
  });

  it.each(['chat-bun', 'chat-py'])('%s: the record run went out, and its call is in the workspace cassette', async (name) => {
    const run = recorded.get(name)!;
    expect(run.output.status, JSON.stringify(run.output)).toBe(200);
    expect(run.output.text).toContain('data: [DONE]');
    expect(run.record.egress).toMatchObject({ mode: 'record', source: 'run', cassette: 'default', calls: 1, recorded: 1, unmatched: 0 });
    const har = JSON.parse(await readFile(join(workspace, 'snippets', name, 'cassettes', 'default.har'), 'utf8'));
    expect(har.log.version).toBe('1.2');
    expect(har.log.entries.map((e: HarEntry) => e._svcEmu.invocation_id)).toContain(run.id);
  });

  it('an integration call is recorded too', () => {
    const run = recorded.get('weather')!;
    expect(run.output).toMatchObject({ ok: true, status: 200, body: { city: 'Paris' } });
    expect(run.record.egress).toMatchObject({ mode: 'record', calls: 1, recorded: 1 });
  });

  it('writing a cassette into the workspace makes no new version (the loader ignores cassettes/)', async () => {
    const name = 'weather';
    const before = versionsBefore.get(name)!;
    expect(await versionsOf(name)).toEqual(before);
    // An edit after the write is the next version: nothing came between.
    await writeFile(join(workspace, 'snippets', name, 'NOTES.md'), `recorded ${recorded.get(name)!.id}\n`);
    const after = await waitFor('the edit to load', async () => {
      const v = await versionsOf(name);
      return v.length > before.length && v;
    });
    expect(after).toEqual([...before, before[before.length - 1]! + 1]);
    // And the cassette is not part of the new version's files.
    const v = await core.call('GET', `/v1/snippets/${name}/versions/${after[after.length - 1]}`);
    expect(Object.keys(v.json.files).sort()).toEqual(['NOTES.md', 'index.ts']);
  });

  it("an integration's credential header is redacted on the tape whatever its value (hostAdded)", async () => {
    // A 3-character secret is below what the value search looks for: only the header's being host-added takes it out.
    expect((await core.call('PUT', '/v1/secrets/TINY', { value: 'k9z' })).status).toBeLessThan(300);
    const i = await core.call('PUT', '/v1/integrations/weather-h', {
      provider: 'http',
      base_url: fake.url,
      auth: { type: 'header', header: 'X-Api-Token', secret: 'TINY' },
    });
    expect(i.status, i.text).toBe(201);
    const run = await invoke('weather', { city: 'Paris', via: 'weather-h' }, adminHeaders('live')); // the provider is gone: no answer
    expect(run.output).toMatchObject({ ok: false });
    const [call] = await callsOf(run.id);
    expect(call!.request.headers).toContainEqual({ name: 'x-api-token', value: '[redacted]' });
    expect(call!._svcEmu.error).toBeTruthy();
  });

  it('a secret echoed in a body is recorded redacted', async () => {
    const run = recorded.get('echo')!;
    expect(run.output.echo).toBe(200);
    const calls = await callsOf(run.id);
    expect(calls).toHaveLength(2);
    const echo = calls[1]!;
    expect(echo.request.postData?.text).toContain('[secret ECHO_SECRET]');
    expect(echo.response.content.text).toContain('[secret ECHO_SECRET]');
    expect(echo._svcEmu.redacted).toContain('[secret ECHO_SECRET]');
  });

  it('with the provider stopped, replay gives the same output, each chunk at the recorded time (10%, or the loop’s own stall)', async () => {
    for (const name of ['chat-bun', 'chat-py']) {
      const rec = recorded.get(name)!;
      const { value: run, lagMs } = await withLoopLag(() => invoke(name, { base, prompt: 'Tell me about Paris' }, adminHeaders('replay')));
      if (name === 'chat-bun') expect(run.output.replayed).toBe('replayed');
      const { replayed: _r, ...same } = run.output;
      const { replayed: _o, ...orig } = rec.output;
      expect(same).toEqual(orig);
      expect(run.record.egress).toMatchObject({ mode: 'replay', source: 'run', replayed: 1, unmatched: 0 });
      expect(run.record.parity_warnings).toContain('egress: outbound calls replayed from cassette default (nothing went out)');
      const want = await chunkTimes(rec.id);
      const got = await chunkTimes(run.id);
      if (process.env.RR_TIMING) console.log(name, JSON.stringify({ want, got, lagMs }));
      expectOnPace(name, want, got, lagMs);
    }
  });

  it('fault rules act before the cassette: QA can break a replay on purpose (once, then it plays again)', async () => {
    const h = { key: null, headers: { 'x-emu-admin': core.admin } };
    const rule = await core.call(
      'POST',
      '/_emu/egress/faults',
      { host: 'localhost', action: { type: 'status', status: 503 }, times: 1 },
      h,
    );
    expect(rule.status, rule.text).toBe(201);
    const broken = await invoke('chat-bun', { base, prompt: 'Tell me about Paris' }, adminHeaders('replay'));
    expect(broken.output.status).toBe(503);
    expect(broken.record.egress).toMatchObject({ mode: 'replay', replayed: 0, unmatched: 0 });
    const again = await invoke('chat-bun', { base, prompt: 'Tell me about Paris' }, adminHeaders('replay'));
    expect(again.output.text).toBe(recorded.get('chat-bun')!.output.text);
  });

  it("snippet.json's egress.match reaches the player: an ignored body field does not count", async () => {
    const run = await invoke('loose', { base, prompt: 'Tell me about Lyon' }, adminHeaders('replay'));
    expect(run.output.text).toBe(recorded.get('loose')!.output.text);
    expect(run.record.egress).toMatchObject({ mode: 'replay', replayed: 1, unmatched: 0 });
  });

  it('the integration replays from its cassette', async () => {
    const run = await invoke('weather', { city: 'Paris' }, adminHeaders('replay'));
    expect(run.output).toEqual(recorded.get('weather')!.output);
    expect(run.record.egress).toMatchObject({ mode: 'replay', replayed: 1 });
    const miss = await invoke('weather', { city: 'Lyon' }, adminHeaders('replay'));
    expect(miss.output).toMatchObject({ ok: false, code: 'replay_no_match' });
    expect(miss.output.message).toMatch(/closest/);
    expect(miss.output.message).toMatch(/city/);
  });

  it('the replay speed (server setting) scales the waits', async () => {
    const set = await core.call('PUT', '/_emu/egress/mode', { replay_speed: 2 }, { key: null, headers: { 'x-emu-admin': core.admin } });
    expect(set.status, set.text).toBe(200);
    expect(set.json).toEqual({ mode: 'live', replay_speed: 2 });
    try {
      const rec = recorded.get('chat-bun')!;
      const { value: run, lagMs } = await withLoopLag(() =>
        invoke('chat-bun', { base, prompt: 'Tell me about Paris' }, adminHeaders('replay')),
      );
      expect(run.output.text).toBe(rec.output.text);
      const want = (await chunkTimes(rec.id)).map((t) => t / 2);
      const got = await chunkTimes(run.id);
      if (process.env.RR_TIMING) console.log('speed 2', JSON.stringify({ want, got, lagMs }));
      expectOnPace('at speed 2', want, got, lagMs);
    } finally {
      await core.call('PUT', '/_emu/egress/mode', { replay_speed: 1 }, { key: null, headers: { 'x-emu-admin': core.admin } });
    }
  });

  it('a changed request fails with a 502 egress_replay_no_match naming the difference', async () => {
    const run = await invoke('chat-bun', { base, prompt: 'Tell me about Lyon' }, adminHeaders('replay'));
    expect(run.output.status).toBe(502);
    expect(run.output.replayed).toBe('no-match');
    const problem = JSON.parse(run.output.text);
    expect(problem.code).toBe('egress_replay_no_match');
    expect(problem.detail).toMatch(/closest/);
    expect(problem.detail).toMatch(/messages/);
    expect(run.record.egress).toMatchObject({ mode: 'replay', replayed: 0, unmatched: 1 });
    const log = await core.call('GET', `/_emu/egress?invocation=${run.id}`, undefined, {
      key: null,
      headers: { 'x-emu-admin': core.admin },
    });
    expect(log.json.data[0].error).toBe(problem.detail);
  });

  it('an async job keeps the mode it was submitted with', async () => {
    const r = await core.call(
      'POST',
      '/v1/invoke/chat-bun',
      { base, prompt: 'Tell me about Paris' },
      {
        headers: { 'x-invoke-mode': 'async', ...adminHeaders('replay') },
      },
    );
    expect(r.status, r.text).toBe(202);
    const id = r.json.invocation_id as string;
    const done = await waitFor('the job to finish', async () => {
      const g = await core.call('GET', `/_emu/invocations/${id}`, undefined, { key: null, headers: { 'x-emu-admin': core.admin } });
      return g.json.status === 'succeeded' || g.json.status === 'failed' ? g.json : null;
    });
    expect(done.output.text).toBe(recorded.get('chat-bun')!.output.text);
    expect(done.egress).toMatchObject({ mode: 'replay', source: 'run', replayed: 1 });
  });

  it('precedence: the run > snippet.json > the server', async () => {
    // snippet.json (pinned): replay from its own cassette, which holds nothing → a miss saying so.
    const pinned = await invoke('pinned', { base, prompt: 'Tell me about Paris' });
    expect(pinned.record.egress).toMatchObject({ mode: 'replay', source: 'snippet', cassette: 'pinned-take', unmatched: 1 });
    expect(JSON.parse(pinned.output.text).detail).toMatch(/pinned-take/);
    // The run's header wins over snippet.json: live, so the call goes out (and finds nothing listening).
    const live = await invoke('pinned', { base, prompt: 'Tell me about Paris' }, adminHeaders('live'));
    expect(live.record.egress).toMatchObject({ mode: 'live', source: 'run', replayed: 0 });
    expect(live.output.status).toBe(502);
    // The server's mode applies when neither says.
    const set = await core.call('PUT', '/_emu/egress/mode', { mode: 'replay' }, { key: null, headers: { 'x-emu-admin': core.admin } });
    expect(set.json.mode).toBe('replay');
    try {
      const server = await invoke('chat-bun', { base, prompt: 'Tell me about Paris' });
      expect(server.record.egress).toMatchObject({ mode: 'replay', source: 'server', replayed: 1 });
      // snippet.json still wins over the server.
      const again = await invoke('pinned', { base, prompt: 'Tell me about Paris' });
      expect(again.record.egress).toMatchObject({ source: 'snippet', cassette: 'pinned-take' });
    } finally {
      await core.call('PUT', '/_emu/egress/mode', { mode: 'live' }, { key: null, headers: { 'x-emu-admin': core.admin } });
    }
    expect(core.emu.services.egressSessions.openCount()).toBe(0);
  });

  it('the cassette routes list, read, write (redacted again) and delete', async () => {
    const h = { key: null, headers: { 'x-emu-admin': core.admin } };
    const list = await core.call('GET', '/_emu/snippets/chat-bun/cassettes', undefined, h);
    expect(list.status, list.text).toBe(200);
    expect(list.json.data.map((c: { name: string }) => c.name).sort()).toEqual(['default', 'echo']);
    const one = await core.call('GET', '/_emu/snippets/chat-bun/cassettes/default', undefined, h);
    expect(one.status).toBe(200);
    // A cassette from elsewhere carrying this tenant's secret: written with it taken out.
    const doc = structuredClone(one.json);
    doc.log.entries[0].response.content.text = `${doc.log.entries[0].response.content.text}${API_KEY}`;
    doc.log.entries[0]._svcEmu.chunks.push({ t_ms: 900, bytes: API_KEY.length });
    const put = await core.call('PUT', '/_emu/snippets/chat-bun/cassettes/copy', doc, h);
    expect(put.status, put.text).toBe(200);
    const text = await readFile(put.json.path, 'utf8');
    expect(text).not.toContain(API_KEY);
    expect(text).toContain('[secret OPENAI_API_KEY]');
    const bad = await core.call('PUT', '/_emu/snippets/chat-bun/cassettes/bad', { log: { entries: 'no' } }, h);
    expect(bad.status).toBe(422);
    expect((await core.call('DELETE', '/_emu/snippets/chat-bun/cassettes/copy', undefined, h)).status).toBe(204);
    expect((await core.call('DELETE', '/_emu/snippets/chat-bun/cassettes/copy', undefined, h)).status).toBe(404);
  });

  it('no secret value in any cassette file or any egress_blob', async () => {
    const texts: string[] = [];
    for (const name of ['chat-bun', 'chat-py', 'weather', 'loose']) {
      const dir = join(workspace, 'snippets', name, 'cassettes');
      for (const f of await readdir(dir)) texts.push(await readFile(join(dir, f), 'utf8'));
    }
    const ids = (await core.call('GET', '/v1/invocations?limit=100')).json.data.map((i: { id: string }) => i.id) as string[];
    let blobs = 0;
    for (const id of ids) {
      const calls = await callsOf(id);
      if (calls.length) blobs++;
      texts.push(JSON.stringify(calls));
    }
    expect(blobs).toBeGreaterThanOrEqual(4);
    for (const text of texts) for (const secret of SECRETS) expect(text.includes(secret), `a secret in ${text.slice(0, 200)}`).toBe(false);
  });
});
