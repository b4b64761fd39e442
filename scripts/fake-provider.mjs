// node --import tsx scripts/fake-provider.mjs [--port N] [--host H] [--api-key K] [--rest-token T] [--delay-ms N]
//                                            [--first-token-ms N --token-ms MIN-MAX]
// Starts the fake OpenAI-compatible provider + fake REST API (fixtures/fake-openai/server.ts) for demos,
// prints {url, openai_base_url, api_key, rest_token} as one JSON line, and stays up until Ctrl+C.
// --delay-ms pauses between streamed frames; --first-token-ms / --token-ms pace a stream like a model
// (a wait before the first token, then MIN–MAX ms between tokens, e.g. 30-60): `npm run demo` uses them.
import { parseArgs } from 'node:util';
import { startFakeProvider } from '../fixtures/fake-openai/server.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    'api-key': { type: 'string', default: 'sk-fake' },
    'rest-token': { type: 'string', default: 'rest-secret' },
    'delay-ms': { type: 'string', default: '0' },
    'first-token-ms': { type: 'string' },
    'token-ms': { type: 'string' },
  },
});

/** `--token-ms 30-60` (or one number) and `--first-token-ms 500`: a model's pace, or undefined. */
function paceOf(first, between) {
  if (first === undefined && between === undefined) return undefined;
  const [min, max = min] = (between ?? '0').split('-').map(Number);
  const firstMs = Number(first ?? 0);
  if (![min, max, firstMs].every((n) => Number.isFinite(n) && n >= 0) || max < min) {
    process.stderr.write(`fake-provider: --first-token-ms N and --token-ms MIN-MAX take milliseconds (got ${first}, ${between})\n`);
    process.exit(2);
  }
  return { firstMs, minMs: min, maxMs: max };
}
const pace = paceOf(values['first-token-ms'], values['token-ms']);

const fake = await startFakeProvider({
  port: Number(values.port),
  host: values.host,
  apiKey: values['api-key'],
  restToken: values['rest-token'],
  streamDelayMs: Number(values['delay-ms']),
  ...(pace ? { pace } : {}),
});
process.stdout.write(
  JSON.stringify({ url: fake.url, openai_base_url: fake.openaiBaseUrl, api_key: fake.apiKey, rest_token: fake.restToken }) + '\n',
);

let closing = false;
const stop = () => {
  if (closing) return;
  closing = true;
  fake.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
