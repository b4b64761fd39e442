/**
 * State export and import (docs/state.md), end to end on real cores with real Bun runners: a running
 * core's export (jobs queued and one running, callbacks pending against a receiver answering 500) imported
 * into a fresh data dir — through the CLI on the files (then a core starts on them) and through a running
 * core's `POST /_emu/state/import` — where every job runs and every callback is delivered at its
 * `next_attempt_at`, signed with the imported secret (passphrase) or a new one (secrets left out, said).
 * Every export is grepped for every secret value.
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCore, tempDir, type TestCore } from '../helpers/core';
import { runCli } from '../helpers/cli';
import { expectProblem } from '../api/_util';
import { readTar } from '../../server/state/tar';
import { emptyCassette } from '../../server/egress/cassette/har';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, fn: () => Promise<T | null | undefined | false>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * A webhook receiver answering `status` (500 while the export is taken, 200 after). While `holdRetries` is set, a
 * second delivery of a webhook-id (the exporting core's own retry, due ~2 s after the first on a busy host) is
 * held unanswered and unrecorded: still in flight, it is not in the exported state, whose records then say one
 * failed attempt and the next planned ~2 s out, however long the export took. release() cuts the held ones.
 */
class Receiver {
  readonly got: { headers: IncomingHttpHeaders; body: string; status: number }[] = [];
  status = 500;
  holdRetries = true;
  private readonly seen = new Set<string>();
  private readonly held: ServerResponse[] = [];
  private server!: Server;
  url = '';
  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const id = String(req.headers['webhook-id']);
        if (this.holdRetries && this.seen.has(id)) return void this.held.push(res);
        this.seen.add(id);
        this.got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status: this.status });
        res.writeHead(this.status).end();
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }
  release(): void {
    this.holdRetries = false;
    for (const r of this.held.splice(0)) r.destroy();
  }
  close(): Promise<void> {
    this.release();
    return new Promise((r) => {
      this.server.close(() => r());
      this.server.closeAllConnections();
    });
  }
}

/** Holds every request until closed: the handler that fetched it stays running. */
class Gate {
  readonly held: ServerResponse[] = [];
  private server!: Server;
  url = '';
  async start(): Promise<this> {
    this.server = createServer((_req, res) => this.held.push(res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/gate`;
    return this;
  }
  close(): Promise<void> {
    for (const r of this.held.splice(0)) r.destroy();
    return new Promise((r) => {
      this.server.close(() => r());
      this.server.closeAllConnections();
    });
  }
}

/** Standard Webhooks, written out here (not the emulator's verifier). */
function verifies(secret: string, headers: IncomingHttpHeaders, body: string): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signed = `${String(headers['webhook-id'])}.${String(headers['webhook-timestamp'])}.${body}`;
  const want = createHmac('sha256', key).update(signed).digest('base64');
  return String(headers['webhook-signature'])
    .split(' ')
    .some((s) => s === `v1,${want}`);
}

const CODE = `export default async function handler(input) {
  if (input.gate) await fetch(input.gate).catch(() => null);
  return { n: input.n ?? null, token_len: (process.env.API_TOKEN ?? '').length };
}
`;

/** Every secret value the source core holds: none may be in an archive in clear. */
interface Secrets {
  values: string[];
  webhook: string;
}

async function exportVia(core: TestCore, passphrase?: string): Promise<Buffer> {
  const res = await fetch(`${core.url}/_emu/state/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${core.admin}`, 'content-type': 'application/json' },
    body: JSON.stringify(passphrase ? { passphrase } : {}),
  });
  expect(
    res.status,
    await res
      .clone()
      .text()
      .catch(() => ''),
  ).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/vnd.svc-emu.state+gzip');
  expect(res.headers.get('x-emu-secrets')).toBe(passphrase ? 'encrypted' : 'left_out');
  return Buffer.from(await res.arrayBuffer());
}

function expectNoSecretIn(archive: Buffer, secrets: Secrets): void {
  const unpacked = gunzipSync(archive);
  for (const v of [...secrets.values, secrets.webhook, secrets.webhook.replace(/^whsec_/, '')]) {
    expect(archive.includes(Buffer.from(v)), `secret ${v.slice(0, 8)}… in the gzip bytes`).toBe(false);
    expect(unpacked.includes(Buffer.from(v)), `secret ${v.slice(0, 8)}… in the archive`).toBe(false);
  }
}

describe('state export → import', () => {
  let a: TestCore;
  let receiver: Receiver;
  let gate: Gate;
  let secrets: Secrets;
  let plainArchive: Buffer;
  let sealedArchive: Buffer;
  const passphrase = 'correct horse battery staple';
  const callbackIds: string[] = [];
  const queuedIds: string[] = [];
  let gateId = '';

  beforeAll(async () => {
    receiver = await new Receiver().start();
    gate = await new Gate().start();
    // Retries 0.4× production: a failed first delivery is tried again ~2 s later (after the export).
    a = await startTestCore({ config: { callbackRetryScale: 0.4, asyncWorkers: 1 } });
    expect((await a.call('POST', '/v1/snippets', { name: 'job', runtime: 'bun' })).status).toBe(201);
    expect((await a.call('POST', '/v1/snippets/job/versions', { code: CODE })).status).toBe(201);
    const token = `tok_${Math.random().toString(36).slice(2)}_value`;
    const other = `other-${Math.random().toString(36).slice(2)}-secret`;
    expect((await a.call('PUT', '/v1/secrets/API_TOKEN', { value: token })).status).toBeLessThan(300);
    expect((await a.call('PUT', '/v1/secrets/OTHER', { value: other })).status).toBeLessThan(300);
    expect((await a.call('PUT', '/v1/store/greeting', { value: { hello: 'world' } })).status).toBeLessThan(300);
    // A cassette (under the data dir: the snippet was made over the API), a fault rule, an inbox's chosen answer.
    const cassette = emptyCassette({ tenant: 'local', snippet: 'job' }, 'test');
    const put = await a.call('PUT', '/_emu/snippets/job/cassettes/demo', cassette, { key: a.admin });
    expect(put.status, put.text).toBe(200);
    const fault = await a.call(
      'POST',
      '/_emu/egress/faults',
      { host: 'api.example.com', action: { type: 'status', status: 503 } },
      { key: a.admin },
    );
    expect(fault.status, fault.text).toBeLessThan(300);
    const answer = await a.call(
      'PUT',
      '/_emu/inbox/qa/response',
      { status: 503, times: null, retry_after_seconds: null },
      { key: a.admin },
    );
    expect(answer.status, answer.text).toBe(200);
    const webhook = (await a.call('GET', '/v1/tenant/webhook-secret')).json.secret as string;
    secrets = { values: [token, other, a.key], webhook };
    // 5 callbacks: the run ends, the receiver answers 500, the next attempt is planned ~2 s out.
    for (let n = 0; n < 5; n++) {
      const r = await a.call('POST', '/v1/invoke/job', { n, callback_url: receiver.url }, { headers: { 'x-invoke-mode': 'async' } });
      expect(r.status).toBe(202);
      callbackIds.push(r.json.invocation_id);
    }
    await until('5 failed first deliveries', async () => receiver.got.length >= 5);
    // One job holds the only worker (it is running at export), 20 wait behind it.
    const g = await a.call('POST', '/v1/invoke/job', { gate: gate.url }, { headers: { 'x-invoke-mode': 'async' } });
    gateId = g.json.invocation_id;
    await until('the gate job running', async () => gate.held.length >= 1);
    for (let n = 0; n < 20; n++) {
      const r = await a.call('POST', '/v1/invoke/job', { n: 100 + n }, { headers: { 'x-invoke-mode': 'async' } });
      queuedIds.push(r.json.invocation_id);
    }
    plainArchive = await exportVia(a);
    sealedArchive = await exportVia(a, passphrase);
    receiver.status = 200;
    receiver.release(); // a's own retries, if any came, fail (cut): a stops now, its state is already exported
    await a.stop();
    await gate.close();
  }, 120_000);

  afterAll(async () => {
    await receiver?.close();
    await gate?.close();
  });

  it('leaves every secret out of an archive without a passphrase, and names each in the manifest', () => {
    expectNoSecretIn(plainArchive, secrets);
    const manifest = JSON.parse(readTar(gunzipSync(plainArchive))[0]!.data.toString('utf8'));
    expect(manifest.format).toBe('svc-emu-state');
    expect(manifest.secrets.mode).toBe('left_out');
    expect(manifest.secrets.left_out).toEqual(
      expect.arrayContaining([
        'secret local/API_TOKEN',
        'secret local/OTHER',
        expect.stringMatching(/^webhook signing secret of tenant local/),
      ]),
    );
    expect(manifest.counts).toMatchObject({ queued_jobs: 21, pending_callbacks: 5, secrets: 2, store: 1 });
  });

  it('carries no secret in clear with a passphrase', () => {
    expectNoSecretIn(sealedArchive, secrets);
    const parts = readTar(gunzipSync(sealedArchive)).map((p) => p.name);
    expect(parts).toContain('secrets.enc');
  });

  it('imports on the files (passphrase): jobs run, callbacks go out on schedule, signed with the same secret', async () => {
    const dir = await tempDir();
    const archive = join(dir, 'state.svcemu');
    const passFile = join(dir, 'pass');
    await writeFile(archive, sealedArchive);
    await writeFile(passFile, passphrase + '\n');
    const dataDir = join(dir, 'data');
    const imp = await runCli(['import', archive, '--data-dir', dataDir, '--passphrase-file', passFile, '--json']);
    expect(imp.code, imp.stderr + imp.stdout).toBe(0);
    const report = JSON.parse(imp.stdout);
    expect(report.secrets).toEqual({ mode: 'encrypted', left_out: [], new_webhook_secrets: [] });
    const before = receiver.got.length;
    const b = await startTestCore({ dataDir, config: { callbackRetryScale: 0.4 } });
    try {
      await expectImported(b, before);
      expect((await b.call('GET', '/v1/tenant/webhook-secret')).json.secret).toBe(secrets.webhook);
      const delivered = receiver.got.slice(before).filter((d) => d.status === 200);
      for (const d of delivered) expect(verifies(secrets.webhook, d.headers, d.body), 'signature with the imported secret').toBe(true);
      // The secret itself came along (sealed again with this data dir's key): the snippet sees it.
      const run = await b.call('POST', '/v1/invoke/job', { n: 1 });
      expect(run.json.token_len).toBe(secrets.values[0]!.length);
    } finally {
      await b.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('imports into a running core (no passphrase): a new webhook secret, said, and signatures verify with it', async () => {
    const b = await startTestCore({ config: { callbackRetryScale: 0.4 } });
    try {
      const before = receiver.got.length;
      const res = await fetch(`${b.url}/_emu/state/import`, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.admin}`, 'content-type': 'application/vnd.svc-emu.state+gzip' },
        body: new Uint8Array(plainArchive),
      });
      const report = await res.json();
      expect(res.status, JSON.stringify(report)).toBe(200);
      expect(report.secrets.mode).toBe('left_out');
      expect(report.secrets.left_out).toEqual(expect.arrayContaining(['secret local/API_TOKEN', 'secret local/OTHER']));
      expect(report.secrets.new_webhook_secrets).toEqual(['local']);
      // The imported keys work (b's own first key is gone with its state): a's key is the one now.
      const key = secrets.values[2]!;
      const bk: TestCore = { ...b, call: (m, p, body, o = {}) => b.call(m, p, body, { key, ...o }) };
      await expectImported(bk, before);
      const fresh = (await bk.call('GET', '/v1/tenant/webhook-secret')).json.secret as string;
      expect(fresh).not.toBe(secrets.webhook);
      const delivered = receiver.got.slice(before).filter((d) => d.status === 200);
      for (const d of delivered) expect(verifies(fresh, d.headers, d.body), 'signature with the new secret').toBe(true);
      // Left out: the snippet runs without it.
      expect((await bk.call('POST', '/v1/invoke/job', { n: 1 })).json.token_len).toBe(0);
      // Not empty any more: a second import is refused unless replace.
      const again = await b.call('POST', '/_emu/state/import', undefined, {
        key: b.admin,
        raw: plainArchive,
        headers: { 'content-type': 'application/vnd.svc-emu.state+gzip' },
      });
      expectProblem(again, 409, 'state_not_empty');
    } finally {
      await b.stop();
    }
  }, 120_000);

  async function expectImported(b: TestCore, deliveredBefore: number): Promise<void> {
    // What lives outside db.json came along: the cassette, the fault rule, the inbox's answer.
    const cassettes = await b.call('GET', '/_emu/snippets/job/cassettes', undefined, { key: b.admin });
    expect(cassettes.json.data.map((c: { name: string }) => c.name)).toEqual(['demo']);
    const faults = await b.call('GET', '/_emu/egress/faults', undefined, { key: b.admin });
    expect(faults.json.data).toEqual([expect.objectContaining({ host: 'api.example.com', action: { type: 'status', status: 503 } })]);
    expect((await b.call('GET', '/_emu/inbox/qa', undefined, { key: b.admin })).json.response.status).toBe(503);
    // All 20 queued jobs (and the one that was running, again: at-least-once) run to success.
    for (const id of [...queuedIds, gateId]) {
      const rec = await until(`job ${id} finished`, async () => {
        const r = await b.call('GET', `/v1/invocations/${id}`);
        return r.status === 200 && r.json.status !== 'queued' && r.json.status !== 'running' ? r.json : null;
      });
      if (id !== gateId) expect(rec.outcome, JSON.stringify(rec.error)).toBe('success');
    }
    // All 5 callbacks delivered (200) on their schedule, with their webhook-id unchanged.
    await until('5 callbacks delivered', async () => {
      const ok = new Set(
        receiver.got
          .slice(deliveredBefore)
          .filter((d) => d.status === 200)
          .map((d) => String(d.headers['webhook-id'])),
      );
      return ok.size >= 5;
    });
    for (const id of callbackIds) {
      const r = await b.call('GET', `/v1/invocations/${id}`);
      expect(r.json.callback.status).toBe('delivered');
      expect(r.json.callback.attempts).toBe(2);
    }
  }
});
