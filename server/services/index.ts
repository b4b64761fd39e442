import type { CoreDeps } from '../core-deps';
import { TenantService } from './tenants';
import { SnippetService, type CodeValidator } from './snippets';
import { SecretService } from './secrets';
import { StoreService } from './store';
import { IntegrationService } from './integrations';

/** Facts about this emulator process that routes report (GET /_emu/info, doctor). */
export interface EmulatorFacts {
  version: string;
  dataDir: string;
  workspace: string | null;
  startedAt: string;
  url: () => string;
  doctor: () => Promise<unknown>;
  ready: () => { ready: boolean; reasons: string[] };
}

export interface Services {
  tenants: TenantService;
  snippets: SnippetService;
  secrets: SecretService;
  store: StoreService;
  integrations: IntegrationService;
  facts: EmulatorFacts;
}

export function createServices(deps: CoreDeps, facts: EmulatorFacts, validateCode: CodeValidator | null = null): Services {
  return {
    tenants: new TenantService(deps),
    snippets: new SnippetService(deps, validateCode),
    secrets: new SecretService(deps),
    store: new StoreService(deps),
    integrations: new IntegrationService(deps),
    facts,
  };
}
