import { ApiError, DataDirError } from '../errors';
import { acquireDataDir, liveOwner, type DataDirPaths } from '../storage/data-dir';
import { openState } from '../open-state';
import { TenantService, type TenantView } from '../services/tenants';
import { EMULATOR_VERSION } from '../version';
import type { CapsRecord } from '../storage/schema';

/**
 * The operator powers (tenants, caps, keys) behind one interface with two ways in: over `/_emu` when a
 * core owns the data dir, or on the files (holding the data dir's lock) when none does. The CLI does
 * not need to know which.
 */
export interface Operator {
  listTenants(): Promise<TenantView[]>;
  getTenant(name: string): Promise<TenantView>;
  createTenant(name: string): Promise<TenantView>;
  setCaps(name: string, patch: Partial<CapsRecord>): Promise<CapsRecord>;
  createKey(name: string): Promise<{ id: string; tenant: string; key: string; prefix: string; created_at: string }>;
  /** 'core' = through the running emulator at `url`; 'files' = directly on the data dir. */
  readonly via: { kind: 'core'; url: string } | { kind: 'files' };
  close(): Promise<void>;
}

export async function openOperator(paths: DataDirPaths): Promise<Operator> {
  const owner = await liveOwner(paths);
  if (owner?.kind === 'core' && owner.url && owner.admin_token) return httpOperator(owner.url, owner.admin_token);
  if (owner?.kind === 'core') {
    throw new DataDirError(paths.root, `an emulator (pid ${owner.pid}) is still starting on it`, 'Try again in a moment.');
  }
  return fileOperator(paths);
}

function httpOperator(url: string, adminToken: string): Operator {
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    let res: Response;
    try {
      res = await fetch(url + path, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
    } catch (err) {
      throw new DataDirError(url, `the running emulator did not answer (${(err as Error).message})`);
    }
    const payload = (await res.json().catch(() => null)) as Record<string, unknown> | null;
    if (!res.ok) {
      throw new ApiError(res.status, String(payload?.code ?? 'error'), String(payload?.title ?? 'Error'), String(payload?.detail ?? res.statusText), payload ?? {});
    }
    return payload as T;
  };
  const enc = encodeURIComponent;
  return {
    via: { kind: 'core', url },
    listTenants: async () => (await call<{ data: TenantView[] }>('GET', '/_emu/tenants')).data,
    getTenant: (name) => call('GET', `/_emu/tenants/${enc(name)}`),
    createTenant: (name) => call('POST', '/_emu/tenants', { name }),
    setCaps: (name, patch) => call('PATCH', `/_emu/tenants/${enc(name)}/limits`, patch),
    createKey: (name) => call('POST', `/_emu/tenants/${enc(name)}/keys`),
    close: async () => {},
  };
}

async function fileOperator(paths: DataDirPaths): Promise<Operator> {
  const lock = await acquireDataDir(paths, 'cli', EMULATOR_VERSION);
  try {
    const { deps } = await openState(paths.root);
    const tenants = new TenantService(deps);
    return {
      via: { kind: 'files' },
      listTenants: async () => tenants.list().map((t) => tenants.view(t)),
      getTenant: async (name) => tenants.view(tenants.get(name)),
      createTenant: async (name) => tenants.view(await tenants.create(name)),
      setCaps: (name, patch) => tenants.setCaps(name, patch),
      createKey: async (name) => {
        const { record, key } = await tenants.createKey(name);
        return { id: record.id, tenant: name, key, prefix: record.prefix, created_at: record.created_at };
      },
      close: async () => {
        await deps.repo.flush();
        await lock.release();
      },
    };
  } catch (err) {
    await lock.release();
    throw err;
  }
}
