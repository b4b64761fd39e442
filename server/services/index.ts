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
import { EgressService } from './egress';
import { retryPolicy } from '../webhooks/schedule';
import type { EgressRules } from '../egress/policy';
import type { Logger } from '../logger';
import type { Executor } from '../../executor';
import { LimaManager } from '../../executor';
import type { WorkspaceView } from '../workspace/loader';
import type { TerminalAccess } from '../terminal/sessions';

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
  /** The runtime manifest and what is installed (GET /_emu/runtime). */
  runtime: () => Promise<unknown>;
}

export interface Services {
  tenants: TenantService;
  snippets: SnippetService;
  secrets: SecretService;
  store: StoreService;
  integrations: IntegrationService;
  invocations: InvocationService;
  invoke: InvokeService;
  async: AsyncService;
  callbacks: CallbackService;
  inbox: InboxService;
  streams: StreamLog;
  egress: EgressService;
  executor: Executor;
  facts: EmulatorFacts;
  /** The watched workspace (null when the core runs without one). Set once the loader has started. */
  workspace: { status(): WorkspaceView } | null;
  /** The executor VM of macOS (`/_emu/vm`): its status and create/start/stop. Set by startEmulator. */
  vm: LimaManager;
  /**
   * Connects the executor to the VM's agent now (a VM started outside the app); throws why it could not.
   * Null when snippets run on this host. Set by startEmulator.
   */
  connectAgent: (() => Promise<void>) | null;
  /** The GUI's terminals (`/_emu/terminals`), or why they are off. Set by startEmulator. */
  terminals: TerminalAccess;
}

export interface ServiceOptions {
  executor: Executor;
  logger: Logger;
  validateCode?: CodeValidator | null;
  historyLimit?: number;
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
  );
}

export function createServices(deps: CoreDeps, facts: EmulatorFacts, opts: ServiceOptions): Services {
  const snippets: SnippetService = new SnippetService(deps, opts.validateCode ?? null, (snippetId) => {
    // A replaced or undeployed version's warm sandboxes go, so the next invocation runs current code.
    void opts.executor.retire({ snippetId, keepVersions: snippets.liveVersions(snippetId) });
  });
  const tenants = new TenantService(deps);
  const secrets = new SecretService(deps);
  const store = new StoreService(deps);
  const invocations = new InvocationService(deps, opts.historyLimit);
  const egress = opts.egressService;
  const integrations = new IntegrationService(deps, secrets, egress);
  const invoke = new InvokeService(deps, opts.executor, snippets, secrets, store, invocations, integrations, new TenantSlots());
  const callbacks = new CallbackService(deps, invocations, tenants, {
    rules: opts.egress,
    retry: retryPolicy({ scale: opts.callbackRetryScale }),
    timeoutMs: opts.callbackTimeoutMs,
    logger: opts.logger,
  });
  return {
    tenants,
    snippets,
    secrets,
    store,
    integrations,
    egress,
    invocations,
    invoke,
    async: new AsyncService(invoke, invocations, tenants, callbacks, { maxWorkers: opts.asyncWorkers, logger: opts.logger }),
    callbacks,
    inbox: new InboxService(opts.inboxDir, tenants, deps.clock),
    streams: new StreamLog(deps, opts.streamPingMs),
    executor: opts.executor,
    facts,
    workspace: null,
    vm: new LimaManager({ limactl: null, projectRoot: null, hostBackend: opts.executor.info.backend }),
    connectAgent: null,
    terminals: { sessions: null, disabled: 'terminals are not set up on this core' },
  };
}
