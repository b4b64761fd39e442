import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { CgroupFs, ExecFn, ExecResult } from '../../executor/limits/cgroupfs';
import { nodeCgroupFs } from '../../executor/limits/cgroupfs';

/** A temp directory standing in for "/" (cgroupfs files are plain files; directories are directories). */
export function fakeTree(files: Record<string, string>, dirs: string[] = []): { root: string; read(p: string): string; cleanup(): void } {
  const root = mkdtempSync(join(tmpdir(), 'svc-emu-fakecg-'));
  for (const d of dirs) mkdirSync(join(root, d), { recursive: true });
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), text);
  }
  return {
    root,
    read: (p) => readFileSync(join(root, p), 'utf8'),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

export function errno(code: string, message = code): NodeJS.ErrnoException {
  const e = new Error(message) as NodeJS.ErrnoException;
  e.code = code;
  return e;
}

/** Wraps the node fs with hooks that can throw kernel errors or emulate side effects. */
export function hookedFs(hooks: {
  write?: (path: string, data: string) => Promise<'default' | void> | 'default' | void;
  writable?: (path: string) => boolean | undefined;
}): CgroupFs {
  return {
    ...nodeCgroupFs,
    async write(path, data) {
      const r = hooks.write ? await hooks.write(path, data) : 'default';
      if (r === 'default') await nodeCgroupFs.write(path, data);
    },
    async writable(path) {
      const r = hooks.writable?.(path);
      return r === undefined ? nodeCgroupFs.writable(path) : r;
    },
  };
}

/** An ExecFn answering from a table keyed by "file arg1 arg2 …"; records every call. */
export function fakeExec(
  table: Record<string, Partial<ExecResult>>,
  fallback: Partial<ExecResult> = { code: null, error: 'spawn ENOENT' },
) {
  const calls: string[][] = [];
  const exec: ExecFn = async (file, args) => {
    calls.push([file, ...args]);
    const key = [file, ...args].join(' ');
    const hit = table[key] ?? fallback;
    return {
      code: hit.code === undefined ? 0 : hit.code,
      stdout: hit.stdout ?? '',
      stderr: hit.stderr ?? '',
      ...(hit.error ? { error: hit.error } : {}),
    };
  };
  return { exec, calls };
}

// ---- mountinfo fixtures -----------------------------------------------------------------------------

/** Pure cgroup v2 (Fedora, Ubuntu ≥ 21.10, Debian ≥ 11, Arch). */
export const MOUNTINFO_V2 = `22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
24 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
25 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
26 25 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`;

/** This host: cgroup v1 (cpu and cpuacct as separate mounts) plus an empty cgroup2 at /sys/fs/cgroup/unified. */
export const MOUNTINFO_V1_HOST = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;

/** systemd "hybrid" on an older distro: v1 controllers, combined cpu,cpuacct, unified for systemd only. */
export const MOUNTINFO_HYBRID = `25 22 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:4 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:6 - cgroup cgroup rw,xattr,name=systemd
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
31 25 0:28 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,memory
32 25 0:29 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,pids
33 25 0:30 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,net_cls,net_prio
`;

/** macOS has no mountinfo at all. */
export const MOUNTINFO_NONE = `22 1 0:50 / / rw,relatime - overlay overlay rw,lowerdir=/a,upperdir=/b,workdir=/c
`;

export const USER_SERVICE = '/user.slice/user-1000.slice/user@1000.service';
