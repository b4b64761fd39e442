/**
 * The tenant set-up the agent examples need (secrets and the `weather` integration), against the
 * project's fake provider: the model is reached as `localhost`, the REST API as `127.0.0.1`, so fault
 * rules can pick one of them by host.
 */
import { expect } from 'vitest';
import type { FakeProvider } from '../../fixtures/fake-openai/server';
import type { TestCore } from './core';

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
