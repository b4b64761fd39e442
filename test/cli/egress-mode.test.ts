/**
 * The CLI's side of record and replay (issue 18, lane B): `svc-emu invoke NAME --egress-mode M [--cassette C]`
 * (the headers sent with the admin token the CLI holds), `svc-emu cassettes SNIPPET [--json]`, and serve's
 * `--egress-mode` / `--replay-speed` checked before anything starts. A snippet made over the API, so its
 * cassettes live under the data dir (`<data-dir>/cassettes/local/<snippet>/`). Real core, real Bun runner,
 * the project's fake provider on loopback.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { runCli, startCli, until } from '../helpers/cli';
import { startFakeProvider, type FakeProvider } from '../../fixtures/fake-openai/server';

const CODE = `export default async function handler(input) {
  const res = await fetch(input.url);
  return { status: res.status, body: await res.text() };
}
`;

const dirs: string[] = [];
const savedEnv = { ...process.env };
let core: TestCore;
let fake: FakeProvider;
let dd: string[];
let url: string;
/** The recording made in beforeAll (the provider is gone after it): its output. */
let recordedOutput: string;
let recordId: string;

beforeAll(async () => {
  const runtime = await tempDir('svc-emu-cores-');
  dirs.push(runtime);
  process.env.SVC_EMU_RUNTIME_DIR = runtime;
  for (const k of ['SVC_EMU_DATA_DIR', 'SVC_EMU_URL', 'SVC_EMU_ADMIN_TOKEN']) delete process.env[k];
  fake = await startFakeProvider();
  url = `http://localhost:${new URL(fake.url).port}/api/weather?city=Paris`;
  core = await startTestCore({ config: { coresDir: runtime } });
  dd = ['--data-dir', core.dataDir];
  expect((await core.call('POST', '/v1/snippets', { name: 'fetcher', runtime: 'bun' })).status).toBe(201);
  expect((await core.call('POST', '/v1/snippets/fetcher/versions', { code: CODE })).status).toBe(201);
  const rec = await runCli([
    'invoke',
    'fetcher',
    '--data',
    JSON.stringify({ url }),
    '--egress-mode',
    'record',
    '--cassette',
    'take1',
    '--json',
    ...dd,
  ]);
  expect(rec.code, rec.stdout + rec.stderr).toBe(0);
  const record = JSON.parse(rec.stdout);
  expect(record.output.status).toBe(401); // the fake's REST API wants its token: an answer all the same
  recordedOutput = JSON.stringify(record.output);
  recordId = record.id;
  await fake.close();
}, 60_000);

afterAll(async () => {
  await core?.stop();
  await fake?.close().catch(() => {});
  process.env = savedEnv;
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('invoke --egress-mode / --cassette', () => {
  it('record wrote the cassette under the data dir (a snippet made over the API)', async () => {
    expect(existsSync(join(core.dataDir, 'cassettes', 'local', 'fetcher', 'take1.har'))).toBe(true);
    // The recording run by its id: in a shuffled order the replay test may have run (and be the newest) already.
    const emu = await core.call('GET', `/_emu/invocations/${recordId}`, undefined, { key: null, headers: { 'x-emu-admin': core.admin } });
    expect(emu.json.egress).toMatchObject({ mode: 'record', source: 'run', cassette: 'take1', recorded: 1 });
  });

  it('replay from it with the provider gone: the same output', async () => {
    const r = await runCli([
      'invoke',
      'fetcher',
      '--data',
      JSON.stringify({ url }),
      '--egress-mode',
      'replay',
      '--cassette',
      'take1',
      '--json',
      ...dd,
    ]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const record = JSON.parse(r.stdout);
    expect(JSON.stringify(record.output)).toBe(recordedOutput);
    expect(record.parity_warnings).toContain('egress: outbound calls replayed from cassette take1 (nothing went out)');
  });

  it('a bad mode or cassette name is a usage error (exit 2) naming the fix', async () => {
    const bad = await runCli(['invoke', 'fetcher', '--egress-mode', 'tape', ...dd]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--egress-mode: live, record or replay');
    const name = await runCli(['invoke', 'fetcher', '--cassette', 'Bad Name', ...dd]);
    expect(name.code).toBe(2);
    expect(name.stderr).toContain('--cassette');
  });
});

describe('cassettes SNIPPET', () => {
  it('lists the cassettes, as a table and as JSON', async () => {
    const t = await runCli(['cassettes', 'fetcher', ...dd]);
    expect(t.code, t.stderr).toBe(0);
    expect(t.stdout).toMatch(/NAME\s+CALLS\s+RUNS/);
    expect(t.stdout).toMatch(/take1\s+1\s+1/);
    const j = await runCli(['cassettes', 'fetcher', '--json', ...dd]);
    expect(j.code).toBe(0);
    expect(JSON.parse(j.stdout)).toEqual([expect.objectContaining({ name: 'take1', entries: 1 })]);
    const none = await runCli(['cassettes', 'nosuch', ...dd]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('not_found');
  });
});

describe('serve', () => {
  it('--egress-mode and --replay-speed are checked before anything starts', async () => {
    const mode = await runCli(['serve', '--egress-mode', 'tape', '--data-dir', join(core.dataDir, 'never')]);
    expect(mode.code).toBe(2);
    expect(mode.stderr).toContain('--egress-mode: live, record or replay');
    const speed = await runCli(['serve', '--replay-speed', '-1', '--data-dir', join(core.dataDir, 'never')]);
    expect(speed.code).toBe(2);
    expect(speed.stderr).toContain('--replay-speed');
    expect(existsSync(join(core.dataDir, 'never'))).toBe(false);
  });

  it('--egress-mode replay --replay-speed 0 is the started core’s setting (and said at start)', async () => {
    const data = await tempDir('svc-emu-serve-mode-');
    dirs.push(data);
    const serve = startCli(
      ['serve', '--port', '0', '--spares', 'none', '--no-terminal', '--egress-mode', 'replay', '--replay-speed', '0', '--data-dir', data],
      data,
    );
    try {
      await until(() => serve.out.stdout.includes('Press Ctrl+C') || serve.out.stderr.includes('svc-emu:'), 'serve to start', 30_000);
      expect(serve.out.stdout, serve.out.stderr).toMatch(
        /Mode +replay \(outbound calls answered from cassettes, nothing goes out; speed 0\)/,
      );
      const gui = /GUI +(\S+)/.exec(serve.out.stdout)![1]!;
      const u = new URL(gui);
      const mode = await fetch(`${u.origin}/_emu/egress/mode`, { headers: { authorization: `Bearer ${u.searchParams.get('token')}` } });
      expect(await mode.json()).toEqual({ mode: 'replay', replay_speed: 0 });
    } finally {
      const stopped = await serve.stop();
      expect(stopped.code, stopped.stderr).toBe(0);
    }
  });
});
