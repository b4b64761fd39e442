import { FaultAction, NewFaultRule } from '../../contract/schemas/egress';
export { FaultAction, NewFaultRule };

export type FaultRule = NewFaultRule & { id: string; created_at: string; hits: number };

/** What the matching rules do to one call: a delay first, then at most one way to fail. */
export interface FaultPlan {
  latencyMs: number;
  fail: Exclude<FaultAction, { type: 'latency' }> | null;
  /** "latency 500 ms (fault f1); status 503 (fault f2)" for the egress log; null when nothing matched. */
  describe: string | null;
}

const hostMatches = (pattern: string, host: string) => {
  const p = pattern.toLowerCase();
  const h = host.toLowerCase().replace(/\.$/, '');
  return p.startsWith('*.') ? h.endsWith(p.slice(1)) : h === p;
};

/** Fault rules for outbound calls (emulator only): QA breaks a provider on purpose. */
export class FaultRules {
  private rules: FaultRule[] = [];
  private next = 1;

  constructor(private readonly clock: () => Date) {}

  add(rule: NewFaultRule): FaultRule {
    const r: FaultRule = { ...rule, id: `flt_${this.next++}`, created_at: this.clock().toISOString(), hits: 0 };
    this.rules.push(r);
    return r;
  }

  list(): FaultRule[] {
    return this.rules.map((r) => ({ ...r }));
  }

  remove(id: string): boolean {
    const before = this.rules.length;
    this.rules = this.rules.filter((r) => r.id !== id);
    return this.rules.length < before;
  }

  clear(): void {
    this.rules = [];
  }

  /** The plan for a call to `host` (and from `integration`); counts the hits and retires spent rules. */
  plan(host: string, integration: string | null): FaultPlan {
    const matching = this.rules.filter(
      (r) => (r.host === undefined || hostMatches(r.host, host)) && (r.integration === undefined || r.integration === integration),
    );
    let latencyMs = 0;
    let fail: FaultPlan['fail'] = null;
    const said: string[] = [];
    for (const r of matching) {
      if (r.action.type === 'latency') latencyMs += r.action.ms;
      else if (fail)
        continue; // one failure per call: the first rule wins
      else fail = r.action;
      r.hits++;
      said.push(
        `${r.action.type === 'latency' ? `latency ${r.action.ms} ms` : r.action.type === 'status' ? `status ${r.action.status}` : r.action.type} (${r.id})`,
      );
      if (r.times !== null && r.hits >= r.times) this.remove(r.id);
    }
    return { latencyMs, fail, describe: said.length ? said.join('; ') : null };
  }
}
