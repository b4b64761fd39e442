import { z } from 'zod';
import { FolderStatus } from './workspace';
import { OUTCOMES, INVOCATION_STATUSES } from './invocations';
import { EgressEntry } from './egress';
import { DebugSession } from './debug';

/**
 * The live event feed, `GET /_emu/events` (emulator only): one SSE stream that carries every change the GUI,
 * the CLI's `logs --follow` and the terminal lines react to. Each frame is `id: <boot>-<seq>`,
 * `event: <type>`, `data: <EmuEvent JSON>`. Events are small: they name what changed and carry a summary;
 * a reader that needs the whole thing fetches it (`GET /_emu/invocations/{id}`…).
 */

const InvocationSummary = z
  .object({
    id: z.string(),
    tenant_id: z.string(),
    snippet: z.string(),
    version: z.number().int(),
    env: z.string().nullable(),
    mode: z.enum(['sync', 'async', 'stream']),
    status: z.enum(INVOCATION_STATUSES),
    outcome: z.enum(OUTCOMES).nullable(),
    error: z.object({ code: z.string(), message: z.string() }).nullable(),
    duration_ms: z.number().nullable(),
  })
  .meta({ id: 'EmuEventInvocation' });

const SnippetRef = z.object({ snippet_id: z.string(), snippet: z.string(), tenant_id: z.string() });

/** One step an agent framework reported (see contract/schemas/agent.ts), announced as it happens. */
const StepRef = z.object({
  invocation_id: z.string(),
  step_id: z.string(),
  kind: z.enum(['node', 'step', 'tool', 'llm']),
  name: z.string(),
  phase: z.enum(['start', 'end']),
});

/** Every event type and its `data`. Adding a type: here, then publish it (server/events/bus.ts). */
export const EMU_EVENT_DATA = {
  'snippet.created': SnippetRef.extend({ runtime: z.enum(['bun', 'python']) }),
  'snippet.deleted': SnippetRef,
  'version.created': SnippetRef.extend({ version: z.number().int(), source: z.enum(['api', 'workspace']) }),
  /** `version` null: the environment no longer runs the snippet (undeployed). */
  'deployment.changed': SnippetRef.extend({ env: z.string(), version: z.number().int().nullable() }),
  'environment.created': z.object({ tenant_id: z.string(), env: z.string() }),
  /** The loader read a folder: compiled (loaded / unchanged), refused (error with file:line:col), deleted. */
  'workspace.folder': FolderStatus,
  'invocation.created': InvocationSummary,
  'invocation.started': InvocationSummary,
  'invocation.finished': InvocationSummary,
  'invocation.step': StepRef,
  'callback.attempt': z.object({
    invocation_id: z.string(),
    url: z.string(),
    attempt: z.number().int(),
    status_code: z.number().int().nullable(),
    error: z.string().nullable(),
    state: z.enum(['pending', 'delivered', 'failed']),
  }),
  'inbox.delivery': z.object({ inbox: z.string(), delivery_id: z.string(), verified: z.boolean(), answered: z.number().int() }),
  'egress.call': EgressEntry,
  'tenant.changed': z.object({ tenant_id: z.string(), name: z.string() }),
  'secret.changed': z.object({ tenant_id: z.string(), name: z.string(), deleted: z.boolean() }),
  'store.changed': z.object({ tenant_id: z.string(), key: z.string(), deleted: z.boolean() }),
  /** A fault rule was added or removed, or all were cleared (`id` null); hits show as `egress.call`s. */
  'fault.changed': z.object({ id: z.string().nullable(), state: z.enum(['added', 'removed', 'cleared']) }),
  /** The egress log was emptied. */
  'egress.cleared': z.object({}),
  /** A cassette was written by a record run, or deleted (contract/schemas/cassette.ts). */
  'cassette.changed': z.object({
    tenant_id: z.string(),
    snippet: z.string(),
    name: z.string(),
    state: z.enum(['written', 'deleted']),
    entries: z.number().int(),
  }),
  /** The server's egress mode or replay speed was switched. */
  'egress.mode': z.object({ mode: z.enum(['live', 'record', 'replay']), replay_speed: z.number() }),
  /** A debug run's debugger listens (`waiting`), a debugger attached or detached, or the run ended (contract/schemas/debug.ts). */
  'debug.session': DebugSession,
  /** A GUI terminal (the Terminal page) opened, its shell exited, or it was closed. */
  'terminal.changed': z.object({ id: z.string(), state: z.enum(['opened', 'resized', 'exited', 'closed']) }),
  /** The executor VM's operation (create / start / stop) began, printed a line (`line`), or ended. */
  'vm.operation': z.object({
    kind: z.enum(['create', 'start', 'stop']),
    state: z.enum(['running', 'succeeded', 'failed']),
    started_at: z.string(),
    line: z.string().nullable(),
    log_total: z.number().int(),
  }),
} as const;

export type EmuEventType = keyof typeof EMU_EVENT_DATA;
export const EMU_EVENT_TYPES = Object.keys(EMU_EVENT_DATA) as EmuEventType[];

/** The envelope of every event (the SSE frame's `data:`). */
export const emuEventSchema = <T extends EmuEventType>(type: T) =>
  z.object({
    id: z.string().meta({ description: '`<boot>-<seq>`: the SSE `id:`; send it back as `Last-Event-ID` to resume.' }),
    type: z.literal(type),
    at: z.string(),
    data: EMU_EVENT_DATA[type],
  });

/** SSE `reset`: the `Last-Event-ID` given is from another start of the core or too old; re-read everything. */
export const EmuEventsReset = z
  .object({ reason: z.enum(['other_boot', 'too_old', 'bad_id']), latest: z.string().nullable() })
  .meta({ id: 'EmuEventsReset' });

export const EMU_EVENT_SCHEMAS = Object.fromEntries(EMU_EVENT_TYPES.map((t) => [t, emuEventSchema(t)])) as {
  [K in EmuEventType]: ReturnType<typeof emuEventSchema<K>>;
};

export type EmuEventData<T extends EmuEventType> = z.infer<(typeof EMU_EVENT_DATA)[T]>;
export type EmuEvent = { [K in EmuEventType]: { id: string; type: K; at: string; data: EmuEventData<K> } }[EmuEventType];
