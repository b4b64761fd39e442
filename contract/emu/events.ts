import { z } from 'zod';
import { defineOperation } from '../operation';
import { ok, problems, sse } from '../responses';
import { EMU_EVENT_SCHEMAS, EMU_EVENT_TYPES, EmuEventsReset } from '../schemas/events';
import { AgentRun } from '../schemas/agent';
import { InvocationId } from '../schemas/invocations';

/** The live event feed and the agent run view's data (emulator only). */

export const emuEvents = defineOperation({
  operationId: 'emuEvents',
  method: 'get',
  path: '/_emu/events',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'Every change as it happens (SSE), resumable with `Last-Event-ID`',
  description:
    'One event per change: snippets, versions, deployments, workspace compiles and their diagnostics, invocations and their outcomes, agent steps, callback attempts, inbox deliveries, egress calls, tenants, secrets (names only) and store keys (keys only). ' +
    'Reconnecting with `Last-Event-ID` replays what was missed from the last 1,000 events; an id from another start of the core, or older than that, gets one `reset` event first (re-read the state, then follow). ' +
    '`types=` keeps only the listed types (comma-separated; a trailing `*` matches a prefix: `invocation.*`). `: ping` every 15 s of silence.',
  query: z.object({
    types: z
      .string()
      .regex(/^[a-z*.]+(,[a-z*.]+)*$/, 'must be event types separated by commas, e.g. invocation.*,workspace.folder')
      .optional(),
  }),
  headers: z.object({ 'last-event-id': z.string().max(64).optional() }),
  responses: {
    200: sse(`The events. Types: ${EMU_EVENT_TYPES.join(', ')}, and \`reset\`.`, { ...EMU_EVENT_SCHEMAS, reset: EmuEventsReset }),
    ...problems(400, 401),
  },
});

export const emuInvocationAgent = defineOperation({
  operationId: 'emuInvocationAgent',
  method: 'get',
  path: '/_emu/invocations/{id}/agent',
  auth: 'admin',
  tag: 'Emulator',
  summary: 'What an agent run did: LangGraph nodes or Mastra steps, tool calls, and its model calls assembled',
  description:
    'Steps come from the frameworks’ own hooks inside the runner; model calls from the egress log (OpenAI-compatible chat completions and responses, streamed or not). A run that used no framework and called no model answers empty lists.',
  params: InvocationId,
  responses: { 200: ok('The run’s steps, graph and model calls.', AgentRun), ...problems(401, 404) },
});
