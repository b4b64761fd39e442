// Admin-token hand-over and the `/_emu/info` call. No React here, so it can be tested under Node.
import { operations } from '../../contract';
import { createClient, type RawReply } from '../../contract/client';
import type { SvcEmuBridge } from '../../main/bridge';

export const TOKEN_STORAGE_KEY = 'svc-emu.admin-token';

export interface TenantCaps {
  name: string;
  caps: {
    timeout_ms: number | null;
    max_memory_mb: number | null;
    max_cpu_percent: number | null;
    max_concurrency: number | null;
  };
}

export interface EmulatorInfo {
  version: string;
  dataDir: string;
  /** The folder the loader watches (null: none). */
  workspace: string | null;
  /** The core's own URL (what `/v1` clients call). */
  url: string | null;
  localApiKey: string | null;
  tenants: TenantCaps[];
}

export interface TokenSources {
  location: Pick<Location, 'href'>;
  history: Pick<History, 'replaceState' | 'state'>;
  storage: Pick<Storage, 'getItem' | 'setItem'>;
  bridge: SvcEmuBridge | undefined;
}

/**
 * The admin token, in order: `?token=` in the URL (then removed from the address bar and kept in
 * sessionStorage, so a reload still works), the desktop app's preload bridge, sessionStorage.
 */
export async function acquireToken(src: TokenSources): Promise<string | null> {
  const url = new URL(src.location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl !== null) {
    url.searchParams.delete('token');
    src.history.replaceState(src.history.state, '', `${url.pathname}${url.search}${url.hash}`);
    if (fromUrl) {
      src.storage.setItem(TOKEN_STORAGE_KEY, fromUrl);
      return fromUrl;
    }
  }
  if (src.bridge) {
    try {
      const token = await src.bridge.adminToken;
      if (token) return token;
    } catch {
      // fall through to a stored token
    }
  }
  return src.storage.getItem(TOKEN_STORAGE_KEY) || null;
}

export type InfoResult = { kind: 'ok'; info: EmulatorInfo } | { kind: 'rejected'; status: number } | { kind: 'error'; message: string };

export async function fetchInfo(token: string, fetchImpl: typeof fetch = fetch): Promise<InfoResult> {
  // Through the one client (contract/client.ts) and the contract's operation; any status is read here (`send`).
  const client = createClient({ adminToken: token, fetch: fetchImpl });
  let reply: RawReply;
  try {
    reply = await client.send(operations.emuInfo, { headers: { accept: 'application/json' } });
  } catch (error) {
    return { kind: 'error', message: `The emulator did not answer (${error instanceof Error ? error.message : String(error)}).` };
  }
  if (reply.status === 401 || reply.status === 403) return { kind: 'rejected', status: reply.status };
  if (reply.status < 200 || reply.status > 299) return { kind: 'error', message: `GET /_emu/info answered ${reply.status}.` };
  if (reply.body === undefined) return { kind: 'error', message: 'GET /_emu/info did not answer JSON.' };
  return { kind: 'ok', info: parseInfo(reply.body) };
}

/** Reads the fields the overview and the shell use, tolerating missing ones. */
export function parseInfo(raw: unknown): EmulatorInfo {
  const obj = isRecord(raw) ? raw : {};
  const tenants = Array.isArray(obj.tenants) ? obj.tenants : [];
  return {
    version: str(obj.version) ?? str(obj.emulator_version) ?? 'unknown',
    dataDir: str(obj.data_dir) ?? 'unknown',
    workspace: str(obj.workspace) ?? null,
    url: str(obj.url) ?? null,
    localApiKey: str(obj.local_api_key) ?? null,
    tenants: tenants.filter(isRecord).map((t) => {
      const caps = isRecord(t.caps) ? t.caps : {};
      return {
        name: str(t.name) ?? '?',
        caps: {
          timeout_ms: num(caps.timeout_ms),
          max_memory_mb: num(caps.max_memory_mb),
          max_cpu_percent: num(caps.max_cpu_percent),
          max_concurrency: num(caps.max_concurrency),
        },
      };
    }),
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}
function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}
