import { basename } from 'node:path';
import type { DomainServices } from '../services';
import type { EgressRules } from '../egress/policy';
import type { CassetteStore } from '../egress/cassette/types';
import type { CassetteIO, LiveParts } from './service';

/** A snippet's cassettes as the store lists them (`<name>.har` files): what an export copies. */
export function cassetteLister(store: Pick<CassetteStore, 'list'>): CassetteIO['list'] {
  return async (tenant, snippet) =>
    (await store.list(tenant.name, snippet)).map((f) => ({ name: basename(f.path, '.har'), path: f.path, cassette: f.cassette }));
}

/** The running core's parts a state export and import touch, from its services (server/index.ts builds it once). */
export function liveParts(domain: DomainServices, opts: { rules: EgressRules; dataDir: string }): LiveParts {
  const sessions = domain.egressSessions;
  return {
    inbox: domain.inbox,
    egress: {
      profile: opts.rules.profile,
      allow: opts.rules.allow,
      faults: domain.egress.faults,
      mode: () => sessions.mode(),
      setMode: (m) => sessions.setMode(m),
    },
    cassettes: {
      list: cassetteLister(sessions.store),
      // Checked and redacted again with the target tenant's secrets, announced as cassette.changed (services/egress-sessions.ts).
      put: async (tenant, snippet, name, cassette) => void (await sessions.put(tenant, { name: snippet }, name, cassette)),
    },
    resume: async () => {
      domain.callbacks.forgetPlanned(); // the replaced state's; recover plans the imported ones
      await domain.async.recover();
      domain.async.start();
    },
    dataDir: opts.dataDir,
  };
}
