/**
 * The escape suite (issue 14): every probe of test/security/probes/table.ts, as a Bun snippet and as a
 * Python snippet, run through a real core (HTTP, real bubblewrap, real runtimes) started as root and as an
 * unprivileged uid. Every probe must fail, and the host must show it: a /proc/sys snapshot before and after
 * compares equal, the runner's uid, capabilities, no_new_privs and seccomp are read from this host's
 * /proc/<pid>/status, the files the probes aim at hash the same, the core still answers, and no process
 * of a sandbox outlives its destroy.
 *
 * Everything runs in each mode's beforeAll (probes, bombs, destroy, stop) and the tests judge what was
 * recorded, so they pass in any order. The probe table (probe × mode × runtime: attempts, successes) is
 * printed at the end.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { arch, hostname } from 'node:os';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nonRootObstacle, startCoreAs, type CoreAs } from './core-as';
import {
  alive,
  descendants,
  hostStatus,
  isRunner,
  sandboxProcesses,
  sha256File,
  sysctlDiff,
  sysctlSnapshot,
  volatileKeys,
  type HostStatus,
  type ProcInfo,
} from './host';
import { PROBES, type ProbeInput } from './probes/table';
import { bunProbeSource, pyProbeSource } from './probes/render';
import { spawnSync } from 'node:child_process';

type Mode = 'root' | 'non-root';
type Runtime = 'bun' | 'python';
interface ProbeResult {
  probe: string;
  attempted: boolean;
  succeeded: boolean;
  detail: string;
  ms?: number;
}

/** The uid the non-root core runs as when this test runs as root (no account needed). */
const NON_ROOT_UID = 4242;
const FORK_CAP = 1024;
const DISK_CAP_MB = 256;
const RUNTIMES: Runtime[] = ['bun', 'python'];

const whichOk = (bin: string) => spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0;

function modeObstacle(mode: Mode): string | null {
  if (arch() !== 'x64') return `the probes use x86_64 syscall numbers (this is ${arch()})`;
  if (process.platform !== 'linux') return 'the sandbox is Linux-only';
  if (!whichOk('bwrap')) return 'bubblewrap is not installed: there is no sandbox to attack';
  const amRoot = process.getuid!() === 0;
  if (mode === 'root') return amRoot ? null : `the test runs as uid ${process.getuid!()}: a core cannot be started as root`;
  if (amRoot && !whichOk('setpriv')) return 'setpriv (util-linux) is missing: cannot start the core as another uid';
  return amRoot ? nonRootObstacle() : null;
}

/** probe → mode → runtime → {attempts, successes}, printed at the end. */
const table = new Map<string, Partial<Record<`${Mode}/${Runtime}`, { attempts: number; successes: number }>>>();
function record(mode: Mode, runtime: Runtime, r: ProbeResult) {
  const row = table.get(r.probe) ?? {};
  const cell = (row[`${mode}/${runtime}`] ??= { attempts: 0, successes: 0 });
  if (r.attempted) cell.attempts++;
  if (r.succeeded) cell.successes++;
  table.set(r.probe, row);
}

afterAll(() => {
  const cols = ['root/bun', 'root/python', 'non-root/bun', 'non-root/python'] as const;
  const lines = [`| probe | ${cols.join(' | ')} |`, `| --- | ${cols.map(() => '---').join(' | ')} |`];
  for (const p of PROBES) {
    const row = table.get(p.id) ?? {};
    lines.push(
      `| ${p.id} | ${cols.map((c) => (row[c] ? `${row[c].attempts} tried, ${row[c].successes} succeeded` : 'not run')).join(' | ')} |`,
    );
  }
  console.log(`escape probe table (attempts, successes):\n${lines.join('\n')}`);
});

async function call(
  core: CoreAs,
  method: string,
  path: string,
  body?: unknown,
  opts: { key?: string; headers?: Record<string, string> } = {},
) {
  const res = await fetch(core.url + path, {
    method,
    headers: {
      authorization: `Bearer ${opts.key ?? core.key}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...opts.headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(180_000),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

async function deploy(core: CoreAs, name: string, runtime: Runtime, code: string, limits: Record<string, number>, key?: string) {
  const s = await call(core, 'POST', '/v1/snippets', { name, runtime }, { ...(key ? { key } : {}) });
  if (s.status !== 201 && s.status !== 409) throw new Error(`create ${name}: ${s.status} ${s.text}`);
  const v = await call(core, 'POST', `/v1/snippets/${name}/versions`, { code, ...limits }, { ...(key ? { key } : {}) });
  if (v.status !== 201) throw new Error(`version of ${name}: ${v.status} ${v.text.slice(0, 2000)}`);
}

/** Polls `check` until it returns a value (not a fixed sleep: the outcome is the event, the bound only ends a hang). */
async function until<T>(what: string, check: () => T | null | undefined | false, ms: number): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = check();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function listen(server: Server, arg: number | string): Promise<void> {
  return new Promise((res, rej) => {
    server.once('error', rej);
    if (typeof arg === 'number') server.listen(arg, '127.0.0.1', () => res());
    else server.listen(arg, () => res());
  });
}

interface Facts {
  core: { uid: number; pid: number };
  results: Record<Runtime, ProbeResult[]>;
  /** Processes of each probe sandbox, seen from the host while it was warm (found by the /tmp marker the probes write). */
  sandbox: Record<Runtime, { procs: ProcInfo[]; status: HostStatus[]; outsideCore: number[] }>;
  bombs: Record<Runtime, { fork: ProbeResult; disk: ProbeResult; healthz: { count: number; failures: string[]; maxMs: number } }>;
  tenantB: { pid: number; procs: ProcInfo[] };
  sysctlDiff: string[];
  sysctlCompared: number;
  hostname: { before: string; after: string };
  files: { before: Record<string, string>; after: Record<string, string> };
  strayFiles: string[];
  coreAliveAfterProbes: boolean;
  healthzAfterProbes: number;
  survivorsAfterRetire: ProcInfo[];
  survivorsAfterStop: ProcInfo[];
  doctor: unknown;
}

describe.each<Mode>(['root', 'non-root'])('escape suite, core as %s', (mode) => {
  const obstacle = modeObstacle(mode);
  let facts: Facts | null = null;
  let setupError: Error | null = null;
  const cleanups: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    if (obstacle) return;
    try {
      facts = await runMode(mode, cleanups);
    } catch (err) {
      setupError = err instanceof Error ? err : new Error(String(err));
    }
  }, 900_000);

  afterAll(async () => {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => {});
  }, 60_000);

  const need = (ctx: { skip: (note?: string) => never }): Facts => {
    if (obstacle) ctx.skip(obstacle);
    if (setupError) throw setupError;
    return facts!;
  };

  it.for(RUNTIMES)('every probe is attempted from a %s snippet, and every one fails', (runtime, ctx) => {
    const f = need(ctx);
    const res = f.results[runtime];
    const expected = PROBES.filter((p) => !p.own).map((p) => p.id);
    expect(res.map((r) => r.probe).sort()).toEqual([...expected].sort());
    const notTried = res.filter((r) => !r.attempted).map((r) => `${r.probe}: ${r.detail}`);
    expect(notTried, 'probes that could not be tried').toEqual([]);
    const escaped = res.filter((r) => r.succeeded).map((r) => `${r.probe}: ${r.detail}`);
    expect(escaped, 'probes that got through').toEqual([]);
  });

  it.for(RUNTIMES)('the %s runner, seen from the host: never uid 0, no capability, no_new_privs, a seccomp filter', (runtime, ctx) => {
    const f = need(ctx);
    const { status } = f.sandbox[runtime];
    // Found by its private /tmp, and it is the core's: a descendant of the core's process.
    expect(f.sandbox[runtime].outsideCore).toEqual([]);
    const runners = status.filter(isRunner);
    expect(runners.length, `runner among ${JSON.stringify(status.map((s) => s.cmdline))}`).toBeGreaterThan(0);
    for (const s of runners) {
      const where = JSON.stringify(s);
      expect(s.uid.length, where).toBe(4);
      expect(
        s.uid.every((u) => u !== 0),
        where,
      ).toBe(true);
      expect(
        s.gid.every((g) => g !== 0),
        where,
      ).toBe(true);
      expect(new Set(s.uid).size, where).toBe(1);
      if (mode === 'non-root') expect(s.uid[0], where).toBe(f.core.uid);
      else expect(s.uid[0], where).not.toBe(f.core.uid);
      expect(s.capEff, where).toBe('0000000000000000');
      expect(s.capPrm, where).toBe('0000000000000000');
      expect(s.capInh, where).toBe('0000000000000000');
      expect(s.capAmb, where).toBe('0000000000000000');
      // As root the runner is in the initial user namespace: its bounding set must be empty too.
      if (mode === 'root') expect(s.capBnd, where).toBe('0000000000000000');
      expect(s.noNewPrivs, where).toBe('1');
      expect(s.seccomp, where).toBe('2');
    }
    // Every other process of the sandbox holds no capability either, unless it is root's own bwrap outside.
    for (const s of status.filter((x) => !isRunner(x) && x.uid[0] !== 0)) expect(s.capEff, JSON.stringify(s)).toBe('0000000000000000');
  });

  it.for(RUNTIMES)('a %s fork bomb is bounded and the core keeps answering', (runtime, ctx) => {
    const f = need(ctx);
    const b = f.bombs[runtime];
    expect(b.fork.attempted, b.fork.detail).toBe(true);
    expect(b.fork.succeeded, b.fork.detail).toBe(false);
    expect(b.healthz.count).toBeGreaterThan(0);
    expect(b.healthz.failures, `healthz during the bomb (max ${b.healthz.maxMs} ms)`).toEqual([]);
  });

  it.for(RUNTIMES)('a %s disk bomb is bounded on every writable path', (runtime, ctx) => {
    const f = need(ctx);
    const d = f.bombs[runtime].disk;
    expect(d.attempted, d.detail).toBe(true);
    expect(d.succeeded, d.detail).toBe(false);
  });

  it('the host is unchanged: /proc/sys, the hostname, the files the probes aimed at; the core still runs', (ctx) => {
    const f = need(ctx);
    expect(f.sysctlCompared).toBeGreaterThan(100);
    expect(f.sysctlDiff).toEqual([]);
    expect(f.hostname.after).toBe(f.hostname.before);
    expect(f.files.after).toEqual(f.files.before);
    expect(Object.values(f.files.before).filter((h) => h.startsWith('unreadable')).length).toBeLessThan(Object.keys(f.files.before).length);
    expect(f.strayFiles).toEqual([]);
    expect(f.coreAliveAfterProbes).toBe(true);
    expect(f.healthzAfterProbes).toBe(200);
  });

  it("another tenant's sandbox was running during the probes (so the cross-tenant probes aimed at something)", (ctx) => {
    const f = need(ctx);
    expect(f.tenantB.pid).toBeGreaterThan(0);
    expect(f.tenantB.procs.length).toBeGreaterThan(0);
  });

  it("no process of a sandbox survives its destroy (a retired version, then the core's stop)", (ctx) => {
    const f = need(ctx);
    // The sleeper each snippet left behind while loading (detached, setsid'd) was there to be killed.
    for (const rt of RUNTIMES)
      expect(
        f.sandbox[rt].status.map((s) => s.cmdline),
        rt,
      ).toContain('sleep 600');
    expect(f.survivorsAfterRetire).toEqual([]);
    expect(f.survivorsAfterStop).toEqual([]);
  });
});

describe("the escape suite's documentation", () => {
  it("docs/security.md's probe table names every probe", () => {
    const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'security.md'), 'utf8');
    const missing = PROBES.filter((p) => !doc.includes(`| \`${p.id}\` |`)).map((p) => p.id);
    expect(missing).toEqual([]);
  });
});

async function runMode(mode: Mode, cleanups: (() => Promise<void> | void)[]): Promise<Facts> {
  const canaryEnv = `svc-escape-canary-${randomBytes(8).toString('hex')}`;
  const tcp = createServer((s) => s.destroy());
  await listen(tcp, 0);
  cleanups.push(() => new Promise<void>((r) => tcp.close(() => r())));
  const abstractName = `svc-escape-${randomBytes(6).toString('hex')}`;
  const abstract = createServer((s) => s.destroy());
  await listen(abstract, `\0${abstractName}`);
  cleanups.push(() => new Promise<void>((r) => abstract.close(() => r())));

  const core = await startCoreAs({
    uid: mode === 'root' ? null : process.getuid!() === 0 ? NON_ROOT_UID : null,
    env: { SVC_ESCAPE_CANARY: canaryEnv },
  });
  cleanups.push(() => core.stop());
  const doctor = (await call(core, 'GET', '/_emu/doctor', undefined, { key: core.admin })).json;

  // Tenant B: a Python snippet that writes a file into its /tmp, names its thread, and keeps running.
  const tb = await call(core, 'POST', '/_emu/tenants', { name: 'victim' }, { key: core.admin });
  if (tb.status !== 201) throw new Error(`tenant: ${tb.status} ${tb.text}`);
  const kb = await call(core, 'POST', '/_emu/tenants/victim/keys', undefined, { key: core.admin });
  const keyB = kb.json.key as string;
  const marker = `tenant-b-${randomBytes(6).toString('hex')}`;
  const tag = `tb${randomBytes(5).toString('hex')}`;
  await deploy(
    core,
    'victim',
    'python',
    [
      'import ctypes, time',
      'def handler(input):',
      "    with open('/tmp/' + input['marker'], 'w') as f:",
      "        f.write('tenant B private data')",
      "    ctypes.CDLL(None).prctl(15, input['tag'].encode(), 0, 0, 0)",
      "    deadline = time.time() + input['seconds']",
      '    while time.time() < deadline:',
      '        time.sleep(0.1)',
      "    return {'ok': True}",
      '',
    ].join('\n'),
    { timeout_ms: 600_000 },
    keyB,
  );
  const inv = await call(
    core,
    'POST',
    '/v1/invoke/victim',
    { marker, tag, seconds: 500 },
    { key: keyB, headers: { 'x-invoke-mode': 'async' } },
  );
  if (inv.status !== 202) throw new Error(`tenant B invoke: ${inv.status} ${inv.text}`);
  cleanups.push(async () => {
    await call(core, 'POST', `/v1/invocations/${inv.json.invocation_id}/cancel`, {}, { key: keyB }).catch(() => {});
  });
  const bProcs = await until(
    "tenant B's sandbox",
    () => {
      const ps = sandboxProcesses(marker);
      return ps.length ? ps : null;
    },
    60_000,
  );
  const bRunner = bProcs.map((p) => hostStatus(p.pid)).find((s) => s && isRunner(s)) ?? null;
  const tenantB = { pid: bRunner?.pid ?? bProcs[0]!.pid, procs: bProcs };

  // Host state before.
  const samples = [sysctlSnapshot()];
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setTimeout(r, 100)); // spacing between samples, to see what moves by itself
    samples.push(sysctlSnapshot());
  }
  const volatile = volatileKeys(samples);
  const before = samples.at(-1)!;
  const hostnameBefore = hostname();
  const watched = [
    join(core.dataDir, 'secret.key'),
    join(core.dataDir, 'emulator.json'),
    '/etc/passwd',
    '/etc/shadow',
    '/etc/hosts',
    '/etc/hostname',
    join(core.runtimeDirs[0]!, 'bun', 'runner.ts'),
    join(core.runtimeDirs[0]!, 'python', 'svc_runner.py'),
    core.runtimeLock,
  ];
  const hashes = () => Object.fromEntries(watched.map((p) => [p, sha256File(p)]));
  const filesBefore = hashes();

  const base = (nonce: string): ProbeInput => ({
    nonce,
    corePid: core.pid,
    corePort: core.port,
    canaryPort: (tcp.address() as { port: number }).port,
    canaryEnv,
    abstractName,
    dataDir: {
      db: join(core.dataDir, 'db.json'),
      secretKey: join(core.dataDir, 'secret.key'),
      emulatorJson: join(core.dataDir, 'emulator.json'),
      egressSock: join(core.dataDir, 'egress.sock'),
    },
    runtimeDirs: core.runtimeDirs,
    tenantB: { pid: tenantB.pid, marker, tag },
  });

  const results = {} as Facts['results'];
  const sandbox = {} as Facts['sandbox'];
  const bombs = {} as Facts['bombs'];
  const nonces: string[] = [];
  for (const runtime of RUNTIMES) {
    const code = runtime === 'bun' ? bunProbeSource(PROBES) : pyProbeSource(PROBES);
    const name = `escape-${runtime}`;
    await deploy(core, name, runtime, code, { timeout_ms: 300_000, max_memory_mb: 1024 });
    const nonce = `escape-${randomBytes(8).toString('hex')}`;
    nonces.push(nonce);
    const r = await call(core, 'POST', `/v1/invoke/${name}`, base(nonce));
    if (r.status !== 200) throw new Error(`${runtime} probes: ${r.status} ${r.text.slice(0, 3000)}`);
    const rs = (r.json.results as ProbeResult[]).map((x) => ({ ...x }));
    // The sandbox is warm now: its processes, as the host sees them.
    const procs = sandboxProcesses(nonce);
    const status = procs.map((p) => hostStatus(p.pid)).filter((s): s is HostStatus => s !== null);
    const underCore = new Set(descendants(core.pid).map((p) => p.pid));
    sandbox[runtime] = { procs, status, outsideCore: procs.filter((p) => !underCore.has(p.pid)).map((p) => p.pid) };
    results[runtime] = rs;

    // The bombs, each in its own invocation of its own snippet (their own limits), while the host polls /healthz.
    const bombName = `bomb-${runtime}`;
    await deploy(core, bombName, runtime, code, { timeout_ms: 120_000, max_memory_mb: 1024 });
    const one = async (id: string) => {
      const bn = `escape-${randomBytes(8).toString('hex')}`;
      nonces.push(bn);
      const health = { count: 0, failures: [] as string[], maxMs: 0 };
      let done = false;
      // The host counts the bomb's processes itself: a runner that dies at the limit reports nothing.
      let hostMax = 0;
      const poll = (async () => {
        while (!done) {
          hostMax = Math.max(hostMax, sandboxProcesses(bn).length);
          const t0 = Date.now();
          try {
            const h = await fetch(`${core.url}/healthz`, { signal: AbortSignal.timeout(5_000) });
            await h.text();
            if (h.status !== 200) health.failures.push(`status ${h.status}`);
          } catch (err) {
            health.failures.push(String(err));
          }
          health.count++;
          health.maxMs = Math.max(health.maxMs, Date.now() - t0);
          await new Promise((res) => setTimeout(res, 200));
        }
      })();
      const res = await call(core, 'POST', `/v1/invoke/${bombName}`, {
        ...base(bn),
        only: [id],
        forkCap: FORK_CAP,
        diskCapMb: DISK_CAP_MB,
      });
      done = true;
      await poll;
      let out: ProbeResult;
      if (res.status === 200 && res.json?.results?.[0]) out = res.json.results[0] as ProbeResult;
      else if (id === 'fork_bomb' && hostMax > 0) {
        // The runner died under the bomb (Bun aborts when it cannot start a thread): the host's count decides.
        out = {
          probe: id,
          attempted: true,
          succeeded: false,
          detail: `the snippet did not report (${res.status}: ${res.json?.detail ?? res.text.slice(0, 300)})`,
        };
      } else
        out = {
          probe: id,
          attempted: false,
          succeeded: false,
          detail: `the invocation answered ${res.status}: ${res.text.slice(0, 1000)}`,
        };
      if (id === 'fork_bomb') {
        out.succeeded ||= hostMax >= FORK_CAP;
        out.detail += `; the host saw at most ${hostMax} processes in the sandbox (cap ${FORK_CAP})`;
      }
      return { out, health };
    };
    const fork = await one('fork_bomb');
    const disk = await one('disk_bomb');
    bombs[runtime] = { fork: fork.out, disk: disk.out, healthz: fork.health };
  }

  // Host state after the probes.
  const after = sysctlSnapshot();
  const diff = sysctlDiff(before, after, volatile);
  const coreAliveAfterProbes = core.proc.exitCode === null && core.proc.signalCode === null;
  const healthzAfterProbes = await fetch(`${core.url}/healthz`)
    .then((r) => r.status)
    .catch(() => 0);
  const strayFiles = nonces.flatMap((n) =>
    [...core.runtimeDirs, core.dataDir, '/', '/etc', '/tmp'].map((d) => join(d, `escape-${n}`)).filter((p) => existsSync(p)),
  );
  const filesAfter = hashes();

  // Destroy: a new version of each probe snippet retires the warm sandboxes; every process of them must go.
  const seen = RUNTIMES.flatMap((rt) => sandbox[rt].procs);
  for (const nonce of nonces)
    seen.push(...sandboxProcesses(nonce).filter((p) => !seen.some((s) => s.pid === p.pid && s.start === p.start)));
  for (const runtime of RUNTIMES) {
    const code = runtime === 'bun' ? 'export default async function handler() { return {}; }\n' : 'def handler(input):\n    return {}\n';
    await deploy(core, `escape-${runtime}`, runtime, code, {});
    await deploy(core, `bomb-${runtime}`, runtime, code, {});
  }
  const survivorsAfterRetire = await until(
    'the retired sandboxes to go',
    () => (seen.some(alive) ? null : ([] as ProcInfo[])),
    20_000,
  ).catch(() => seen.filter(alive));
  // Then the core's stop takes everything else (tenant B's sandbox included).
  const all = [...seen, ...bProcs, ...descendants(core.pid)];
  await call(core, 'POST', `/v1/invocations/${inv.json.invocation_id}/cancel`, {}, { key: keyB }).catch(() => {});
  await core.stop();
  const survivorsAfterStop = await until(
    'every sandbox process to go after the stop',
    () => (all.some(alive) ? null : ([] as ProcInfo[])),
    20_000,
  ).catch(() => all.filter(alive));

  if (process.env.SVC_ESCAPE_DUMP) {
    writeFileSync(
      join(process.env.SVC_ESCAPE_DUMP, `escape-${mode}.json`),
      JSON.stringify({ results, sandbox, bombs, doctor, diff }, null, 2),
    );
  }
  for (const runtime of RUNTIMES) {
    const rs = results[runtime];
    const survive = rs.find((r) => r.probe === 'survive_destroy');
    if (survive) {
      const left = survivorsAfterRetire.filter((p) => sandbox[runtime].procs.some((s) => s.pid === p.pid));
      survive.succeeded = left.length > 0;
      survive.detail += `; host: ${left.length} of its processes survived the destroy`;
    }
    for (const r of rs) record(mode, runtime, r);
    record(mode, runtime, bombs[runtime].fork);
    record(mode, runtime, bombs[runtime].disk);
  }
  return {
    core: { uid: core.uid, pid: core.pid },
    results,
    sandbox,
    bombs,
    tenantB,
    sysctlDiff: diff,
    sysctlCompared: before.size - volatile.size,
    hostname: { before: hostnameBefore, after: hostname() },
    files: { before: filesBefore, after: filesAfter },
    strayFiles,
    coreAliveAfterProbes,
    healthzAfterProbes,
    survivorsAfterRetire,
    survivorsAfterStop,
    doctor,
  };
}
