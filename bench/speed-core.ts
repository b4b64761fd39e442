import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Served, Unavailable } from './anchors';
import { client, type ServedCore } from './lib';
import type { Target } from './lean-http';
import type { RowInput } from './table';
import type { FakeProvider } from '../fixtures/fake-openai/server';

/** What every part of the speed suite (bench/speed.ts) shares: one core, its clients, the anchors, the table. */
export interface SpeedCtx {
  /** Short runs (`--quick`): every part once with few iterations, to check the suite works, not to measure. */
  quick: boolean;
  log(line: string): void;
  core: ServedCore;
  dataDir: string;
  /** The tenant key's client and the admin token's (contract/client.ts, for set-up calls). */
  call: ApiCall;
  asAdmin: ApiCall;
  /** A set-up call that must answer 2xx (or one of `want`); its JSON body. */
  ok(method: string, path: string, body?: unknown, want?: number[]): Promise<unknown>;
  miniflare: Served | Unavailable;
  bunFloor: Served | Unavailable;
  add(row: RowInput): void;
  /** Everything measured, beyond the table's cells: the JSON report keeps it. */
  detail: Record<string, unknown>;
}

export type ApiCall = ReturnType<typeof client>;

export const HELLO = {
  bun: 'export default async function handler(input) { return { hello: input.name ?? "world" }; }\n',
  python: 'def handler(input):\n    return {"hello": input.get("name", "world")}\n',
} as const;
export type Runtime = keyof typeof HELLO;
export const RUNTIMES: Runtime[] = ['bun', 'python'];

/** The admin token of a core's data dir. */
export const adminToken = (dataDir: string) =>
  (JSON.parse(readFileSync(join(dataDir, 'emulator.json'), 'utf8')) as { admin_token: string }).admin_token;

/** A checked set-up call over the contract's client. */
export function okCall(call: ApiCall) {
  return async (method: string, path: string, body?: unknown, want: number[] = [200, 201, 204]): Promise<unknown> => {
    const r = await call(method, path, body);
    if (!want.includes(r.status)) throw new Error(`${method} ${path}: ${r.status} ${r.body.slice(0, 500)}`);
    return r.body ? (JSON.parse(r.body) as unknown) : null;
  };
}

/** Creates snippet `name` with a hello version (`limits` over the defaults) unless it exists. */
export async function ensureHello(ctx: SpeedCtx, name: string, runtime: Runtime, limits: Record<string, number>): Promise<void> {
  if ((await ctx.call('GET', `/v1/snippets/${name}`)).status === 200) return;
  await ctx.ok('POST', '/v1/snippets', { name, runtime });
  await ctx.ok('POST', `/v1/snippets/${name}/versions`, { code: HELLO[runtime], ...limits });
}

/** A sync invoke of `snippet` as a lean-client target (bench/lean-http.ts). */
export function invokeTarget(
  core: Pick<ServedCore, 'url' | 'apiKey'>,
  snippet: string,
  expect: Target['expect'],
  opts: { query?: string; body?: unknown } = {},
): Target {
  return {
    name: `emulator ${snippet}`,
    url: core.url,
    method: 'POST',
    path: `/v1/invoke/${snippet}${opts.query ?? ''}`,
    headers: { authorization: `Bearer ${core.apiKey}` },
    body: opts.body ?? { name: 'bench' },
    expect,
  };
}

interface SpareRunner {
  id: string;
  runtime: string;
  profile: string;
  state: string;
  rss_mb: number | null;
}

/** The spares /_emu/executor lists (`pool.spares.spares`: each runtime's plain and framework spares), or null without the list. */
export function listedSpares(executor: unknown): SpareRunner[] | null {
  const list = (executor as { pool?: { spares?: { spares?: unknown } } }).pool?.spares?.spares;
  return Array.isArray(list) ? (list as SpareRunner[]) : null;
}

/** Whether every spare is ready: each listed spare's `state`, or (a core without the list) every count under `spares.ready`. */
function allSparesReady(executor: unknown): boolean | null {
  const list = listedSpares(executor);
  if (list) return list.length ? list.every((s) => s.state === 'ready') : null;
  const ready = (executor as { pool?: { spares?: { ready?: Record<string, unknown> } } }).pool?.spares?.ready;
  const counts = Object.values(ready ?? {}).filter((n): n is number => typeof n === 'number');
  return counts.length ? counts.every((n) => n >= 1) : null;
}

/**
 * Waits until /_emu/executor reports every spare ready, the framework-pre-imported ones included (a new
 * version's first run then finds one, as at a human pace), polling every 20 ms. Returns the ms waited, or
 * null when they were not all ready within `timeoutMs` or the core reports no spares.
 */
export async function waitSparesReady(asAdmin: ApiCall, timeoutMs = 15_000): Promise<number | null> {
  const t0 = performance.now();
  for (;;) {
    const r = await asAdmin('GET', '/_emu/executor');
    const ready = r.status === 200 ? allSparesReady(JSON.parse(r.body)) : null;
    if (ready) return Math.round(performance.now() - t0);
    if (ready === null || performance.now() - t0 > timeoutMs) return null;
    await new Promise((res) => setTimeout(res, 20));
  }
}

export const AGENT_SECRETS = (fake: FakeProvider) => {
  const port = new URL(fake.url).port;
  return {
    secrets: {
      OPENAI_API_KEY: fake.apiKey,
      OPENAI_BASE_URL: `http://localhost:${port}/v1`,
      OPENAI_MODEL: 'fake-model',
      WEATHER_TOKEN: fake.restToken,
    },
    integration: {
      provider: 'http',
      base_url: `http://127.0.0.1:${port}/api`,
      auth: { type: 'bearer', secret: 'WEATHER_TOKEN' },
    },
  };
};

/** The tenant's secrets and `weather` integration the agent examples need, pointing at the fake provider. */
export async function setUpAgentTenant(ok: SpeedCtx['ok'], fake: FakeProvider): Promise<void> {
  const { secrets, integration } = AGENT_SECRETS(fake);
  for (const [k, v] of Object.entries(secrets)) await ok('PUT', `/v1/secrets/${k}`, { value: v });
  await ok('PUT', '/v1/integrations/weather', integration);
}

export const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;
