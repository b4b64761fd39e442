// A cancel that arrives after an async job's record is finished, but before the job has let go of its abort
// controller (its finish still being made durable), is refused as a conflict: it used to answer 202
// `cancelling` for an invocation that had already ended (seen under load in test/api/async.test.ts).
import { describe, expect, it } from 'vitest';
import { AsyncService } from '../../server/services/async';
import { TenantSlots } from '../../server/services/slots';
import { silentLogger } from '../../server/logger';
import { ConflictError } from '../../server/domain/errors';
import type { CallbackService } from '../../server/services/callbacks';
import type { InvokeService } from '../../server/services/invoke';
import type { InvocationService } from '../../server/services/invocations';
import type { TenantService } from '../../server/services/tenants';
import type { InvocationRecord, TenantRecord } from '../../server/storage/schema';
import type { ExecutionResult } from '../../executor';

describe('AsyncService.cancel', () => {
  it('refuses a job whose record is finished while its finish is still being written', async () => {
    const tenant = { id: 't' } as TenantRecord;
    const rec = { id: 'inv_1', tenant_id: 't', status: 'queued', outcome: null, callback: null } as unknown as InvocationRecord;
    let finishing!: () => void;
    const finishCalled = new Promise<void>((resolve) => (finishing = resolve));
    let release!: () => void;
    const durable = new Promise<void>((resolve) => (release = resolve));
    const invocations = {
      recover: async () => ({ requeued: 0, failed: 0, queued: [{ id: rec.id, tenant_id: 't' }] }),
      byId: () => rec,
      find: () => rec,
      markRunning: async () => Object.assign(rec, { status: 'running' }),
      inputOf: async () => null,
      finish: async () => {
        // What InvocationService.finish does: the record reads as finished at once, the durable write follows.
        Object.assign(rec, { status: 'succeeded', outcome: 'success' });
        finishing();
        await durable;
        return rec;
      },
    } as unknown as InvocationService;
    const invoke = {
      slots: new TenantSlots(),
      capOf: () => 1,
      execute: async () => ({ outcome: 'success' }),
      abort: () => false,
    } as unknown as InvokeService;
    const tenants = { byId: () => tenant } as unknown as TenantService;
    const callbacks = { recover: () => {}, schedule: () => {} } as unknown as CallbackService;
    const svc = new AsyncService(invoke, invocations, tenants, callbacks, { maxWorkers: 1, logger: silentLogger });
    await svc.recover();
    svc.start();
    await finishCalled;
    const refused = await svc.cancel(tenant, rec.id).catch((e: unknown) => e);
    release();
    while (svc.stats().running || svc.stats().queued) await svc.idle();
    expect(refused).toBeInstanceOf(ConflictError);
    expect((refused as ConflictError).message).toBe("invocation 'inv_1' has finished (success); there is nothing to cancel");
  });

  it('a cancel answered `cancelling` holds when the run ends on its own before the kill: the outcome is cancelled', async () => {
    const h = harness();
    await h.start();
    const signal = await h.executing;
    const answer = await h.svc.cancel(h.tenant, h.rec.id);
    expect(signal.aborted).toBe(true);
    // The executor had its verdict already (the reply came before the abort): it reports the run's own end.
    h.ran({ outcome: 'success', output: { done: true }, usage: USAGE, logs: 'ran\n', timeline: [] });
    h.writeBlobs();
    await h.settled();
    expect(answer).toBe('cancelling');
    expect(h.finishedWith).toMatchObject({ outcome: 'cancelled', error: { code: 'cancelled' }, usage: USAGE, logs: 'ran\n' });
    expect(h.finishedWith!.error!.message).toMatch(/as its run ended \(success\)/);
    expect(h.finishedWith).not.toHaveProperty('output');
  });

  it('refuses a cancel between the run ending and its record being finished, naming the outcome once it is written', async () => {
    const h = harness();
    await h.start();
    await h.executing;
    h.ran({ outcome: 'success', output: { done: true }, usage: USAGE, logs: '', timeline: [] });
    await h.finishCalled; // the run has ended; its big output is still going to a blob, so the record says `running`
    expect(h.rec.status).toBe('running');
    const refused = h.svc.cancel(h.tenant, h.rec.id).catch((e: unknown) => e);
    h.writeBlobs();
    await h.settled();
    const err = await refused;
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as ConflictError).message).toBe("invocation 'inv_1' has finished (success); there is nothing to cancel");
    expect(h.finishedWith).toMatchObject({ outcome: 'success', output: { done: true } });
  });
});

const USAGE = { duration_ms: 5, init_ms: 0, cpu_ms: 1, cpu_throttled_ms: 0, peak_memory_mb: 1 };

/**
 * One recovered job through a real AsyncService with fakes around it: the test says when its run ends (`ran`) and
 * when its finish's blobs are written (`writeBlobs`; InvocationService.finish writes them before the record changes).
 */
function harness() {
  const tenant = { id: 't' } as TenantRecord;
  const rec = { id: 'inv_1', tenant_id: 't', status: 'queued', outcome: null, callback: null } as unknown as InvocationRecord;
  let executing!: (signal: AbortSignal) => void;
  let ran!: (result: Partial<ExecutionResult>) => void;
  const result = new Promise<Partial<ExecutionResult>>((resolve) => (ran = resolve));
  let finishing!: () => void;
  let writeBlobs!: () => void;
  const blobs = new Promise<void>((resolve) => (writeBlobs = resolve));
  const h = {
    tenant,
    rec,
    executing: new Promise<AbortSignal>((resolve) => (executing = resolve)),
    ran,
    finishCalled: new Promise<void>((resolve) => (finishing = resolve)),
    writeBlobs,
    finishedWith: null as ExecutionResult | null,
    svc: null as unknown as AsyncService,
    start: async () => {
      await h.svc.recover();
      h.svc.start();
    },
    settled: async () => {
      while (h.svc.stats().running || h.svc.stats().queued) await h.svc.idle();
    },
  };
  const invocations = {
    recover: async () => ({ requeued: 0, failed: 0, queued: [{ id: rec.id, tenant_id: 't' }] }),
    byId: () => rec,
    find: () => rec,
    markRunning: async () => Object.assign(rec, { status: 'running' }),
    inputOf: async () => ({}),
    finish: async (_id: string, r: ExecutionResult) => {
      finishing();
      await blobs;
      h.finishedWith = r;
      return Object.assign(rec, { status: r.outcome === 'success' ? 'succeeded' : 'failed', outcome: r.outcome });
    },
  } as unknown as InvocationService;
  const invoke = {
    slots: new TenantSlots(),
    capOf: () => 1,
    execute: async (_t: TenantRecord, _r: InvocationRecord, _i: unknown, hooks: { signal: AbortSignal }) => {
      executing(hooks.signal);
      return result;
    },
    abort: () => false,
  } as unknown as InvokeService;
  const tenants = { byId: () => tenant } as unknown as TenantService;
  const callbacks = { recover: () => {}, schedule: () => {} } as unknown as CallbackService;
  h.svc = new AsyncService(invoke, invocations, tenants, callbacks, { maxWorkers: 1, logger: silentLogger });
  return h;
}
