import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Repository } from '../../server/storage/repository';
import { BlobStore } from '../../server/storage/blobs';
import { aesGcmSecretBox } from '../../server/crypto/secret-box';
import { TenantService } from '../../server/services/tenants';
import { sha256Hex } from '../../server/ids';
import { EventBus } from '../../server/events/bus';
import type { CoreDeps } from '../../server/core-deps';

// TenantService.authenticate decodes each key record's stored hash once and keeps the bytes (server/services/tenants.ts):
// what it answers must follow the records as they are now — a key added later, a record's hash changed in place, a
// record gone, a malformed hash — exactly as decoding them afresh at every request did.

let dir: string;
let deps: CoreDeps;
let tenants: TenantService;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-emu-auth-'));
  deps = {
    repo: await Repository.open(join(dir, 'db.json')),
    blobs: new BlobStore(join(dir, 'blobs')),
    secretBox: aesGcmSecretBox(randomBytes(32)),
    clock: () => new Date(),
    events: new EventBus(() => new Date()),
  };
  tenants = new TenantService(deps);
});

afterEach(async () => {
  await deps.repo.close();
  await rm(dir, { recursive: true, force: true });
});

const bearer = (key: string) => `Bearer ${key}`;

describe('authenticate', () => {
  it('follows the key records as they are now, whatever it decoded before', async () => {
    await tenants.create('alpha');
    await tenants.create('beta');
    const a = await tenants.createKey('alpha');
    expect(tenants.authenticate(bearer(a.key)).id).toBe(a.record.tenant_id);
    // A key made after the first request (its record decoded for the first time now).
    const b = await tenants.createKey('beta');
    expect(tenants.authenticate(bearer(b.key)).id).toBe(b.record.tenant_id);
    expect(tenants.authenticate(bearer(a.key)).id).toBe(a.record.tenant_id);

    // alpha's record now holds beta's hash (changed in place): alpha's key no longer works, beta's names alpha's tenant.
    await deps.repo.mutate((db) => {
      db.api_keys.find((k) => k.id === a.record.id)!.hash = sha256Hex('svc_other');
    });
    expect(() => tenants.authenticate(bearer(a.key))).toThrow(/not valid/);
    expect(tenants.authenticate(bearer('svc_other')).id).toBe(a.record.tenant_id);

    // A malformed stored hash matches nothing (not even a key whose digest it would pad to).
    await deps.repo.mutate((db) => {
      db.api_keys.find((k) => k.id === a.record.id)!.hash = 'not-hex';
    });
    expect(() => tenants.authenticate(bearer('svc_other'))).toThrow(/not valid/);
    expect(tenants.authenticate(bearer(b.key)).id).toBe(b.record.tenant_id);

    // A record gone: its key is refused at once.
    await deps.repo.mutate((db) => {
      db.api_keys = db.api_keys.filter((k) => k.id !== b.record.id);
    });
    expect(() => tenants.authenticate(bearer(b.key))).toThrow(/not valid/);
  });
});
