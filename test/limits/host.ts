import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import { performance } from 'node:perf_hooks';
import { nodeCgroupFs } from '../../executor/limits/cgroupfs';
import { parseCgroupMounts, v1MountFor } from '../../executor/limits/mountinfo';

/** What the real-cgroup and real-bubblewrap tests need from this host, with the reason when it is missing. */

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  wallMs: number;
  pid: number;
}

export function run(
  argv: string[],
  opts: { timeoutMs?: number; onSpawn?: (pid: number) => void; env?: NodeJS.ProcessEnv; detached?: boolean } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(argv[0]!, argv.slice(1), {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: opts.env ?? process.env,
      detached: opts.detached ?? false,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 20_000);
    child.on('error', reject);
    child.on('spawn', () => opts.onSpawn?.(child.pid!));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, wallMs: performance.now() - t0, pid: child.pid ?? -1 });
    });
  });
}

/** Killed by SIGKILL, directly (signal) or as reported by a wrapper/bwrap (exit status 137). */
export function killedBySigkill(r: Pick<RunResult, 'code' | 'signal'>): boolean {
  return r.signal === 'SIGKILL' || r.code === 137;
}

/** A real CPython binary (not a pyenv shim script: those fork helpers, which matters under pids.max). */
export function pythonPath(): string | null {
  if (existsSync('/usr/bin/python3')) return '/usr/bin/python3';
  const r = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** Read-only binds a sandbox needs for `python` when it lives outside /usr (e.g. pyenv under /root). */
export function pythonBinds(py: string): Array<{ src: string; dest: string }> {
  const real = realpathSync(py);
  if (real.startsWith('/usr/')) return [];
  const prefix = dirname(dirname(real));
  return [{ src: prefix, dest: prefix }];
}

export function cgroupV1Status(): { ok: true } | { ok: false; reason: string } {
  if (process.platform !== 'linux') return { ok: false, reason: `platform ${process.platform}` };
  if (process.getuid?.() !== 0) return { ok: false, reason: `not root (uid ${process.getuid?.()})` };
  let text: string;
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return { ok: false, reason: 'no /proc/self/mountinfo' };
  }
  const mounts = parseCgroupMounts(text);
  const missing = ['memory', 'cpu', 'cpuacct', 'pids'].filter((c) => !v1MountFor(mounts, c));
  if (missing.length) return { ok: false, reason: `no cgroup v1 hierarchy for ${missing.join(', ')}` };
  return { ok: true };
}

export function loudSkip(what: string, reason: string): void {
  const bar = '!'.repeat(100);
  console.warn(`\n${bar}\n!! SKIPPED: ${what}\n!! because: ${reason}\n!! (these tests need it; CI machines have it)\n${bar}\n`);
}

export function mountinfo(): string {
  return readFileSync('/proc/self/mountinfo', 'utf8');
}

export { nodeCgroupFs };

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function uniqueId(prefix: string): string {
  return `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}
