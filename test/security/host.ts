/**
 * Host-side views for the escape suite (test/security/escape.test.ts): what the probes changed or reached,
 * read from this host's /proc and files, never from the snippet's own report.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync, lstatSync } from 'node:fs';
import { join } from 'node:path';

/** Every readable /proc/sys value (write-only knobs are left out). */
export function sysctlSnapshot(): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string) => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const n of names) {
      const p = join(dir, n);
      let st;
      try {
        st = lstatSync(p);
      } catch {
        continue;
      }
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && st.mode & 0o444) {
        try {
          out.set(p, readFileSync(p, 'latin1'));
        } catch {
          /* write-only or refused */
        }
      }
    }
  };
  walk('/proc/sys');
  return out;
}

/**
 * Knobs the kernel changes by itself (counters, random values). Found by sampling before the probes run
 * (`volatileKeys`) plus these, which move with ordinary activity on the host.
 */
const COUNTERS =
  /^\/proc\/sys\/(kernel\/random\/(entropy_avail|uuid)|kernel\/ns_last_pid|kernel\/pty\/nr|kernel\/hung_task_detect_count|fs\/(file-nr|inode-nr|inode-state|dentry-state|aio-nr)|fs\/quota\/|net\/netfilter\/nf_conntrack_count)/;

export function volatileKeys(samples: Map<string, string>[]): Set<string> {
  const keys = new Set<string>();
  const [first, ...rest] = samples;
  for (const [k, v] of first ?? []) {
    if (COUNTERS.test(k) || rest.some((s) => s.get(k) !== v)) keys.add(k);
  }
  return keys;
}

export function sysctlDiff(before: Map<string, string>, after: Map<string, string>, ignore: Set<string>): string[] {
  const diffs: string[] = [];
  for (const [k, v] of before) {
    if (ignore.has(k) || COUNTERS.test(k)) continue;
    const a = after.get(k);
    if (a !== v) diffs.push(`${k}: ${JSON.stringify(v.trim())} → ${JSON.stringify(a?.trim())}`);
  }
  for (const k of after.keys()) if (!before.has(k) && !COUNTERS.test(k)) diffs.push(`${k}: appeared`);
  return diffs;
}

export function sha256File(path: string): string {
  try {
    return createHash('sha256').update(readFileSync(path)).digest('hex');
  } catch (err) {
    return `unreadable: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
  }
}

export interface ProcInfo {
  pid: number;
  ppid: number;
  /** Start time in clock ticks since boot: with the pid, a process's identity (pids are reused). */
  start: string;
}

export function procInfo(pid: number): ProcInfo | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { pid, ppid: Number(f[1]), start: f[19]! };
  } catch {
    return null;
  }
}

export function allPids(): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number);
}

/** Every process below `root` (children, grandchildren …), as /proc says now. */
export function descendants(root: number): ProcInfo[] {
  const infos = allPids()
    .map(procInfo)
    .filter((p): p is ProcInfo => p !== null);
  const byParent = new Map<number, ProcInfo[]>();
  for (const p of infos) byParent.set(p.ppid, [...(byParent.get(p.ppid) ?? []), p]);
  const out: ProcInfo[] = [];
  const stack = [root];
  while (stack.length) {
    for (const c of byParent.get(stack.pop()!) ?? []) {
      out.push(c);
      stack.push(c.pid);
    }
  }
  return out;
}

/** The processes whose root directory holds /tmp/<marker>: those of one sandbox (a private /tmp each). */
export function sandboxProcesses(marker: string): ProcInfo[] {
  return allPids()
    .filter((pid) => existsSync(`/proc/${pid}/root/tmp/${marker}`))
    .map(procInfo)
    .filter((p): p is ProcInfo => p !== null);
}

export function alive(p: ProcInfo): boolean {
  const now = procInfo(p.pid);
  return now !== null && now.start === p.start && !isZombie(p.pid);
}

function isZombie(pid: number): boolean {
  try {
    return /\nState:\s+Z/.test(readFileSync(`/proc/${pid}/status`, 'latin1'));
  } catch {
    return false;
  }
}

export interface HostStatus {
  pid: number;
  cmdline: string;
  /** real, effective, saved, filesystem */
  uid: number[];
  gid: number[];
  groups: string;
  capEff: string;
  capPrm: string;
  capInh: string;
  capBnd: string;
  capAmb: string;
  noNewPrivs: string;
  seccomp: string;
  userNs: string;
}

/** A process's identity as this host sees it (/proc/<pid>/status read from outside its namespaces). */
export function hostStatus(pid: number): HostStatus | null {
  try {
    const t = readFileSync(`/proc/${pid}/status`, 'latin1');
    const get = (k: string) => new RegExp(`^${k}:\\s*(.*)$`, 'm').exec(t)?.[1]?.trim() ?? '';
    let userNs = '';
    try {
      userNs = readlinkSync(`/proc/${pid}/ns/user`);
    } catch {
      /* gone */
    }
    return {
      pid,
      cmdline: readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim().slice(0, 300),
      uid: get('Uid').split(/\s+/).map(Number),
      gid: get('Gid').split(/\s+/).map(Number),
      groups: get('Groups'),
      capEff: get('CapEff'),
      capPrm: get('CapPrm'),
      capInh: get('CapInh'),
      capBnd: get('CapBnd'),
      capAmb: get('CapAmb'),
      noNewPrivs: get('NoNewPrivs'),
      seccomp: get('Seccomp'),
      userNs,
    };
  } catch {
    return null;
  }
}

export const isRunner = (s: HostStatus) =>
  /runner\.ts|svc_runner\.py/.test(s.cmdline) && !/\bbwrap\b|setpriv/.test(s.cmdline.split(' ')[0] ?? '');
