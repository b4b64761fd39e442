// The GUI's sign-in (renderer/src/session.ts) and /_emu/info parsing, under Node: the cookie itself is the
// browser's (test/gui/session.test.ts drives it in Chromium).
import { describe, expect, it, vi } from 'vitest';
import type { SvcEmuBridge } from '../../main/bridge';
import { dropRejectedToken, fetchInfo, isSignedIn, parseInfo, signInThroughBridge } from '../../renderer/src/session';

const bridge = (token: Promise<string>): SvcEmuBridge => ({
  adminToken: token,
  openFolder: async () => null,
  reveal: async () => undefined,
  openInEditor: async () => '',
  switchWorkspace: async () => '',
});

describe('renderer sign-in', () => {
  it('a ?token= the core left in the URL (not this run’s) leaves the address bar and is reported', () => {
    const replaceState = vi.fn();
    expect(
      dropRejectedToken({
        location: { href: 'http://127.0.0.1:7070/?token=old&tab=runs#/snippets' },
        history: { state: null, replaceState },
      }),
    ).toBe(true);
    expect(replaceState).toHaveBeenCalledWith(null, '', '/?tab=runs#/snippets');
    const untouched = vi.fn();
    expect(dropRejectedToken({ location: { href: 'http://127.0.0.1:7070/#/x' }, history: { state: null, replaceState: untouched } })).toBe(
      false,
    );
    expect(untouched).not.toHaveBeenCalled();
  });

  it('asks /_emu/gui-session without credentials (the cookie is the browser’s), and says null when the core does not answer', async () => {
    const fetchImpl = vi.fn(
      async (_url: string | URL | Request, _init?: RequestInit) =>
        new Response(JSON.stringify({ signed_in: false, via: null, admin_token: null }), { status: 200 }),
    );
    await expect(isSignedIn(fetchImpl)).resolves.toBe(false);
    const [url, init] = fetchImpl.mock.calls[0]!;
    expect(url).toBe('/_emu/gui-session');
    expect(new Headers(init?.headers).get('authorization')).toBeNull();
    const down = (async () => {
      throw new TypeError('fetch failed');
    }) as unknown as typeof fetch;
    await expect(isSignedIn(down)).resolves.toBeNull();
  });

  it('the desktop app signs in again through its bridge after a rotation, at most once a minute', async () => {
    const store = new Map<string, string>();
    const storage = { getItem: (k: string) => store.get(k) ?? null, setItem: (k: string, v: string) => void store.set(k, v) };
    const replace = vi.fn();
    const page = (now: number) => ({ location: { href: 'http://127.0.0.1:7070/#/snippets/hello', replace }, storage, now: () => now });
    await expect(signInThroughBridge(bridge(Promise.resolve('emu_tok')), page(1_000_000))).resolves.toBe(true);
    expect(replace).toHaveBeenCalledWith('/?token=emu_tok#/snippets/hello');
    await expect(signInThroughBridge(bridge(Promise.resolve('emu_tok')), page(1_030_000))).resolves.toBe(false); // a loop, if the core refused
    await expect(signInThroughBridge(bridge(Promise.resolve('emu_tok')), page(1_070_000))).resolves.toBe(true);
    await expect(signInThroughBridge(undefined, page(9_000_000))).resolves.toBe(false); // a browser has no bridge
    await expect(signInThroughBridge(bridge(Promise.reject(new Error('no ipc'))), page(9_000_000))).resolves.toBe(false);
  });
});

describe('renderer fetchInfo/parseInfo', () => {
  const info = {
    version: '0.1.0',
    data_dir: '/p/.svc-emu',
    workspace: '/p',
    url: 'http://127.0.0.1:7070',
    local_api_key: 'svc_abc',
    tenants: [{ name: 'local', caps: { timeout_ms: 60000, max_memory_mb: 1024, max_cpu_percent: 100, max_concurrency: 10 } }],
  };

  it('sends no token (the session cookie is the browser’s) and reads version, data dir, workspace, URL, key and caps', async () => {
    const fetchImpl = vi.fn(
      async (_url: string | URL | Request, _init?: RequestInit) => new Response(JSON.stringify(info), { status: 200 }),
    );
    const result = await fetchInfo(fetchImpl);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    const [url, init] = fetchImpl.mock.calls[0]!;
    expect(url).toBe('/_emu/info');
    expect(new Headers(init?.headers).get('authorization')).toBeNull();
    expect(result).toEqual({
      kind: 'ok',
      info: {
        version: '0.1.0',
        dataDir: '/p/.svc-emu',
        workspace: '/p',
        url: 'http://127.0.0.1:7070',
        localApiKey: 'svc_abc',
        tenants: [{ name: 'local', caps: info.tenants[0]!.caps }],
      },
    });
  });

  it('reports not signed in (401) and other failures distinctly', async () => {
    const status = (s: number) => (async () => new Response('{}', { status: s })) as unknown as typeof fetch;
    await expect(fetchInfo(status(401))).resolves.toEqual({ kind: 'rejected', status: 401 });
    await expect(fetchInfo(status(500))).resolves.toMatchObject({ kind: 'error' });
    const down = (async () => {
      throw new TypeError('fetch failed');
    }) as unknown as typeof fetch;
    await expect(fetchInfo(down)).resolves.toMatchObject({ kind: 'error', message: expect.stringContaining('fetch failed') });
  });

  it('tolerates missing fields', () => {
    expect(parseInfo({ tenants: [{ name: 'x' }, 'junk'] })).toEqual({
      version: 'unknown',
      dataDir: 'unknown',
      workspace: null,
      url: null,
      localApiKey: null,
      tenants: [{ name: 'x', caps: { timeout_ms: null, max_memory_mb: null, max_cpu_percent: null, max_concurrency: null } }],
    });
  });
});
