/** Shared assertions and raw-HTTP helpers of the API tests (not a test file itself). */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { expect } from 'vitest';
import type { Res, TestCore } from '../helpers/core';

export const PROBLEM_FIELDS = ['type', 'title', 'status', 'detail', 'code', 'request_id'] as const;

/** An RFC 9457 problem with the given status and stable code, tied to the response's request id. */
export function expectProblem(res: Res | RawRes, status: number, code: string): void {
  const got = { status: res.status, code: res.json?.code };
  expect(got, `${res.status} ${res.text.slice(0, 500)}`).toEqual({ status, code });
  const type =
    'headers' in res && res.headers instanceof Headers ? res.headers.get('content-type') : (res as RawRes).headers['content-type'];
  expect(type).toMatch(/^application\/problem\+json/);
  const body = res.json as Record<string, unknown>;
  for (const f of PROBLEM_FIELDS) expect(body, `problem field ${f}`).toHaveProperty(f);
  expect(typeof body.type).toBe('string');
  expect(String(body.type)).toMatch(new RegExp(`${code}$`));
  expect(typeof body.title).toBe('string');
  expect(String(body.title).length).toBeGreaterThan(0);
  expect(typeof body.detail).toBe('string');
  expect(String(body.detail).length).toBeGreaterThan(0);
  expect(body.status).toBe(status);
  const rid =
    'headers' in res && res.headers instanceof Headers ? res.headers.get('x-request-id') : (res as RawRes).headers['x-request-id'];
  expect(rid, 'X-Request-Id header').toBeTruthy();
  expect(body.request_id).toBe(rid);
}

export interface RawRes {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: any;
}

/** A request through node:http, which (unlike fetch) lets us set any Host, Origin or Sec-Fetch-* header. */
export function rawRequest(
  baseUrl: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<RawRes> {
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: u.hostname,
        port: Number(u.port),
        method,
        path,
        headers: { ...(opts.body !== undefined ? { 'content-length': String(Buffer.byteLength(opts.body)) } : {}), ...opts.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

/** Creates a tenant through /_emu and issues it a key; returns the key. */
export async function newTenant(core: TestCore, name: string): Promise<string> {
  const t = await core.call('POST', '/_emu/tenants', { name }, { key: core.admin });
  expect(t.status, t.text).toBe(201);
  const k = await core.call('POST', `/_emu/tenants/${name}/keys`, undefined, { key: core.admin });
  expect(k.status, k.text).toBe(201);
  expect(k.json.key).toMatch(/^svc_[0-9A-Za-z]{40}$/);
  return k.json.key as string;
}

export const BUN_CODE = 'export default async function handler(input) { return { ok: true, input }; }\n';
export const PY_CODE = 'def handler(input):\n    return {"ok": True}\n';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
