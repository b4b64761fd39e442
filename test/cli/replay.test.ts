/**
 * `svc-emu invoke --replay ID [--data JSON] [--mode M]` (server/cli/client.ts): runs an invocation again
 * with its snippet, version, env, mode and X-Emu-Limits overrides, and its stored input (or --data); a
 * clear failure when the input was not kept or the invocation is unknown. In-process `main(argv, io)`
 * against a real core on a temp data dir (Bun really runs).
 */
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli';
import { operations } from '../../contract';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';

const cli = (argv: string[]) => runCli(argv);

const ECHO = `export default async function handler(input) {
  return { input, version: Number(process.env.SVC_VERSION) };
}`;
const V2 = `export default async function handler(input) { return { v: 2, input }; }`;
const TICKER = `export default async function* handler(input) { for (let i = 0; i < (input.n ?? 2); i++) yield { i }; return { n: input.n }; }`;

let core: TestCore;
let dir: string;
let dd: string[];

beforeAll(async () => {
  dir = await tempDir('svc-emu-replay-');
  core = await startTestCore({ dataDir: dir });
  dd = ['--data-dir', dir];
  for (const [name, code] of [
    ['echo', ECHO],
    ['echo', V2],
    ['ticker', TICKER],
  ] as const) {
    if (code !== V2) expect((await core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
    const v = await core.call('POST', `/v1/snippets/${name}/versions`, { code });
    expect(v.status, v.text).toBe(201);
  }
  // echo: v1 runs in dev, v2 is the latest
  expect((await core.call('PUT', '/v1/snippets/echo/environments/dev', { version: 1 })).status).toBe(200);
}, 60_000);
afterAll(async () => {
  await core?.stop();
  await rm(dir, { recursive: true, force: true });
});

const view = (id: string) => core.client.call(operations.emuGetInvocation, { params: { id } });

describe('svc-emu invoke --replay', () => {
  it('runs the same snippet, version, env and overrides with the stored input; --json gives the new record', async () => {
    const first = await core.call(
      'POST',
      '/v1/invoke/echo?env=dev',
      { name: 'Ada', deep: { list: [1, 2] } },
      {
        headers: { 'X-Emu-Limits': 'timeout_ms=7000', 'X-Emu-Admin': core.admin },
      },
    );
    expect(first.status, first.text).toBe(200);
    const id = first.headers.get('x-invocation-id')!;

    const r = await cli(['invoke', '--replay', id, ...dd]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(first.json);
    expect(r.stderr).toContain(`replaying ${id}: echo v1 env dev, sync, overrides timeout_ms=7000`);
    const newId = /invocation (inv_[0-9A-Za-z]+)/.exec(r.stderr)?.[1];
    expect(newId).toBeTruthy();
    expect(newId).not.toBe(id);
    const again = await view(newId!);
    expect({ version: again.version, env: again.env, mode: again.mode, input: again.input, overrides: again.overrides }).toEqual({
      version: 1,
      env: 'dev',
      mode: 'sync',
      input: { name: 'Ada', deep: { list: [1, 2] } },
      overrides: { timeout_ms: 7000 },
    });
    expect(again.limits.timeout_ms).toBe(7000);

    const j = await cli(['invoke', '--replay', id, '--json', ...dd]);
    expect(j.code).toBe(0);
    const rec = JSON.parse(j.stdout) as { id: string; version: number; output: unknown };
    expect(rec.id).not.toBe(id);
    expect(rec.version).toBe(1);
    expect(rec.output).toEqual(first.json);
  });

  it('--data replaces the input, --mode the mode', async () => {
    const first = await core.call('POST', '/v1/invoke/ticker', { n: 2 });
    const id = first.headers.get('x-invocation-id')!;
    const r = await cli(['invoke', '--replay', id, '--data', '{"n":3}', '--mode', 'stream', ...dd]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n').slice(0, 3)).toEqual(['{"i":0}', '{"i":1}', '{"i":2}']);
    expect(r.stderr).toContain('stream');
    // and a stream run replays as a stream by itself
    const streamed = /invocation (inv_[0-9A-Za-z]+) — streamed/.exec(r.stderr)?.[1];
    expect(streamed).toBeTruthy();
    expect((await view(streamed!)).input).toEqual({ n: 3 });
    const s = await cli(['invoke', '--replay', streamed!, ...dd]);
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).toContain('{"i":2}');
  });

  it('an async run replays async, with its callback_url back in the input', async () => {
    const cb = `${core.url}/_emu/inbox/replay`;
    const first = await core.call(
      'POST',
      '/v1/invoke/echo?version=2',
      { x: 1, callback_url: cb },
      { headers: { 'X-Invoke-Mode': 'async' } },
    );
    expect(first.status).toBe(202);
    const id = first.json.invocation_id as string;
    const r = await cli(['invoke', '--replay', id, '--json', ...dd]);
    expect(r.code, r.stderr).toBe(0);
    const accepted = JSON.parse(r.stdout) as { invocation_id: string; status: string };
    expect(accepted.status).toBe('queued');
    const again = await view(accepted.invocation_id);
    expect(again.mode).toBe('async');
    expect(again.version).toBe(2);
    expect(again.input).toEqual({ x: 1 });
    expect(again.callback?.url).toBe(cb);
  });

  it('says clearly when the input was not kept, or the invocation is unknown; usage errors exit 2', async () => {
    const big = await core.call('POST', '/v1/invoke/echo?version=2', { s: 'x'.repeat(70 * 1024) });
    const id = big.headers.get('x-invocation-id')!;
    const r = await cli(['invoke', '--replay', id, ...dd]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('was over 64 KiB of JSON, so it was not kept: give one with --data JSON');
    const ok = await cli(['invoke', '--replay', id, '--data', '{"s":"short"}', ...dd]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual({ v: 2, input: { s: 'short' } });

    const unknown = await cli(['invoke', '--replay', 'inv_doesnotexist', ...dd]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('invocation inv_doesnotexist is unknown');
    const unknownJson = await cli(['invoke', '--replay', 'inv_doesnotexist', '--json', ...dd]);
    expect(unknownJson.code).toBe(1);
    const lines = `${unknownJson.stdout}${unknownJson.stderr}`.trim().split('\n');
    expect(JSON.parse(lines[lines.length - 1]!)).toMatchObject({ code: 'not_found' });

    for (const [argv, says] of [
      [['invoke', '--replay', 'nope'], "--replay: 'nope' is not an invocation id"],
      [['invoke', 'echo', '--replay', id], 'takes no NAME'],
      [['invoke', '--replay', id, '--env', 'dev'], 'drop --env/--version'],
      [['invoke', '--replay', id, '--mode', 'fast'], '--mode: must be sync, async or stream'],
      [['invoke', '--replay', id, '--mode', 'sync', '--stream'], 'choose one mode'],
    ] as const) {
      const u = await cli([...argv, ...dd]);
      expect(u.code, argv.join(' ')).toBe(2);
      expect(u.stderr, argv.join(' ')).toContain(says);
    }
  });
});
