/**
 * The tenant set-up the agent examples need (secrets and the `weather` integration), against the
 * project's fake provider: the model is reached as `localhost`, the REST API as `127.0.0.1`, so fault
 * rules can pick one of them by host.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { FakeProvider } from '../../fixtures/fake-openai/server';
import { PROJECT_ROOT, type TestCore } from './core';

/** The agent examples of the example workspace, by snippet name. */
export const AGENT_EXAMPLES = join(PROJECT_ROOT, 'fixtures', 'workspace', 'snippets');
export const AGENTS = {
  'mastra-agent': { runtime: 'bun', entry: 'index.ts' },
  'langgraph-agent': { runtime: 'python', entry: 'main.py' },
} as const;
export type AgentName = keyof typeof AGENTS;
export const AGENT_NAMES = Object.keys(AGENTS) as AgentName[];

export async function configureAgentTenant(core: TestCore, provider: FakeProvider): Promise<void> {
  const port = new URL(provider.url).port;
  for (const [name, value] of Object.entries({
    OPENAI_API_KEY: provider.apiKey,
    OPENAI_BASE_URL: `http://localhost:${port}/v1`,
    OPENAI_MODEL: 'fake-model',
    WEATHER_TOKEN: provider.restToken,
  })) {
    const r = await core.call('PUT', `/v1/secrets/${name}`, { value });
    expect(r.status, r.text).toBeLessThan(300);
  }
  const i = await core.call('PUT', '/v1/integrations/weather', {
    provider: 'http',
    base_url: `http://127.0.0.1:${port}/api`,
    auth: { type: 'bearer', secret: 'WEATHER_TOKEN' },
  });
  expect(i.status, i.text).toBeLessThan(300);
}

/** The tenant set-up, then a version of each agent example (over the API) with its snippet.json limits. */
export async function deployAgentExamples(core: TestCore, provider: FakeProvider): Promise<void> {
  await configureAgentTenant(core, provider);
  for (const [name, { runtime, entry }] of Object.entries(AGENTS)) {
    const dir = join(AGENT_EXAMPLES, name);
    const config = JSON.parse(await readFile(join(dir, 'snippet.json'), 'utf8'));
    await core.call('POST', '/v1/snippets', { name, runtime });
    const v = await core.call('POST', `/v1/snippets/${name}/versions`, {
      code: await readFile(join(dir, entry), 'utf8'),
      timeout_ms: config.timeout_ms,
      max_memory_mb: config.max_memory_mb,
      max_cpu_percent: config.max_cpu_percent,
    });
    expect(v.status, v.text).toBe(201);
  }
}
