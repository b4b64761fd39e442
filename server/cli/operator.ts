import { join } from 'node:path';
import { createClient, ProblemError } from '../../contract/client';
import { operations as ops } from '../../contract';
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

/** `warn` hears what opening the data dir's files set aside (the quarantine: storage/quarantine.ts). */
export async function openOperator(paths: DataDirPaths, warn: (text: string) => void = () => {}): Promise<Operator> {
  const owner = await liveOwner(paths);
  if (owner?.kind === 'core' && owner.url && owner.admin_token) return httpOperator(owner.url, owner.admin_token);
  if (owner?.kind === 'core') {
    throw new DataDirError(paths.root, `an emulator (pid ${owner.pid}) is still starting on it`, 'Try again in a moment.');
  }
  return fileOperator(paths, warn);
}

/** The operator powers of a core reached by URL (`$SVC_EMU_URL` with `$SVC_EMU_ADMIN_TOKEN`: server/cli/locate.ts). */
export const openOperatorAt = (url: string, adminToken: string): Operator => httpOperator(url, adminToken);

function httpOperator(url: string, adminToken: string): Operator {
  // The one client (contract/client.ts) with the admin token: /_emu's tenant operations, a problem as an ApiError.
  const client = createClient({ baseUrl: url, adminToken });
  const call = async <T>(request: () => Promise<unknown>): Promise<T> => {
    try {
      return (await request()) as T;
    } catch (err) {
      if (err instanceof ProblemError) throw new ApiError(err.status, err.code, err.title || 'Error', err.detail, { ...err.problem });
      throw new DataDirError(url, `the running emulator did not answer (${(err as Error).message})`);
    }
  };
  return {
    via: { kind: 'core', url },
    listTenants: async () => (await call<{ data: TenantView[] }>(() => client.call(ops.emuListTenants))).data,
    getTenant: (name) => call(() => client.call(ops.emuGetTenant, { params: { name } })),
    createTenant: (name) => call(() => client.call(ops.emuCreateTenant, { body: { name } })),
    setCaps: (name, patch) => call(() => client.call(ops.emuSetTenantLimits, { params: { name }, body: patch })),
    createKey: (name) => call(() => client.call(ops.emuCreateTenantKey, { params: { name } })),
    close: async () => {},
  };
}

async function fileOperator(paths: DataDirPaths, warn: (text: string) => void): Promise<Operator> {
  const lock = await acquireDataDir(paths, 'cli', EMULATOR_VERSION);
  try {
    const { deps } = await openState(paths.root);
    const q = deps.repo.quarantined;
    if (q) {
      const whole = q.items.some((i) => i.collection === null);
      warn(
        `svc-emu: ${whole ? 'db.json could not be used: the state starts EMPTY' : `${q.items.length} record(s) failed validation and were set aside`}; kept in ${join(paths.root, 'quarantine')} (svc-emu doctor lists them)\n`,
      );
    }
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
