import { execFile } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import type { CgroupFs, ExecFn, KillFn } from './cgroupfs';
import { errnoOf } from './cgroupfs';
import type { SampleOptions, UsageSample } from './types';

/** Name of the parent group (v1: in every hierarchy; v2: under the anchor) and of the systemd units. */
export const PARENT_GROUP = 'svc-emu';

/** Group ids become directory and systemd unit names: keep them to a safe alphabet. */
export function validateGroupId(id: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/.test(id)) {
    throw new Error(`limit group id ${JSON.stringify(id)}: use 1–100 of [A-Za-z0-9_-], starting alphanumeric`);
  }
  return id;
}

export function validateLimits(memoryMb: number, pidsMax: number): void {
  if (!Number.isFinite(memoryMb) || memoryMb <= 0) throw new Error(`memoryMb must be > 0 (got ${memoryMb})`);
  if (!Number.isInteger(pidsMax) || pidsMax <= 0) throw new Error(`pidsMax must be a positive integer (got ${pidsMax})`);
}

export function validateCpuPercent(percent: number | null): void {
  if (percent === null) return;
  if (!Number.isFinite(percent) || percent <= 0) throw new Error(`cpu percent must be > 0 or null (got ${percent})`);
}

export const CFS_PERIOD_US = 100_000;
/**
 * The CPU weights (types.ts CpuWeight) as each interface writes them: the smallest the kernel takes, and its default
 * (cgroup v1 cpu.shares 2..262144, default 1024; v2 cpu.weight and systemd's CPUWeight 1..10000, default 100).
 */
export const CPU_SHARES = { low: 2, default: 1024 } as const;
export const CPU_WEIGHT = { low: 1, default: 100 } as const;
/** The kernel refuses quotas under 1 ms. */
export const CFS_MIN_QUOTA_US = 1_000;

/** cfs quota in µs for `percent` of one CPU over a 100 ms period; null → null (no quota). */
export function quotaUs(percent: number | null): number | null {
  if (percent === null) return null;
  return Math.max(CFS_MIN_QUOTA_US, Math.round((percent / 100) * CFS_PERIOD_US));
}

export function mib(mb: number): number {
  return Math.round(mb * 1024 * 1024);
}

/** Single-quotes a string for /bin/sh. */
export function shQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * The wrapper that puts the runner in its groups before it runs any code: a tiny shell writes its own pid
 * to each `cgroup.procs`, then execs the real argv (same pid, already inside). If a write fails the chain
 * stops and the runner never starts (exit status 1 or 2 from sh).
 */
export function enterGroupsArgv(procsFiles: string[], argv: string[]): string[] {
  if (argv.length === 0) throw new Error('wrap: empty argv');
  const writes = procsFiles.map((f) => `echo $$ > ${shQuote(f)}`);
  return ['/bin/sh', '-c', [...writes, 'exec "$@"'].join(' && '), 'sh', ...argv];
}

/** "key value" lines (cpu.stat, memory.events, memory.stat, memory.oom_control) → map. */
/**
 * One key of a `key value` per line cgroup file, as parseKeyedInts reads it, without splitting the rest: memory.stat
 * has ~40 lines and a sample reads it twice per invocation (bench/results/profile-warm-path.md: parsing it whole was
 * ~3% of the core's CPU on the warm path). cgroup files put each key at the start of its line, once.
 */
export function keyedInt(text: string | null, key: string): number | undefined {
  if (!text) return undefined;
  const head = `${key} `;
  const first = text.startsWith(head);
  const newline = first ? 0 : text.indexOf(`\n${head}`);
  if (newline < 0) return undefined;
  const start = first ? 0 : newline + 1;
  const end = text.indexOf('\n', start);
  const m = /^(\S+)\s+(-?\d+)\s*$/.exec(text.slice(start, end < 0 ? undefined : end).trim());
  return m && m[1] === key ? Number(m[2]) : undefined;
}

export function parseKeyedInts(text: string | null): Map<string, number> {
  const out = new Map<string, number>();
  if (!text) return out;
  for (const line of text.split('\n')) {
    const m = /^(\S+)\s+(-?\d+)\s*$/.exec(line.trim());
    if (m && m[1] !== undefined && m[2] !== undefined) out.set(m[1], Number(m[2]));
  }
  return out;
}

export function parseIntOr(text: string | null, fallback: number): number {
  if (text === null) return fallback;
  const t = text.trim();
  if (t === 'max') return Number.POSITIVE_INFINITY;
  const n = Number(t);
  return Number.isFinite(n) ? n : fallback;
}

export function parsePids(text: string | null): number[] {
  if (!text) return [];
  return text
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const monoMs = () => performance.now();

/**
 * SIGKILL every pid `listPids` returns until it returns none, bounded. A fork racing the loop lands in
 * the same group and is caught by the next round. Returns the pids still there when time ran out.
 */
export async function killLoop(listPids: () => Promise<number[]>, kill: KillFn, boundMs = 1000): Promise<number[]> {
  const deadline = monoMs() + boundMs;
  for (let round = 0; ; round++) {
    const pids = await listPids();
    if (pids.length === 0) return [];
    for (const pid of pids) {
      try {
        kill(pid, 'SIGKILL');
      } catch (err) {
        if (errnoOf(err) !== 'ESRCH') throw err;
      }
    }
    if (monoMs() > deadline) return pids;
    // A SIGKILLed process is gone within a few ms: look again after 1, 2, 4 ms, then every 5 (a timeout's answer waits for this).
    await sleep(Math.min(5, 1 << round));
  }
}

/** A group's freezer (v1 `freezer.state`, v2 `cgroup.freeze`). */
export interface Freezer {
  /** Freezes the group; true once the kernel reports it frozen, false when it did not get there in time. */
  freeze(): Promise<boolean>;
  thaw(): Promise<void>;
}

/** Polls `done` until true or `boundMs` passed (first check at once: an idle group freezes in well under 1 ms). */
export async function pollUntil(done: () => Promise<boolean>, boundMs = 1000): Promise<boolean> {
  const deadline = monoMs() + boundMs;
  for (;;) {
    if (await done()) return true;
    if (monoMs() > deadline) return false;
    await sleep(1);
  }
}

/**
 * SIGKILLs every pid of the group that is not in `keep`. With a freezer: freeze, read the list (stable now:
 * a frozen process cannot fork), kill, thaw; the kills land as the group thaws. Then, bounded, kill again
 * whatever is still there besides `keep` (no freezer, or a group that did not freeze in time: a fork racing
 * the loop is caught by the next round). Cheap when there is nothing to do: one read of the list.
 * Returns how many pids were signalled and those still there when time ran out.
 */
export async function killAllExcept(
  listPids: () => Promise<number[]>,
  keep: ReadonlySet<number>,
  kill: KillFn,
  freezer: Freezer | null,
  boundMs = 1000,
): Promise<{ killed: number; left: number[] }> {
  const extra = async () => (await listPids()).filter((p) => !keep.has(p));
  if ((await extra()).length === 0) return { killed: 0, left: [] };
  const signalled = new Set<number>();
  const counting: KillFn = (pid, signal) => {
    kill(pid, signal);
    signalled.add(pid);
  };
  if (freezer) {
    try {
      await freezer.freeze();
      for (const pid of await extra()) {
        try {
          counting(pid, 'SIGKILL');
        } catch (err) {
          if (errnoOf(err) !== 'ESRCH') throw err;
        }
      }
    } finally {
      await freezer.thaw();
    }
  }
  const left = await killLoop(extra, counting, boundMs);
  return { killed: signalled.size, left };
}

/** Waits until `listPids` is empty, bounded; returns what is left. */
export async function waitEmpty(listPids: () => Promise<number[]>, boundMs = 1000): Promise<number[]> {
  const deadline = monoMs() + boundMs;
  for (let round = 0; ; round++) {
    const pids = await listPids();
    if (pids.length === 0 || monoMs() > deadline) return pids;
    await sleep(Math.min(5, 1 << round)); // as killLoop
  }
}

/** rmdir with a short retry while the kernel still counts tasks (EBUSY right after a kill). */
export async function rmdirRetry(fs: CgroupFs, dir: string, boundMs = 1000): Promise<void> {
  const deadline = monoMs() + boundMs;
  for (;;) {
    try {
      await fs.rmdir(dir);
      return;
    } catch (err) {
      if (errnoOf(err) !== 'EBUSY' || monoMs() > deadline) {
        const e = err as Error;
        e.message = `rmdir ${dir}: ${e.message}`;
        throw e;
      }
      await sleep(10);
    }
  }
}

/**
 * Reads a cgroup v2 group's usage (shared by the cgroup-v2 and systemd-scope backends). `peakSeen` is
 * the running max of samples, used when the kernel has no memory.peak (< 5.19).
 */
export async function sampleV2(fs: CgroupFs, dir: string, peakSeen: number, opts?: SampleOptions): Promise<UsageSample> {
  const [current, peak, cpuStat, events, stat, pidsEvents] = await Promise.all([
    fs.read(`${dir}/memory.current`),
    fs.read(`${dir}/memory.peak`),
    fs.read(`${dir}/cpu.stat`),
    fs.read(`${dir}/memory.events`),
    opts?.anon === false ? null : fs.read(`${dir}/memory.stat`),
    fs.read(`${dir}/pids.events`),
  ]);
  const cpu = parseKeyedInts(cpuStat);
  const ev = parseKeyedInts(events);
  const anon = keyedInt(stat, 'anon');
  const memory = parseIntOr(current, 0);
  const kernelPeak = peak === null ? null : parseIntOr(peak, 0);
  return {
    at_ms: monoMs(),
    memory_bytes: memory,
    memory_peak_bytes: kernelPeak ?? Math.max(peakSeen, memory),
    cpu_usage_ns: (cpu.get('usage_usec') ?? 0) * 1000,
    cpu_throttled_ns: (cpu.get('throttled_usec') ?? 0) * 1000,
    oom_kills: ev.get('oom_kill') ?? 0,
    limit_hits: ev.get('max') ?? 0,
    ...(anon !== undefined ? { memory_anon_bytes: anon } : {}),
    ...(pidsEvents !== null ? { pids_limit_hits: parseKeyedInts(pidsEvents).get('max') ?? 0 } : {}),
  };
}

/** Default ExecFn over child_process.execFile. */
export const nodeExec: ExecFn = (file, args, opts) =>
  new Promise((resolve) => {
    execFile(file, args, { timeout: opts?.timeoutMs ?? 5000, encoding: 'utf8' }, (err, stdout, stderr) => {
      const out = String(stdout ?? '');
      const errOut = String(stderr ?? '');
      if (!err) return resolve({ code: 0, stdout: out, stderr: errOut });
      const e = err as NodeJS.ErrnoException & { code?: unknown; signal?: unknown };
      if (typeof e.code === 'number') return resolve({ code: e.code, stdout: out, stderr: errOut });
      resolve({ code: null, stdout: out, stderr: errOut, error: e.message });
    });
  });
