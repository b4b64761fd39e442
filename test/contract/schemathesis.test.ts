// Schemathesis (an outside, schema-driven fuzzer) against a real core: every operation of the OpenAPI document
// the core serves at /openapi.json, `--checks all` (server errors, undocumented statuses, content types and
// headers, response schemas, schema-valid requests refused and schema-violating ones accepted, unsupported
// methods, auth that is ignored, a deleted resource still answering), once for /v1 (and the health probes) with
// the tenant's key and once for /_emu with the admin token (server/http/app.ts: `Authorization: Bearer`).
//
// `st` comes from .runtimes/tools-venv, made by `node scripts/setup.mjs --for=test` (scripts/setup/schemathesis.mjs).
// Bounded to fit the suite (examples per operation, one worker, a request timeout) and deterministic (a fixed seed,
// one worker, no example database). By hand: docs/qa-recipes.md, "Schemathesis and the OpenAPI lint".
//
// No operation is excluded from either run. The exceptions, each with its reason, are in schemathesis.toml beside
// this file (the callback inbox answers the 5xx a test chose; an emptied inbox still answers). One part of the
// surface only reaches its refusal: the core runs with terminals off (`terminal: false`), so /_emu/terminals*
// answer 403 `terminal_disabled`, because a fuzzer that opens a shell and types generated keystrokes into it
// runs generated commands on this machine.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { PROJECT_ROOT, startTestCore, type TestCore } from '../helpers/core';

const RUNTIMES_DIR = process.env.SVC_EMU_RUNTIMES_DIR ?? join(PROJECT_ROOT, '.runtimes');
const ST = join(RUNTIMES_DIR, 'tools-venv', 'bin', 'st');
/** The per-operation exceptions, each with its reason. */
const CONFIG = join(__dirname, 'schemathesis.toml');
const SEED = 20261125;
/** Cases per operation and phase: ~1,000–1,500 cases per run, ~10–20 s each on a 2-core machine. */
const MAX_EXAMPLES = 25;

const stReport = z.object({
  schemathesis_version: z.string(),
  seed: z.number(),
  running_time: z.number(),
  complete: z.boolean(),
  exit_code: z.number(),
  operations: z.object({ total: z.number(), selected: z.number(), tested: z.number(), errored: z.number(), skipped: z.number() }),
  phases: z.record(z.string(), z.object({ status: z.string(), skip_reason: z.string().nullable() })),
  test_cases: z.object({ generated: z.number(), with_failures: z.number(), unique_failures: z.number(), errored: z.number() }),
  failures: z.array(z.object({ code: z.string(), title: z.string(), count: z.number(), operations: z.array(z.string()) })),
  errors: z.array(z.object({ title: z.string(), count: z.number() })),
});
type StReport = z.infer<typeof stReport>;

let core: TestCore;
let workDir: string;

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'svc-emu-schemathesis-'));
  core = await startTestCore({
    config: {
      terminal: false, // see the header: no generated keystrokes into a real shell
      egressProfile: 'production', // a generated callback_url on a private address is refused, not called
      callbackRetryScale: 0.001,
      callbackTimeoutMs: 2_000,
    },
  });
  await seed(core);
}, 60_000);

afterAll(async () => {
  await core?.stop();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

/**
 * Something behind every kind of identifier, named as the document's examples name them where it has one
 * (`hello-world`, version 3, `OPENAI_API_KEY`, `counter:visits`): Schemathesis's example and coverage phases
 * send those first, so positive cases reach the real code behind a 404.
 */
async function seed(c: TestCore): Promise<void> {
  const ok = async (method: string, path: string, body?: unknown, opts: { key?: string | null } = {}) => {
    const res = await c.call(method, path, body, opts);
    expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(300);
    return res;
  };
  await ok('POST', '/v1/snippets', { name: 'hello-world', runtime: 'python', description: 'seeded for Schemathesis' });
  for (const greeting of ['hello', 'hi', 'hey']) {
    await ok('POST', '/v1/snippets/hello-world/versions', {
      code: `def handler(input):\n    return {"greeting": "${greeting}", "input": input}\n`,
    });
  }
  await ok('PUT', '/v1/snippets/hello-world/environments/dev', { version: 2 });
  await ok('POST', '/v1/snippets', { name: 'greeter', runtime: 'bun' });
  await ok('POST', '/v1/snippets/greeter/versions', {
    code: 'export default async function handler(input) {\n  return { hello: input };\n}\n',
  });
  await ok('POST', '/v1/invoke/hello-world', { name: 'seed' });
  await ok('POST', '/v1/invoke/greeter', { name: 'seed' });
  await ok('PUT', '/v1/secrets/OPENAI_API_KEY', { value: 'sk-seeded-not-a-real-key' });
  await ok('PUT', '/v1/store/counter:visits', { value: { n: 1 }, ttl_seconds: 3600 });
  await ok('PUT', '/v1/integrations/hello-world', {
    provider: 'http',
    base_url: 'https://api.example.com',
    auth: { type: 'bearer', secret: 'OPENAI_API_KEY' },
  });
  await ok('POST', '/v1/environments', { name: 'qa' });
  await ok('POST', '/_emu/inbox/hello-world', { seeded: true }, { key: null });
  await ok('POST', '/_emu/egress/faults', { host: 'api.example.com', action: { type: 'latency', ms: 1 } }, { key: c.admin });
}

function runSt(args: string[], cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(ST, args, {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Hypothesis keeps its files under the working directory (a temp dir here), never in the repository.
      env: { ...process.env, NO_COLOR: '1', HYPOTHESIS_STORAGE_DIRECTORY: join(cwd, '.hypothesis'), PYTHONDONTWRITEBYTECODE: '1' },
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (output += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (output += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

async function fuzz(name: string, includePathRegex: string, token: string): Promise<{ report: StReport; output: string }> {
  const reportPath = join(workDir, `${name}.json`);
  const run = await runSt(
    [
      '--config-file',
      CONFIG,
      'run',
      `${core.url}/openapi.json`,
      '--checks',
      'all',
      '--include-path-regex',
      includePathRegex,
      '--header',
      `Authorization: Bearer ${token}`,
      '--max-examples',
      String(MAX_EXAMPLES),
      '--seed',
      String(SEED),
      '--workers',
      '1',
      '--request-timeout',
      '10',
      '--generation-database',
      'none',
      '--no-color',
      '--output-truncate',
      'false',
      '--report',
      'json',
      '--report-json-path',
      reportPath,
    ],
    workDir,
  );
  expect(existsSync(reportPath), `st wrote no report (exit ${run.code}):\n${run.output.slice(-20_000)}`).toBe(true);
  const report = stReport.parse(JSON.parse(await readFile(reportPath, 'utf8')));
  const failures = report.failures.reduce((n, f) => n + f.count, 0);
  const errors = report.errors.reduce((n, e) => n + e.count, 0);
  console.log(
    `Schemathesis ${report.schemathesis_version} ${name} (seed ${report.seed}): ${report.operations.tested}/${report.operations.selected} operations, ` +
      `${report.test_cases.generated} cases generated, ${failures} failures, ${errors} errors, ` +
      `phases ${Object.entries(report.phases)
        .map(([p, s]) => `${p} ${s.status}`)
        .join(', ')} (${report.running_time.toFixed(1)} s)`,
  );
  return { report, output: run.output };
}

function expectClean({ report, output }: { report: StReport; output: string }): void {
  const listing = output.includes('FAILURES')
    ? output.slice(output.indexOf('FAILURES') - 40, output.indexOf('FAILURES') + 30_000)
    : output.slice(-8_000);
  expect(
    { failures: report.failures.map((f) => `${f.code} ${f.title} ×${f.count}: ${f.operations.join(', ')}`), errors: report.errors },
    listing,
  ).toEqual({ failures: [], errors: [] });
  expect(report.complete).toBe(true);
  expect(report.exit_code).toBe(0);
  expect(report.operations.errored).toBe(0);
  expect(report.operations.tested).toBe(report.operations.selected);
}

/** `st` must be there: in CI setup installs it, so a missing one fails; elsewhere the test skips and says how to get it. */
function requireSt(ctx: { skip: (note: string) => never }): void {
  if (existsSync(ST)) return;
  const hint = `${ST} is missing: run \`node scripts/setup.mjs --for=test\` (npm test runs it)`;
  if (process.env.CI) expect.fail(hint);
  ctx.skip(hint);
}

describe('Schemathesis against a live core (--checks all)', () => {
  test('/v1 and the health probes, with the tenant key: 0 failures', async (ctx) => {
    requireSt(ctx);
    const run = await fuzz('/v1', '^/(v1/|healthz$|readyz$)', core.key);
    expect(run.report.operations.selected).toBeGreaterThanOrEqual(30);
    expectClean(run);
  }, 120_000);

  test('/_emu with the admin token: 0 failures', async (ctx) => {
    requireSt(ctx);
    const run = await fuzz('/_emu', '^/_emu/', core.admin);
    expect(run.report.operations.selected).toBeGreaterThanOrEqual(30);
    expectClean(run);
  }, 120_000);
});
