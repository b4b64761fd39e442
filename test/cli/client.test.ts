/**
 * The client commands of the CLI (issue 4): `invoke`, `logs` and `deploy`, called in-process through
 * `main(argv, io)` against a core started in-process on a temp data dir (snippets really run). They find
 * the core through `<data-dir>/emulator.json` and act as the local tenant over /v1.
 */
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main, type CliIO } from '../../server/cli/main';
import { runCli } from '../helpers/cli';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';

const cli = (argv: string[]) => runCli(argv);

const invocationId = (stderr: string) => /invocation (inv_[0-9A-Za-z]+)/.exec(stderr)?.[1];

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function newDir(): Promise<string> {
  const d = await tempDir('svc-emu-client-');
  dirs.push(d);
  return d;
}

describe('with a running core', () => {
  let core: TestCore;
  let dd: string[];

  beforeAll(async () => {
    const dir = await newDir();
    core = await startTestCore({ dataDir: dir });
    dd = ['--data-dir', dir];
    const create = async (name: string, runtime: string, code: string) => {
      expect((await core.call('POST', '/v1/snippets', { name, runtime })).status).toBe(201);
      const v = await core.call('POST', `/v1/snippets/${name}/versions`, { code, max_memory_mb: 128 });
      expect(v.status, v.text).toBe(201);
    };
    const HELLO_V1 =
      'export default async function handler(input) {\n  console.log("hello log line", input.name)\n  return { hello: input.name ?? "world", nested: { n: 1 } }\n}\n';
    await create('hello', 'bun', HELLO_V1);
    await create('hello-deploy', 'bun', HELLO_V1);
    await create(
      'ticker',
      'bun',
      'export default async function* handler(input) {\n  yield { n: 1 }\n  await new Promise((r) => setTimeout(r, input.pause ?? 0))\n  yield { n: 2 }\n  return { ticks: 2 }\n}\n',
    );
    await create(
      'broken',
      'bun',
      'export default function handler(input) {\n  throw new Error("boom: " + (input.why ?? "no reason"))\n}\n',
    );
    await create(
      'pyhello',
      'python',
      'def handler(input):\n    print("from python", input.get("name"))\n    return {"msg": "hi " + input.get("name", "there")}\n',
    );
  }, 60_000);
  afterAll(async () => {
    await core?.stop();
  });

  it('invoke prints the output as pretty JSON on stdout and names the run on stderr; exit 0', async () => {
    const r = await cli(['invoke', 'hello', '--data', '{"name":"Ada"}', ...dd]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(JSON.stringify({ hello: 'Ada', nested: { n: 1 } }, null, 2) + '\n');
    expect(r.stderr).toMatch(/^invocation inv_[0-9A-Za-z]+ — hello v1, env none \(latest\), \d+ ms/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);

    // The run it names is the one that happened.
    const rec = await core.call('GET', `/v1/invocations/${invocationId(r.stderr)}`);
    expect(rec.json).toMatchObject({ snippet: 'hello', version: 1, outcome: 'success', output: { hello: 'Ada' } });

    // Without --data the input is {}; a Python snippet works the same.
    const py = await cli(['invoke', 'pyhello', ...dd]);
    expect(py.code, py.stderr).toBe(0);
    expect(JSON.parse(py.stdout)).toEqual({ msg: 'hi there' });
  });

  it('invoke --json prints the invocation record', async () => {
    const r = await cli(['invoke', 'hello', '--data', '{"name":"Bo"}', '--json', ...dd]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    const rec = JSON.parse(r.stdout);
    expect(rec).toMatchObject({
      snippet: 'hello',
      version: 1,
      env: null,
      status: 'succeeded',
      outcome: 'success',
      output: { hello: 'Bo' },
    });
    expect(rec.id).toMatch(/^inv_/);
    expect(rec.usage.duration_ms).toEqual(expect.any(Number));
  });

  it('invoke of a failing snippet prints the problem (code, detail, stack) and exits 1', async () => {
    const r = await cli(['invoke', 'broken', '--data', '{"why":"testing"}', ...dd]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('svc-emu: broken failed: handler_error: ');
    expect(r.stderr).toContain('boom: testing');
    expect(r.stderr).toMatch(/index\.ts:2/); // the stack, in the tenant's own file
    expect(r.stderr).toMatch(/invocation inv_[0-9A-Za-z]+ — broken v1, .*; logs: svc-emu logs inv_/);

    const json = await cli(['invoke', 'broken', '--json', ...dd]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ snippet: 'broken', outcome: 'handler_error', error: { code: 'handler_error' } });
  });

  it('logs ID prints the handler’s console output as is', async () => {
    const r = await cli(['invoke', 'hello', '--data', '{"name":"Lin"}', ...dd]);
    expect(r.code, r.stderr).toBe(0);
    const id = invocationId(r.stderr)!;
    const logs = await cli(['logs', id, ...dd]);
    expect(logs).toEqual({ code: 0, stdout: 'hello log line Lin\n', stderr: '' });

    const py = await cli(['invoke', 'pyhello', '--data', '{"name":"Py"}', ...dd]);
    const pyLogs = await cli(['logs', invocationId(py.stderr)!, ...dd]);
    expect(pyLogs.stdout).toBe('from python Py\n');

    const json = await cli(['logs', id, '--json', ...dd]);
    expect(JSON.parse(json.stdout)).toEqual({ invocation_id: id, logs: 'hello log line Lin\n', truncated: false });

    const missing = await cli(['logs', 'inv_doesnotexist000000000', ...dd]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/404 not_found/);
  });

  it('deploy then invoke --env dev runs that version; without --env the latest runs', async () => {
    // hello-deploy, not hello: the versions and deployments made here would change what the other tests' hello runs.
    const v2 = await core.call('POST', '/v1/snippets/hello-deploy/versions', { code: 'export default () => ({ version: 2 })' });
    expect(v2.status, v2.text).toBe(201);

    const d1 = await cli(['deploy', 'hello-deploy', '--version', '1', '--env', 'dev', ...dd]);
    expect(d1, d1.stderr).toEqual({ code: 0, stdout: 'deployed hello-deploy v1 to dev (nothing ran there before)\n', stderr: '' });

    const onDev = await cli(['invoke', 'hello-deploy', '--env', 'dev', '--data', '{"name":"Dev"}', ...dd]);
    expect(onDev.code, onDev.stderr).toBe(0);
    expect(JSON.parse(onDev.stdout)).toEqual({ hello: 'Dev', nested: { n: 1 } });
    expect(onDev.stderr).toMatch(/— hello-deploy v1, env dev, \d+ ms/);

    const latest = await cli(['invoke', 'hello-deploy', ...dd]);
    expect(JSON.parse(latest.stdout)).toEqual({ version: 2 });
    const pinned = await cli(['invoke', 'hello-deploy', '--version', '1', ...dd]);
    expect(JSON.parse(pinned.stdout)).toMatchObject({ hello: 'world' });
    expect(pinned.stderr).toMatch(/— hello-deploy v1, env none \(pinned\), \d+ ms/);

    const d2 = await cli(['deploy', 'hello-deploy', '--version', '2', '--env', 'dev', ...dd]);
    expect(d2.stdout).toBe('deployed hello-deploy v2 to dev (was v1)\n');
    const again = await cli(['deploy', 'hello-deploy', '--version', '2', '--env', 'dev', ...dd]);
    expect(again.stdout).toBe('deployed hello-deploy v2 to dev (was v2 already)\n');
    expect(JSON.parse((await cli(['invoke', 'hello-deploy', '--env', 'dev', ...dd])).stdout)).toEqual({ version: 2 });

    const json = await cli(['deploy', 'hello-deploy', '--version', '1', '--env', 'staging', '--json', ...dd]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ env: 'staging', version: 1 });

    // Failures from the core: a missing version, an unknown environment.
    const noVersion = await cli(['deploy', 'hello-deploy', '--version', '9', '--env', 'dev', ...dd]);
    expect(noVersion.code).toBe(1);
    expect(noVersion.stderr).toMatch(/404 not_found/);
    const noEnv = await cli(['invoke', 'hello-deploy', '--env', 'qa', ...dd]);
    expect(noEnv.code).toBe(1);
    expect(noEnv.stderr).toMatch(/^svc-emu: invoke hello-deploy: .*\(404 not_found\)/);
  });

  it('an unknown snippet exits 1 with the reason', async () => {
    const unknown = await cli(['invoke', 'nope', ...dd]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^svc-emu: invoke nope: .*nope.*\(404 not_found\)\n$/);
    const streamed = await cli(['invoke', 'nope', '--stream', ...dd]);
    expect(streamed.code).toBe(1);
    expect(streamed.stderr).toMatch(/\(404 not_found\)/);
  });

  it('--stream prints each chunk as it arrives (a JSON line each), then the output; --json prints every event', async () => {
    const writes: { at: number; text: string }[] = [];
    const io: CliIO = {
      stdout: (t) => void writes.push({ at: performance.now(), text: t }),
      stderr: () => {},
      cwd: '/',
      untilSignal: () => new Promise(() => {}),
    };
    expect(await main(['invoke', 'ticker', '--stream', '--data', '{"pause":500}', ...dd], io)).toBe(0);
    expect(writes.map((w) => w.text)).toEqual(['{"n":1}\n', '{"n":2}\n', '{\n  "ticks": 2\n}\n']);
    expect(writes[1]!.at - writes[0]!.at).toBeGreaterThanOrEqual(400);

    const j = await cli(['invoke', 'ticker', '--stream', '--json', ...dd]);
    expect(j.code).toBe(0);
    const events = j.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(events.map((e) => [e.id, e.event])).toEqual([
      [1, 'start'],
      [2, 'chunk'],
      [3, 'chunk'],
      [4, 'result'],
    ]);

    const failed = await cli(['invoke', 'broken', '--stream', ...dd]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/svc-emu: broken failed: handler_error: boom/);
  });

  it('--async queues the run and prints where to read it; the job then succeeds', async () => {
    const r = await cli(['invoke', 'hello', '--async', '--version', '1', '--data', '{"name":"later"}', '--json', ...dd]);
    expect(r.code, r.stderr).toBe(0);
    const queued = JSON.parse(r.stdout) as { invocation_id: string; status: string; status_url: string };
    expect(queued.status).toBe('queued');
    expect(queued.status_url).toBe(`/v1/invocations/${queued.invocation_id}`);
    let rec = (await core.call('GET', queued.status_url)).json;
    for (let i = 0; i < 200 && rec.status !== 'succeeded' && rec.status !== 'failed'; i++) {
      await new Promise((res) => setTimeout(res, 25));
      rec = (await core.call('GET', queued.status_url)).json;
    }
    expect(rec).toMatchObject({ status: 'succeeded', mode: 'async', attempts: 1, output: { hello: 'later' } });
  });

  it('usage errors exit 2 even with a core running, and nothing runs', async () => {
    const before = (await core.call('GET', '/v1/invocations')).json.data.length;
    for (const argv of [
      ['invoke', 'hello', '--data', '[1]'],
      ['invoke', 'hello', '--data', 'null'],
      ['invoke', 'hello', '--data', '{not json'],
      ['invoke', 'hello', '--async', '--stream'],
    ]) {
      const r = await cli([...argv, ...dd]);
      expect(r.code, argv.join(' ')).toBe(2);
    }
    expect((await core.call('GET', '/v1/invocations')).json.data.length).toBe(before);
  });
});

describe('arguments are checked before any network call (exit 2 on a data dir with no core)', () => {
  const cases: [string[], RegExp][] = [
    [['invoke', 'hello', '--data', '[1]'], /--data: must be a JSON object \(the handler's input\), got an array/],
    [['invoke', 'hello', '--data', '"x"'], /--data: must be a JSON object .*got a string/],
    [['invoke', 'hello', '--data', '{'], /--data: not JSON/],
    [['invoke'], /usage: svc-emu invoke NAME/],
    [['invoke', 'a', 'b'], /unexpected argument 'b'/],
    [['invoke', 'Bad_Name'], /NAME: 'Bad_Name' is not a snippet name/],
    [['invoke', 'hello', '--version', '0'], /--version: must be a version number/],
    [['invoke', 'hello', '--version', 'x'], /--version: must be a version number/],
    [['invoke', 'hello', '--env', 'Prod!'], /--env: 'Prod!' is not an environment name/],
    [['invoke', 'hello', '--async', '--stream'], /--async and --stream: choose one mode/],
    [
      ['invoke', 'hello', '--port', '1'],
      /^svc-emu: unknown flag --port for `svc-emu invoke`; flags: --data JSON, --env ENV, --version N, --async, --stream/,
    ],
    [['logs', '--follow', 'inv_x'], /logs --follow takes no ID/],
    [['logs', '--limit', '0'], /--limit: an integer from 1 to 1000, not '0'/],
    [['logs', '--outcome', 'ok'], /--outcome: one of success, handler_error, timeout, oom_killed, cancelled, failed; not 'ok'/],
    [['logs', 'inv_x', '--snippet', 'hello'], /logs ID takes no --snippet/],
    [['logs', 'hello'], /ID: 'hello' is not an invocation id/],
    [
      ['logs', 'inv_x', '--env', 'dev'],
      /unknown flag --env for `svc-emu logs`; flags: --snippet NAME, --outcome OUTCOME, --limit N, --follow/,
    ],
    [['deploy', 'hello', '--env', 'dev'], /deploy needs --version V/],
    [['deploy', 'hello', '--version', '1'], /deploy needs --env E/],
    [['deploy', '--version', '1', '--env', 'dev'], /usage: svc-emu deploy NAME --version V --env E/],
    [
      ['deploy', 'hello', '--version', '1', '--env', 'dev', '--data', '{}'],
      /unknown flag --data for `svc-emu deploy`; flags: --env ENV, --version N, --data-dir DIR, --json/,
    ],
    [['invoke', 'hello', '--bogus'], /unknown flag --bogus for `svc-emu invoke`/],
    [['invoke', 'hello', '--env'], /flag --env needs a value: --env ENV/],
    [['invoke', 'hello', '--async=yes'], /flag --async takes no value: --async, not --async=yes/],
  ];
  it.each(cases)('%j', async (argv, message) => {
    const dir = await newDir();
    const r = await cli([...argv, '--data-dir', dir]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });
});

describe('no core running', () => {
  it('exit 1 with a clear message: no data dir, an empty one, a stale emulator.json', async () => {
    const dir = await newDir();
    const stale = await newDir();
    // The lock of a core that is gone (a pid that cannot be alive).
    await writeFile(
      join(stale, 'emulator.json'),
      JSON.stringify({
        kind: 'core',
        pid: 2 ** 22 + 7,
        pid_start: null,
        port: 1,
        url: 'http://127.0.0.1:1',
        admin_token: 'emu_x',
        started_at: new Date().toISOString(),
        version: '0',
      }),
    );
    for (const d of [join(dir, 'missing'), dir, stale]) {
      for (const argv of [
        ['invoke', 'hello'],
        ['logs', 'inv_abc'],
        ['deploy', 'hello', '--version', '1', '--env', 'dev'],
      ]) {
        const r = await cli([...argv, '--data-dir', d]);
        expect(r.code, `${argv.join(' ')} on ${d}`).toBe(1);
        expect(r.stdout).toBe('');
        expect(r.stderr).toContain(`svc-emu: no emulator is running on ${d}: start it with \`npm start\` or \`svc-emu serve\``);
      }
    }
    const json = await cli(['invoke', 'hello', '--json', '--data-dir', dir]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ code: 'no_emulator', data_dir: dir, detail: expect.any(String) });
    expect(json.stderr).toBe('');
  });

  it('a core that stopped: exit 1 with the same message', async () => {
    const dir = await newDir();
    const core = await startTestCore({ dataDir: dir });
    expect((await cli(['invoke', 'nothing-here', '--data-dir', dir])).stderr).toMatch(/404 not_found/);
    await core.stop();
    const r = await cli(['invoke', 'hello', '--data-dir', dir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`no emulator is running on ${dir}`);
  });
});
