// Signing in and the `/_emu/info` call. No React here, so it can be tested under Node.
//
// The GUI signs in once: opening it with `?token=<admin token>` makes the core answer a redirect without the
// token and an HttpOnly session cookie (server/http/gui-session.ts), which every tab then sends by itself and
// which survives restarts of the core. The GUI never holds a credential for `/_emu`; the desktop app's main
// process sets the cookie on its window before loading it (main/app.ts).
import { operations } from '../../contract';
import { createClient, type RawReply } from '../../contract/client';
import type { SvcEmuBridge } from '../../main/bridge';

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

export interface AddressBar {
  location: Pick<Location, 'href'>;
  history: Pick<History, 'replaceState' | 'state'>;
}

/**
 * A `?token=` still in the address bar is one the core did not accept (it redirects this run's admin token
 * away): removed from the address bar (and so from the history), and reported, so the sign-in page can say so.
 */
export function dropRejectedToken(src: AddressBar): boolean {
  const url = new URL(src.location.href);
  if (!url.searchParams.has('token')) return false;
  url.searchParams.delete('token');
  src.history.replaceState(src.history.state, '', `${url.pathname}${url.search}${url.hash}`);
  return true;
}

const BRIDGE_TRY_KEY = 'svc-emu.bridge-sign-in';

/**
 * The desktop app signed out (a `gui-token rotate` while it ran): sign in again with the admin token its
 * bridge hands over, once a minute at most (a loop would never end if the core kept refusing). True when
 * the page is being replaced.
 */
export async function signInThroughBridge(
  bridge: SvcEmuBridge | undefined,
  page: { location: Pick<Location, 'href' | 'replace'>; storage: Pick<Storage, 'getItem' | 'setItem'>; now?: () => number },
): Promise<boolean> {
  if (!bridge) return false;
  const now = (page.now ?? Date.now)();
  const last = Number(page.storage.getItem(BRIDGE_TRY_KEY) ?? 0);
  if (now - last < 60_000) return false;
  let token: string;
  try {
    token = await bridge.adminToken;
  } catch {
    return false;
  }
  if (!token) return false;
  page.storage.setItem(BRIDGE_TRY_KEY, String(now));
  const url = new URL(page.location.href);
  url.searchParams.set('token', token);
  page.location.replace(`${url.pathname}${url.search}${url.hash}`);
  return true;
}

/**
 * Whether this browser is signed in (its session cookie is current), asked of `/_emu/gui-session`, which
 * answers without a 401 either way; null when the core did not answer as expected (fetchInfo then says why).
 */
export async function isSignedIn(fetchImpl: typeof fetch = fetch): Promise<boolean | null> {
  try {
    return (await createClient({ fetch: fetchImpl }).call(operations.emuGuiSession)).signed_in;
  } catch {
    return null;
  }
}

export type InfoResult = { kind: 'ok'; info: EmulatorInfo } | { kind: 'rejected'; status: number } | { kind: 'error'; message: string };

/** `/_emu/info` with the session cookie (the browser sends it; no token here): `rejected` = not signed in. */
export async function fetchInfo(fetchImpl: typeof fetch = fetch): Promise<InfoResult> {
  // Through the one client (contract/client.ts) and the contract's operation; any status is read here (`send`).
  const client = createClient({ fetch: fetchImpl });
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
