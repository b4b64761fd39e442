// The placeholder GUI's token hand-over and /_emu/info parsing (renderer/src/session.ts), under Node.
import { describe, expect, it, vi } from 'vitest';
import type { SvcEmuBridge } from '../../main/bridge';
import { acquireToken, fetchInfo, parseInfo, TOKEN_STORAGE_KEY, type TokenSources } from '../../renderer/src/session';

function sources(href: string, bridge?: SvcEmuBridge) {
  const store = new Map<string, string>();
  const replaceState = vi.fn();
  const src: TokenSources = {
    location: { href },
    history: { state: null, replaceState },
    storage: { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => void store.set(k, v) },
    bridge,
  };
  return { src, store, replaceState };
}

const bridge = (token: Promise<string>): SvcEmuBridge => ({
  adminToken: token,
  openFolder: async () => null,
  reveal: async () => undefined,
  openInEditor: async () => '',
  switchWorkspace: async () => '',
});

describe('renderer acquireToken', () => {
  it('takes ?token=, removes it from the address bar and keeps it in sessionStorage', async () => {
    const { src, store, replaceState } = sources('http://127.0.0.1:7070/?token=abc&tab=runs#x');
    await expect(acquireToken(src)).resolves.toBe('abc');
    expect(replaceState).toHaveBeenCalledWith(null, '', '/?tab=runs#x');
    expect(store.get(TOKEN_STORAGE_KEY)).toBe('abc');
  });

  it('uses the preload bridge in the desktop app, then sessionStorage after a reload', async () => {
    await expect(acquireToken(sources('http://127.0.0.1:7070/', bridge(Promise.resolve('from-ipc'))).src)).resolves.toBe('from-ipc');
    const reload = sources('http://127.0.0.1:7070/', bridge(Promise.reject(new Error('no ipc'))));
    reload.store.set(TOKEN_STORAGE_KEY, 'stored');
    await expect(acquireToken(reload.src)).resolves.toBe('stored');
    await expect(acquireToken(sources('http://127.0.0.1:7070/').src)).resolves.toBeNull();
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

  it('sends the token as a bearer and reads version, data dir, workspace, URL, key and caps', async () => {
    const fetchImpl = vi.fn(
      async (_url: string | URL | Request, _init?: RequestInit) => new Response(JSON.stringify(info), { status: 200 }),
    );
    const result = await fetchInfo('tok', fetchImpl);
    expect(fetchImpl).toHaveBeenCalledTimes(1);
    const [url, init] = fetchImpl.mock.calls[0]!;
    expect(url).toBe('/_emu/info');
    expect(new Headers(init?.headers).get('authorization')).toBe('Bearer tok');
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

  it('reports a rejected token and other failures distinctly', async () => {
    const status = (s: number) => (async () => new Response('{}', { status: s })) as unknown as typeof fetch;
    await expect(fetchInfo('bad', status(401))).resolves.toEqual({ kind: 'rejected', status: 401 });
    await expect(fetchInfo('t', status(500))).resolves.toMatchObject({ kind: 'error' });
    const down = (async () => {
      throw new TypeError('fetch failed');
    }) as unknown as typeof fetch;
    await expect(fetchInfo('t', down)).resolves.toMatchObject({ kind: 'error', message: expect.stringContaining('fetch failed') });
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
