/**
 * Async jobs survive the core (issue 5): 30 jobs queued or running, the core killed with SIGKILL,
 * restarted on the same data dir — every job succeeds and every callback arrives. Jobs that were running
 * run again (at-least-once), and say so with `attempts` ≥ 2; a callback sent twice keeps its webhook-id.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, rm } from 'node:fs/promises';
import { afterAll, expect, it } from 'vitest';
import { request, startTestCore, tempDir } from '../helpers/core';
import { killAll, PROJECT_ROOT_ARGS, spawnCore } from '../helpers/spawn-core';
import { sleep } from './_util';

const dirs: string[] = [];
let server: Server | undefined;
afterAll(async () => {
  killAll();
  server?.closeAllConnections();
  server?.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

interface Delivery {
  webhookId: string;
  payload: { id: string; status: string; outcome: string; attempts: number; started_at: string; output: { tag: number } | null };
}

it('kill -9 with 30 jobs queued or running, then restart: all 30 succeed and every callback arrives', async () => {
  const deliveries: Delivery[] = [];
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      deliveries.push({ webhookId: String(req.headers['webhook-id']), payload: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const callbackUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;

  const dataDir = await tempDir();
  dirs.push(dataDir);
  const first = await spawnCore(dataDir, PROJECT_ROOT_ARGS);
  const call = (url: string, key: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    request(url, method, path, body, { key, headers });

  expect((await call(first.url, first.key, 'POST', '/v1/snippets', { name: 'job', runtime: 'bun' })).status).toBe(201);
  const code = [
    'import { store } from "@svc/store";',
    'export default async function handler(input) {',
    '  const key = "runs-" + input.tag;',
    '  await store.set(key, ((await store.get(key)) ?? 0) + 1);',
    '  await new Promise((r) => setTimeout(r, 400));',
    '  return { tag: input.tag };',
    '}',
  ].join('\n');
  const v = await call(first.url, first.key, 'POST', '/v1/snippets/job/versions', { code, max_cpu_percent: 100 });
  expect(v.status, v.text).toBe(201);

  const ids: string[] = [];
  for (let tag = 0; tag < 30; tag++) {
    const r = await call(first.url, first.key, 'POST', '/v1/invoke/job', { tag, callback_url: callbackUrl }, { 'x-invoke-mode': 'async' });
    expect(r.status, r.text).toBe(202);
    ids.push(r.json.invocation_id);
  }
  // Kill once the first callbacks are in: by then some jobs are done, some run, the rest wait.
  for (let i = 0; i < 300 && deliveries.length === 0; i++) await sleep(20);
  expect(deliveries.length).toBeGreaterThan(0);
  await sleep(150);
  first.proc.kill('SIGKILL');
  expect((await first.exited).signal).toBe('SIGKILL');
  const before = await fetchStatuses(dataDir);
  expect(before.running + before.queued, JSON.stringify(before)).toBeGreaterThan(0);

  const second = await spawnCore(dataDir, PROJECT_ROOT_ARGS);
  expect(second.key).toBe(first.key);
  const succeeded = (id: string) => deliveries.some((d) => d.payload.id === id && d.payload.outcome === 'success');
  for (let i = 0; i < 1500 && !ids.every(succeeded); i++) await sleep(20);
  expect(
    ids.filter((id) => !succeeded(id)),
    'jobs without a success callback',
  ).toEqual([]);

  let rerun = 0;
  for (const [tag, id] of ids.entries()) {
    const rec = (await call(second.url, second.key, 'GET', `/v1/invocations/${id}`)).json;
    expect(rec).toMatchObject({ status: 'succeeded', outcome: 'success', output: { tag } });
    const mine = deliveries.filter((d) => d.payload.id === id);
    expect(new Set(mine.map((d) => d.webhookId)).size, `one webhook-id for ${id}`).toBe(1);
    // Two runs (different started_at) can only come from a job that ran again: its attempts say so.
    if (new Set(mine.map((d) => d.payload.started_at)).size > 1)
      expect(Math.max(...mine.map((d) => d.payload.attempts))).toBeGreaterThanOrEqual(2);
    // Every run that reached the snippet's code was counted as an attempt.
    const runs = (await call(second.url, second.key, 'GET', `/v1/store/runs-${tag}`)).json.value as number;
    expect(runs).toBeGreaterThanOrEqual(1);
    expect(runs).toBeLessThanOrEqual(rec.attempts);
    if (rec.attempts >= 2) rerun++;
  }
  expect(rerun, 'jobs that were running at the kill ran again').toBeGreaterThan(0);
  second.proc.kill('SIGTERM');
  await second.exited;
}, 90_000);

/** How the dead core left its jobs, read from db.json. */
async function fetchStatuses(dataDir: string): Promise<{ queued: number; running: number; done: number }> {
  const db = JSON.parse(await readFile(`${dataDir}/db.json`, 'utf8')) as { invocations: { status: string }[] };
  const count = (s: string) => db.invocations.filter((i) => i.status === s).length;
  return { queued: count('queued'), running: count('running'), done: count('succeeded') + count('failed') };
}

it('a graceful stop leaves a running job to run again on the next start, not failed by the shutdown', async () => {
  const dataDir = await tempDir();
  dirs.push(dataDir);
  const core = await startTestCore({ dataDir });
  await core.call('POST', '/v1/snippets', { name: 'slow', runtime: 'bun' });
  await core.call('POST', '/v1/snippets/slow/versions', {
    code: 'export default async function handler(input) { await new Promise((r) => setTimeout(r, input.ms)); return { ok: true }; }\n',
  });
  const r = await core.call('POST', '/v1/invoke/slow', { ms: 3000 }, { headers: { 'x-invoke-mode': 'async' } });
  const id = r.json.invocation_id as string;
  for (let i = 0; i < 200 && (await core.call('GET', `/v1/invocations/${id}`)).json.status !== 'running'; i++) await sleep(20);
  await core.stop();
  const db = JSON.parse(await readFile(`${dataDir}/db.json`, 'utf8')) as {
    invocations: { id: string; status: string; attempts: number }[];
  };
  expect(db.invocations.find((i) => i.id === id)).toMatchObject({ status: 'running', attempts: 1 });

  const again = await startTestCore({ dataDir });
  try {
    let rec = (await again.call('GET', `/v1/invocations/${id}`)).json;
    for (let i = 0; i < 300 && rec.status !== 'succeeded' && rec.status !== 'failed'; i++) {
      await sleep(20);
      rec = (await again.call('GET', `/v1/invocations/${id}`)).json;
    }
    expect(rec).toMatchObject({ status: 'succeeded', outcome: 'success', attempts: 2 });
  } finally {
    await again.stop();
  }
}, 30_000);
