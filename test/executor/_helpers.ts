/**
 * Shared helpers of the executor tests (not a test file). Every test file starts its own core
 * (startTestCore: port 0, temp data dir, real runtimes), so files never share state.
 */
import { expect } from 'vitest';
import { request, type Res, type TestCore } from '../helpers/core';

export type Runtime = 'bun' | 'python';
export const RUNTIMES: Runtime[] = ['bun', 'python'];

/** Code per runtime, written as the tenant would write it. */
export type Code = Record<Runtime, string>;

export interface VersionOpts {
  timeout_ms?: number;
  max_memory_mb?: number;
  max_cpu_percent?: number;
}

let seq = 0;
/** A unique snippet name (names are per tenant, but unique names keep the pool keys readable). */
export function uniqueName(prefix: string): string {
  seq += 1;
  return `${prefix}-${process.pid}-${seq}`.toLowerCase().slice(0, 60);
}

/** Calls as the local tenant unless another key is given. */
export function as(core: TestCore, key?: string) {
  return (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
    core.call(method, path, body, { ...(key ? { key } : {}), ...(headers ? { headers } : {}) });
}

export async function createSnippet(core: TestCore, runtime: Runtime, name: string, key?: string): Promise<void> {
  const r = await as(core, key)('POST', '/v1/snippets', { name, runtime });
  expect(r.status, r.text).toBe(201);
}

export async function createVersion(core: TestCore, name: string, code: string, opts: VersionOpts = {}, key?: string): Promise<number> {
  const r = await as(core, key)('POST', `/v1/snippets/${name}/versions`, { code, ...opts });
  expect(r.status, r.text).toBe(201);
  return r.json.version as number;
}

/** A snippet with one version; returns its name. */
export async function snippet(
  core: TestCore,
  runtime: Runtime,
  prefix: string,
  code: string,
  opts: VersionOpts = {},
  key?: string,
): Promise<string> {
  const name = uniqueName(`${prefix}-${runtime === 'bun' ? 'b' : 'p'}`);
  await createSnippet(core, runtime, name, key);
  await createVersion(core, name, code, opts, key);
  return name;
}

export async function deploy(core: TestCore, name: string, env: string, version: number, key?: string): Promise<void> {
  const r = await as(core, key)('PUT', `/v1/snippets/${name}/environments/${env}`, { version });
  expect(r.status, r.text).toBeLessThan(300);
}

export interface InvokeOpts {
  key?: string;
  query?: string;
  headers?: Record<string, string>;
}

export async function invoke(core: TestCore, name: string, input: unknown = {}, o: InvokeOpts = {}): Promise<Res & { ms: number }> {
  const t0 = performance.now();
  const r = await core.call('POST', `/v1/invoke/${name}${o.query ? `?${o.query}` : ''}`, input, {
    ...(o.key ? { key: o.key } : {}),
    ...(o.headers ? { headers: o.headers } : {}),
  });
  return { ...r, ms: performance.now() - t0 };
}

/** Invokes and expects 200; returns the body. */
export async function ok(core: TestCore, name: string, input: unknown = {}, o: InvokeOpts = {}): Promise<any> {
  const r = await invoke(core, name, input, o);
  expect(r.status, `invoke ${name}: ${r.text.slice(0, 2000)}`).toBe(200);
  return r.json;
}

export function invocationId(r: Res): string {
  const id = r.headers.get('x-invocation-id');
  expect(id, 'X-Invocation-Id header').toBeTruthy();
  return id!;
}

/** The operator's view of an invocation (warm, timeline, evidence). */
export async function emuInvocation(core: TestCore, id: string): Promise<any> {
  const r = await core.call('GET', `/_emu/invocations/${id}`, undefined, { key: core.admin });
  expect(r.status, r.text).toBe(200);
  return r.json;
}

export async function executorInfo(core: TestCore): Promise<any> {
  const r = await core.call('GET', '/_emu/executor', undefined, { key: core.admin });
  expect(r.status, r.text).toBe(200);
  return r.json;
}

/** A new tenant with a key (through /_emu, as the operator). */
export async function newTenant(core: TestCore, name: string): Promise<string> {
  const t = await core.call('POST', '/_emu/tenants', { name }, { key: core.admin });
  expect(t.status, t.text).toBe(201);
  const k = await core.call('POST', `/_emu/tenants/${name}/keys`, undefined, { key: core.admin });
  expect(k.status, k.text).toBe(201);
  return k.json.key as string;
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | null | undefined | false>,
  timeoutMs = 5000,
  everyMs = 25,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export { request };

/** Says loudly, on stderr and in the test's name, why a suite does not run here. */
export function loudSkip(what: string, why: string): void {
  const bar = '!'.repeat(100);
  process.stderr.write(`\n${bar}\n!!! SKIPPING ${what}: ${why}\n${bar}\n\n`);
}
