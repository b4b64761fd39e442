import type { Agent } from 'undici';

/**
 * Node's own fetch gives up on a response whose headers take more than 300 s (undici's `headersTimeout`), and on
 * a body silent for 300 s: a sync invoke can legitimately take longer (a debug run held at a breakpoint, a version
 * with a long `timeout_ms`). The CLI's clients wait as long as the core does: the run's own limits end it.
 *
 * undici is loaded on the first call, not with the CLI: `svc-emu serve` never calls it, and its ~110 modules
 * cost the idle core ~7 MB (docs/architecture.md, "What the idle core holds").
 */
let loaded: Promise<{ fetch: typeof import('undici').fetch; agent: Agent }> | null = null;

export const patientFetch = (async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
  loaded ??= import('undici').then((u) => ({ fetch: u.fetch, agent: new u.Agent({ headersTimeout: 0, bodyTimeout: 0 }) }));
  const { fetch: undiciFetch, agent } = await loaded;
  return undiciFetch(input as Parameters<typeof undiciFetch>[0], {
    ...(init as Parameters<typeof undiciFetch>[1]),
    dispatcher: agent,
  });
}) as unknown as typeof fetch;
