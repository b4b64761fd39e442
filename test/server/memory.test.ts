// /_emu/memory: the core's own RSS and heap, optionally after a forced GC (what the soak benchmark reads).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coreMemory } from '../../server/memory';
import { DomainError } from '../../server/domain/errors';
import { problemOfDomainError } from '../../server/http/problem';
import { startTestCore, type TestCore } from '../helpers/core';

describe('coreMemory', () => {
  it('runs the collector when asked, and refuses with gc_unavailable when node has no --expose-gc', () => {
    let collections = 0;
    const m = coreMemory(true, () => collections++);
    expect(collections).toBe(1);
    expect(m.gc).toBe('forced');
    expect(m.rss_bytes).toBeGreaterThan(m.heap_used_bytes);
    expect(coreMemory(false, () => collections++).gc).toBe('not_asked');
    expect(collections).toBe(1);
    let err: unknown;
    try {
      coreMemory(true, null);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect(problemOfDomainError(err as DomainError).status).toBe(409);
    expect((err as DomainError).code).toBe('gc_unavailable');
  });
});

describe('GET /_emu/memory', () => {
  let core: TestCore;
  beforeAll(async () => {
    core = await startTestCore();
  }, 60_000);
  afterAll(async () => {
    await core?.stop();
  });

  it('answers the admin with the process memory, and a tenant key with 401', async () => {
    const r = await core.call('GET', '/_emu/memory', undefined, { key: core.admin });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ gc: 'not_asked' });
    expect(r.json.heap_used_bytes).toBeGreaterThan(0);
    expect((await core.call('GET', '/_emu/memory')).status).toBe(401);
    expect((await core.call('GET', '/_emu/memory?gc=maybe', undefined, { key: core.admin })).status).toBe(400);
  });
});
