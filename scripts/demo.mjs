#!/usr/bin/env node
// `npm run demo`: the agent examples, streaming the way a real model streams, with nothing to set up.
//
//   npm run demo [-- --port 7070 --data-dir DIR --first-token-ms 600 --token-ms 30-60 --json --no-setup]
//
// Starts the project's fake OpenAI-compatible provider (scripts/fake-provider.mjs) pacing its tokens like a
// model (a wait before the first token, then 30–60 ms a token), starts the headless core (`svc-emu serve`)
// on the example workspace (fixtures/workspace) with its own data dir (./.svc-emu-demo), gives the tenant
// `local` what the agent examples need (the secrets OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL and
// WEATHER_TOKEN, and the `weather` integration: see fixtures/workspace/snippets/mastra-agent/index.ts),
// then prints the GUI's URL and commands to paste. The core's terminal lines follow. Ctrl+C stops both.
import { spawn } from 'node:child_process';
import { resolve, join } from 'node:path';
import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import { ROOT, runSetup, SetupError } from './setup.mjs';

const USAGE = `usage: npm run demo [-- --port N] [--data-dir DIR] [--first-token-ms N] [--token-ms MIN-MAX] [--json] [--no-setup]
  --port N             the emulator's port (default 7070; 0 picks a free one)
  --data-dir DIR       the demo's data dir (default ./.svc-emu-demo: kept between demos, apart from npm start's)
  --first-token-ms N   the fake model's time to first token (default 600)
  --token-ms MIN-MAX   the fake model's pause between tokens (default 30-60)
  --json               print one JSON line {gui_url, url, api_key, data_dir, provider_url} instead of the text
  --no-setup           skip the set-up and build check (npm run build does them)
`;

const PROMPT = 'What is the weather in Paris?';

function options(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string', default: '7070' },
      'data-dir': { type: 'string' },
      'first-token-ms': { type: 'string', default: '600' },
      'token-ms': { type: 'string', default: '30-60' },
      json: { type: 'boolean', default: false },
      'no-setup': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
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

async function api(base, key, method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
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
  const dataDir = resolve(opts['data-dir'] ?? join(process.cwd(), '.svc-emu-demo'));
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
      process.exit(code);
    })());
  // Ctrl+C in a terminal reaches the children too; a second signal to them is harmless (they stop once).
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => void stop(0));

  // 1. The fake model, paced.
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
  let fake;
  try {
    fake = JSON.parse(await firstLine(provider, 'the fake provider', () => providerErr));
  } catch (error) {
    process.stderr.write(`demo: ${error.message}\n`);
    return stop(1);
  }

  // 2. The core, on the example workspace; its terminal lines (stderr) go straight to this terminal.
  const core = spawn(
    process.execPath,
    [
      join(ROOT, 'bin', 'svc-emu.mjs'),
      'serve',
      '--json',
      '--port',
      opts.port,
      '--data-dir',
      dataDir,
      '--workspace',
      join(ROOT, 'fixtures', 'workspace'),
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

  // 3. What the agent examples need (fixtures/workspace/README.md, "The agent examples: a provider and an integration").
  const secrets = {
    OPENAI_API_KEY: fake.api_key,
    OPENAI_BASE_URL: fake.openai_base_url,
    OPENAI_MODEL: 'fake-model',
    WEATHER_TOKEN: fake.rest_token,
  };
  try {
    for (const [name, value] of Object.entries(secrets)) await api(banner.url, banner.api_key, 'PUT', `/v1/secrets/${name}`, { value });
    await api(banner.url, banner.api_key, 'PUT', '/v1/integrations/weather', {
      provider: 'http',
      base_url: `${fake.url}/api`,
      auth: { type: 'bearer', secret: 'WEATHER_TOKEN' },
    });
  } catch (error) {
    process.stderr.write(`demo: could not set up the tenant: ${error.message}\n`);
    return stop(1);
  }

  const data = JSON.stringify({ prompt: PROMPT });
  if (opts.json) {
    process.stdout.write(
      JSON.stringify({
        gui_url: banner.gui_url,
        url: banner.url,
        api_key: banner.api_key,
        data_dir: dataDir,
        provider_url: fake.openai_base_url,
      }) + '\n',
    );
    return;
  }
  const dd = dataDir === resolve(ROOT, '.svc-emu-demo') ? '--data-dir .svc-emu-demo' : `--data-dir ${dataDir}`;
  process.stdout.write(
    [
      '',
      'Snippet Emulator demo: the agent examples against a fake model that streams like a real one',
      `  GUI      ${banner.gui_url}`,
      `  API      ${banner.url}/v1   (API key ${banner.api_key})`,
      `  Model    ${fake.openai_base_url}   (fake-model: first token after ${opts['first-token-ms']} ms, then ${opts['token-ms']} ms a token)`,
      `  Set up   secrets ${Object.keys(secrets).join(', ')} and the integration weather, for the tenant local`,
      '',
      'Watch an answer stream in, token by token (paste in another terminal, from the checkout):',
      `  npx svc-emu invoke mastra-agent --env dev --stream --data '${data}' ${dd}`,
      `  npx svc-emu invoke langgraph-agent --env dev --stream --data '${data}' ${dd}`,
      `  npx svc-emu invoke ai-token-stream --env dev --stream --data '{"prompt":"How does streaming work?"}' ${dd}`,
      `  curl -sN -H 'Authorization: Bearer ${banner.api_key}' -H 'Content-Type: application/json' -H 'X-Invoke-Mode: stream' \\`,
      `       '${banner.url}/v1/invoke/mastra-agent?env=dev' -d '${data}'`,
      'Or in the GUI: Snippets → mastra-agent → Run, mode stream; Live streams shows every stream as it runs.',
      'Press Ctrl+C to stop the emulator and the fake model.',
      '',
    ].join('\n'),
  );
}

await main();
