/** One outbound call, as the egress inspector shows it. Never a credential, never a body. */
export interface EgressEntry {
  id: number;
  at: string;
  /** `snippet`: through the proxy (the snippet's own HTTP client); `integration`: made by the core for `integrations.call`. */
  source: 'snippet' | 'integration';
  tenant: string | null;
  invocation_id: string | null;
  integration: string | null;
  /** `CONNECT` for a tunnel (HTTPS): then only host and port are known. */
  method: string;
  host: string;
  port: number;
  /** Plain HTTP and integrations only. */
  path: string | null;
  status: number | null;
  bytes_out: number;
  bytes_in: number;
  duration_ms: number;
  /** The fault rule that acted on it, described. */
  fault: string | null;
  /** Why the egress profile refused it. */
  refused: string | null;
  error: string | null;
}

/** The last `keep` outbound calls, newest last (emulator only: `/_emu/egress`). */
export class EgressLog {
  private readonly entries: EgressEntry[] = [];
  private next = 1;

  constructor(private readonly keep = 1000) {}

  add(entry: Omit<EgressEntry, 'id'>): EgressEntry {
    const e = { id: this.next++, ...entry };
    this.entries.push(e);
    if (this.entries.length > this.keep) this.entries.splice(0, this.entries.length - this.keep);
    return e;
  }

  /** Newest first, optionally one invocation's. */
  list(filter: { invocation_id?: string; tenant?: string } = {}): EgressEntry[] {
    return this.entries
      .filter(
        (e) =>
          (filter.invocation_id === undefined || e.invocation_id === filter.invocation_id) &&
          (filter.tenant === undefined || e.tenant === filter.tenant),
      )
      .reverse();
  }

  clear(): void {
    this.entries.length = 0;
  }
}
