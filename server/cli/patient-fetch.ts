import { Agent, fetch as undiciFetch } from 'undici';

/**
 * Node's own fetch gives up on a response whose headers take more than 300 s (undici's `headersTimeout`), and on
 * a body silent for 300 s: a sync invoke can legitimately take longer (a debug run held at a breakpoint, a version
 * with a long `timeout_ms`). The CLI's clients wait as long as the core does: the run's own limits end it.
 */
const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0 });

export const patientFetch = ((input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) =>
  undiciFetch(input as Parameters<typeof undiciFetch>[0], {
    ...(init as Parameters<typeof undiciFetch>[1]),
    dispatcher: agent,
  })) as unknown as typeof fetch;
