/**
 * `svc-emu parity` (issue 19): the CLI run as a process (node + tsx on server/cli/bin.ts) against a real target
 * core in this process, started with the `production` egress profile, one tenant per test with its own key
 * (created there with `svc-emu tenant create` / `key create`). The CLI starts its own reference emulator; every
 * probe really runs on both (Bun and Python snippets, a timeout, an OOM kill, a stream, an async job, a callback).
 *   (1) a target like the reference: exit 0, every probe `same` (workspace probes included);
 *   (2) a target whose tenant caps differ (max_memory_mb, timeout_ms): exit 1, exactly the differences the caps make;
 *   (3) without --allow-deploy nothing is created (listed before/after) and the deploy probes say so; with it,
 *       everything created is deleted, after a full run and after Ctrl-C mid-run.
 */
import { spawn } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ParityReport } from '../../contract/schemas/parity';
import { PROBES } from '../../server/parity/probes';
import { NOT_DEPLOYED } from '../../server/parity/run';
import { runCli, until } from '../helpers/cli';
import { PROJECT_ROOT, request, startTestCore, tempDir, type TestCore } from '../helpers/core';

const BIN = join(PROJECT_ROOT, 'server', 'cli', 'bin.ts');
const dirs: string[] = [];
let target: TestCore;
let ws: string;

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `svc-emu parity ARGS` as a process; `onStart` gets the child (to send it a signal). */
function parity(args: string[], onStart?: (kill: (s: NodeJS.Signals) => void) => void): Promise<Run> {
  const env = { ...process.env };
  for (const k of ['SVC_EMU_DATA_DIR', 'SVC_EMU_URL', 'SVC_EMU_ADMIN_TOKEN', 'SVC_PARITY_KEY']) delete env[k];
  const child = spawn(process.execPath, ['--import', 'tsx', BIN, 'parity', ...args], {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (c: Buffer) => (out.stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out.stderr += c.toString()));
  onStart?.((s) => child.kill(s));
  return new Promise((res) => child.once('close', (code, signal) => res({ code, signal, ...out })));
}

/** A tenant on the target with its own key (`svc-emu tenant create` / `key create`, through the running core). */
async function tenantKey(name: string, caps: string[] = []): Promise<string> {
  const dd = ['--data-dir', target.dataDir];
  expect((await runCli(['tenant', 'create', name, ...dd])).code).toBe(0);
  if (caps.length) expect((await runCli(['tenant', 'limits', name, ...caps, ...dd])).code).toBe(0);
  const key = await runCli(['key', 'create', '--tenant', name, ...dd]);
  expect(key.code, key.stderr).toBe(0);
  return key.stdout.trim();
}

async function snippetsOf(key: string): Promise<string[]> {
  const r = await request(target.url, 'GET', '/v1/snippets?limit=1000', undefined, { key });
  expect(r.status).toBe(200);
  return (r.json as { data: { name: string }[] }).data.map((s) => s.name).sort();
}

function report(run: Run): ParityReport {
  expect(run.stdout.trim().split('\n'), run.stderr).toHaveLength(1);
  return ParityReport.parse(JSON.parse(run.stdout));
}

beforeAll(async () => {
  target = await startTestCore({ config: { egressProfile: 'production' } });
  ws = await tempDir('svc-emu-parity-ws-');
  dirs.push(ws);
  const put = async (path: string, text: string) => {
    await mkdir(join(ws, 'snippets', path, '..'), { recursive: true });
    await writeFile(join(ws, 'snippets', path), text);
  };
  await put('hello/index.ts', 'export default async function handler(input) {\n  return { hello: input.name ?? "world" };\n}\n');
  await put('hello/snippet.json', JSON.stringify({ max_memory_mb: 128, timeout_ms: 5000 }));
  await put('greet-py/main.py', 'def handler(input):\n    return {"greeting": "hi", "keys": sorted(input)}\n');
  await put('greet-py/snippet.json', JSON.stringify({ runtime: 'python', deploy: ['dev', 'staging'] }));
  await put('fails/index.ts', 'export default async function handler(input) {\n  throw new TypeError("no " + input.x);\n}\n');
  await put('broken/index.ts', 'export default async function handler(input) {\n  return {;\n}\n');
}, 60_000);

afterAll(async () => {
  await target?.stop();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('svc-emu parity', () => {
  it('(1) against an emulator with production rules: exit 0, every probe and workspace snippet the same; what it created is deleted', async () => {
    const key = await tenantKey('parity-same');
    const before = await snippetsOf(key);
    const run = await parity(['--against', target.url, '--key', key, '--allow-deploy', '--workspace', ws, '--json']);
    const r = report(run);
    const bad = r.probes.filter((p) => p.status !== 'same');
    expect(bad, JSON.stringify(bad, null, 2)).toEqual([]);
    expect(run.code, run.stderr).toBe(0);
    expect(r.result).toBe('same');
    // Every probe of the one list ran, and one per workspace folder.
    expect(r.probes.map((p) => p.name)).toEqual([
      ...PROBES.map((p) => p.name),
      'workspace.broken',
      'workspace.fails',
      'workspace.greet-py',
      'workspace.hello',
    ]);
    const probe = (name: string) => r.probes.find((p) => p.name === name)!;
    // What the probes saw is what the contract says (not just "the same on both sides").
    expect(probe('outcome.timeout').target).toMatchObject({ status: '504', code: 'timeout' });
    expect(probe('outcome.timeout').target.timing).toMatch(/^≈ timeout_ms/);
    expect(probe('outcome.oom').target).toMatchObject({ status: '500', code: 'oom_killed' });
    expect(probe('outcome.handler-error').target).toMatchObject({ status: '500', code: 'handler_error', message: 'the handler’s message' });
    expect(probe('callback.private-url').target).toMatchObject({
      status: '422',
      code: 'callback_url_refused',
      errors: 'body.callback_url',
    });
    expect(probe('invoke.stream').target).toMatchObject({ events: 'start,chunk,chunk,chunk,result', ids: 'increasing' });
    expect(probe('invoke.async').target).toMatchObject({
      status: '202',
      'header.location': '/v1/invocations/{id}',
      'record.outcome': '"success"',
    });
    expect(probe('invoke.idempotency').target).toMatchObject({
      'repeat.same-invocation': 'yes',
      'repeat.same-body': 'yes',
      'repeat.header.idempotent-replayed': 'true',
      'other-snippet.code': 'idempotency_key_reused',
    });
    expect(probe('limits.above-cap').target).toMatchObject({
      code: 'limit_exceeds_tenant_cap',
      field: '"max_memory_mb"',
      'names-the-cap': 'yes',
    });
    expect(probe('limits.concurrency').target).toEqual({
      'snippet pause': 'created',
      caps: 'read',
      statuses: '200×10, 429×1',
      '429.code': 'rate_limited',
      '429.retry-after': 'present',
    });
    expect(probe('workspace.hello').target).toMatchObject({ status: '200', outcome: 'success', 'header.x-snippet-env': 'none' });
    expect(probe('workspace.fails').target).toMatchObject({ status: '500', outcome: 'handler_error' });
    expect(probe('workspace.broken').target).toEqual({ snippet: 'refused' });
    // Cleanup: everything created was deleted, and the tenant's snippets are what they were.
    expect(r.cleanup.created.length).toBeGreaterThanOrEqual(7);
    // broken too: its snippet was created before its version was refused.
    expect(r.cleanup.deleted.sort()).toEqual(r.cleanup.created.sort());
    expect(r.cleanup.failed).toEqual([]);
    expect(await snippetsOf(key)).toEqual(before);
  }, 180_000);

  it('(2) against a tenant whose caps differ: exit 1, and the diff names exactly what the caps change', async () => {
    // max_memory_mb 1024 (reference: 2048); timeout_ms 7500 (reference: 900000): between the probe snippets'
    // timeouts (5000, 7000) and the timeout probe's (8000), and below the default (60000).
    const key = await tenantKey('parity-differs', ['--max-memory-mb', '1024', '--timeout-ms', '7500']);
    const run = await parity(['--target', target.url, '--key', key, '--allow-deploy', '--json']);
    expect(run.code, run.stderr).toBe(1);
    const r = report(run);
    expect(r.result).toBe('differs');
    const diffs = r.probes.flatMap((p) => p.differences.map((d) => `${p.name} / ${d.aspect}: ${d.emulator} → ${d.target}`));
    expect(diffs.sort()).toEqual(
      [
        'tenant.runtime-limits / max_memory_mb: 2048 → 1024',
        'tenant.runtime-limits / timeout_ms: 900000 → 7500',
        // The timeout probe's version (timeout_ms 8000) is refused there; nothing after it is compared.
        'outcome.timeout / snippet sleeps: created → version 422 limit_exceeds_tenant_cap',
        // A version asking no limits gets timeout_ms 60000: over that cap.
        'limits.defaults / version: 201 → version 422 limit_exceeds_tenant_cap',
      ].sort(),
    );
    expect(r.probes.filter((p) => p.status === 'error')).toEqual([]);
    // A refusal above each side's own cap is the same refusal (the caps themselves are compared once, above).
    expect(r.probes.find((p) => p.name === 'limits.above-cap')!.status).toBe('same');
    expect(r.cleanup.failed).toEqual([]);
    expect(await snippetsOf(key)).toEqual([]);
  }, 180_000);

  it('(2) against an emulator under the local egress profile: only the callback differs, and its delivery is signed (checked with the tenant secret)', async () => {
    const local = await startTestCore(); // egress profile `local`: a loopback callback_url is accepted and delivered
    try {
      const run = await parity(['--against', local.url, '--key', local.key, '--allow-deploy', '--json']);
      expect(run.code, run.stderr).toBe(1);
      const r = report(run);
      const differing = r.probes.filter((p) => p.status !== 'same');
      expect(
        differing.map((p) => p.name),
        JSON.stringify(differing, null, 2),
      ).toEqual(['callback.private-url']);
      const cb = differing[0]!;
      expect(cb.differences.map((d) => d.aspect)).toEqual([
        'status',
        'content-type',
        'code',
        'errors',
        'delivery',
        'header.content-type',
        'header.webhook-id',
        'header.webhook-timestamp',
        'signature',
        'body.shape',
      ]);
      expect(cb.emulator).toMatchObject({ status: '422', code: 'callback_url_refused' });
      expect(cb.target).toMatchObject({
        status: '202',
        delivery: 'received',
        'header.webhook-id': 'msg_…',
        'header.webhook-timestamp': 'unix seconds, now',
        signature: 'v1, valid',
      });
    } finally {
      await local.stop();
    }
  }, 180_000);

  it('(3) without --allow-deploy nothing is written to the target, and every probe that needs it is listed as skipped', async () => {
    const key = await tenantKey('parity-nodeploy');
    await request(target.url, 'POST', '/v1/snippets', { name: 'theirs', runtime: 'bun' }, { key });
    const before = await snippetsOf(key);
    const run = await parity(['--against', target.url, '--key', key, '--workspace', ws]);
    expect(run.code, run.stderr).toBe(0);
    expect(await snippetsOf(key)).toEqual(before);
    const skipped = PROBES.filter((p) => p.needs === 'deploy').map((p) => p.name);
    expect(skipped.length).toBeGreaterThan(10);
    // The human table lists each skipped probe, never silently: probe, (skipped), the reason.
    for (const name of [...skipped, 'workspace.hello'])
      expect(run.stdout).toMatch(new RegExp(`^${name.replace('.', '\\.')}\\s+\\(skipped\\)\\s+not deployed`, 'm'));
    expect(run.stdout).toContain(NOT_DEPLOYED);
    expect(run.stdout).toMatch(
      /parity holds against .*: \d+ same, 0 differ, \d+ skipped \(not deployed: --allow-deploy runs them\), 0 could not run/,
    );
  }, 120_000);

  it('(3) Ctrl-C mid-run: the snippets created so far are deleted before it exits (130)', async () => {
    const key = await tenantKey('parity-sigint');
    let kill!: (s: NodeJS.Signals) => void;
    const done = parity(['--against', target.url, '--key', key, '--allow-deploy'], (k) => (kill = k));
    await until(async () => (await snippetsOf(key)).some((n) => n.startsWith('svc-parity-')), 'a probe snippet on the target', 60_000);
    kill('SIGINT');
    const run = await done;
    expect(run.code, run.stderr).toBe(130);
    expect(run.stderr).toMatch(/interrupted; deleted on the target: svc-parity-/);
    expect(await snippetsOf(key)).toEqual([]);
  }, 120_000);

  it('a target that cannot be checked: exit 2 with what to fix (unreachable; the key refused; no --against)', async () => {
    const closed = await startTestCore();
    const url = closed.url;
    await closed.stop();
    const gone = await parity(['--against', url, '--key', 'svc_x']);
    expect(gone.code).toBe(2);
    expect(gone.stderr).toMatch(new RegExp(`cannot reach the target at ${url}: .*ECONNREFUSED`));
    const badKey = await parity(['--against', target.url, '--key', 'svc_nope', '--json']);
    expect(badKey.code).toBe(2);
    expect(JSON.parse(badKey.stdout)).toMatchObject({
      code: 'target_unreachable',
      detail: expect.stringMatching(/refused the key \(401 unauthenticated\): check --key/),
    });
    const usage = await parity(['--key', 'k']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/needs --against URL/);
  }, 60_000);
});
