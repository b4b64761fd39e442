import { conflict, ValidationError, type DomainCode } from '../domain/errors';
import { checkTarget, refuseAddress, TargetError, type EgressRules } from '../egress/policy';
import { deliver as httpDeliver, type DeliverOptions, type DeliveryAttempt } from '../webhooks/deliver';
import { signHeaders } from '../webhooks/sign';
import { isOwnInbox, isSelfAddress, type SelfEndpoint } from '../webhooks/own-inbox';
import { nextDelayMs, type RetryPolicy } from '../webhooks/schedule';
import type { Logger } from '../logger';
import type { CoreDeps } from '../core-deps';
import type { DeliveryRecord, InvocationRecord, TenantRecord } from '../storage/schema';
import type { InvocationService } from './invocations';
import type { TenantService } from './tenants';

/** Deliveries kept per invocation (the retry schedule has 10; redeliveries add to it). */
const MAX_DELIVERIES = 50;

export interface CallbackOptions {
  rules: EgressRules;
  retry: RetryPolicy;
  /** Per attempt: connect, answer and body (production: 15 s). */
  timeoutMs: number;
  logger: Logger;
  /** One HTTP attempt (tests may pass their own). */
  deliver?: (opts: DeliverOptions) => Promise<DeliveryAttempt>;
  /** Where this core listens, once it does (its own inbox is a callback target under every profile). */
  self?: () => SelfEndpoint | null;
}

/**
 * Async callbacks: the finished invocation record POSTed to `callback_url`, signed per Standard
 * Webhooks with the tenant's secret, retried on the production schedule (compressible for QA) until
 * a 2xx, a 410, a refused target, or the schedule runs out. Each attempt is recorded on the invocation
 * before the next is planned, so a restart resumes where the last core stopped.
 */
export class CallbackService {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly deps: CoreDeps,
    private readonly invocations: InvocationService,
    private readonly tenants: TenantService,
    private readonly opts: CallbackOptions,
  ) {}

  get rules(): EgressRules {
    return this.opts.rules;
  }

  private self(): SelfEndpoint | null {
    return this.opts.self?.() ?? null;
  }

  /**
   * Checks a callback URL at submit: not http(s) → 422; refused under the production egress profile
   * → 422; allowed here but not in production → the parity warnings to record on the invocation.
   */
  async vet(url: unknown): Promise<string[]> {
    const invalid = (message: string, code: DomainCode<'validation_failed'> = 'validation_failed') =>
      new ValidationError([{ location: 'body.callback_url', message }], message, code);
    if (typeof url !== 'string' || url.length === 0 || url.length > 2048) {
      throw invalid('callback_url must be an http(s) URL of at most 2048 characters');
    }
    if (this.opts.rules.profile === 'production' && isOwnInbox(url, this.self())) {
      const host = new URL(url).hostname;
      return [
        `callback_url: production would refuse this target: ${host} is a private/loopback address (production refuses callback targets ` +
          `that resolve to private, loopback or link-local addresses); allowed here because it is this emulator's own callback inbox`,
      ];
    }
    try {
      const verdict = await checkTarget(url, this.opts.rules);
      if (verdict.refused) throw invalid(verdict.refused, 'callback_url_refused');
      return verdict.warning ? [`callback_url: ${verdict.warning}`] : [];
    } catch (err) {
      if (err instanceof TargetError) throw invalid(err.message, err.code === 'refused' ? 'callback_url_refused' : 'validation_failed');
      throw err;
    }
  }

  /** Plans the invocation's next delivery from its record (at once when it is due). */
  schedule(id: string): void {
    if (this.closed) return;
    const cb = this.deps.repo.read((db) => db.invocations.find((i) => i.id === id)?.callback);
    if (!cb || cb.status !== 'pending' || !cb.next_attempt_at) return;
    clearTimeout(this.timers.get(id));
    const due = Math.max(0, Date.parse(cb.next_attempt_at) - this.deps.clock().getTime());
    const timer = setTimeout(() => {
      this.timers.delete(id);
      this.attempt(id, true).catch((err) =>
        this.opts.logger.log('error', 'callback delivery failed inside the emulator', { invocation_id: id, error: String(err) }),
      );
    }, due);
    timer.unref();
    this.timers.set(id, timer);
  }

  /** After a restart: every callback still due is planned again. */
  recover(): void {
    const due = this.deps.repo.read((db) =>
      db.invocations.filter((i) => i.callback?.status === 'pending' && i.callback.next_attempt_at).map((i) => i.id),
    );
    for (const id of due) this.schedule(id);
  }

  /** Sends the callback again now, outside the retry schedule (same `webhook-id`). */
  async redeliver(tenant: TenantRecord, id: string): Promise<InvocationRecord> {
    const rec = this.invocations.find(tenant, id);
    if (!rec.callback) throw conflict(`invocation '${id}' was made without a callback_url; there is nothing to redeliver`);
    if (!rec.finished_at) throw conflict(`invocation '${id}' has not finished; its callback goes out when it does`);
    return this.attempt(rec.id, false);
  }

  /** A state import replaced the records (server/state/service.ts): the planned deliveries of the old ones go. */
  forgetPlanned(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  /** One POST, recorded; then the next one planned (scheduled attempts only). */
  private async attempt(id: string, scheduled: boolean): Promise<InvocationRecord> {
    const rec = this.invocations.byId(id);
    const cb = rec.callback!;
    const body = JSON.stringify(await this.invocations.view(rec));
    const timestamp = Math.floor(this.deps.clock().getTime() / 1000);
    const headers = signHeaders(this.tenants.signingSecrets(rec.tenant_id), cb.webhook_id, timestamp, body);
    const at = this.deps.clock().toISOString();
    const result = await (this.opts.deliver ?? httpDeliver)({
      url: cb.url,
      headers,
      body,
      timeoutMs: this.opts.timeoutMs,
      guard: isOwnInbox(cb.url, this.self())
        ? (address, host, port) => (isSelfAddress(address, port, this.self()) ? null : refuseAddress(address, host, port, this.opts.rules))
        : (address, host, port) => refuseAddress(address, host, port, this.opts.rules),
    });
    const updated = await this.deps.repo.mutateRecords(
      (db) => {
        const current = db.invocations.find((i) => i.id === id);
        if (!current?.callback) return current ?? rec;
        const callback = current.callback;
        const delivery: DeliveryRecord = {
          at,
          status_code: result.status_code,
          error: result.error,
          duration_ms: result.duration_ms,
          scheduled,
        };
        callback.deliveries.push(delivery);
        if (callback.deliveries.length > MAX_DELIVERIES) callback.deliveries.splice(0, callback.deliveries.length - MAX_DELIVERIES);
        if (result.ok) {
          callback.status = 'delivered';
          callback.next_attempt_at = null;
        } else if (scheduled) {
          const sent = callback.deliveries.filter((d) => d.scheduled).length;
          const delay = result.final ? null : nextDelayMs(sent, this.opts.retry, result.retry_after_ms);
          callback.status = delay === null ? 'failed' : 'pending';
          callback.next_attempt_at = delay === null ? null : new Date(this.deps.clock().getTime() + delay).toISOString();
        }
        return current;
      },
      (r) => [r],
    );
    const after = updated.callback;
    if (after) {
      this.deps.events.publish('callback.attempt', {
        invocation_id: id,
        url: after.url,
        attempt: after.deliveries.length,
        status_code: result.status_code,
        error: result.error,
        state: after.status,
      });
    }
    if (result.ok) {
      clearTimeout(this.timers.get(id)); // a redelivery answered 2xx: the planned retry has nothing left to do
      this.timers.delete(id);
    } else if (scheduled) this.schedule(id);
    return updated;
  }
}
