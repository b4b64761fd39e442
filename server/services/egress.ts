import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { EgressLog, type EgressEntry } from '../egress/log';
import { FaultRules, type FaultPlan } from '../egress/faults';
import { refuseAddress, type EgressRules } from '../egress/policy';
import type { Clock } from '../core-deps';
import type { EventBus } from '../events/bus';
import { EXCHANGE_LIMITS, isProviderCall, ProviderExchanges } from '../egress/exchanges';
import { upstreamTls } from '../egress/tls/trust';
import type { CallRequest, EgressSession, ReplayAnswer, ReplayMiss } from '../egress/cassette/types';

/** Who makes an outbound call. */
export interface EgressIdentity {
  tenant: string | null;
  invocation_id: string | null;
}

export type Resolved = { address: string; family: number } | { refused: string } | { error: string };

export class EgressError extends Error {
  constructor(
    readonly code: 'egress_refused' | 'egress_fault' | 'timeout' | 'connection_failed' | 'replay_no_match',
    message: string,
    /** An HTTP status a fault answered with. */
    readonly status: number | null = null,
    readonly body: string | null = null,
  ) {
    super(message);
  }
}

export interface OutboundRequest {
  identity: EgressIdentity;
  integration: string | null;
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: Buffer;
  timeoutMs: number;
  /** Header names the host added (an integration's credential): always redacted on the run's tape, never matched. */
  hostAdded?: readonly string[];
}

export interface OutboundResponse {
  status: number;
  statusText?: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** Responses larger than this are refused (the snippet gets an error, not a truncated body). */
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Answers a call of a replaying run from its cassette (services/egress-sessions.ts opened the session): the
 * player's answer or miss, and a miss naming the cassette when there is no cassette to play from.
 */
export function answerFromCassette(session: EgressSession, req: CallRequest): ReplayAnswer | ReplayMiss {
  const answer: ReplayAnswer | ReplayMiss = session.player
    ? session.player.answer(req)
    : {
        message: `no cassette '${session.cassette?.name ?? 'default'}' to replay from: record one first (X-Emu-Egress-Mode: record, or egress.mode "record" in snippet.json)`,
        closest: null,
      };
  if ('message' in answer) {
    session.counts.unmatched++;
    if ((session.misses ??= []).length < 3) session.misses.push(answer.message);
  } else session.counts.replayed++;
  return answer;
}

/** Headers as [name, value] pairs, names lower-case (what the run's tape takes). */
export function headerPairs(h: IncomingHttpHeaders | Record<string, string>): [string, string][] {
  const out: [string, string][] = [];
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) out.push([k.toLowerCase(), String(one)]);
  }
  return out;
}

/**
 * A recorded answer's headers as it is played: the body comes decoded (a cassette keeps `content.text`),
 * in chunks of its own, so the recorded encoding and framing headers do not apply.
 */
export function replayedHeaders(pairs: readonly [string, string][]): IncomingHttpHeaders {
  const out: Record<string, string> = {};
  for (const [k, v] of pairs) {
    const name = k.toLowerCase();
    if (['content-encoding', 'content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(name)) continue;
    out[name] = name in out ? `${out[name]}, ${v}` : v;
  }
  return out;
}

const header = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join(', ') : v);

/**
 * Everything that leaves the emulator on a snippet's behalf goes through here: the egress profile
 * (checked on the addresses a name resolves to, at connect time), the fault rules QA sets, and the
 * egress log. The proxy (snippets' own HTTP clients) and `integrations.call` (made by the core) share it.
 */
export class EgressService {
  readonly log = new EgressLog();
  readonly faults: FaultRules;
  /** The bodies of model calls (server/egress/exchanges.ts), for the agent run view; dropped with their invocation. */
  readonly exchanges: ProviderExchanges;

  constructor(
    readonly rules: EgressRules,
    private readonly clock: Clock,
    /** The tenant an invocation belongs to (null when unknown). */
    private readonly tenantOf: (invocationId: string) => string | null,
    /** Under the local profile, a call production would refuse: said on the invocation (parity_warnings). */
    private readonly warn: (invocationId: string, text: string) => void = () => {},
    /** Where each log entry is announced (GET /_emu/events); the core passes its bus. */
    private readonly events?: EventBus,
  ) {
    this.faults = new FaultRules(clock);
    this.exchanges = new ProviderExchanges(
      (id) => this.tenantOf(id) !== null,
      EXCHANGE_LIMITS,
      () => clock().getTime(),
    );
  }

  /** The open egress sessions, by invocation (services/egress-sessions.ts adds and removes them). */
  readonly sessions = new Map<string, EgressSession>();

  /** How a run treats its outbound calls (live, record, replay), while it runs; null for no run (or one that has ended). */
  sessionFor(invocationId: string | null): EgressSession | null {
    return invocationId ? (this.sessions.get(invocationId) ?? null) : null;
  }

  identify(invocationId: string | null): EgressIdentity {
    return { invocation_id: invocationId, tenant: invocationId ? this.tenantOf(invocationId) : null };
  }

  /**
   * The address to connect to, or why not: the profile is applied to every address the name has. Under
   * the local profile, what production would refuse goes through, and the invocation is told so.
   */
  async resolve(host: string, port: number, identity?: EgressIdentity): Promise<Resolved> {
    const bare = host.replace(/^\[|\]$/g, '');
    let addresses: { address: string; family: number }[];
    if (isIP(bare)) addresses = [{ address: bare, family: isIP(bare) }];
    else {
      try {
        addresses = await lookup(bare, { all: true, verbatim: true });
      } catch (err) {
        return { error: `host not found (${(err as NodeJS.ErrnoException).code ?? 'lookup failed'})` };
      }
    }
    for (const a of addresses) {
      const refused = refuseAddress(a.address, bare, port, this.rules, 'outbound connections');
      if (refused) return { refused };
    }
    if (this.rules.profile === 'local' && identity?.invocation_id) {
      const production = { profile: 'production' as const, allow: this.rules.allow };
      const wouldRefuse = addresses
        .map((a) => refuseAddress(a.address, bare, port, production, 'outbound connections'))
        .find((r) => r !== null);
      if (wouldRefuse)
        this.warn(identity.invocation_id, `egress: ${wouldRefuse.replace(/^production refuses/, 'production would refuse')}`);
    }
    return addresses[0] ?? { error: 'host not found (no address)' };
  }

  plan(host: string, integration: string | null): FaultPlan {
    return this.faults.plan(host, integration);
  }

  record(entry: Omit<EgressEntry, 'id' | 'at'> & { startedAt: number }): EgressEntry {
    const { startedAt, ...rest } = entry;
    const added = this.log.add({ ...rest, at: new Date(this.clock().getTime() - (performance.now() - startedAt)).toISOString() });
    this.events?.publish('egress.call', added);
    return added;
  }

  /**
   * One buffered HTTP(S) request made by the core (an integration call): faults, then the profile,
   * then the request with a deadline. Throws EgressError when it cannot get an answer; any HTTP status
   * that comes back is an answer.
   */
  async send(req: OutboundRequest): Promise<OutboundResponse> {
    const started = performance.now();
    const host = req.url.hostname;
    const port = Number(req.url.port || (req.url.protocol === 'https:' ? 443 : 80));
    const base = {
      source: 'integration' as const,
      tenant: req.identity.tenant,
      invocation_id: req.identity.invocation_id,
      integration: req.integration,
      method: req.method,
      host,
      port,
      path: req.url.pathname,
      bytes_out: req.body?.length ?? 0,
      startedAt: started,
    };
    // A model call made for `integrations.call` (an `openai` integration): its bodies, for the agent run view.
    const exchange =
      req.identity.invocation_id && isProviderCall(req.method, req.url.pathname)
        ? this.exchanges.open(req.identity.invocation_id, { source: 'integration', method: req.method, host, path: req.url.pathname })
        : null;
    if (exchange && req.body) exchange.request(req.body);
    // Every call goes on its run's tape, whatever the mode (services/egress-sessions.ts): the run's egress_blob, and a record run's cassette.
    const session = this.sessionFor(req.identity.invocation_id);
    const sent = headerPairs({ ...req.headers, ...(req.body ? { 'content-length': String(req.body.length) } : {}) });
    const call = session?.tape.begin({
      source: 'integration',
      integration: req.integration,
      method: req.method,
      url: req.url.href,
      headers: sent,
      hostAdded: req.hostAdded ?? [],
    });
    if (call && req.body) call.requestBody(req.body);
    const done = (fields: Partial<EgressEntry>) => {
      const entry = this.record({
        ...base,
        status: null,
        bytes_in: 0,
        duration_ms: Math.round(performance.now() - started),
        fault: plan.describe,
        refused: null,
        error: null,
        ...fields,
      });
      exchange?.finish(entry);
      // After the log entry: building the tape's entry (redaction) is not the call's time.
      call?.end(fields.status == null ? (fields.error ?? fields.refused ?? 'no answer') : (fields.error ?? null));
      return entry;
    };
    const answered = (status: number, headers: IncomingHttpHeaders, body: Buffer, statusText = '') => {
      call?.head({ status, statusText, headers: headerPairs(headers) });
      if (body.length) call?.chunk(body);
    };

    const plan = this.plan(host, req.integration);
    const deadline = started + req.timeoutMs;
    if (plan.latencyMs) await sleep(Math.min(plan.latencyMs, Math.max(0, deadline - performance.now())));
    if (performance.now() >= deadline || plan.fail?.type === 'timeout') {
      if (plan.fail?.type === 'timeout') await sleep(Math.max(0, deadline - performance.now()));
      done({ error: `no answer within ${req.timeoutMs} ms` });
      throw new EgressError('timeout', `${req.integration ?? host}: no answer within ${req.timeoutMs} ms`);
    }
    if (plan.fail?.type === 'drop') {
      done({ error: 'connection dropped by a fault rule' });
      throw new EgressError('egress_fault', `${req.integration ?? host}: the connection was dropped`);
    }
    if (plan.fail?.type === 'status') {
      const body = plan.fail.body ?? JSON.stringify({ error: 'injected by an emulator fault rule' });
      exchange?.head(plan.fail.status, 'application/json', undefined);
      exchange?.response(Buffer.from(body));
      const headers = { 'content-type': 'application/json', 'x-svc-emu-fault': 'status' };
      answered(plan.fail.status, headers, Buffer.from(body));
      done({ status: plan.fail.status, bytes_in: Buffer.byteLength(body) });
      return { status: plan.fail.status, headers, body: Buffer.from(body) };
    }
    if (session?.mode === 'replay') {
      // Nothing goes out: the cassette answers (fault rules above still act first, so QA can break a replay on purpose).
      const answer = answerFromCassette(session, {
        source: 'integration',
        integration: req.integration,
        method: req.method,
        url: req.url.href,
        headers: sent,
        hostAdded: req.hostAdded ?? [],
        body: req.body ?? Buffer.alloc(0),
      });
      if ('message' in answer) {
        done({ error: answer.message });
        throw new EgressError('replay_no_match', answer.message);
      }
      if (answer.error) {
        done({ error: answer.error });
        throw new EgressError('connection_failed', `${host}: ${answer.error} (as recorded)`);
      }
      // The core buffers an integration's answer: it comes whole, after the recorded time (scaled by the replay speed).
      const wait = answer.chunks.reduce((t, c) => t + c.delayMs, 0);
      if (wait > 0) await sleep(Math.min(wait, Math.max(0, deadline - performance.now())));
      if (performance.now() >= deadline && wait > 0) {
        done({ error: `no answer within ${req.timeoutMs} ms` });
        throw new EgressError('timeout', `${req.integration ?? host}: no answer within ${req.timeoutMs} ms`);
      }
      const body = Buffer.concat(answer.chunks.map((c) => c.data));
      const headers = replayedHeaders(answer.head.headers);
      exchange?.head(answer.head.status, header(headers['content-type']), undefined);
      exchange?.response(body);
      answered(answer.head.status, headers, body, answer.head.statusText);
      done({ status: answer.head.status, bytes_in: body.length });
      return { status: answer.head.status, headers, body };
    }
    const target = await this.resolve(host, port, req.identity);
    if ('refused' in target) {
      done({ refused: target.refused });
      throw new EgressError('egress_refused', target.refused);
    }
    if ('error' in target) {
      done({ error: target.error });
      throw new EgressError('connection_failed', `${host}: ${target.error}`);
    }
    try {
      const res = await this.request(req, target, deadline - performance.now());
      // The core buffers an integration's answer: it arrives here whole, so its first token is its last.
      exchange?.head(res.status, header(res.headers['content-type']), header(res.headers['content-encoding']));
      exchange?.response(res.body);
      answered(res.status, res.headers, res.body, res.statusText);
      done({ status: res.status, bytes_in: res.body.length });
      return res;
    } catch (err) {
      const e = err instanceof EgressError ? err : new EgressError('connection_failed', `${host}: ${(err as Error).message}`);
      done({ error: e.message });
      throw e;
    }
  }

  private request(req: OutboundRequest, target: { address: string; family: number }, timeoutMs: number): Promise<OutboundResponse> {
    return new Promise((resolve, reject) => {
      const send = req.url.protocol === 'https:' ? httpsRequest : httpRequest;
      const r = send(
        req.url,
        {
          method: req.method,
          headers: { ...req.headers, ...(req.body ? { 'content-length': String(req.body.length) } : {}) },
          agent: false,
          // Connect to the address the profile approved; TLS still checks the certificate for the name.
          lookup: (_host, opts, cb) => (opts.all ? cb(null, [target]) : cb(null, target.address, target.family)),
          // The default roots, plus SVC_EMU_EXTRA_CA's in tests (server/egress/tls/trust.ts).
          ...(req.url.protocol === 'https:' ? upstreamTls() : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > MAX_RESPONSE_BYTES) {
              r.destroy(new EgressError('connection_failed', `the answer is over ${MAX_RESPONSE_BYTES} bytes`));
              return;
            }
            chunks.push(c);
          });
          res.on('end', () => {
            clearTimeout(timer);
            resolve({
              status: res.statusCode ?? 0,
              statusText: res.statusMessage ?? '',
              headers: res.headers,
              body: Buffer.concat(chunks),
            });
          });
          res.on('error', reject);
        },
      );
      const timer = setTimeout(
        () => r.destroy(new EgressError('timeout', `${req.url.host}: no answer within ${req.timeoutMs} ms`)),
        Math.max(1, timeoutMs),
      );
      r.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      r.end(req.body);
    });
  }
}
