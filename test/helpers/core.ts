import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type Client } from '../../contract/client';
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
  /**
   * The typed client (contract/client.ts) with the local tenant's key and the admin token, validating every
   * answer against its Operation: a test calling through it is also a contract check.
   */
  client: Client;
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

export async function request(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  opts: CallOpts & { defaultKey?: string } = {},
): Promise<Res> {
  // The one client's untyped form (contract/client.ts): any method and path, the key as a bearer credential.
  const key = opts.key === undefined ? opts.defaultKey : opts.key;
  const r = await createClient({ baseUrl: url }).sendPath(method, path, {
    credential: key ?? null,
    ...(opts.raw !== undefined ? { raw: opts.raw } : { body }),
    ...(opts.headers ? { headers: opts.headers } : {}),
  });
  return { status: r.status, headers: r.headers, text: r.text, json: r.body };
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
    // No framework spares unless a test asks (config.spares: 'all'): a LangGraph import is ~1 s of CPU per core start.
    spares: 'plain',
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
    client: createClient({ baseUrl: emu.url, key, adminToken: emu.adminToken, validate: true }),
    async stop() {
      await emu.stop();
      if (!opts.keepDir && !opts.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
