import { readFile, access } from 'node:fs/promises';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { probeHost } from '../executor';
import { quarantineDir, readQuarantine, type QuarantineSummary } from './storage/quarantine';

/**
 * What this host can enforce. A first version (issue 2): Node, platform and the cgroup layout; the
 * executor adds limit backends, bubblewrap and runtime versions. Pure reads of /proc and /sys.
 */
export type CgroupMode = 'v2' | 'v1' | 'hybrid' | 'none';

export interface CgroupInfo {
  mode: CgroupMode;
  v1_controllers: string[];
  v2_mount: string | null;
  v2_controllers: string[];
}

export interface DoctorReport {
  node: string;
  platform: NodeJS.Platform;
  arch: string;
  root: boolean;
  cgroup: CgroupInfo;
  electron_binary: boolean;
  limits: Awaited<ReturnType<typeof probeHost>>['limits'];
  sandbox: Awaited<ReturnType<typeof probeHost>>['sandbox'];
  runtime: Record<string, unknown>;
  lima: Record<string, unknown>;
  parity: 'full' | 'degraded';
  notes: string[];
  /** What starts could not load from the data dir and kept aside (null when doctor ran without a data dir). */
  quarantine: QuarantineSummary | null;
}

const V1_CONTROLLERS = new Set(['cpu', 'cpuacct', 'memory', 'pids', 'cpuset', 'blkio', 'devices', 'freezer', 'io']);

export function parseCgroupMounts(mounts: string): Omit<CgroupInfo, 'v2_controllers'> {
  const v1 = new Set<string>();
  let v2: string | null = null;
  for (const line of mounts.split('\n')) {
    const [, mountPoint, fsType, options] = line.split(' ');
    if (fsType === 'cgroup2' && mountPoint) v2 = v2 === '/sys/fs/cgroup' ? v2 : mountPoint;
    if (fsType === 'cgroup' && options) for (const opt of options.split(',')) if (V1_CONTROLLERS.has(opt)) v1.add(opt);
  }
  const mode: CgroupMode = v1.size && v2 ? 'hybrid' : v1.size ? 'v1' : v2 ? 'v2' : 'none';
  return { mode, v1_controllers: [...v1].sort(), v2_mount: v2 };
}

export async function detectCgroups(): Promise<CgroupInfo> {
  const mounts = await readFile('/proc/mounts', 'utf8').catch(() => '');
  const base = parseCgroupMounts(mounts);
  let v2Controllers: string[] = [];
  if (base.v2_mount) {
    const text = await readFile(join(base.v2_mount, 'cgroup.controllers'), 'utf8').catch(() => '');
    v2Controllers = text.trim().split(/\s+/).filter(Boolean).sort();
  }
  return { ...base, v2_controllers: v2Controllers };
}

export async function runDoctor(
  opts: { electronPathFile?: string; projectRoot?: string | null; dataDir?: string | null } = {},
): Promise<DoctorReport> {
  const cgroup =
    process.platform === 'linux'
      ? await detectCgroups()
      : { mode: 'none' as const, v1_controllers: [], v2_mount: null, v2_controllers: [] };
  const electronBinary = opts.electronPathFile
    ? await access(opts.electronPathFile, constants.R_OK).then(
        () => true,
        () => false,
      )
    : false;
  const notes: string[] = [];
  const usableV1 = ['memory', 'cpu', 'pids'].every((c) => cgroup.v1_controllers.includes(c));
  const usableV2 = ['memory', 'cpu', 'pids'].every((c) => cgroup.v2_controllers.includes(c));
  if (process.platform === 'darwin')
    notes.push('macOS: limits are enforced inside a Lima VM (`svc-emu lima status`; the Parity status page creates and starts it).');
  else if (process.platform === 'win32') {
    notes.push(
      'Windows: no cgroups and no bubblewrap, so only the timeout is enforced here, and this port is not tested. For limits that bite, run the core headless in WSL 2 (`npx svc-emu serve` inside WSL) and open the URL it prints: WSL forwards localhost to Windows.',
    );
  } else if (process.platform !== 'linux') notes.push(`${process.platform}: no cgroups; only the timeout can be enforced.`);
  else if (!usableV1 && !usableV2) notes.push('No usable memory/cpu/pids cgroup controllers: only the timeout can be enforced.');
  if (!electronBinary)
    notes.push(
      'Electron binary not installed yet: `npm start` fetches it where a desktop can show a window; until then the core runs headless.',
    );
  const host = await probeHost({ projectRoot: opts.projectRoot ?? null });
  notes.push(...host.degraded);
  const quarantine = await quarantineSection(opts.dataDir ?? null, notes);
  return {
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    root: typeof process.getuid === 'function' && process.getuid() === 0,
    cgroup,
    electron_binary: electronBinary,
    limits: host.limits,
    sandbox: host.sandbox,
    runtime: host.runtime,
    lima: host.lima,
    parity: host.degraded.length === 0 && process.platform === 'linux' && (usableV1 || usableV2) ? 'full' : 'degraded',
    notes,
    quarantine,
  };
}

// ---- the data dir's quarantine (storage/quarantine.ts) ------------------------------------------------

/** What was kept aside in `dataDir`, with a note when anything was (a read of files only: safe while a core runs). */
async function quarantineSection(dataDir: string | null, notes: string[]): Promise<QuarantineSummary | null> {
  if (!dataDir) return null;
  const q = await readQuarantine(quarantineDir(dataDir));
  if (q.count > 0) {
    notes.push(
      `${q.count} record(s) failed validation when the data was loaded and are kept aside in ${q.dir}: they are not in use. See the quarantine list for what to do.`,
    );
  }
  return q;
}
