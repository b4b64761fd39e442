import type { DomainServices } from '../services';
import type { EgressRules } from '../egress/policy';
import type { CassetteIO, LiveParts } from './service';

/** The running core's parts a state export and import touch, from its services (server/index.ts builds it once). */
export function liveParts(
  domain: DomainServices,
  opts: {
    rules: EgressRules;
    dataDir: string;
    cassettes?: CassetteIO | null;
    mode?: LiveParts['egress']['mode'];
    setMode?: LiveParts['egress']['setMode'];
  },
): LiveParts {
  return {
    inbox: domain.inbox,
    egress: {
      profile: opts.rules.profile,
      allow: opts.rules.allow,
      faults: domain.egress.faults,
      mode: opts.mode ?? null,
      setMode: opts.setMode ?? null,
    },
    cassettes: opts.cassettes ?? null,
    resume: async () => {
      await domain.async.recover();
      domain.async.start();
    },
    dataDir: opts.dataDir,
  };
}
