import type { CoreDeps } from '../core-deps';
import { TenantService } from './tenants';
import { SnippetService, type CodeValidator } from './snippets';
import { SecretService } from './secrets';
import { StoreService } from './store';
import { IntegrationService } from './integrations';
import { InvocationService } from './invocations';
import { InvokeService } from './invoke';
import type { Executor } from '../../executor';
import type { WorkspaceView } from '../workspace/loader';

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
  executor: Executor;
  facts: EmulatorFacts;
  /** The watched workspace (null when the core runs without one). Set once the loader has started. */
  workspace: { status(): WorkspaceView } | null;
}

export function createServices(
  deps: CoreDeps,
  facts: EmulatorFacts,
  opts: { executor: Executor; validateCode?: CodeValidator | null; historyLimit?: number },
): Services {
  const snippets: SnippetService = new SnippetService(deps, opts.validateCode ?? null, (snippetId) => {
    // A replaced or undeployed version's warm sandboxes go, so the next invocation runs current code.
    void opts.executor.retire({ snippetId, keepVersions: snippets.liveVersions(snippetId) });
  });
  const secrets = new SecretService(deps);
  const store = new StoreService(deps);
  const invocations = new InvocationService(deps, opts.historyLimit);
  return {
    tenants: new TenantService(deps),
    snippets,
    secrets,
    store,
    integrations: new IntegrationService(deps),
    invocations,
    invoke: new InvokeService(deps, opts.executor, snippets, secrets, store, invocations),
    executor: opts.executor,
    facts,
    workspace: null,
  };
}
