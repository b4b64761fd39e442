/**
 * No runner outlives the core (issue 3, "Tests"): a core in its own process (test/helpers/core-process.mts
 * with --project-root) runs a long busy loop in Bun and in Python; the core is SIGKILLed (no chance to clean
 * up); within ~3 s no runner process of it is left (/proc scan), and none of its cgroups under svc-emu/
 * holds a process. The same with a clean stop (SIGTERM), which must also remove its cgroup directories.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { rm, rmdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { request, tempDir } from '../helpers/core';
import { loudSkip, uniqueName, waitFor, type Code, type Runtime } from './_helpers';

const SCRIPT = resolve(__dirname, '../helpers/core-process.mts');
const ROOT = resolve(__dirname, '../..');
const RUNNER_SCRIPTS = ['runner.ts', 'svc_runner.py'];

const children: ChildProcess[] = [];
const dataDirs: string[] = [];
/** Every process seen as ours: killed in afterAll if a failing run left it behind. */
const seen = new Map<number, string>();
/** Limit groups of the killed core (named after invocation ids): a SIGKILLed core cannot remove them. */
const groupIdsToRemove: string[] = [];

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const [pid, start] of seen) {
    if (startTime(pid) === start) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }
  // Our own empty cgroup directories left by the killed core (rmdir fails on a populated group).
  for (const dir of groupDirs(groupIdsToRemove)) await rmdir(dir).catch(() => {});
  for (const d of dataDirs) await rm(d, { recursive: true, force: true });
});

const BUSY: Code = {
  bun: 'export default async function handler() {\n  let n = 0;\n  while (true) n++;\n}\n',
  python: 'def handler(input):\n    n = 0\n    while True:\n        n += 1\n',
};

interface Proc {
  pid: number;
  cmdline: string;
  cgroup: string;
  start: string;
}

function read(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/**
 * Field 22 of /proc/PID/stat, the start time (tells a process from a reused pid), of a process that is
 * alive; null when it is gone or a zombie (dead, waiting only for its new parent to reap it: it runs
 * nothing and holds no memory).
 */
function startTime(pid: number): string | null {
  const stat = read(`/proc/${pid}/stat`);
  if (!stat) return null;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields[0] === 'Z' || fields[0] === 'X') return null;
  return fields[19] ?? null;
}

function processes(): Proc[] {
  const out: Proc[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const pid = Number(d);
    const cmdline = read(`/proc/${pid}/cmdline`);
    const start = startTime(pid);
    if (cmdline === null || start === null) continue;
    out.push({ pid, cmdline: cmdline.replace(/\0/g, ' ').trim(), cgroup: read(`/proc/${pid}/cgroup`) ?? '', start });
  }
  return out;
}

/**
 * Processes of the core under test: their cmdline names its data dir (bwrap binds the bundle from it; an
 * unsandboxed runner gets it as --bundle), or they sit in one of its limit groups (named by invocation id),
 * or they are a runner whose cmdline names a bundle under its data dir.
 */
function ours(dir: string, groupIds: string[]): Proc[] {
  return processes().filter(
    (p) =>
      p.pid !== process.pid &&
      !children.some((c) => c.pid === p.pid) &&
      (p.cmdline.includes(dir) ||
        p.cgroup
          .split('\n')
          .some((l) => l.includes('/svc-emu/') && groupIds.some((id) => groupNamed(l.slice(l.lastIndexOf('/') + 1), id)))),
  );
}

/** The runner itself (Bun or Python running runner.ts / svc_runner.py), not the cgroup wrapper (sh) or bwrap. */
const isRunner = (p: Proc) => {
  const argv0 = p.cmdline.split(' ')[0] ?? '';
  return RUNNER_SCRIPTS.some((s) => p.cmdline.includes(s)) && !/(^|\/)(sh|bash|dash|bwrap)$/.test(argv0);
};

const describeProcs = (ps: Proc[]) =>
  ps.map((p) => `${p.pid} [${p.cgroup.split('\n').find((l) => l.includes('svc-emu')) ?? '-'}] ${p.cmdline.slice(0, 300)}`).join('\n');

/**
 * A limit group is named after the core that made it (`c<core pid>-…`): after the invocation that
 * created its sandbox, or a spare runner's id when the sandbox began as a spare.
 */
let corePrefix: string | null = null;
function groupNamed(name: string, id: string): boolean {
  return name === id || name.endsWith(`-${id}`) || (corePrefix !== null && name.startsWith(corePrefix));
}

/** Cgroup directories (any v1 hierarchy, or the v2 tree) named after one of the ids. */
function groupDirs(groupIds: string[]): string[] {
  const roots: string[] = [];
  const base = '/sys/fs/cgroup';
  for (const h of existsSync(base) ? readdirSync(base) : []) {
    const dir = join(base, h, 'svc-emu');
    if (existsSync(dir)) roots.push(dir);
  }
  if (existsSync(join(base, 'svc-emu'))) roots.push(join(base, 'svc-emu'));
  const found: string[] = [];
  const walk = (dir: string, depth: number) => {
    if (depth > 4) return;
    let entries: string[];
    try {
      entries = readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name);
    } catch {
      return;
    }
    for (const e of entries) {
      const sub = join(dir, e);
      if (groupIds.some((id) => groupNamed(e, id))) found.push(sub);
      walk(sub, depth + 1);
    }
  };
  for (const r of roots) walk(r, 0);
  return found;
}

/** Those of the groups that hold processes, with their pids. */
function groupsWithProcs(groupIds: string[]): string[] {
  return groupDirs(groupIds).flatMap((dir) => {
    const procs = (read(join(dir, 'cgroup.procs')) ?? '').trim();
    return procs ? [`${dir}: ${procs.split('\n').join(',')}`] : [];
  });
}

/**
 * Starts a core in its own process with busy Bun and Python runs in flight, stops it with `signal`, and
 * waits up to 3 s for every process of it to be gone. Returns what is left and the cgroup evidence.
 */
async function busyCoreThen(signal: 'SIGKILL' | 'SIGTERM') {
  const dataDir = await tempDir('svc-emu-orphans-');
  dataDirs.push(dataDir);
  const proc = spawn(process.execPath, ['--import', 'tsx', SCRIPT, dataDir, '--project-root', ROOT], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(proc);
  let stderr = '';
  proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    proc.once('exit', (code, sig) => res({ code, signal: sig })),
  );
  const line = await Promise.race([
    new Promise<string>((res) => createInterface({ input: proc.stdout }).once('line', res)),
    exited.then((e) => Promise.reject(new Error(`core process exited (${JSON.stringify(e)}) before it listened:\n${stderr}`))),
    new Promise<string>((_, rej) => setTimeout(() => rej(new Error(`core process did not start in 20 s:\n${stderr}`)), 20_000)),
  ]);
  const info = JSON.parse(line) as { url: string; key: string; admin: string; pid: number; data_dir: string };
  corePrefix = `c${info.pid}-`;
  expect(info.admin, 'the helper prints the admin token').toMatch(/\S/);
  const call = (method: string, path: string, body?: unknown, key = info.key) => request(info.url, method, path, body, { key });

  const exec = await call('GET', '/_emu/executor', undefined, info.admin);
  expect(exec.status, exec.text).toBe(200);
  const cgroups = exec.json.backend !== 'none';
  if (!cgroups) loudSkip('the cgroup half of the no-orphans test', `backend is none (${JSON.stringify(exec.json.parity)})`);

  const names = {} as Record<Runtime, string>;
  for (const rt of ['bun', 'python'] as const) {
    names[rt] = uniqueName(`orphan-${rt}`);
    expect((await call('POST', '/v1/snippets', { name: names[rt], runtime: rt })).status).toBe(201);
    const v = await call('POST', `/v1/snippets/${names[rt]}/versions`, { code: BUSY[rt], timeout_ms: 120_000 });
    expect(v.status, v.text).toBe(201);
  }
  // Not awaited: they end when the core goes.
  const pending = (['bun', 'python'] as const).map((rt) => call('POST', `/v1/invoke/${names[rt]}`, {}).catch((e: Error) => e));

  const running = await waitFor(
    'both invocations to be running',
    async () => {
      const l = await call('GET', '/v1/invocations?status=running');
      return l.json?.data?.length === 2 ? (l.json.data as { id: string }[]).map((x) => x.id) : null;
    },
    10_000,
  );
  // Sandboxes (and their limit groups) are named after the invocation that created them.
  groupIdsToRemove.push(...running);
  const before = await waitFor(
    'a runner of each runtime in /proc',
    async () => {
      const ps = ours(info.data_dir, running);
      const runners = ps.filter(isRunner);
      const both = runners.some((p) => p.cmdline.includes('runner.ts')) && runners.some((p) => p.cmdline.includes('svc_runner.py'));
      return both ? ps : null;
    },
    10_000,
  );
  for (const p of before) seen.set(p.pid, p.start);
  if (cgroups) expect(groupsWithProcs(running).length, 'precondition: the runs have populated cgroups').toBeGreaterThanOrEqual(2);
  // Let the runners be well inside their loops.
  await new Promise((r) => setTimeout(r, 300));

  proc.kill(signal);
  const how = await Promise.race([exited, new Promise<null>((r) => setTimeout(() => r(null), 10_000))]);
  expect(how, `the core exits on ${signal}:\n${stderr.slice(-2000)}`).not.toBeNull();
  const stoppedAt = Date.now();

  let left: Proc[];
  let groups: string[];
  for (;;) {
    left = ours(info.data_dir, running);
    // The exact processes seen before (pid + start time), whatever their cmdline looks like now.
    for (const p of before) if (startTime(p.pid) === p.start && !left.some((x) => x.pid === p.pid)) left.push(p);
    groups = cgroups ? groupsWithProcs(running) : [];
    if ((left.length === 0 && groups.length === 0) || Date.now() - stoppedAt > 3000) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const results = await Promise.all(pending);
  return {
    how,
    left,
    groups,
    before,
    running,
    cgroups,
    results,
    stoppedAt,
    describe: () => describeProcs(left),
    beforeText: () => describeProcs(before),
  };
}

describe('no runner outlives the core', () => {
  it('SIGKILL the core during busy Bun and Python runs: within ~3 s no runner process and no populated cgroup of it remain', async () => {
    const r = await busyCoreThen('SIGKILL');
    expect(r.how?.signal).toBe('SIGKILL');
    expect(
      r.left,
      `processes of the killed core still alive ${Date.now() - r.stoppedAt} ms later:\n${r.describe()}\nbefore the kill:\n${r.beforeText()}`,
    ).toEqual([]);
    expect(r.groups, 'cgroups of the killed core that still hold processes').toEqual([]);
    for (const x of r.results) expect(x instanceof Error || x.status >= 500, 'the pending calls ended').toBe(true);
  }, 60_000);

  it('SIGTERM (a clean stop) during busy runs: no runner process is left, and the core removes its cgroups', async () => {
    const r = await busyCoreThen('SIGTERM');
    expect(r.how?.code, 'a clean exit').toBe(0);
    expect(r.left, `processes of the stopped core still alive:\n${r.describe()}\nbefore the stop:\n${r.beforeText()}`).toEqual([]);
    expect(r.groups, 'cgroups of the stopped core that still hold processes').toEqual([]);
    if (r.cgroups) expect(groupDirs(r.running), 'a clean stop leaves no cgroup directory behind').toEqual([]);
  }, 60_000);
});
