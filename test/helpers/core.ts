import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmulator, type EmulatorConfig, type RunningEmulator } from '../../server';
import { jsonLogger } from '../../server/logger';

export const PROJECT_ROOT = join(__dirname, '..', '..');

export interface TestCore {
  emu: RunningEmulator;
  url: string;
  dataDir: string;
  /** The local tenant's key. */
  key: string;
  admin: string;
  /** Every log line the core wrote. */
  logs: string[];
  call(method: string, path: string, body?: unknown, opts?: CallOpts): Promise<Res>;
  stop(): Promise<void>;
}

export interface CallOpts {
  key?: string | null;
  headers?: Record<string, string>;
  raw?: string | Buffer;
}

export interface Res {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export async function tempDir(prefix = 'svc-emu-test-'): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export async function request(url: string, method: string, path: string, body?: unknown, opts: CallOpts & { defaultKey?: string } = {}): Promise<Res> {
  const key = opts.key === undefined ? opts.defaultKey : opts.key;
  const headers: Record<string, string> = { ...(key ? { authorization: `Bearer ${key}` } : {}) };
  let payload: string | Buffer | undefined;
  if (opts.raw !== undefined) payload = opts.raw;
  else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers['content-type'] = 'application/json';
  }
  const res = await fetch(url + path, { method, headers: { ...headers, ...opts.headers }, body: payload as BodyInit | undefined });
  const text = await res.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** A core on port 0 with a fresh temp data dir (or the given one). */
export async function startTestCore(
  opts: { dataDir?: string; keepDir?: boolean; workspace?: string; config?: Partial<EmulatorConfig> } = {},
): Promise<TestCore> {
  const dataDir = opts.dataDir ?? (await tempDir());
  const logs: string[] = [];
  const emu = await startEmulator({
    dataDir,
    port: 0,
    logger: jsonLogger((l) => logs.push(l), { level: 'debug' }),
    storeSweepMs: 50,
    projectRoot: PROJECT_ROOT,
    ...(opts.workspace ? { workspace: opts.workspace } : {}),
    ...opts.config,
  });
  const key = emu.localApiKey!;
  return {
    emu,
    url: emu.url,
    dataDir,
    key,
    admin: emu.adminToken,
    logs,
    call: (method, path, body, o = {}) => request(emu.url, method, path, body, { ...o, defaultKey: key }),
    async stop() {
      await emu.stop();
      if (!opts.keepDir && !opts.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
