// Issue 14, item 2: maps keyed by invocation id must shrink again on every way out, or a core that runs for
// weeks keeps one entry per such invocation. White-box (the maps are private): an async job that cannot
// run, a redelivery that succeeds while a retry was planned, a stream whose transcript cannot be written.
import { describe, expect, it } from 'vitest';
import { AsyncService } from '../../server/services/async';
import { CallbackService } from '../../server/services/callbacks';
import { TenantSlots } from '../../server/services/slots';
import { StreamLog } from '../../server/services/stream-log';
import { silentLogger } from '../../server/logger';
import { notFound } from '../../server/domain/errors';
import type { InvokeService } from '../../server/services/invoke';
import type { InvocationService } from '../../server/services/invocations';
import type { TenantService } from '../../server/services/tenants';
import type { CoreDeps } from '../../server/core-deps';
import { EventBus } from '../../server/events/bus';
import type { InvocationRecord } from '../../server/storage/schema';

const sizeOf = (o: object, field: string) => (o as unknown as Record<string, Map<string, unknown>>)[field]!.size;

describe('AsyncService', () => {
  it('forgets when a job was queued also when the job cannot run (its record is gone, or it is no longer queued)', async () => {
    const records: Record<string, Partial<InvocationRecord>> = { inv_done: { id: 'inv_done', tenant_id: 't', status: 'succeeded' } };
    const invocations = {
      recover: async () => ({
        requeued: 0,
        failed: 0,
        queued: [
          { id: 'inv_gone', tenant_id: 't' },
          { id: 'inv_done', tenant_id: 't' },
        ],
      }),
      byId: (id: string) => {
        if (!records[id]) throw notFound('invocation', id);
        return records[id];
      },
    } as unknown as InvocationService;
    const invoke = { slots: new TenantSlots(), capOf: () => 1 } as unknown as InvokeService;
    const tenants = { byId: () => ({ id: 't' }) } as unknown as TenantService;
    const callbacks = { recover: () => {} } as unknown as CallbackService;
    const svc = new AsyncService(invoke, invocations, tenants, callbacks, { maxWorkers: 1, logger: silentLogger });
    await svc.recover();
    svc.start();
    while (svc.stats().running || svc.stats().queued) await svc.idle(); // idle() resolves between two jobs too
    expect(svc.stats()).toMatchObject({ queued: 0, running: 0 });
    expect(sizeOf(svc, 'queuedAt')).toBe(0);
    expect(sizeOf(svc, 'controllers')).toBe(0);
  });
});

describe('CallbackService', () => {
  it('drops the planned retry of a callback that a redelivery got through', async () => {
    const now = new Date('2026-01-01T00:00:00Z');
    const rec = {
      id: 'inv_1',
      tenant_id: 't',
      finished_at: now.toISOString(),
      callback: {
        url: 'http://127.0.0.1:9/cb',
        webhook_id: 'msg_1',
        status: 'pending',
        deliveries: [],
        next_attempt_at: new Date(now.getTime() + 3600_000).toISOString(),
      },
    } as unknown as InvocationRecord;
    const db = { invocations: [rec] };
    const deps = {
      clock: () => now,
      events: new EventBus(() => now),
      repo: { read: <T>(fn: (d: typeof db) => T) => fn(db), mutateRecords: async <T>(fn: (d: typeof db) => T) => fn(db) },
    } as unknown as CoreDeps;
    const invocations = { byId: () => rec, find: () => rec, view: async () => ({ id: rec.id }) } as unknown as InvocationService;
    const tenants = { signingSecrets: () => ['whsec_' + Buffer.from('k'.repeat(32)).toString('base64')] } as unknown as TenantService;
    const svc = new CallbackService(deps, invocations, tenants, {
      rules: { profile: 'local', allow: [] } as never,
      retry: {} as never,
      timeoutMs: 1000,
      logger: silentLogger,
      deliver: async () => ({ status_code: 200, error: null, retry_after_ms: null, duration_ms: 1, ok: true, final: false }),
    });
    try {
      svc.schedule(rec.id);
      expect(sizeOf(svc, 'timers'), 'the retry in an hour is planned').toBe(1);
      const updated = await svc.redeliver({ id: 't' } as never, rec.id);
      expect(updated.callback?.status).toBe('delivered');
      expect(sizeOf(svc, 'timers')).toBe(0);
    } finally {
      svc.close();
    }
  });
});

describe('StreamLog', () => {
  it('lets a stream go, and ends its listeners, when its transcript cannot be written (and never rejects)', async () => {
    const errors: string[] = [];
    const deps = {
      clock: () => new Date(),
      blobs: { put: async () => Promise.reject(new Error('ENOSPC: no space left on device')) },
      repo: { mutateLazy: () => {} },
    } as unknown as CoreDeps;
    const log = new StreamLog(deps, 15_000, (message, err) => errors.push(`${message}: ${String(err)}`));
    const seen: (string | null)[] = [];
    log.open('inv_s', (e) => seen.push(e ? e.event : null));
    log.emit('inv_s', 'start', {});
    log.emit('inv_s', 'chunk', { data: 1 });
    await expect(log.close('inv_s')).resolves.toBeUndefined();
    expect(seen).toEqual(['start', 'chunk', null]);
    expect(sizeOf(log, 'live')).toBe(0);
    expect(errors).toEqual(['the events of stream inv_s could not be kept: Error: ENOSPC: no space left on device']);
  });
});
