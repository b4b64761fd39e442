import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { parseSseText } from '../../contract/sse';
import {
  EMULATOR_ONLY_FIELDS,
  errorLocations,
  mediaType,
  pathPattern,
  present,
  problemCode,
  shapeOf,
  timingBand,
  type Observation,
} from './observe';
import type { Fixture, Reply, Side } from './side';
import type { CallbackReceiver } from './receiver';

/**
 * THE list of parity probes (docs/parity.md, "Checking parity against a deployment", lists them too).
 * Each probe runs the same requests on the reference emulator and on the target and records what it saw,
 * normalised (./observe.ts); the check compares the two observations aspect by aspect. A probe that needs
 * snippets of its own on the target (`needs: 'deploy'`) runs only with --allow-deploy, else it is listed
 * as skipped. Snippets are created as `svc-parity-<random>-<fixture>` and deleted at the end.
 */

export interface ProbeContext {
  receiver: () => Promise<CallbackReceiver>;
}

export interface Probe {
  name: string;
  group: string;
  description: string;
  needs: 'nothing' | 'deploy';
  run(side: Side, obs: Observation, ctx: ProbeContext): Promise<void>;
}

/** Every probe snippet asks these limits (within any tenant's default caps) … */
export const FIXTURE_TIMEOUT_MS = 5_000;
/** … the OOM probe's more (a kill for memory took 2.7–3.5 s on a loaded 2-core test host) … */
export const OOM_PROBE_TIMEOUT_MS = 7_000;
/** … and the timeout probe's the most: a tenant cap on timeout_ms between the two refuses that one only. */
export const TIMEOUT_PROBE_MS = 8_000;
/**
 * A 504 may come this much later than timeout_ms and still be "≈ timeout_ms": the runtime's start and the
 * network are not the handler's time (a loaded test host answered 2.2 s late after a 1 s cold start).
 */
export const TIMEOUT_SLACK_MS = 4_000;
/** How long each run of the concurrency probe holds its slot: long enough for max_concurrency + 1 requests to overlap. */
const PAUSE_MS = 2_000;
/** The concurrency probe sends max_concurrency + 1 runs at once only up to this cap (a production tenant's may be far higher). */
const CONCURRENCY_PROBE_MAX = 32;
/** An async invocation (or a callback delivery) must end within this. */
const ASYNC_DEADLINE_MS = 30_000;

interface FixtureSpec {
  runtime: 'bun' | 'python';
  code: string;
  limits: { timeout_ms: number; max_memory_mb: number; max_cpu_percent: number };
}

const LIMITS = { timeout_ms: FIXTURE_TIMEOUT_MS, max_memory_mb: 128, max_cpu_percent: 100 };

/** The probe snippets: the smallest code that shows each behaviour. */
export const FIXTURES: Record<string, FixtureSpec> = {
  echo: {
    runtime: 'bun',
    code: 'export default async function handler(input) {\n  return { echo: input };\n}\n',
    limits: LIMITS,
  },
  /** The limits probes' own (a version made there must not change what the other probes' echo runs). */
  versions: {
    runtime: 'bun',
    code: 'export default async function handler(input) {\n  return { echo: input };\n}\n',
    limits: LIMITS,
  },
  stream: {
    runtime: 'bun',
    code: 'export default async function* handler(input) {\n  for (let n = 1; n <= 3; n++) yield { n };\n}\n',
    limits: LIMITS,
  },
  throws: {
    runtime: 'bun',
    code: "export default async function handler(input) {\n  throw new Error('parity probe: thrown on purpose');\n}\n",
    limits: LIMITS,
  },
  sleeps: {
    runtime: 'bun',
    code: 'export default async function handler(input) {\n  await new Promise((r) => setTimeout(r, 600_000));\n  return {};\n}\n',
    limits: { ...LIMITS, timeout_ms: TIMEOUT_PROBE_MS },
  },
  /** Holds its concurrency slot for PAUSE_MS (the concurrency probe's runs overlap). */
  pause: {
    runtime: 'bun',
    code: `export default async function handler(input) {\n  await new Promise((r) => setTimeout(r, ${PAUSE_MS}));\n  return {};\n}\n`,
    limits: LIMITS,
  },
  hog: {
    runtime: 'python',
    code: 'def handler(input):\n    hog = bytearray(300 * 1024 * 1024)\n    return {"n": len(hog)}\n',
    limits: { ...LIMITS, max_memory_mb: 64, timeout_ms: OOM_PROBE_TIMEOUT_MS },
  },
};

const describeRefusal = (step: string, r: Reply) => `${step} ${r.status} ${problemCode(r.body)}`;

/** Creates a FIXTURES snippet on a side (once): the snippet, then its one version. */
function makeFixture(name: string) {
  return async (side: Side, snippet: string): Promise<Fixture> => {
    const spec = FIXTURES[name]!;
    side.created.push(snippet); // before the request: a Ctrl-C mid-request must still delete it
    const s = await side.send('POST', '/v1/snippets', { body: { name: snippet, runtime: spec.runtime } });
    if (s.status !== 201) return { snippet, ok: false, outcome: describeRefusal('snippet', s) };
    const v = await side.send('POST', `/v1/snippets/${snippet}/versions`, { body: { code: spec.code, ...spec.limits } });
    if (v.status !== 201) return { snippet, ok: false, outcome: describeRefusal('version', v) };
    return { snippet, ok: true, outcome: 'created' };
  };
}

/** The probe's snippet, its creation a gate: false when this side could not create it. */
async function useFixture(side: Side, obs: Observation, name: string): Promise<string | null> {
  const f = await side.fixture(name, makeFixture(name));
  return obs.gate(`snippet ${name}`, f.outcome, f.ok) ? f.snippet : null;
}

/** status, content-type and, for a problem, its code. */
function answer(obs: Observation, r: Reply, prefix = ''): void {
  obs.set(`${prefix}status`, String(r.status));
  obs.set(`${prefix}content-type`, mediaType(r.headers));
  if (r.status >= 400) obs.set(`${prefix}code`, problemCode(r.body));
}

/** A problem answer: status, content-type, code and the body's shape. */
function problem(obs: Observation, r: Reply, prefix = ''): void {
  answer(obs, r, prefix);
  obs.set(`${prefix}body.shape`, shapeOf(r.body));
}

/** The three run headers and the request id, as a run's answer carries them. */
function runHeaders(obs: Observation, r: Reply): void {
  obs.set('header.x-request-id', present(r.headers, 'x-request-id'));
  obs.set('header.x-invocation-id', present(r.headers, 'x-invocation-id'));
  obs.set('header.x-snippet-version', r.headers.get('x-snippet-version') ?? '(absent)');
  obs.set('header.x-snippet-env', r.headers.get('x-snippet-env') ?? '(absent)');
}

const rand = () =>
  randomBytes(12)
    .toString('base64url')
    .replace(/[^A-Za-z0-9]/g, 'x');
const invoke = (snippet: string, query = '') => `/v1/invoke/${encodeURIComponent(snippet)}${query}`;

/** A 404 body with what names the one thing asked for taken out: two such bodies must be identical. */
function anonymous404(r: Reply, asked: string): string {
  const body = { ...(r.body as Record<string, unknown>) };
  delete body.request_id;
  return JSON.stringify(body).split(asked).join('{asked}');
}

async function waitTerminal(side: Side, location: string): Promise<Reply> {
  const deadline = Date.now() + ASYNC_DEADLINE_MS;
  for (;;) {
    const r = await side.send('GET', location);
    const status = (r.body as { status?: unknown } | undefined)?.status;
    if (r.status !== 200 || status === 'succeeded' || status === 'failed' || Date.now() > deadline) return r;
    await new Promise((res) => setTimeout(res, 100));
  }
}

export const PROBES: Probe[] = [
  // ---- auth ------------------------------------------------------------------------------------------
  {
    name: 'auth.no-key',
    group: 'auth',
    description: 'GET /v1/snippets without Authorization → 401 problem',
    needs: 'nothing',
    async run(side, obs) {
      problem(obs, await side.send('GET', '/v1/snippets', { credential: null }));
    },
  },
  {
    name: 'auth.bad-key',
    group: 'auth',
    description: 'GET /v1/snippets with a well-formed key the service never issued → 401 problem',
    needs: 'nothing',
    async run(side, obs) {
      problem(obs, await side.send('GET', '/v1/snippets', { credential: `svc_${rand()}` }));
    },
  },
  {
    name: 'auth.invoke-no-key',
    group: 'auth',
    description: 'POST /v1/invoke/{missing} without Authorization → 401 before any lookup',
    needs: 'nothing',
    async run(side, obs) {
      problem(obs, await side.send('POST', invoke(`${side.prefix}-missing`), { body: {}, credential: null }));
    },
  },
  // ---- tenant isolation ---------------------------------------------------------------------------------
  {
    name: 'tenant.isolation',
    group: 'tenant',
    description: 'a random snippet id (another tenant’s, or nobody’s) → 404, identical to a missing name',
    needs: 'nothing',
    async run(side, obs) {
      const id = `snp_${rand()}`;
      const missing = `${side.prefix}-missing`;
      const byId = await side.send('GET', `/v1/snippets/${id}`);
      const byName = await side.send('GET', `/v1/snippets/${missing}`);
      problem(obs, byId, 'get.');
      obs.set('get.identical-to-missing', anonymous404(byId, id) === anonymous404(byName, missing) ? 'yes' : 'no');
      const inv = await side.send('POST', invoke(id), { body: {} });
      const invMissing = await side.send('POST', invoke(missing), { body: {} });
      problem(obs, inv, 'invoke.');
      obs.set('invoke.identical-to-missing', anonymous404(inv, id) === anonymous404(invMissing, missing) ? 'yes' : 'no');
      const invocation = await side.send('GET', `/v1/invocations/inv_${rand()}`);
      problem(obs, invocation, 'invocation.');
    },
  },
  {
    name: 'tenant.runtime-limits',
    group: 'limits',
    description: 'GET /v1/tenant/runtime-limits: the shape and every cap',
    needs: 'nothing',
    async run(side, obs) {
      const r = await side.send('GET', '/v1/tenant/runtime-limits');
      answer(obs, r);
      obs.set('body.shape', shapeOf(r.body));
      if (r.status === 200 && r.body && typeof r.body === 'object') {
        for (const [k, v] of Object.entries(r.body as Record<string, unknown>)) obs.set(k, JSON.stringify(v));
      }
    },
  },
  {
    name: 'environments.builtin',
    group: 'resolution',
    description: 'GET /v1/environments: the list’s shape, and dev, staging and prod in it',
    needs: 'nothing',
    async run(side, obs) {
      const r = await side.send('GET', '/v1/environments');
      answer(obs, r);
      obs.set('body.shape', shapeOf(r.body, { maxDepth: 3 }));
      const names = new Set(((r.body as { data?: { name?: string }[] } | undefined)?.data ?? []).map((e) => e.name));
      obs.set('builtins', ['dev', 'staging', 'prod'].map((n) => `${n}:${names.has(n) ? 'yes' : 'no'}`).join(' '));
    },
  },
  {
    name: 'input.unknown-snippet',
    group: 'input',
    description: 'POST /v1/invoke/{a name nobody has} → 404 not_found',
    needs: 'nothing',
    async run(side, obs) {
      const r = await side.send('POST', invoke(`${side.prefix}-missing`), { body: {} });
      problem(obs, r);
      obs.set('header.x-request-id', present(r.headers, 'x-request-id'));
    },
  },
  // ---- bad input on a real snippet ------------------------------------------------------------------------
  {
    name: 'input.malformed-json',
    group: 'input',
    description: 'invoke with a body that is not JSON → 400',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'echo');
      if (s) problem(obs, await side.send('POST', invoke(s), { raw: '{"a": ' }));
    },
  },
  {
    name: 'input.non-object',
    group: 'input',
    description: 'invoke with a JSON body that is not an object (an array, a string) → refused, naming the body',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'echo');
      if (!s) return;
      const arr = await side.send('POST', invoke(s), { body: [1, 2, 3] });
      problem(obs, arr, 'array.');
      obs.set('array.errors', errorLocations(arr.body));
      const str = await side.send('POST', invoke(s), { raw: '"text"' });
      problem(obs, str, 'string.');
    },
  },
  {
    name: 'input.bad-mode',
    group: 'input',
    description: 'X-Invoke-Mode other than absent/async/stream (`sideways`, and `sync` spelled out) → 400',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'echo');
      if (!s) return;
      problem(obs, await side.send('POST', invoke(s), { body: {}, headers: { 'x-invoke-mode': 'sideways' } }), 'sideways.');
      answer(obs, await side.send('POST', invoke(s), { body: {}, headers: { 'x-invoke-mode': 'sync' } }), 'sync.');
    },
  },
  // ---- resolution -----------------------------------------------------------------------------------------------
  {
    name: 'resolve.latest',
    group: 'resolution',
    description: 'no ?version, no ?env, prod running nothing → the latest version; the run headers',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'echo');
      if (!s) return;
      const input = { a: 1, b: [true, null], c: { d: 'x' } };
      const r = await side.send('POST', invoke(s), { body: input });
      answer(obs, r);
      runHeaders(obs, r);
      obs.set('body', JSON.stringify(r.body) === JSON.stringify({ echo: input }) ? 'the handler’s return value' : JSON.stringify(r.body));
    },
  },
  {
    name: 'resolve.missing-version',
    group: 'resolution',
    description: '?version=99 of a snippet with one version → 404',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'echo');
      if (s) problem(obs, await side.send('POST', invoke(s, '?version=99'), { body: {} }));
    },
  },
  {
    name: 'resolve.undeployed-env',
    group: 'resolution',
    description: '?env=staging where nothing is deployed, and ?env= of an environment that does not exist → 404',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'echo');
      if (!s) return;
      problem(obs, await side.send('POST', invoke(s, '?env=staging'), { body: {} }), 'staging.');
      problem(obs, await side.send('POST', invoke(s, `?env=${side.prefix}-nowhere`), { body: {} }), 'unknown.');
    },
  },
  {
    name: 'resolve.deployed-env',
    group: 'resolution',
    description: 'deploy v1 to dev; ?env=dev runs it; ?version=1&env=dev: the version wins',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'echo');
      if (!s) return;
      const d = await side.send('PUT', `/v1/snippets/${s}/environments/dev`, { body: { version: 1 } });
      if (!obs.gate('deploy dev', String(d.status), d.status < 300)) return;
      const r = await side.send('POST', invoke(s, '?env=dev'), { body: {} });
      answer(obs, r, 'env.');
      obs.set('env.header.x-snippet-env', r.headers.get('x-snippet-env') ?? '(absent)');
      obs.set('env.header.x-snippet-version', r.headers.get('x-snippet-version') ?? '(absent)');
      const both = await side.send('POST', invoke(s, '?version=1&env=dev'), { body: {} });
      answer(obs, both, 'both.');
      obs.set('both.header.x-snippet-env', both.headers.get('x-snippet-env') ?? '(absent)');
    },
  },
  // ---- limits ------------------------------------------------------------------------------------------------------
  {
    name: 'limits.defaults',
    group: 'limits',
    description: 'a version that asks no limits gets the defaults (60000 / 200 / 10)',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'versions');
      if (!s) return;
      const r = await side.send('POST', `/v1/snippets/${s}/versions`, { body: { code: FIXTURES.versions!.code } });
      if (!obs.gate('version', r.status === 201 ? '201' : describeRefusal('version', r), r.status === 201)) return;
      const v = r.body as Record<string, unknown>;
      for (const f of ['timeout_ms', 'max_memory_mb', 'max_cpu_percent']) obs.set(f, JSON.stringify(v[f]));
      obs.set('body.shape', shapeOf(r.body, { maxDepth: 2 }));
    },
  },
  {
    name: 'limits.above-cap',
    group: 'limits',
    description: 'a version asking max_memory_mb one above the tenant’s cap → 422 limit_exceeds_tenant_cap naming the field and the cap',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'versions');
      if (!s) return;
      const caps = await side.send('GET', '/v1/tenant/runtime-limits');
      const cap = (caps.body as { max_memory_mb?: unknown } | undefined)?.max_memory_mb;
      if (!obs.gate('caps', caps.status === 200 && typeof cap === 'number' ? 'read' : String(caps.status), typeof cap === 'number')) return;
      const r = await side.send('POST', `/v1/snippets/${s}/versions`, {
        // The other limits as every probe snippet asks them, so max_memory_mb is the one over a cap.
        body: { code: FIXTURES.versions!.code, ...LIMITS, max_memory_mb: (cap as number) + 1 },
      });
      problem(obs, r);
      obs.set('errors', errorLocations(r.body));
      const body = (r.body ?? {}) as { field?: unknown; cap?: unknown };
      obs.set('field', JSON.stringify(body.field ?? null));
      obs.set('names-the-cap', body.cap === cap ? 'yes' : JSON.stringify(body.cap ?? null));
    },
  },
  {
    name: 'limits.concurrency',
    group: 'limits',
    description:
      `max_concurrency + 1 sync runs that each hold their slot ${PAUSE_MS} ms, sent at once → one 429 rate_limited with Retry-After, the rest 200 ` +
      `(probed when max_concurrency ≤ ${CONCURRENCY_PROBE_MAX})`,
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'pause');
      if (!s) return;
      const caps = await side.send('GET', '/v1/tenant/runtime-limits');
      const max = (caps.body as { max_concurrency?: unknown } | undefined)?.max_concurrency;
      if (!obs.gate('caps', caps.status === 200 && typeof max === 'number' ? 'read' : String(caps.status), typeof max === 'number')) return;
      if ((max as number) > CONCURRENCY_PROBE_MAX) {
        obs.set('statuses', `not probed: max_concurrency ${String(max)} is over ${CONCURRENCY_PROBE_MAX}`);
        return;
      }
      const replies = await Promise.all(Array.from({ length: (max as number) + 1 }, () => side.send('POST', invoke(s), { body: {} })));
      const counts = new Map<number, number>();
      for (const r of replies) counts.set(r.status, (counts.get(r.status) ?? 0) + 1);
      obs.set(
        'statuses',
        [...counts]
          .sort(([a], [b]) => a - b)
          .map(([status, n]) => `${status}×${n}`)
          .join(', '),
      );
      const limited = replies.find((r) => r.status === 429);
      if (!limited) return;
      obs.set('429.code', problemCode(limited.body));
      obs.set('429.retry-after', present(limited.headers, 'retry-after'));
    },
  },
  // ---- the three modes ------------------------------------------------------------------------------------------
  {
    name: 'invoke.async',
    group: 'modes',
    description: 'X-Invoke-Mode: async → 202 {invocation_id, status, status_url} + Location; the status polled to its end',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'echo');
      if (!s) return;
      const r = await side.send('POST', invoke(s), { body: { x: 1 }, headers: { 'x-invoke-mode': 'async' } });
      answer(obs, r);
      obs.set('body.shape', shapeOf(r.body));
      obs.set('body.status', JSON.stringify((r.body as { status?: unknown } | undefined)?.status ?? null));
      obs.set('body.status_url', pathPattern((r.body as { status_url?: string } | undefined)?.status_url));
      obs.set('header.location', pathPattern(r.headers.get('location')));
      runHeaders(obs, r);
      const location = r.headers.get('location');
      if (r.status !== 202 || !location) return;
      const end = await waitTerminal(side, location);
      const rec = (end.body ?? {}) as Record<string, unknown>;
      obs.set('record.status', JSON.stringify(rec.status ?? null));
      obs.set('record.outcome', JSON.stringify(rec.outcome ?? null));
      obs.set('record.output', JSON.stringify(rec.output ?? null));
      obs.set('record.mode', JSON.stringify(rec.mode ?? null));
      obs.set('record.shape', shapeOf(end.body, { maxDepth: 2, skipTop: EMULATOR_ONLY_FIELDS }));
    },
  },
  {
    name: 'invoke.stream',
    group: 'modes',
    description: 'X-Invoke-Mode: stream of an async generator → text/event-stream: start, chunk ×3, result; ids increasing',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'stream');
      if (!s) return;
      const r = await side.send('POST', invoke(s), { body: {}, headers: { 'x-invoke-mode': 'stream', accept: 'text/event-stream' } });
      answer(obs, r);
      runHeaders(obs, r);
      if (r.status !== 200) return;
      const events = parseSseText(r.text);
      obs.set('events', events.map((e) => e.event).join(','));
      const ids = events.map((e) => Number(e.id));
      obs.set(
        'ids',
        ids.every((id, i) => Number.isFinite(id) && (i === 0 || id > ids[i - 1]!))
          ? 'increasing'
          : `not increasing (${events.map((e) => e.id).join(',')})`,
      );
      const data = events.map((e) => {
        try {
          return JSON.parse(e.data) as unknown;
        } catch {
          return undefined;
        }
      });
      const of = (name: string) => data.filter((_, i) => events[i]!.event === name);
      obs.set('start.shape', shapeOf(of('start')[0]));
      obs.set('chunks', JSON.stringify(of('chunk')));
      obs.set('result.shape', shapeOf(of('result')[0], { maxDepth: 2 }));
    },
  },
  {
    name: 'invoke.idempotency',
    group: 'modes',
    description: 'the same Idempotency-Key twice → the same invocation, not a second run; the key on another snippet → refused',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'echo');
      if (!s) return;
      const other = await useFixture(side, obs, 'versions');
      if (!other) return;
      const headers = { 'idempotency-key': `svc-parity-${rand()}` };
      const first = await side.send('POST', invoke(s), { body: { n: 1 }, headers });
      const again = await side.send('POST', invoke(s), { body: { n: 1 }, headers });
      answer(obs, first, 'first.');
      answer(obs, again, 'repeat.');
      const id = (r: Reply) => r.headers.get('x-invocation-id');
      obs.set('repeat.same-invocation', id(first) && id(first) === id(again) ? 'yes' : 'no');
      obs.set('repeat.same-body', first.text === again.text ? 'yes' : 'no');
      obs.set('repeat.header.idempotent-replayed', again.headers.get('idempotent-replayed') ?? '(absent)');
      problem(obs, await side.send('POST', invoke(other), { body: { n: 1 }, headers }), 'other-snippet.');
    },
  },
  // ---- outcomes ----------------------------------------------------------------------------------------------------
  {
    name: 'outcome.handler-error',
    group: 'outcomes',
    description: 'a handler that throws → 500 handler_error with the message, the stack and invocation_id',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'throws');
      if (!s) return;
      const r = await side.send('POST', invoke(s), { body: {} });
      problem(obs, r);
      runHeaders(obs, r);
      const detail = JSON.stringify(r.body ?? '');
      obs.set('message', detail.includes('parity probe: thrown on purpose') ? 'the handler’s message' : '(not found)');
    },
  },
  {
    name: 'outcome.timeout',
    group: 'outcomes',
    description: `a handler that sleeps past timeout_ms (${TIMEOUT_PROBE_MS}) → 504 timeout, answered ≈ timeout_ms after the call`,
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'sleeps');
      if (!s) return;
      const r = await side.send('POST', invoke(s), { body: {} });
      problem(obs, r);
      runHeaders(obs, r);
      obs.set('timing', timingBand(r.ms, TIMEOUT_PROBE_MS, TIMEOUT_SLACK_MS));
      obs.note(`${side.label}: ${r.status} after ${Math.round(r.ms)} ms (timeout_ms ${TIMEOUT_PROBE_MS})`);
    },
  },
  {
    name: 'outcome.oom',
    group: 'outcomes',
    description: 'a handler that allocates 300 MB under max_memory_mb 64 → 500 oom_killed',
    needs: 'deploy',
    async run(side, obs) {
      const s = await useFixture(side, obs, 'hog');
      if (!s) return;
      const r = await side.send('POST', invoke(s), { body: {} });
      problem(obs, r);
      runHeaders(obs, r);
    },
  },
  // ---- callbacks ------------------------------------------------------------------------------------------------
  {
    name: 'callback.private-url',
    group: 'callbacks',
    description:
      'async with callback_url on a loopback receiver: production refuses a private target (422 callback_url_refused); ' +
      'where it is delivered, the Standard Webhooks headers and the signature with the tenant’s secret',
    needs: 'deploy',
    async run(side, obs, ctx) {
      const s = await useFixture(side, obs, 'echo');
      if (!s) return;
      const receiver = await ctx.receiver();
      const url = receiver.urlFor(`${side.label}-${rand()}`);
      const r = await side.send('POST', invoke(s), { body: { x: 1, callback_url: url }, headers: { 'x-invoke-mode': 'async' } });
      answer(obs, r);
      if (r.status >= 400) {
        obs.set('errors', errorLocations(r.body));
        return;
      }
      const delivery = await receiver.next(url, ASYNC_DEADLINE_MS);
      if (!delivery) {
        obs.set('delivery', 'none within 30 s');
        return;
      }
      obs.set('delivery', 'received');
      const h = delivery.headers;
      obs.set('header.content-type', (h['content-type'] ?? '(none)').split(';')[0]!);
      const id = h['webhook-id'] ?? '';
      obs.set('header.webhook-id', id ? (id.startsWith('msg_') ? 'msg_…' : 'present') : 'absent');
      const ts = Number(h['webhook-timestamp']);
      obs.set(
        'header.webhook-timestamp',
        Number.isInteger(ts) && Math.abs(ts - Date.now() / 1000) < 300 ? 'unix seconds, now' : (h['webhook-timestamp'] ?? 'absent'),
      );
      const secret = await side.send('GET', '/v1/tenant/webhook-secret');
      const whsec = (secret.body as { secret?: string } | undefined)?.secret;
      obs.set('signature', verifySignature(h['webhook-signature'], whsec, id, h['webhook-timestamp'] ?? '', delivery.body));
      obs.set('body.shape', shapeOf(safeJson(delivery.body), { maxDepth: 2, skipTop: EMULATOR_ONLY_FIELDS }));
    },
  },
];

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Standard Webhooks: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` keyed with the base64 after `whsec_`. */
export function verifySignature(header: string | undefined, secret: string | undefined, id: string, ts: string, body: string): string {
  if (!header) return 'absent';
  if (!secret?.startsWith('whsec_')) return 'not checked (no whsec_ secret from GET /v1/tenant/webhook-secret)';
  const want = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
    .update(`${id}.${ts}.${body}`)
    .digest();
  for (const part of header.split(' ')) {
    const [v, sig] = part.split(',', 2);
    if (v !== 'v1' || !sig) continue;
    const got = Buffer.from(sig, 'base64');
    if (got.length === want.length && timingSafeEqual(got, want)) return 'v1, valid';
  }
  return /^v1,/.test(header) ? 'v1, INVALID' : `not v1 (${header.slice(0, 20)})`;
}
