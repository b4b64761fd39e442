/**
 * Where the cgroup hierarchies are mounted (from /proc/self/mountinfo) and which cgroup we are in
 * (from /proc/self/cgroup). Pure parsing: the texts are passed in.
 */

export const V1_CONTROLLERS = new Set([
  'cpu',
  'cpuacct',
  'cpuset',
  'memory',
  'devices',
  'freezer',
  'net_cls',
  'net_prio',
  'blkio',
  'perf_event',
  'hugetlb',
  'pids',
  'rdma',
  'misc',
]);

export interface CgroupMount {
  version: 1 | 2;
  /** Where it is mounted in our mount namespace. */
  mountPoint: string;
  /** The cgroup path (in our cgroup namespace) that the mount point shows; usually "/". */
  root: string;
  /** v1: the controllers bound to this hierarchy (e.g. ["cpu","cpuacct"]); v2: [] (see cgroup.controllers). */
  controllers: string[];
  /** v1 named hierarchy (name=systemd), if any. */
  name?: string;
}

/** mountinfo escapes space, tab, newline and backslash as \ooo. */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

export function parseCgroupMounts(mountinfoText: string): CgroupMount[] {
  const out: CgroupMount[] = [];
  for (const line of mountinfoText.split('\n')) {
    if (!line.trim()) continue;
    // id parent major:minor root mountpoint opts [optional fields...] - fstype source superopts
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(' ');
    const right = line.slice(sep + 3).split(' ');
    const fstype = right[0];
    if (fstype !== 'cgroup' && fstype !== 'cgroup2') continue;
    const root = unescapeMount(left[3] ?? '/');
    const mountPoint = unescapeMount(left[4] ?? '');
    if (!mountPoint) continue;
    if (fstype === 'cgroup2') {
      out.push({ version: 2, mountPoint, root, controllers: [] });
      continue;
    }
    const superOpts = (right[2] ?? '').split(',');
    const controllers = superOpts.filter((o) => V1_CONTROLLERS.has(o));
    const nameOpt = superOpts.find((o) => o.startsWith('name='));
    out.push({ version: 1, mountPoint, root, controllers, ...(nameOpt ? { name: nameOpt.slice(5) } : {}) });
  }
  return out;
}

export interface SelfCgroups {
  /** The unified (v2) path, "0::/path", when present. */
  v2: string | null;
  /** v1: controller → path. */
  v1: Map<string, string>;
}

export function parseProcSelfCgroup(text: string): SelfCgroups {
  const v1 = new Map<string, string>();
  let v2: string | null = null;
  for (const line of text.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, hid, ctrls, path] = m;
    if (hid === '0' && ctrls === '') {
      v2 = path ?? '/';
      continue;
    }
    for (const c of (ctrls ?? '').split(',')) if (c) v1.set(c, path ?? '/');
  }
  return { v2, v1 };
}

/**
 * The directory of cgroup `path` under a mount whose root is `mount.root`. Null when the path is outside
 * what the mount shows (then we cannot reach it).
 */
export function cgroupDir(mount: CgroupMount, path: string, fsRoot = ''): string | null {
  const root = mount.root === '/' ? '' : mount.root.replace(/\/$/, '');
  if (root && path !== root && !path.startsWith(root + '/')) return null;
  const rel = path.slice(root.length).replace(/^\/+/, '');
  const base = fsRoot + mount.mountPoint.replace(/\/$/, '');
  return rel ? `${base}/${rel}` : base;
}

/** The v2 mount to use: the one at /sys/fs/cgroup if any, else the first. */
export function pickV2Mount(mounts: CgroupMount[]): CgroupMount | null {
  const v2 = mounts.filter((m) => m.version === 2);
  return v2.find((m) => m.mountPoint === '/sys/fs/cgroup') ?? v2[0] ?? null;
}

/** v1: the mount holding each controller (a combined "cpu,cpuacct" mount serves both). */
export function v1MountFor(mounts: CgroupMount[], controller: string): CgroupMount | null {
  return mounts.find((m) => m.version === 1 && m.controllers.includes(controller)) ?? null;
}
