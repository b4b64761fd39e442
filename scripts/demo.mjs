#!/usr/bin/env node
// `npm run demo`: the agent examples, streaming the way a real model streams, with nothing to set up and
// nothing to reach: no provider, no key, no network.
//
//   npm run demo [-- --live | --record] [--port 7070 --data-dir DIR --first-token-ms 600 --token-ms 30-60 --json --no-setup]
//
// Three modes (docs/qa-recipes.md, "Demo offline"):
// - replay (the default): the headless core (`svc-emu serve --egress-mode replay`) on the example workspace
//   (fixtures/workspace) with its own data dir (./.svc-emu-demo). The agents' model and weather calls are
//   answered from the cassettes shipped beside them (fixtures/workspace/snippets/{mastra-agent,
//   langgraph-agent}/cassettes/default.har), chunk by chunk at the recorded pace. The tenant's secrets and
//   integration point at `replay.invalid` (a name that never resolves, RFC 6761) with dummy credentials: the
//   default matchers ignore host and port (contract/schemas/cassette.ts CassetteMatch), so the recorded calls
//   still match, and nothing could go out if one did not.
// - --live: the project's fake OpenAI-compatible provider (scripts/fake-provider.mjs) paced like a model (a
//   wait before the first token, then 30–60 ms a token) and the core in live mode against it.
// - --record: the paced fake provider, the core in record mode with a throwaway data dir; the shipped
//   cassettes are deleted, each agent is invoked once in stream mode with PROMPT (which writes its cassette
//   anew), the files are checked for the provider's credentials, and the demo exits.
// The tenant `local` gets what the agent examples need (the secrets OPENAI_API_KEY, OPENAI_BASE_URL,
// OPENAI_MODEL and WEATHER_TOKEN, and the `weather` integration: see fixtures/workspace/snippets/mastra-agent/index.ts),
// then the GUI's URL and commands to paste are printed. The core's terminal lines follow. Ctrl+C stops it all.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { resolve, join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import { ROOT, runSetup, SetupError } from './setup.mjs';
import { CORE_NODE_FLAGS } from './core-node-flags.mjs';

const USAGE = `usage: npm run demo [-- --live | --record] [--port N] [--data-dir DIR] [--first-token-ms N] [--token-ms MIN-MAX] [--json] [--no-setup]
  (default)            replay: the agents answer from their recorded cassettes; no provider, no key, no network
  --live               the paced fake provider instead, and the emulator in live mode (calls really go out to it)
  --record             re-record the agents' cassettes against the paced fake provider, then exit
  --port N             the emulator's port (default 7070; 0 picks a free one)
  --data-dir DIR       the demo's data dir (default ./.svc-emu-demo: kept between demos, apart from npm start's;
                       --record uses a throwaway one unless given)
  --workspace DIR      another workspace with the agent examples (default fixtures/workspace; --record writes its cassettes)
  --first-token-ms N   the fake model's time to first token (--live, --record; default 600)
  --token-ms MIN-MAX   the fake model's pause between tokens (--live, --record; default 30-60)
  --json               print one JSON line {gui_url, url, api_key, data_dir, provider_url, egress_mode} instead of the text
                       (--record: {egress_mode, cassettes: [{snippet, path, entries, bytes}]} when done)
  --no-setup           skip the set-up and build check (npm run build does them)
`;

const PROMPT = 'What is the weather in Paris?';
const AGENTS = ['mastra-agent', 'langgraph-agent'];
const EXAMPLE_WORKSPACE = join(ROOT, 'fixtures', 'workspace');
/** Where replay points the agents: a reserved name that never resolves (RFC 6761), so nothing can go out. */
const NOWHERE = 'http://replay.invalid';

function options(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      live: { type: 'boolean', default: false },
      record: { type: 'boolean', default: false },
      port: { type: 'string', default: '7070' },
      'data-dir': { type: 'string' },
      workspace: { type: 'string' },
      'first-token-ms': { type: 'string', default: '600' },
      'token-ms': { type: 'string', default: '30-60' },
      json: { type: 'boolean', default: false },
      'no-setup': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.live && values.record) throw new Error('--live and --record: choose one');
  return values;
}

/** Resolves with the child's first stdout line; rejects if it exits first (with what it said on stderr). */
function firstLine(child, what, stderrText) {
  return new Promise((resolvePromise, reject) => {
    const rl = createInterface({ input: child.stdout });
    rl.once('line', (line) => {
      rl.close();
      resolvePromise(line);
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`${what} exited (${signal ?? code}) before it was ready${stderrText() ? `:\n${stderrText()}` : ''}`)),
    );
  });
}

const alive = (child) => child.exitCode === null && child.signalCode === null;
const exited = (child) => (alive(child) ? new Promise((r) => child.once('exit', r)) : Promise.resolve());

async function api(base, auth, method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...auth, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok && !(method === 'DELETE' && res.status === 404)) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res;
}

/** Invokes an agent in stream mode and reads its events to the end: the result's output, or the error's message thrown. */
async function streamOnce(base, key, name) {
  const res = await fetch(`${base}/v1/invoke/${name}?env=dev`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-invoke-mode': 'stream' },
    body: JSON.stringify({ prompt: PROMPT }),
  });
  if (!res.ok) throw new Error(`${name}: ${res.status} ${await res.text()}`);
  const id = res.headers.get('x-invocation-id');
  let text = '';
  const decoder = new TextDecoder();
  for await (const piece of res.body) text += decoder.decode(piece, { stream: true });
  let chunks = 0;
  for (const frame of text.split('\n\n')) {
    const event = /^event: (.*)$/m.exec(frame)?.[1];
    const data = /^data: (.*)$/m.exec(frame)?.[1];
    if (event === 'chunk') chunks += 1;
    if (event === 'error') throw new Error(`${name}: ${JSON.parse(data).message}`);
    if (event === 'result') return { id, output: JSON.parse(data).output, chunks };
  }
  throw new Error(`${name}: the stream ended without a result`);
}

async function main() {
  let opts;
  try {
    opts = options(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`demo: ${error.message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (opts.help) {
    process.stdout.write(USAGE);
    return;
  }
  const mode = opts.record ? 'record' : opts.live ? 'live' : 'replay';
  const workspace = opts.workspace ? resolve(opts.workspace) : EXAMPLE_WORKSPACE;
  const throwaway = mode === 'record' && opts['data-dir'] === undefined;
  const dataDir = throwaway
    ? await mkdtemp(join(tmpdir(), 'svc-emu-demo-record-'))
    : resolve(opts['data-dir'] ?? join(process.cwd(), '.svc-emu-demo'));
  if (!opts['no-setup']) {
    try {
      await runSetup({ quiet: true });
    } catch (error) {
      process.stderr.write(`setup failed: ${error instanceof SetupError ? error.message : (error?.stack ?? error)}\n`);
      process.exit(1);
    }
  }

  const children = [];
  let stopping = null;
  const stop = (code) =>
    (stopping ??= (async () => {
      // The core first (it drains its runs), then the provider its runs were talking to.
      for (const child of [...children].reverse()) {
        if (alive(child)) child.kill('SIGTERM');
        await exited(child);
      }
      if (throwaway) await rm(dataDir, { recursive: true, force: true });
      process.exit(code);
    })());
  // Ctrl+C in a terminal reaches the children too; a second signal to them is harmless (they stop once).
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => void stop(0));

  // 1. The fake model, paced (live and record only: replay reaches nothing).
  let fake = null;
  if (mode !== 'replay') {
    let providerErr = '';
    const provider = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(ROOT, 'scripts', 'fake-provider.mjs'),
        '--port',
        '0',
        '--first-token-ms',
        opts['first-token-ms'],
        '--token-ms',
        opts['token-ms'],
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(provider);
    provider.stderr.on('data', (c) => (providerErr += c));
    try {
      fake = JSON.parse(await firstLine(provider, 'the fake provider', () => providerErr));
    } catch (error) {
      process.stderr.write(`demo: ${error.message}\n`);
      return stop(1);
    }
  }

  // 2. The core, on the example workspace, in the demo's egress mode; its terminal lines (stderr) go straight to this terminal.
  const core = spawn(
    process.execPath,
    [
      ...CORE_NODE_FLAGS,
      join(ROOT, 'bin', 'svc-emu.mjs'),
      'serve',
      '--json',
      '--port',
      opts.port,
      '--data-dir',
      dataDir,
      '--workspace',
      workspace,
      '--egress-mode',
      mode,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.push(core);
  core.on('exit', (code, signal) => {
    if (!stopping) {
      process.stderr.write(`demo: the emulator stopped (${signal ?? code})\n`);
      void stop(code || 1);
    }
  });
  let banner;
  try {
    banner = JSON.parse(await firstLine(core, 'svc-emu serve', () => ''));
  } catch (error) {
    process.stderr.write(`demo: ${error.message}\n`);
    return stop(1);
  }
  if (!banner.api_key) {
    process.stderr.write(`demo: the data dir ${dataDir} has no readable key for the tenant local; use another --data-dir\n`);
    return stop(1);
  }
  const tenant = { authorization: `Bearer ${banner.api_key}` };
  const admin = { 'x-emu-admin': new URL(banner.gui_url).searchParams.get('token') ?? '' };

  // 3. What the agent examples need (fixtures/workspace/README.md, "The agent examples: a provider and an integration").
  //    Replay: the same names with values that reach nothing and unlock nothing.
  const secrets = fake
    ? { OPENAI_API_KEY: fake.api_key, OPENAI_BASE_URL: fake.openai_base_url, OPENAI_MODEL: 'fake-model', WEATHER_TOKEN: fake.rest_token }
    : { OPENAI_API_KEY: 'sk-replay-none', OPENAI_BASE_URL: `${NOWHERE}/v1`, OPENAI_MODEL: 'fake-model', WEATHER_TOKEN: 'replay-none' };
  try {
    for (const [name, value] of Object.entries(secrets)) await api(banner.url, tenant, 'PUT', `/v1/secrets/${name}`, { value });
    await api(banner.url, tenant, 'PUT', '/v1/integrations/weather', {
      provider: 'http',
      base_url: `${fake ? fake.url : NOWHERE}/api`,
      auth: { type: 'bearer', secret: 'WEATHER_TOKEN' },
    });
  } catch (error) {
    process.stderr.write(`demo: could not set up the tenant: ${error.message}\n`);
    return stop(1);
  }

  if (mode === 'record') {
    try {
      await record(banner, admin, fake, opts);
    } catch (error) {
      process.stderr.write(`demo: recording failed: ${error.message}\n`);
      return stop(1);
    }
    return stop(0);
  }

  const data = JSON.stringify({ prompt: PROMPT });
  if (opts.json) {
    process.stdout.write(
      JSON.stringify({
        gui_url: banner.gui_url,
        url: banner.url,
        api_key: banner.api_key,
        data_dir: dataDir,
        provider_url: fake ? fake.openai_base_url : null,
        egress_mode: mode,
      }) + '\n',
    );
    return;
  }
  const dd = dataDir === resolve(ROOT, '.svc-emu-demo') ? '--data-dir .svc-emu-demo' : `--data-dir ${dataDir}`;
  const model =
    mode === 'replay'
      ? [
          `  Egress   replay: the agents' model and weather calls are answered from their cassettes`,
          `           (${relative(process.cwd(), workspace) || '.'}/snippets/<agent>/cassettes/default.har) at the recorded pace; nothing goes out`,
          `           (the secrets point at ${NOWHERE}). Switch: \`npm run demo -- --live\` (the paced fake model, live),`,
          `           \`npm run demo -- --record\` (record the cassettes again).`,
        ]
      : [
          `  Model    ${fake.openai_base_url}   (fake-model: first token after ${opts['first-token-ms']} ms, then ${opts['token-ms']} ms a token)`,
          `  Egress   live: calls really go out (to the fake model). \`npm run demo\` alone replays the recorded cassettes, offline.`,
        ];
  process.stdout.write(
    [
      '',
      mode === 'replay'
        ? 'Snippet Emulator demo, offline: the agent examples replay their recorded model calls, token by token'
        : 'Snippet Emulator demo: the agent examples against a fake model that streams like a real one',
      `  GUI      ${banner.gui_url}`,
      `  API      ${banner.url}/v1   (API key ${banner.api_key})`,
      ...model,
      `  Set up   secrets ${Object.keys(secrets).join(', ')} and the integration weather, for the tenant local`,
      '',
      'Watch an answer stream in, token by token (paste in another terminal, from the checkout):',
      `  npx svc-emu invoke mastra-agent --env dev --stream --data '${data}' ${dd}`,
      `  npx svc-emu invoke langgraph-agent --env dev --stream --data '${data}' ${dd}`,
      ...(mode === 'live'
        ? [`  npx svc-emu invoke ai-token-stream --env dev --stream --data '{"prompt":"How does streaming work?"}' ${dd}`]
        : []),
      `  curl -sN -H 'Authorization: Bearer ${banner.api_key}' -H 'Content-Type: application/json' -H 'X-Invoke-Mode: stream' \\`,
      `       '${banner.url}/v1/invoke/mastra-agent?env=dev' -d '${data}'`,
      ...(mode === 'replay'
        ? [
            `  (replay knows this prompt: another finds no recorded answer and the run fails, naming the difference;`,
            `   the run's page in the GUI and GET /_emu/egress show it)`,
          ]
        : []),
      'Or in the GUI: Snippets → mastra-agent → Run, mode stream; Live streams shows every stream as it runs.',
      `Press Ctrl+C to stop the emulator${fake ? ' and the fake model' : ''}.`,
      '',
    ].join('\n'),
  );
}

/**
 * --record: each agent's cassette is deleted, then the agent runs once in stream mode (PROMPT) against the
 * paced fake model, which writes it anew; the files must not hold the provider's credentials.
 */
async function record(banner, admin, fake, opts) {
  const say = (line) => process.stderr.write(`demo: ${line}\n`);
  say(`recording against the fake model (first token after ${opts['first-token-ms']} ms, then ${opts['token-ms']} ms a token)`);
  const written = [];
  for (const name of AGENTS) {
    await api(banner.url, admin, 'DELETE', `/_emu/snippets/${name}/cassettes/default`);
    const { id, output, chunks } = await streamOnce(banner.url, banner.api_key, name);
    // The run's calls are merged into the cassette as it ends: wait (a few seconds at most) until the file holds them.
    let cassette;
    for (const deadline = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 100))) {
      const res = await api(banner.url, admin, 'GET', `/_emu/snippets/${name}/cassettes`);
      cassette = (await res.json()).data.find((c) => c.name === 'default');
      if (cassette?.episodes.includes(id)) break;
      if (Date.now() > deadline) throw new Error(`${name}: the run ${id} wrote no cassette`);
    }
    const text = await readFile(cassette.path, 'utf8');
    for (const secret of [fake.api_key, fake.rest_token]) {
      if (text.includes(secret)) throw new Error(`${cassette.path} holds a credential of the provider: it must not be committed`);
    }
    written.push({ snippet: name, path: cassette.path, entries: cassette.entries, bytes: cassette.bytes });
    say(
      `${name}: ${chunks} chunks, answer ${JSON.stringify(output.answer)} → ${relative(process.cwd(), cassette.path)} (${cassette.entries} calls, ${cassette.bytes} bytes)`,
    );
  }
  if (opts.json) process.stdout.write(JSON.stringify({ egress_mode: 'record', cassettes: written }) + '\n');
  else say('done: review the cassettes (git diff) and commit them beside their snippets');
}

await main();
