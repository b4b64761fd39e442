import { DebugSessions } from './debug-sessions';
import type { CoreDeps } from '../core-deps';
import { TenantService } from './tenants';
import { SnippetService, type CodeValidator } from './snippets';
import { SecretService } from './secrets';
import { StoreService } from './store';
import { IntegrationService } from './integrations';
import { InvocationService } from './invocations';
import { InvokeService } from './invoke';
import { TenantSlots } from './slots';
import { AsyncService } from './async';
import { CallbackService } from './callbacks';
import { InboxService } from './inbox';
import { StreamLog } from './stream-log';
import { AgentStepService } from './agent-steps';
import type { ProviderCall } from '../../contract/schemas/agent';
import { EgressService } from './egress';
import { cassetteFolder, EgressSessions, type EgressModeSetting } from './egress-sessions';
import { FileCassetteStore } from '../egress/cassette/store';
import { EMULATOR_VERSION } from '../version';
import { retryPolicy } from '../webhooks/schedule';
import type { EgressRules } from '../egress/policy';
import type { SelfEndpoint } from '../webhooks/own-inbox';
import type { Logger } from '../logger';
import type { Executor, LimaManager } from '../../executor';
import type { WorkspaceView } from '../workspace/loader';
import type { TerminalAccess } from '../terminal/sessions';
import type { EventBus } from '../events/bus';
import type { GuiSession } from './gui-session';
import type { StateService } from '../state/service';
import type { ReportService } from '../report';

/** Facts about this emulator process that routes report (GET /_emu/info, doctor). */
export interface EmulatorFacts {
  version: string;
  dataDir: string;
  workspace: string | null;
  startedAt: string;
  url: () => string;
  doctor: () => Promise<unknown>;
  ready: () => { ready: boolean; reasons: string[] };
  /** The admin token of this run (X-Emu-Admin checks). */
  adminToken: string;
  /** The GUI's session (its cookie, rotated by POST /_emu/gui-session/rotate): server/http/gui-session.ts. */
  guiSession: GuiSession;
  /** The runtime manifest and what is installed (GET /_emu/runtime). */
  runtime: () => Promise<unknown>;
}

/** The domain's services: plain data in, plain data out, refusals as server/domain/errors.ts. */
export interface DomainServices {
  readonly tenants: TenantService;
  readonly snippets: SnippetService;
  readonly secrets: SecretService;
  readonly store: StoreService;
  readonly integrations: IntegrationService;
  readonly invocations: InvocationService;
  readonly invoke: InvokeService;
  readonly async: AsyncService;
  readonly callbacks: CallbackService;
  readonly inbox: InboxService;
  readonly streams: StreamLog;
  readonly egress: EgressService;
  /** Agent steps from the runners' framework hooks (`GET /_emu/invocations/{id}/agent`). */
  readonly agentSteps: AgentStepService;
  /** Each run's egress session (live, record, replay), the server's mode, and the cassette files (`.store`). */
  readonly egressSessions: EgressSessions;
  /** Debug runs in progress (X-Emu-Debug): where to attach, and whether a debugger holds each. */
  readonly debugSessions: DebugSessions;
}

/** What the routes are handed: the domain's services and the process's parts, all built before it (server/index.ts). */
export interface Services extends DomainServices {
  /** The core's event bus (the same as `deps.events`): GET /_emu/events reads it. */
  readonly events: EventBus;
  readonly executor: Executor;
  readonly facts: EmulatorFacts;
  /** The watched workspace (null when the core runs without one). */
  readonly workspace: { status(): WorkspaceView } | null;
  /** The executor VM of macOS (`/_emu/vm`): its status and create/start/stop. */
  readonly vm: LimaManager;
  /**
   * Connects the executor to the VM's agent now (a VM started outside the app); throws why it could not.
   * Null when snippets run on this host.
   */
  readonly connectAgent: (() => Promise<void>) | null;
  /** The GUI's terminals (`/_emu/terminals`), or why they are off. */
  readonly terminals: TerminalAccess;
  /** Export and import of the whole state (`/_emu/state`: server/state/). */
  readonly state: StateService;
  /** The run report and import-report (`/_emu/report`: server/report/). */
  readonly report: ReportService;
}

export interface ServiceOptions {
  executor: Executor;
  logger: Logger;
  validateCode?: CodeValidator | null;
  /** Built before the executor too: the egress path records its parity warnings on the invocation. */
  invocations: InvocationService;
  egress: EgressRules;
  /** Built before the executor (its proxy must listen before sandboxes start): see `egressService`. */
  egressService: EgressService;
  asyncWorkers: number;
  callbackRetryScale: number;
  callbackTimeoutMs: number;
  /** Where the callback inbox keeps its deliveries. */
  inboxDir: string;
  /** Silence after which an SSE response gets a `: ping` comment. */
  streamPingMs: number;
  /** Where the core listens, once it does: its own callback inbox is reachable under every egress profile. */
  self?: () => SelfEndpoint | null;
  /** A run's model calls, assembled from the egress log (the agent view's `provider_calls`; none when unset). */
  providerCalls?: (invocationId: string) => Promise<ProviderCall[]>;
  /** The server's egress mode at start (`serve --egress-mode`, `--replay-speed`); default live at speed 1. */
  egressMode?: EgressModeSetting;
  /** Where cassettes live: beside workspace snippets, else under the data dir (services/egress-sessions.ts). */
  dataDir?: string;
  workspace?: string | null;
}

/** The egress path, built from the state (who an invocation belongs to) and the profile. */
export function egressService(deps: CoreDeps, rules: EgressRules, warn: (invocationId: string, text: string) => void): EgressService {
  return new EgressService(
    rules,
    deps.clock,
    (invocationId) =>
      deps.repo.read((db) => {
        const tenantId = db.invocations.find((i) => i.id === invocationId)?.tenant_id;
        return db.tenants.find((t) => t.id === tenantId)?.name ?? null;
      }),
    warn,
    deps.events,
  );
}

/** The domain's services in dependency order, each handed what it uses; nothing is patched in afterwards. */
export function createServices(deps: CoreDeps, opts: ServiceOptions): DomainServices {
  const snippets: SnippetService = new SnippetService(deps, opts.validateCode ?? null, (snippetId) => {
    // A replaced or undeployed version's warm sandboxes go, so the next invocation runs current code.
    void opts.executor.retire({ snippetId, keepVersions: snippets.liveVersions(snippetId) });
  });
  const tenants = new TenantService(deps);
  const secrets = new SecretService(deps);
  const store = new StoreService(deps);
  const invocations = opts.invocations;
  const egress = opts.egressService;
  const integrations = new IntegrationService(deps, secrets, egress);
  const egressSessions = new EgressSessions({
    deps,
    egress,
    invocations,
    secrets: (tenant) => secrets.reveal(tenant),
    store: new FileCassetteStore({
      locate: cassetteFolder({ workspace: opts.workspace ?? null, dataDir: opts.dataDir ?? '.svc-emu' }),
      creatorVersion: EMULATOR_VERSION,
    }),
    setting: opts.egressMode ?? { mode: 'live', replay_speed: 1 },
    logger: opts.logger,
  });
  const agentSteps = new AgentStepService(deps, {
    providerCalls: opts.providerCalls,
    onError: (message, err) => opts.logger.log('warn', message, { error: String(err) }),
  });
  const debugSessions = new DebugSessions(deps.events);
  const invoke = new InvokeService(
    deps,
    opts.executor,
    snippets,
    secrets,
    store,
    invocations,
    integrations,
    new TenantSlots(),
    agentSteps,
    egressSessions,
    debugSessions,
  );
  const callbacks = new CallbackService(deps, invocations, tenants, {
    rules: opts.egress,
    retry: retryPolicy({ scale: opts.callbackRetryScale }),
    timeoutMs: opts.callbackTimeoutMs,
    logger: opts.logger,
    self: opts.self,
  });
  const async = new AsyncService(invoke, invocations, tenants, callbacks, { maxWorkers: opts.asyncWorkers, logger: opts.logger });
  return {
    tenants,
    snippets,
    secrets,
    store,
    integrations,
    egress,
    invocations,
    invoke,
    agentSteps,
    egressSessions,
    debugSessions,
    async,
    callbacks,
    inbox: new InboxService(opts.inboxDir, tenants, deps.clock, deps.events),
    streams: new StreamLog(deps, opts.streamPingMs, (message, err) => opts.logger.log('warn', message, { error: String(err) })),
  };
}
