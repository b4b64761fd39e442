/**
 * Issue 14, "One validation for every way in" — property tests on real files:
 *
 * 1. Host calls. A scripted runner (test/helpers/scripted-runner.ts) sends arbitrary host-call frames
 *    over the real fd-3 protocol to a real core (real executor pool, RunnerChannel, InvokeService,
 *    services, repository in a temp data dir): huge, negative, fractional and 1e12 TTLs, values nested
 *    10,000 levels or over 1 MiB, bad keys, extra fields. Each call is accepted within the REST caps
 *    (and then reads back over REST as written) or refused with `validation_failed`/`payload_too_large`
 *    and a message naming every offending field. A restart afterwards finds nothing to quarantine.
 * 2. Outputs and stream chunks: deeper or larger than an API body → a handler_error saying so.
 * 3. Stored state. Fuzzed db.json contents (valid documents with records whose fields are out of range,
 *    whole documents that are not JSON or not objects, bad journal lines) never stop a restart: the
 *    repository opens, every record is either loaded (and valid) or quarantined with the file kept byte
 *    for byte; the core itself starts on them and doctor lists what was set aside.
 *
 * The expectations are computed from reference predicates written from docs/contract.md, not from the schemas.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { mkdir, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startEmulator, type RunningEmulator } from '../../server';
import { jsonLogger } from '../../server/logger';
import { Repository } from '../../server/storage/repository';
import { DbData, SCHEMA_VERSION, emptyDb } from '../../server/storage/schema';
import { DataDirError } from '../../server/errors';
import { PROJECT_ROOT, request, tempDir } from '../helpers/core';
import { SnippetJson } from '../../server/workspace/folder';
import { CreateSnippet, CreateVersion } from '../../contract/schemas/snippets';
import { scriptedExecutor, type CallReply } from '../helpers/scripted-runner';
import { fuzzSeed } from '../helpers/fuzz-seed';

const MiB = 1024 * 1024;
/** SVC_FUZZ_SCALE=10 runs the host-call and stored-state properties ten times as long (a deeper hunt than npm test's). */
const RUNS_SCALE = Math.max(1, Number(process.env.SVC_FUZZ_SCALE) || 1);
/** Every property below draws from this seed (fixed, so a run is repeatable; SVC_FUZZ_SEED=N explores others). */
const seed = fuzzSeed('one-validation.property', 20261125, process.env, console.info);
const TEN_YEARS_S = 10 * 365 * 24 * 3600; // docs/contract.md's "at most 10 years", as PUT /v1/store/{key} has it

// ---- reference predicates ----------------------------------------------------------------------------

/** 1–512 printable ASCII characters without spaces. */
function refStoreKey(k: unknown): boolean {
  if (typeof k !== 'string' || k.length < 1 || k.length > 512) return false;
  for (let i = 0; i < k.length; i++) if (k.charCodeAt(i) < 0x21 || k.charCodeAt(i) > 0x7e) return false;
  return true;
}
const refTtl = (t: unknown) =>
  t === undefined || t === null || (typeof t === 'number' && Number.isInteger(t) && t >= 1 && t <= TEN_YEARS_S);

// ---- JSON values with a known depth and size, as text (so 10,000 levels need no recursion here) ----------

interface Val {
  text: string;
  depth: number;
  /** Bytes of its JSON as the core re-serialises it. */
  bytes: number;
}

/** A JSON value with its depth and size measured. */
function measured(v: unknown): Val {
  const text = JSON.stringify(v);
  let depth = 0;
  let d = 0;
  let inStr = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inStr) {
      if (c === '\\') i++;
      else if (c === '"') inStr = false;
    } else if (c === '"') inStr = true;
    else if (c === '[' || c === '{') depth = Math.max(depth, ++d);
    else if (c === ']' || c === '}') d--;
  }
  return { text, depth, bytes: Buffer.byteLength(text) };
}
/** Arrays (or objects) nested `depth` levels around a 0. */
function deepOf(depth: number, objects: boolean): Val {
  const text = objects ? '{"a":'.repeat(depth) + '0' + '}'.repeat(depth) : '['.repeat(depth) + '0' + ']'.repeat(depth);
  return { text, depth, bytes: text.length };
}
/** A string whose JSON is `n` bytes. */
const bigOf = (n: number): Val => ({ text: `"${'x'.repeat(n - 2)}"`, depth: 0, bytes: n });
const small = fc.jsonValue({ maxDepth: 4 }).map(measured);
const deep = fc
  .record({ depth: fc.oneof(fc.integer({ min: 120, max: 135 }), fc.constantFrom(1, 127, 128, 1000, 10_000)), objects: fc.boolean() })
  .map(({ depth, objects }) => deepOf(depth, objects));
const big = fc.constantFrom(MiB - 2, MiB - 1, MiB + 1, 2 * MiB).map(bigOf);
const anyValue = fc.oneof({ weight: 5, arbitrary: small }, { weight: 3, arbitrary: deep }, { weight: 1, arbitrary: big });

const keys = fc.oneof(
  { weight: 5, arbitrary: fc.stringMatching(/^[\x21-\x7e]{1,24}$/) },
  { weight: 1, arbitrary: fc.integer({ min: 510, max: 514 }).map((n) => 'k'.repeat(n)) },
  { weight: 2, arbitrary: fc.string({ maxLength: 30 }) },
  { weight: 1, arbitrary: fc.oneof(fc.integer(), fc.constant(null), fc.constant([]), fc.constant({ k: 1 }), fc.constant(true)) },
);
const ttls = fc.oneof(
  { weight: 6, arbitrary: fc.oneof(fc.constant(undefined), fc.constant(null), fc.integer({ min: 1, max: TEN_YEARS_S })) },
  fc.constant(undefined),
  fc.constant(null),
  fc.integer({ min: -5, max: 5 }),
  fc.constantFrom(1e12, TEN_YEARS_S, TEN_YEARS_S + 1, -1, 0, 1.5, 2 ** 53, 1e308, -1e308, 86_400),
  fc.double(),
  fc.string({ maxLength: 5 }),
  fc.boolean(),
);

/** One host call: its op, its args as JSON text, and what the reference predicates expect. */
interface Call {
  op: string;
  argsJson: string;
  /** Fields the core must name when it refuses (empty: it must accept). */
  bad: string[];
  /** Only the size is over: payload_too_large. */
  tooLarge: boolean;
  /** store.set accepted: what must read back. */
  stored?: { key: string; valueText: string; ttl: number | null };
  /** integrations.call that passes validation: no such integration here. */
  notFound?: boolean;
}

/** Args JSON with the value spliced in as text (JSON.stringify never sees a 10,000-level value). */
const withValue = (fields: Record<string, unknown>, value: Val | undefined) => {
  const rest = JSON.stringify(fields);
  if (!value) return rest;
  return rest === '{}' ? `{"value":${value.text}}` : `${rest.slice(0, -1)},"value":${value.text}}`;
};

/** A store.set call and what the reference predicates expect of it. */
function storeSetCall({ key, value, ttl, extra }: { key?: unknown; value?: Val; ttl?: unknown; extra?: string }): Call {
  const fields: Record<string, unknown> = {};
  if (key !== undefined) fields.key = key;
  if (ttl !== undefined) fields.ttl_seconds = ttl;
  if (extra) fields[extra] = 1;
  // What arrives is what JSON makes of it: a non-finite number is null on the wire (the Bun library
  // refuses one before sending; Python's json refuses to encode it).
  const wireTtl = ttl === undefined ? undefined : (JSON.parse(JSON.stringify(ttl)) as unknown);
  const bad: string[] = [];
  if (!refStoreKey(key)) bad.push('key');
  if (!value || value.depth > 127) bad.push('value');
  if (!refTtl(wireTtl)) bad.push('ttl_seconds');
  if (extra) bad.push(extra);
  const tooLarge = bad.length === 0 && value !== undefined && value.bytes > MiB;
  return {
    op: 'store.set',
    argsJson: withValue(fields, value),
    bad,
    tooLarge,
    ...(bad.length === 0 && !tooLarge
      ? { stored: { key: key as string, valueText: value!.text, ttl: (wireTtl as number | null | undefined) ?? null } }
      : {}),
  };
}
const setCall = fc
  .record({
    key: fc.option(keys, { nil: undefined }),
    value: fc.option(anyValue, { freq: 8, nil: undefined }),
    ttl: ttls,
    extra: fc.oneof({ weight: 8, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom('extra', 'ttlSeconds') }),
  })
  .map(storeSetCall);
const keyCall = (op: 'store.get' | 'store.delete') =>
  fc.record({ key: fc.option(keys, { nil: undefined }) }).map(({ key }): Call => ({
    op,
    argsJson: JSON.stringify(key === undefined ? {} : { key }),
    bad: refStoreKey(key) ? [] : ['key'],
    tooLarge: false,
  }));
const listCall = fc
  .option(
    fc.oneof(
      fc.string({ maxLength: 20 }),
      fc.integer({ min: 510, max: 514 }).map((n) => 'p'.repeat(n)),
      fc.integer(),
    ),
    { nil: undefined },
  )
  .map((prefix): Call => ({
    op: 'store.list',
    argsJson: JSON.stringify(prefix === undefined ? {} : { prefix }),
    bad: prefix === undefined || (typeof prefix === 'string' && prefix.length <= 512) ? [] : ['prefix'],
    tooLarge: false,
  }));
/** An integrations.call call and what the reference predicates expect of it. */
function integrationsCall({ name, header, body }: { name: string; header?: string; body?: Val }): Call {
  const nameOk = /^[a-z0-9][a-z0-9-]{0,62}$/.test(name);
  const headerOk = header === undefined || !/[\r\n\0]/.test(header);
  const bodyOk = body === undefined || body.depth <= 127;
  const fields = JSON.stringify({ name, method: 'GET', path: '/x', ...(header === undefined ? {} : { headers: { 'x-test': header } }) });
  const bad = [...(nameOk ? [] : ['name']), ...(headerOk ? [] : ['headers']), ...(bodyOk ? [] : ['body'])];
  return {
    op: 'integrations.call',
    argsJson: body ? `${fields.slice(0, -1)},"body":${body.text}}` : fields,
    bad,
    tooLarge: false,
    notFound: bad.length === 0,
  };
}
const integrationCall = fc
  .record({
    name: fc.oneof(fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,10}$/), fc.string({ maxLength: 70 })),
    header: fc.option(fc.constantFrom('ok-value', 'bad\r\nInjected: 1', 'bad\u0000nul'), { nil: undefined }),
    body: fc.option(fc.oneof(small, deep), { nil: undefined }),
  })
  .map(integrationsCall);
const anyCall = fc.oneof({ weight: 6, arbitrary: setCall }, keyCall('store.get'), keyCall('store.delete'), listCall, integrationCall);

/**
 * Calls the property makes first on every test run, before the drawn ones and whatever the seed (fast-check's
 * `examples`, counted within numRuns): each outcome the property claims to have met (accepted at the edges,
 * refused for each field, too large) is met by construction, not by the luck of a draw.
 */
const coverage: Call[] = [
  // Accepted, at the edges of each field.
  ...[
    { key: 'cov:plain', value: measured({ a: [1, 'two'] }) },
    { key: '!', value: measured(null), ttl: null },
    { key: 'k'.repeat(512), value: measured('v'), ttl: 1 },
    { key: '~cov', value: measured(0), ttl: TEN_YEARS_S },
    { key: 'cov:arrays', value: deepOf(127, false), ttl: 60 },
    { key: 'cov:objects', value: deepOf(127, true) },
    { key: 'cov:big', value: bigOf(MiB) },
    { key: 'cov:list', value: measured([]) },
    { key: 'cov:object', value: measured({}), ttl: 86_400 },
    { key: 'cov:nan', value: measured(true), ttl: Number.NaN }, // null on the wire: no expiry
  ].map(storeSetCall),
  // Refused for the TTL.
  ...[0, -1, 1.5, TEN_YEARS_S + 1, 1e12, 2 ** 53, -1e308, '60', true, []].map((ttl) =>
    storeSetCall({ key: 'cov:ttl', value: measured(1), ttl }),
  ),
  // Refused for the value.
  ...[undefined, deepOf(128, false), deepOf(128, true), deepOf(1000, false), deepOf(10_000, true)].map((value) =>
    storeSetCall({ key: 'cov:value', value }),
  ),
  // Refused for the key.
  ...[undefined, '', 'a b', 'k'.repeat(513), 'ключ', 42].map((key) => storeSetCall({ key, value: measured(1) })),
  // Too large, and nothing else wrong.
  ...[MiB + 1, 2 * MiB].map((n) => storeSetCall({ key: 'cov:too-large', value: bigOf(n) })),
  // integrations.call refused for each field, and one that passes validation (no such integration).
  integrationsCall({ name: 'Bad_Name' }),
  integrationsCall({ name: 'ok', header: 'bad\r\nInjected: 1' }),
  integrationsCall({ name: 'ok', body: deepOf(128, false) }),
  integrationsCall({ name: 'ok', header: 'ok-value', body: measured({ q: 1 }) }),
];
/** The coverage calls as examples of the property, four to an invocation (as many as a drawn one makes at most). */
const coverageExamples: [Call[]][] = [];
for (let i = 0; i < coverage.length; i += 4) coverageExamples.push([coverage.slice(i, i + 4)]);

// ---- a core on the scripted runner -----------------------------------------------------------------------

const scripted = scriptedExecutor();
const logs: string[] = [];

async function start(dataDir: string): Promise<RunningEmulator> {
  return startEmulator({
    dataDir,
    port: 0,
    projectRoot: PROJECT_ROOT,
    logger: jsonLogger((l) => logs.push(l), { level: 'debug' }),
    executor: scripted.executor(),
    validateCode: async () => [],
    terminal: false,
  });
}

const call = (emu: RunningEmulator, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  request(emu.url, method, path, body, { defaultKey: emu.localApiKey!, headers });

async function newSnippet(emu: RunningEmulator, name: string) {
  expect((await call(emu, 'POST', '/v1/snippets', { name, runtime: 'bun' })).status).toBe(201);
  const v = await call(emu, 'POST', `/v1/snippets/${name}/versions`, {
    code: 'export default async function handler() { return null; }\n',
  });
  expect(v.status, v.text).toBe(201);
}

describe('host calls from snippets meet the REST schemas and caps', () => {
  let dir: string;
  let emu: RunningEmulator;
  beforeAll(async () => {
    dir = await tempDir('svc-emu-hostcalls-');
    emu = await start(dir);
    await newSnippet(emu, 'caller');
  }, 30_000);
  afterAll(async () => {
    await emu?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('store.set(k, v, {ttlSeconds: 1e12}) is refused with a message saying why, and nothing is stored', async () => {
    scripted.setScript({ calls: [{ op: 'store.set', argsJson: '{"key":"far","value":1,"ttl_seconds":1000000000000}' }] });
    expect((await call(emu, 'POST', '/v1/invoke/caller', {})).status).toBe(200);
    expect(scripted.replies).toEqual([
      { ok: false, error: { code: 'validation_failed', message: 'store.set.ttl_seconds: must be at most 10 years (315360000 seconds)' } },
    ]);
    expect((await call(emu, 'GET', '/v1/store/far')).status).toBe(404);
  });

  it('every arbitrary call is accepted within the caps (and reads back over REST) or refused naming each bad field', async () => {
    const stored = new Map<string, { valueText: string; ttl: number | null }>();
    const seen = new Map<string, number>(); // outcome kinds met, so the property cannot hold vacuously
    const saw = (k: string) => seen.set(k, (seen.get(k) ?? 0) + 1);
    await fc.assert(
      fc.asyncProperty(fc.array(anyCall, { minLength: 1, maxLength: 4 }), async (calls) => {
        scripted.setScript({ calls: calls.map(({ op, argsJson }) => ({ op, argsJson })) });
        const res = await call(emu, 'POST', '/v1/invoke/caller', {});
        expect(res.status, res.text).toBe(200);
        const replies: CallReply[] = scripted.replies;
        expect(replies).toHaveLength(calls.length);
        for (const [i, c] of calls.entries()) {
          const r = replies[i]!;
          const what = `${c.op} ${c.argsJson.slice(0, 200)} → ${JSON.stringify(r).slice(0, 300)}`;
          saw(`${c.op}:${c.bad.length ? `refused:${c.bad.join(',')}` : c.tooLarge ? 'too_large' : c.notFound ? 'not_found' : 'accepted'}`);
          if (c.bad.length) {
            expect(r.ok, what).toBe(false);
            expect(r.error!.code, what).toBe('validation_failed');
            for (const field of c.bad)
              expect(r.error!.message, what).toMatch(new RegExp(`${c.op.replace('.', '\\.')}\\.${field}\\b|Unrecognized key.*"${field}"`));
          } else if (c.tooLarge) {
            expect(r.ok, what).toBe(false);
            expect(r.error!.code, what).toBe('payload_too_large');
            expect(r.error!.message, what).toMatch(/bytes/);
          } else if (c.notFound) {
            expect(r, what).toMatchObject({ ok: false, error: { code: 'not_found' } });
          } else {
            expect(r.ok, what).toBe(true);
            if (c.stored) stored.set(c.stored.key, c.stored);
            if (c.op === 'store.delete' && JSON.parse(c.argsJson).key) stored.delete(JSON.parse(c.argsJson).key as string);
          }
        }
        // What was accepted reads back over REST as written, with an expiry within 10 years.
        for (const c of calls) {
          if (!c.stored || stored.get(c.stored.key) !== c.stored) continue;
          if (c.stored.key === '.' || c.stored.key === '..') {
            // A URL path cannot carry these (clients resolve /v1/store/%2E to /v1/store/): listed instead.
            const listed = await call(emu, 'GET', `/v1/store?prefix=${encodeURIComponent(c.stored.key)}&limit=1000`);
            expect(listed.json.data.map((e: { key: string }) => e.key)).toContain(c.stored.key);
            continue;
          }
          const got = await call(emu, 'GET', `/v1/store/${encodeURIComponent(c.stored.key)}`);
          expect(got.status, got.text.slice(0, 200)).toBe(200);
          expect(got.json.value).toEqual(JSON.parse(c.stored.valueText));
          if (c.stored.ttl === null) expect(got.json.expires_at).toBeNull();
          else {
            const left = Date.parse(got.json.expires_at as string) - Date.now();
            expect(left).toBeGreaterThan(c.stored.ttl * 1000 - 60_000);
            expect(left).toBeLessThanOrEqual(TEN_YEARS_S * 1000);
          }
        }
      }),
      { numRuns: 80 * RUNS_SCALE, seed, examples: coverageExamples },
    );
    // The coverage examples alone meet each of these (by construction); the drawn calls add to them.
    const count = (re: RegExp) => [...seen].filter(([k]) => re.test(k)).reduce((a, [, n]) => a + n, 0);
    expect(count(/^store\.set:accepted$/), JSON.stringify([...seen])).toBeGreaterThanOrEqual(10);
    expect(count(/^store\.set:refused:.*ttl_seconds/)).toBeGreaterThanOrEqual(10);
    expect(count(/^store\.set:refused:.*value/)).toBeGreaterThanOrEqual(5);
    expect(count(/^store\.set:refused:.*key/)).toBeGreaterThanOrEqual(5);
    expect(count(/^store\.set:too_large$/)).toBeGreaterThanOrEqual(1);
    expect(count(/^integrations\.call:refused/)).toBeGreaterThanOrEqual(3);
    // A restart finds nothing to set aside: no host call stored anything the load check refuses.
    await emu.stop();
    emu = await start(dir);
    expect(await readdir(join(dir, 'quarantine')).catch(() => [])).toEqual([]);
    const doctor = await request(emu.url, 'GET', '/_emu/doctor', undefined, { key: emu.adminToken });
    expect(doctor.json.quarantine).toMatchObject({ count: 0, entries: [] });
  }, 240_000);

  it('an output or stream chunk deeper or larger than an API body is a handler_error that says so', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          small,
          deep,
          fc.constantFrom(6 * MiB - 8, 6 * MiB - 7).map((n): Val => ({ text: `"${'y'.repeat(n - 2)}"`, depth: 0, bytes: n })),
        ),
        async (inner) => {
          // The handler returns an object (the spec's handler shape): {"v": …}, one level and 6 bytes more.
          const out: Val = { text: `{"v":${inner.text}}`, depth: inner.depth + 1, bytes: inner.bytes + 6 };
          scripted.setScript({ outputJson: out.text });
          const res = await call(emu, 'POST', '/v1/invoke/caller', {});
          if (out.depth <= 127 && out.bytes <= 6 * MiB) {
            expect(res.status, res.text.slice(0, 300)).toBe(200);
            expect(res.json).toEqual(JSON.parse(out.text));
          } else {
            expect(res.status, res.text.slice(0, 300)).toBe(500);
            expect(res.json.code).toBe('handler_error');
            expect(res.json.detail).toMatch(
              out.depth > 127 ? /return value nests arrays\/objects deeper than 127 levels/ : /return value is \d+ bytes as JSON/,
            );
          }
        },
      ),
      { numRuns: 25, seed },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(small, deep), { minLength: 1, maxLength: 4 }), async (chunks) => {
        scripted.setScript({ chunks: chunks.map((c) => c.text), outputJson: '{"done":true}' });
        const res = await fetch(`${emu.url}/v1/invoke/caller`, {
          method: 'POST',
          headers: { authorization: `Bearer ${emu.localApiKey}`, 'content-type': 'application/json', 'x-invoke-mode': 'stream' },
          body: '{}',
        });
        const events = (await res.text())
          .split('\n\n')
          .map((block) => ({ event: /^event: (.*)$/m.exec(block)?.[1], data: /^data: (.*)$/m.exec(block)?.[1] }))
          .filter((e) => e.event);
        const firstBad = chunks.findIndex((c) => c.depth > 127);
        const delivered = events.filter((e) => e.event === 'chunk').map((e) => JSON.parse(e.data!).data as unknown);
        const last = events.at(-1)!;
        if (firstBad < 0) {
          expect(delivered).toEqual(chunks.map((c) => JSON.parse(c.text)));
          expect(last.event).toBe('result');
        } else {
          expect(delivered).toEqual(chunks.slice(0, firstBad).map((c) => JSON.parse(c.text)));
          expect(last.event).toBe('error');
          expect(JSON.parse(last.data!)).toMatchObject({
            code: 'handler_error',
            message: expect.stringContaining(`chunk ${firstBad + 1} nests arrays/objects deeper than 127 levels`),
          });
        }
      }),
      { numRuns: 25, seed },
    );
  }, 240_000);
});

describe('the workspace meets the REST schemas too', () => {
  it("snippet.json's limits and description accept exactly what POST /v1/snippets…/versions and POST /v1/snippets accept", () => {
    const limitValue = fc.oneof(
      fc.integer(),
      fc.double(),
      fc.constantFrom(0, -1, 1, 2_147_483_647, 2_147_483_648, 1e300, 1.5),
      fc.string({ maxLength: 3 }),
      fc.constant(null),
    );
    fc.assert(
      fc.property(fc.constantFrom('timeout_ms', 'max_memory_mb', 'max_cpu_percent'), limitValue, (field, v) => {
        // A version needs its code (CreateVersion says so itself); the limit is what varies.
        expect(SnippetJson.safeParse({ [field]: v }).success).toBe(CreateVersion.safeParse({ code: '', [field]: v }).success);
      }),
      { numRuns: 300, seed },
    );
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 1100 }), fc.integer()), (d) => {
        expect(SnippetJson.safeParse({ description: d }).success).toBe(
          CreateSnippet.safeParse({ name: 'x', runtime: 'bun', description: d }).success,
        );
      }),
      { seed },
    );
  });
});

// ---- stored state ----------------------------------------------------------------------------------------

const T = '2026-11-01T00:00:00.000Z';
const H = (c: string) => c.repeat(64);

/** One valid record of each collection (what a core writes), the ground the fuzz stands on. */
function validDoc(): DbData {
  const inv = {
    id: 'inv_1',
    tenant_id: 'ten_l',
    snippet_id: 'snp_1',
    snippet: 'hello',
    version: 1,
    env: null,
    mode: 'sync' as const,
    status: 'succeeded' as const,
    outcome: 'success' as const,
    output: { ok: true },
    error: null,
    usage: { duration_ms: 1, init_ms: 0, cpu_ms: 0, cpu_throttled_ms: 0, peak_memory_mb: 1 },
    limits: { timeout_ms: 1000, max_memory_mb: 64, max_cpu_percent: 10 },
    overridden: false,
    parity: { status: 'full' as const, reasons: [] },
    warm: false,
    logs_blob: null,
    logs_truncated: false,
    timeline_blob: null,
    idempotency_key: null,
    attempts: 1,
    callback: null,
    parity_warnings: [],
    created_at: T,
    started_at: T,
    finished_at: T,
  };
  return {
    ...emptyDb(),
    tenants: [
      {
        id: 'ten_x',
        name: 'other',
        caps: { timeout_ms: 1000, max_memory_mb: 64, max_cpu_percent: 10, max_concurrency: 2 },
        webhook_secret: 'v1.x',
        webhook_secret_created_at: T,
        previous_webhook_secret: null,
        previous_webhook_secret_expires_at: null,
        created_at: T,
      },
      // The local tenant, whose sealed key a start opens (this one cannot be: the key file is new).
      {
        id: 'ten_l',
        name: 'local',
        caps: { timeout_ms: 1000, max_memory_mb: 64, max_cpu_percent: 10, max_concurrency: 2 },
        webhook_secret: 'v1.x',
        webhook_secret_created_at: T,
        previous_webhook_secret: null,
        previous_webhook_secret_expires_at: T,
        created_at: T,
      },
    ],
    api_keys: [
      { id: 'key_1', tenant_id: 'ten_x', hash: H('a'), prefix: 'svc_abc', created_at: T },
      { id: 'key_2', tenant_id: 'ten_l', hash: H('d'), prefix: 'svc_def', sealed: 'v1.not-sealed', created_at: T },
    ],
    snippets: [
      { id: 'snp_1', tenant_id: 'ten_x', name: 'hello', runtime: 'bun', description: '', latest_version: 1, created_at: T, updated_at: T },
    ],
    versions: [
      {
        snippet_id: 'snp_1',
        version: 1,
        entrypoint: 'index.ts',
        files: [{ path: 'index.ts', size: 1, sha256: H('b') }],
        sha256: H('c'),
        size_bytes: 1,
        timeout_ms: 1000,
        max_memory_mb: 64,
        max_cpu_percent: 10,
        source: 'api',
        created_at: T,
      },
    ],
    environments: [{ tenant_id: 'ten_x', name: 'dev', builtin: true, created_at: T }],
    deployments: [{ snippet_id: 'snp_1', env: 'dev', version: 1, previous_version: null, deployed_at: T }],
    secrets: [{ tenant_id: 'ten_x', name: 'K', sealed: 'v1.s', created_at: T, updated_at: T }],
    store: [
      { tenant_id: 'ten_x', key: 'a', value: 1, size: 1, expires_at: null, created_at: T, updated_at: T },
      { tenant_id: 'ten_x', key: 'b', value: [1], size: 3, expires_at: T, created_at: T, updated_at: T },
    ],
    integrations: [
      {
        tenant_id: 'ten_x',
        name: 'w',
        provider: 'http',
        base_url: 'http://127.0.0.1:9',
        auth: { type: 'none', secret: null, header: null },
        created_at: T,
        updated_at: T,
      },
    ],
    invocations: [
      inv,
      { ...inv, id: 'inv_2' },
      // An async job a start queues again, with a callback still to deliver (to a closed port).
      {
        ...inv,
        id: 'inv_3',
        mode: 'async',
        status: 'queued',
        outcome: null,
        output: undefined,
        usage: null,
        started_at: null,
        finished_at: null,
        attempts: 0,
        input: { a: 1 },
        callback: { url: 'http://127.0.0.1:9/hook', webhook_id: 'msg_3', status: 'pending', deliveries: [], next_attempt_at: T },
      },
    ],
  };
}

const COLLECTIONS = [
  'tenants',
  'api_keys',
  'snippets',
  'versions',
  'environments',
  'deployments',
  'secrets',
  'store',
  'integrations',
  'invocations',
] as const;

/** Out-of-range and wrong-typed values, including what a snippet once wrote (year 33715). */
const weird = fc.oneof(
  fc.constantFrom(
    '33715-06-01T00:00:00.000Z',
    '+275760-09-13T00:00:00.000Z',
    'not a date',
    '',
    -1,
    0,
    1e308,
    -1e308,
    2 ** 53 + 2,
    1.5,
    null,
    true,
    [],
    {},
  ),
  fc.string({ maxLength: 10 }),
  fc.integer(),
  fc.double(),
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(500, 5000).map((d) => ({ __deep: d })), // spliced in as text by toText
);

/**
 * JSON text of a fuzzed value, with each `{__deep: d}` replaced by d levels of nesting (no recursion here).
 * Only the two depths `weird` makes: a later edit can set such a record's `__deep` to any number (once
 * 2,147,483,647, which made a string too long for V8).
 */
const toText = (v: unknown) =>
  (JSON.stringify(v) ?? 'null').replace(/\{"__deep":(500|5000)\}/g, (_, d: string) => '['.repeat(Number(d)) + ']'.repeat(Number(d)));

/** A change to a valid document: a field of a record, a record, a collection or the top level. */
const edit = fc.oneof(
  fc.record({
    kind: fc.constant('field' as const),
    collection: fc.constantFrom(...COLLECTIONS),
    at: fc.nat(),
    field: fc.nat(),
    value: weird,
  }),
  fc.record({ kind: fc.constant('drop-field' as const), collection: fc.constantFrom(...COLLECTIONS), at: fc.nat(), field: fc.nat() }),
  fc.record({ kind: fc.constant('record' as const), collection: fc.constantFrom(...COLLECTIONS), value: weird }),
  fc.record({
    kind: fc.constant('collection' as const),
    collection: fc.constantFrom(...COLLECTIONS, 'journal_seq', 'surprise'),
    value: weird,
  }),
  fc.record({ kind: fc.constant('schema_version' as const), value: fc.oneof(weird, fc.constantFrom(0, 1, 2, 3, 4, 99)) }),
);

interface Edit {
  kind: 'field' | 'drop-field' | 'record' | 'collection' | 'schema_version';
  collection?: string;
  at?: number;
  field?: number;
  value?: unknown;
}

function applyEdit(doc: Record<string, unknown>, edit: Edit) {
  // A copy: fast-check hands out the same constant objects again, and an edit must not change them.
  const e = { ...edit, value: structuredClone(edit.value) };
  const list = e.collection ? doc[e.collection] : undefined;
  switch (e.kind) {
    case 'field':
    case 'drop-field': {
      if (!Array.isArray(list) || list.length === 0) return;
      const rec = list[e.at! % list.length];
      if (typeof rec !== 'object' || rec === null || Array.isArray(rec)) return;
      const names = Object.keys(rec);
      const name = names[e.field! % names.length]!;
      if (e.kind === 'field') (rec as Record<string, unknown>)[name] = e.value;
      else delete (rec as Record<string, unknown>)[name];
      return;
    }
    case 'record':
      if (Array.isArray(list)) list.push(e.value);
      return;
    case 'collection':
      doc[e.collection!] = e.value;
      return;
    case 'schema_version':
      doc.schema_version = e.value;
  }
}

/** db.json text: a fuzzed valid document, or text that is not a usable document at all. */
const dbText = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.array(edit, { maxLength: 6 }).map((edits) => {
      const doc = validDoc() as unknown as Record<string, unknown>;
      for (const e of edits) applyEdit(doc, e);
      return toText(doc);
    }),
  },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
      fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
      fc.nat({ max: 400 }).map((n) => JSON.stringify(validDoc()).slice(0, n)),
      fc.constantFrom('['.repeat(100_000), '{"schema_version": 3, "store": [' + '['.repeat(50_000)),
    ),
  },
);

/** Journal lines: entries (valid or not), garbage, a line cut short. */
const journalText = fc
  .array(
    fc.oneof(
      fc
        .record({ seq: fc.integer({ min: 1, max: 50 }), record: fc.oneof(fc.constant(validDoc().invocations[0]), weird) })
        .map((e) => toText({ seq: e.seq, collection: 'invocations', record: e.record })),
      fc.string({ maxLength: 40 }).filter((s) => !s.includes('\n')),
      weird.map(toText),
    ),
    { maxLength: 4 },
  )
  .map((lines) => lines.join('\n') + (lines.length ? '\n' : ''));

const newerVersion = (text: string) => {
  try {
    const v = (JSON.parse(text) as { schema_version?: unknown }).schema_version;
    return typeof v === 'number' && Number.isInteger(v) && v > SCHEMA_VERSION;
  } catch {
    return false;
  }
};

describe('nothing stored can stop a restart', () => {
  it(
    'the repository opens on any db.json and journal: each record loads valid or is quarantined, the files kept byte for byte',
    async () => {
      const root = await tempDir('svc-emu-dbfuzz-');
      let n = 0;
      try {
        await fc.assert(
          fc.asyncProperty(dbText, journalText, async (text, journal) => {
            const dir = join(root, String(n++));
            await mkdir(join(dir, 'journal'), { recursive: true });
            await writeFile(join(dir, 'db.json'), text);
            if (journal) await writeFile(join(dir, 'journal', '1.jsonl'), journal);
            const opened = await Repository.open(join(dir, 'db.json'), { now: () => new Date(T) }).catch((e: unknown) => e);
            if (newerVersion(text)) {
              // The one refusal: a newer emulator's document (starting empty over it would lose that state).
              expect(opened).toBeInstanceOf(DataDirError);
              expect((opened as Error).message).toMatch(/was written by a newer emulator/);
              return;
            }
            expect(opened, String(opened)).toBeInstanceOf(Repository);
            const repo = opened as Repository;
            const data = repo.read((db) => db);
            expect(DbData.safeParse(data).success).toBe(true);
            const q = repo.quarantined;
            let parsed: Record<string, unknown> | null = null;
            try {
              const p = JSON.parse(text) as unknown;
              if (typeof p === 'object' && p !== null && !Array.isArray(p)) parsed = p as Record<string, unknown>;
            } catch {
              /* not JSON */
            }
            const wholeSetAside = q?.items.some((i) => i.collection === null) ?? false;
            if (parsed === null) expect(wholeSetAside).toBe(true);
            if (q) {
              // The report is on disk and the file as it was is kept beside it.
              const files = await readdir(join(dir, 'quarantine'));
              expect(files).toContain(q.file);
              for (const copy of q.copies) expect(files).toContain(copy);
              const dbCopy = q.copies.find((c) => c.endsWith('.db.json'));
              if (q.items.some((i) => i.source === 'db.json'))
                expect(await readFile(join(dir, 'quarantine', dbCopy!), 'latin1')).toBe(Buffer.from(text).toString('latin1'));
              for (const item of q.items) expect(item.problems.length).toBeGreaterThan(0);
            }
            // No record vanishes: each one of a list is loaded or quarantined (a journal may add invocations).
            if (parsed && !wholeSetAside) {
              for (const c of COLLECTIONS) {
                const list = parsed[c];
                if (!Array.isArray(list) || (c === 'invocations' && journal)) continue;
                const fromDb = q?.items.filter((i) => i.source === 'db.json' && i.collection === c).length ?? 0;
                expect((data[c] as unknown[]).length + fromDb, c).toBe(list.length);
              }
            }
            await repo.close();
            // Stable: the rewritten db.json opens clean.
            const again = await Repository.open(join(dir, 'db.json'));
            expect(again.quarantined).toBeNull();
            expect(again.read((db) => db)).toEqual(data);
            await again.close();
            await rm(dir, { recursive: true, force: true });
          }),
          { numRuns: 300 * RUNS_SCALE, seed },
        );
      } finally {
        await rm(root, { recursive: true, force: true });
      }
    },
    240_000 * RUNS_SCALE,
  );

  it(
    'the core starts on fuzzed state, answers /readyz, and doctor lists what was quarantined',
    async () => {
      const root = await tempDir('svc-emu-corefuzz-');
      let n = 0;
      try {
        await fc.assert(
          fc.asyncProperty(
            dbText.filter((t) => !newerVersion(t)),
            async (text) => {
              const dir = join(root, String(n++));
              await mkdir(dir, { recursive: true });
              await writeFile(join(dir, 'db.json'), text);
              const emu = await start(dir);
              try {
                const ready = await request(emu.url, 'GET', '/readyz');
                expect(ready.status, ready.text).toBe(200);
                const doctor = await request(emu.url, 'GET', '/_emu/doctor', undefined, { key: emu.adminToken });
                const reports = (await readdir(join(dir, 'quarantine')).catch(() => [] as string[])).filter((f) =>
                  f.endsWith('.report.json'),
                );
                const count = (
                  await Promise.all(
                    reports.map(
                      async (f) => (JSON.parse(await readFile(join(dir, 'quarantine', f), 'utf8')) as { items: unknown[] }).items.length,
                    ),
                  )
                ).reduce((a, b) => a + b, 0);
                expect(doctor.json.quarantine.count).toBe(count);
                expect(doctor.json.quarantine.entries.length).toBe(Math.min(count, 200));
                for (const e of doctor.json.quarantine.entries) expect(e.action).toMatch(/\S/);
                if (count) expect(logs.some((l) => l.includes('"level":"error"') && l.includes(dir))).toBe(true);
              } finally {
                await emu.stop();
              }
              // And again: nothing new to set aside.
              const second = await start(dir);
              await second.stop();
              expect(
                (await readdir(join(dir, 'quarantine')).catch(() => [] as string[])).filter((f) => f.endsWith('.report.json')).length,
              ).toBeLessThanOrEqual(1);
              await rm(dir, { recursive: true, force: true });
            },
          ),
          { numRuns: 25 * RUNS_SCALE, seed },
        );
      } finally {
        await rm(root, { recursive: true, force: true });
      }
    },
    240_000 * RUNS_SCALE,
  );

  it("a quarantined record's blob survives the start's garbage collection (restoring it finds its value); an unnamed one does not", async () => {
    const dir = await tempDir('svc-emu-qblob-');
    try {
      const named = H('e');
      const orphan = H('f');
      const old = new Date(Date.parse(T) - 86_400_000);
      for (const h of [named, orphan]) {
        await mkdir(join(dir, 'blobs', h.slice(0, 2)), { recursive: true });
        await writeFile(join(dir, 'blobs', h.slice(0, 2), h), '"a large value"');
        await utimes(join(dir, 'blobs', h.slice(0, 2), h), old, old);
      }
      const doc = validDoc();
      doc.store.push({ tenant_id: 'ten_x', key: 'big', blob: named, size: -1, expires_at: null, created_at: T, updated_at: T });
      await writeFile(join(dir, 'db.json'), JSON.stringify(doc));
      const emu = await start(dir);
      await emu.stop();
      const report = (await readdir(join(dir, 'quarantine'))).find((f) => f.endsWith('.report.json'))!;
      expect(JSON.parse(await readFile(join(dir, 'quarantine', report), 'utf8')).items[0]).toMatchObject({
        collection: 'store',
        label: 'store key "big" of "ten_x"',
        problems: ['size: Too small: expected number to be >=0'],
      });
      expect(await readdir(join(dir, 'blobs', 'ee'))).toEqual([named]);
      expect(await readdir(join(dir, 'blobs', 'ff'))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('a store record with an expiry in the year 33715 (what a 1e12 TTL once wrote) is quarantined, and the core starts', async () => {
    const dir = await tempDir('svc-emu-33715-');
    try {
      const doc = validDoc();
      (doc.store[0] as { expires_at: string }).expires_at = '33715-06-01T00:00:00.000Z';
      await writeFile(join(dir, 'db.json'), JSON.stringify(doc));
      const emu = await start(dir);
      try {
        const doctor = await request(emu.url, 'GET', '/_emu/doctor', undefined, { key: emu.adminToken });
        expect(doctor.json.quarantine.count).toBe(1);
        expect(doctor.json.quarantine.entries[0]).toMatchObject({
          source: 'db.json',
          collection: 'store',
          index: 0,
          label: 'store key "a" of "ten_x"',
          problems: [expect.stringMatching(/^expires_at: /)],
          action: expect.stringMatching(/PUT \/v1\/store\/\{key\}/),
        });
        expect(doctor.json.notes.join('\n')).toMatch(/1 record\(s\) failed validation/);
        const report = JSON.parse(await readFile(join(dir, 'quarantine', doctor.json.quarantine.entries[0].report), 'utf8'));
        expect(report.items[0].record).toEqual(doc.store[0]);
      } finally {
        await emu.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
