/**
 * The CLI for humans and scripts (issue 17): `init` (templates that run at once in a watched workspace),
 * `list`, `invocations`, `logs` (the last N, and `--follow` as runs end), `--json` errors on stdout, and
 * bad flags named with their fix. In-process `main(argv, io)` against a real core on a temp data dir that
 * watches a temp workspace; snippets really run (Bun, Python, and the agent templates against the
 * project's fake OpenAI-compatible provider).
 */
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { runCli, startCli, until } from '../helpers/cli';
import { startFakeProvider, type FakeProvider } from '../../fixtures/fake-openai/server';

const dirs: string[] = [];
const savedEnv = { ...process.env };
let core: TestCore;
let ws: string;
let dd: string[];

beforeAll(async () => {
  // A private list of running emulators, so nothing of this machine's (or another test's) is found.
  const runtime = await tempDir('svc-emu-cores-');
  dirs.push(runtime);
  process.env.SVC_EMU_RUNTIME_DIR = runtime;
  for (const k of ['SVC_EMU_DATA_DIR', 'SVC_EMU_URL', 'SVC_EMU_ADMIN_TOKEN']) delete process.env[k];
  ws = await tempDir('svc-emu-ws-');
  dirs.push(ws);
  core = await startTestCore({ workspace: ws, config: { coresDir: runtime } });
  dd = ['--data-dir', core.dataDir];
}, 60_000);

afterAll(async () => {
  await core?.stop();
  process.env = savedEnv;
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** The snippet's latest version once the loader has made it (the workspace is watched). */
async function loaded(name: string, version = 1): Promise<void> {
  await until(async () => {
    const r = await core.call('GET', `/v1/snippets/${name}`);
    return r.status === 200 && (r.json as { latest_version: number }).latest_version >= version;
  }, `${name} v${version} loaded from the workspace`);
}

describe('init', () => {
  it('bun and python hello: written into DIR/snippets/NAME, loaded by the watching core at once, and they run', async () => {
    const bun = await runCli(['init', ws, '--template', 'hello', ...dd]);
    expect(bun.code, bun.stderr).toBe(0);
    expect(bun.stdout).toContain('snippets/hello/index.ts');
    expect(bun.stdout).toContain('snippets/hello/snippet.json');
    const limits = JSON.parse(await readFile(join(ws, 'snippets', 'hello', 'snippet.json'), 'utf8'));
    expect(limits).toMatchObject({ runtime: 'bun', max_memory_mb: 128 });

    const py = await runCli(['init', ws, '--runtime', 'python', '--json']);
    expect(py.code, py.stdout).toBe(0);
    expect(JSON.parse(py.stdout)).toMatchObject({
      name: 'hello-python',
      runtime: 'python',
      template: 'hello',
      files: ['snippets/hello-python/main.py', 'snippets/hello-python/snippet.json'],
    });

    await loaded('hello');
    await loaded('hello-python');
    const a = await runCli(['invoke', 'hello', '--data', '{"name":"Ada"}', ...dd]);
    expect(a.code, a.stderr).toBe(0);
    expect(JSON.parse(a.stdout)).toEqual({ message: 'Hello, Ada!' });
    expect(a.stderr).toMatch(/hello v1, env none \(latest\)/);
    const dev = await runCli(['invoke', 'hello', '--env', 'dev', ...dd]); // the loader deployed it to dev
    expect(dev.stderr).toMatch(/hello v1, env dev/);
    const p = await runCli(['invoke', 'hello-python', '--data', '{"name":"Lin"}', ...dd]);
    expect(p.code, p.stderr).toBe(0);
    expect(JSON.parse(p.stdout)).toEqual({ message: 'Hello, Lin!' });
  });

  it('refuses to overwrite: exit 1, nothing written, --json the error on stdout', async () => {
    const dir = await tempDir('svc-emu-init-');
    dirs.push(dir);
    expect((await runCli(['init', dir, '--name', 'twice'])).code).toBe(0);
    const file = join(dir, 'snippets', 'twice', 'index.ts');
    await writeFile(file, '// mine\nexport default () => ({})\n');
    const again = await runCli(['init', dir, '--name', 'twice']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/snippets\/twice already exists: nothing was written/);
    expect(await readFile(file, 'utf8')).toBe('// mine\nexport default () => ({})\n');
    const json = await runCli(['init', dir, '--name', 'twice', '--json']);
    expect(json.code).toBe(1);
    expect(json.stderr).toBe('');
    expect(JSON.parse(json.stdout)).toMatchObject({ code: 'exists', detail: expect.stringMatching(/already exists/) });
    // init with no DIR writes into the current folder
    const here = await runCli(['init', '--name', 'in-cwd'], dir);
    expect(here.code, here.stderr).toBe(0);
    expect(existsSync(join(dir, 'snippets', 'in-cwd', 'index.ts'))).toBe(true);
    expect(here.stdout).toMatch(/No running emulator watches/);
  });

  it('bad template, runtime or name: exit 2 naming the allowed values', async () => {
    const dir = await tempDir('svc-emu-init-');
    dirs.push(dir);
    const cases: [string[], RegExp][] = [
      [['--template', 'crewai'], /--template: hello, mastra-agent or langgraph-agent, not 'crewai'/],
      [['--runtime', 'ruby'], /--runtime: bun or python, not 'ruby'/],
      [
        ['--template', 'mastra-agent', '--runtime', 'python'],
        /mastra-agent is a Bun snippet: drop --runtime python, or use --template langgraph-agent/,
      ],
      [['--name', 'Bad_Name'], /--name: 'Bad_Name' is not a snippet name/],
      [['--runtime'], /flag --runtime needs a value: --runtime bun\|python/],
    ];
    for (const [argv, message] of cases) {
      const r = await runCli(['init', dir, ...argv]);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
      const j = await runCli(['init', dir, ...argv, '--json']);
      expect(j.code).toBe(2);
      expect(JSON.parse(j.stdout)).toMatchObject({ code: 'usage', detail: expect.stringMatching(message) });
    }
    expect(existsSync(join(dir, 'snippets'))).toBe(false);
  });

  it('mastra-agent and langgraph-agent load, and run against an OpenAI-compatible provider with their tool', async () => {
    let provider: FakeProvider | undefined;
    try {
      provider = await startFakeProvider();
      const port = new URL(provider.url).port;
      for (const [name, value] of Object.entries({
        OPENAI_API_KEY: provider.apiKey,
        OPENAI_BASE_URL: `http://localhost:${port}/v1`,
        OPENAI_MODEL: 'fake-model',
      })) {
        expect((await core.call('PUT', `/v1/secrets/${name}`, { value })).status).toBeLessThan(300);
      }
      for (const template of ['mastra-agent', 'langgraph-agent']) {
        const r = await runCli(['init', ws, '--template', template, ...dd]);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toContain('OPENAI_API_KEY');
        expect(JSON.parse(await readFile(join(ws, 'snippets', template, 'snippet.json'), 'utf8'))).toMatchObject({ max_memory_mb: 512 });
      }
      for (const template of ['mastra-agent', 'langgraph-agent']) {
        await loaded(template);
        const r = await runCli(['invoke', template, '--data', '{"prompt":"count the words of: one two three"}', '--json', ...dd]);
        expect(r.code, r.stdout).toBe(0);
        const record = JSON.parse(r.stdout);
        expect(record).toMatchObject({ snippet: template, outcome: 'success' });
        expect(record.output.tool_calls).toEqual([{ tool: expect.stringMatching(/count.?words/i), args: { text: expect.any(String) } }]);
        expect(record.output.answer).toMatch(/Tool said: .*words/);
      }
    } finally {
      await provider?.close();
    }
  }, 120_000);
});

describe('list, invocations, logs', () => {
  beforeAll(async () => {
    for (const [name, code] of [
      ['talker', 'export default async function handler(input) {\n  console.log("talker says", input.n)\n  return { n: input.n }\n}\n'],
      [
        'failer',
        'export default async function handler(input) {\n  console.log("about to fail", input.n)\n  throw new Error("nope " + input.n)\n}\n',
      ],
    ]) {
      expect((await core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
      expect((await core.call('POST', `/v1/snippets/${name}/versions`, { code })).status).toBe(201);
    }
    expect(
      (
        await core.call('POST', '/v1/snippets/talker/versions', {
          code: 'export default async (i) => { console.log("v2", i.n); return { v: 2 } }\n',
        })
      ).status,
    ).toBe(201);
    expect((await core.call('PUT', '/v1/snippets/talker/environments/prod', { version: 1 })).status).toBe(200);
    expect((await core.call('PUT', '/v1/snippets/talker/environments/dev', { version: 2 })).status).toBe(200);
    for (let n = 1; n <= 3; n++) {
      expect((await core.call('POST', '/v1/invoke/talker?env=prod', { n })).status).toBe(200);
      expect((await core.call('POST', '/v1/invoke/failer', { n })).status).toBe(500);
    }
  }, 60_000);

  it('list: every snippet with its runtime, latest version and what runs where; --json the records', async () => {
    const r = await runCli(['list', ...dd]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+RUNTIME\s+LATEST\s+ENVIRONMENTS$/);
    expect(lines.find((l) => l.startsWith('talker '))).toMatch(/^talker\s+bun\s+v2\s+dev v2, prod v1$/);
    expect(lines.find((l) => l.startsWith('failer '))).toMatch(/^failer\s+bun\s+v1\s+—$/);
    const j = await runCli(['list', '--json', ...dd]);
    const talker = (JSON.parse(j.stdout).data as { name: string }[]).find((s) => s.name === 'talker');
    expect(talker).toMatchObject({ runtime: 'bun', latest_version: 2, deployments: { dev: 2, prod: 1 } });
  });

  it('invocations: newest first, filtered by snippet and outcome, --limit; --json the records', async () => {
    const all = await runCli(['invocations', '--snippet', 'talker', ...dd]);
    expect(all.code, all.stderr).toBe(0);
    const rows = all.stdout.trim().split('\n');
    expect(rows[0]).toMatch(/^ID\s+SNIPPET\s+VERSION\s+ENV\s+MODE\s+OUTCOME\s+DURATION\s+CREATED$/);
    expect(rows.slice(1)).toHaveLength(3);
    for (const row of rows.slice(1)) expect(row).toMatch(/^inv_\w+\s+talker\s+v1\s+prod\s+sync\s+success\s+\d+ ms\s+\d{4}-/);

    const failed = await runCli(['invocations', '--snippet', 'failer', '--outcome', 'handler_error', '--limit', '2', '--json', ...dd]);
    const data = JSON.parse(failed.stdout).data as { snippet: string; outcome: string; error: { message: string } }[];
    expect(data).toHaveLength(2);
    expect(data.map((d) => [d.snippet, d.outcome, d.error.message])).toEqual([
      ['failer', 'handler_error', 'nope 3'],
      ['failer', 'handler_error', 'nope 2'],
    ]);
    const none = await runCli(['invocations', '--snippet', 'talker', '--outcome', 'timeout', ...dd]);
    expect(none).toMatchObject({ code: 0, stdout: '' });
    expect(none.stderr).toMatch(/no invocations of talker with outcome timeout/);
  });

  it('logs without an ID: the last N invocations’ logs, oldest first, each under a header', async () => {
    const r = await runCli(['logs', '--snippet', 'failer', '--limit', '2', ...dd]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^── inv_\w+ {2}failer v1 · no env · sync · handler_error · \d+ ms\n {3}handler_error: nope 2\nabout to fail 2\n── inv_\w+ {2}failer v1 · no env · sync · handler_error · \d+ ms\n {3}handler_error: nope 3\nabout to fail 3\n$/,
    );
    const j = await runCli(['logs', '--snippet', 'talker', '--limit', '1', '--json', ...dd]);
    const lines = j.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ invocation: { snippet: 'talker', outcome: 'success' }, logs: 'talker says 3\n', truncated: false });
  });

  it('logs --follow prints every new invocation’s logs as it ends, filters by snippet and outcome, stops on Ctrl+C', async () => {
    // Snippets of its own: the tests of this file run in any order.
    for (const [name, code] of [
      [
        'tail-talker',
        'export default async function handler(input) {\n  console.log("talker says", input.n)\n  return { n: input.n }\n}\n',
      ],
      [
        'tail-failer',
        'export default async function handler(input) {\n  console.log("about to fail", input.n)\n  throw new Error("nope " + input.n)\n}\n',
      ],
    ]) {
      expect((await core.call('POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
      expect((await core.call('POST', `/v1/snippets/${name}/versions`, { code })).status).toBe(201);
    }
    expect((await core.call('PUT', '/v1/snippets/tail-talker/environments/prod', { version: 1 })).status).toBe(200);
    const every = startCli(['logs', '--follow', ...dd]);
    const talkerOnly = startCli(['logs', '--follow', '--snippet', 'tail-talker', ...dd]);
    const failures = startCli(['logs', '--follow', '--outcome', 'handler_error', '--json', ...dd]);
    for (const f of [every, talkerOnly, failures])
      await until(() => f.out.stderr.includes('following the invocations of'), 'follow to open');

    expect((await core.call('POST', '/v1/invoke/tail-talker?env=prod', { n: 41 })).status).toBe(200);
    expect((await core.call('POST', '/v1/invoke/tail-failer', { n: 42 })).status).toBe(500);
    await until(() => every.out.stdout.includes('about to fail 42'), 'the failure in the unfiltered follow');
    await until(() => failures.out.stdout.includes('about to fail 42'), 'the failure in the outcome-filtered follow');
    await until(() => talkerOnly.out.stdout.includes('talker says 41'), 'talker in the snippet-filtered follow');

    const all = await every.stop();
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toMatch(/── inv_\w+ {2}tail-talker v1 · prod · sync · success · \d+ ms\ntalker says 41\n/);
    expect(all.stdout).toMatch(
      /── inv_\w+ {2}tail-failer v1 · no env · sync · handler_error · \d+ ms\n {3}handler_error: nope 42\nabout to fail 42\n/,
    );
    const talker = await talkerOnly.stop();
    expect(talker.stdout).not.toContain('tail-failer');
    const failed = await failures.stop();
    const events = failed.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(events).toEqual([
      {
        event: 'invocation.finished',
        invocation: expect.objectContaining({ snippet: 'tail-failer', outcome: 'handler_error' }),
        logs: 'about to fail 42\n',
        truncated: false,
      },
    ]);
  });

  it('logs --follow says when a stream starts, before it ends', async () => {
    expect((await core.call('POST', '/v1/snippets', { name: 'slowstream', runtime: 'bun' })).status).toBe(201);
    const code =
      'export default async function* handler(input) {\n  console.log("streaming")\n  yield { n: 1 }\n  await new Promise((r) => setTimeout(r, input.ms))\n  yield { n: 2 }\n}\n';
    expect((await core.call('POST', '/v1/snippets/slowstream/versions', { code })).status).toBe(201);
    const f = startCli(['logs', '--follow', '--snippet', 'slowstream', ...dd]);
    await until(() => f.out.stderr.includes('following the invocations of'), 'follow to open');
    const run = core.call('POST', '/v1/invoke/slowstream', { ms: 1500 }, { headers: { 'x-invoke-mode': 'stream' } });
    await until(() => f.out.stdout.match(/^▶ {2}inv_\w+ {2}slowstream v1 · no env · stream · running\n$/), 'the start line');
    expect((await run).status).toBe(200);
    await until(() => f.out.stdout.includes('streaming\n'), 'the end and its logs');
    expect((await f.stop()).stdout).toMatch(/── inv_\w+ {2}slowstream v1 · no env · stream · success/);
  });
});

describe('errors and flags', () => {
  it('--json: every error is one JSON object {code, detail} on stdout, stderr empty, exit non-zero', async () => {
    const missing = await tempDir('svc-emu-none-');
    dirs.push(missing);
    const cases: [string[], number, string][] = [
      [['list', 'extra'], 2, 'usage'],
      [['list', '--bogus'], 2, 'usage'],
      [['invocations', '--outcome', 'nah'], 2, 'usage'],
      [['frobnicate'], 2, 'usage'],
      [[], 2, 'usage'],
      [['list', '--data-dir', missing], 1, 'no_emulator'],
      [['logs', 'inv_nothere', ...dd], 1, 'not_found'],
      [['tenant', 'limits', 'ghost', '--max-memory-mb', '5', ...dd], 1, 'not_found'],
    ];
    for (const [argv, exit, code] of cases) {
      const r = await runCli([...argv, '--json']);
      expect(r.code, argv.join(' ')).toBe(exit);
      expect(r.stderr, argv.join(' ')).toBe('');
      const lines = r.stdout.trim().split('\n');
      expect(lines, argv.join(' ')).toHaveLength(1);
      expect(JSON.parse(lines[0]!), argv.join(' ')).toMatchObject({ code, detail: expect.any(String) });
    }
  });

  it('bad flags name the flag and the fix, exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [['list', '--foo'], /^svc-emu: unknown flag --foo for `svc-emu list`; flags: --data-dir DIR, --json\n/],
      [['list', '--snippet', 'x'], /unknown flag --snippet for `svc-emu list`; flags: --data-dir DIR, --json/],
      [['invocations', '--limit'], /flag --limit needs a value: --limit N/],
      [['invocations', '--data-dir', '--snippet'], /flag --data-dir needs a value: --data-dir DIR \(or --data-dir=--snippet\)/],
      [['invocations', '--json=yes'], /flag --json takes no value: --json, not --json=yes/],
      [['invocations', '--outcome', 'ok'], /--outcome: one of success, handler_error, timeout, oom_killed, cancelled, failed; not 'ok'/],
      [
        ['tenant', 'limits', 'x', '--tenant', 'y'],
        /unknown flag --tenant for `svc-emu tenant limits`; flags: --timeout-ms N, --max-memory-mb N/,
      ],
      [['serve', '--snippet', 'x'], /unknown flag --snippet for `svc-emu serve`; flags: .*--port N/],
      [['doctor', '-x'], /unknown flag -x for `svc-emu doctor`/],
      [['completion', 'fish'], /usage: svc-emu completion bash\|zsh/],
    ];
    for (const [argv, message] of cases) {
      const r = await runCli(argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe('');
    }
  });
});
