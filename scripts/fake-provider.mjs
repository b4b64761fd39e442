// node --import tsx scripts/fake-provider.mjs [--port N] [--host H] [--api-key K] [--rest-token T] [--delay-ms N]
// Starts the fake OpenAI-compatible provider + fake REST API (fixtures/fake-openai/server.ts) for demos,
// prints {url, openai_base_url, api_key, rest_token} as one JSON line, and stays up until Ctrl+C.
import { parseArgs } from 'node:util';
import { startFakeProvider } from '../fixtures/fake-openai/server.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    'api-key': { type: 'string', default: 'sk-fake' },
    'rest-token': { type: 'string', default: 'rest-secret' },
    'delay-ms': { type: 'string', default: '0' },
  },
});

const fake = await startFakeProvider({
  port: Number(values.port),
  host: values.host,
  apiKey: values['api-key'],
  restToken: values['rest-token'],
  streamDelayMs: Number(values['delay-ms']),
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
