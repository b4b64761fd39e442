import { describe, expect, it } from 'vitest';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseCgroupMounts, runDoctor } from '../../server/doctor';

// /proc/mounts fixtures, as real hosts print them.
const PURE_V2 = `sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0
/dev/nvme0n1p2 / ext4 rw,relatime 0 0
`;

const PURE_V1 = `proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,nosuid,nodev,noexec,relatime,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd 0 0
cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,nosuid,nodev,noexec,relatime,pids 0 0
cgroup /sys/fs/cgroup/net_cls,net_prio cgroup rw,nosuid,nodev,noexec,relatime,net_cls,net_prio 0 0
cgroup /sys/fs/cgroup/hugetlb cgroup rw,nosuid,nodev,noexec,relatime,hugetlb 0 0
`;

/** This host (Debian bookworm container, cgroup v1 plus an empty cgroup2 at /sys/fs/cgroup/unified). */
const HYBRID = `tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/devices cgroup rw,relatime,devices 0 0
cgroup /sys/fs/cgroup/freezer cgroup rw,relatime,freezer 0 0
cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
`;

const NONE = `proc /proc proc rw,relatime 0 0
overlay / overlay rw,relatime,lowerdir=/a,upperdir=/b,workdir=/c 0 0
tmpfs /dev tmpfs rw,nosuid,size=65536k,mode=755 0 0
`;

describe('parseCgroupMounts', () => {
  it('pure v2: cgroup2 at /sys/fs/cgroup, no v1 controllers', () => {
    expect(parseCgroupMounts(PURE_V2)).toEqual({ mode: 'v2', v1_controllers: [], v2_mount: '/sys/fs/cgroup' });
  });

  it('pure v1: the known controllers, from combined mounts too, sorted; named and other hierarchies ignored', () => {
    expect(parseCgroupMounts(PURE_V1)).toEqual({
      mode: 'v1',
      v1_controllers: ['cpu', 'cpuacct', 'memory', 'pids'],
      v2_mount: null,
    });
  });

  it('hybrid: v1 controllers plus cgroup2 at /sys/fs/cgroup/unified (this host)', () => {
    expect(parseCgroupMounts(HYBRID)).toEqual({
      mode: 'hybrid',
      v1_controllers: ['blkio', 'cpu', 'cpuacct', 'cpuset', 'devices', 'freezer', 'memory', 'pids'],
      v2_mount: '/sys/fs/cgroup/unified',
    });
  });

  it('none: no cgroup mounts at all, or no /proc/mounts', () => {
    const none = { mode: 'none', v1_controllers: [], v2_mount: null };
    expect(parseCgroupMounts(NONE)).toEqual(none);
    expect(parseCgroupMounts('')).toEqual(none);
  });

  it('prefers /sys/fs/cgroup when cgroup2 is mounted in several places, whatever the order', () => {
    const extra = 'cgroup2 /run/other cgroup2 rw 0 0\n';
    expect(parseCgroupMounts(PURE_V2 + extra).v2_mount).toBe('/sys/fs/cgroup');
    expect(parseCgroupMounts(extra + PURE_V2).v2_mount).toBe('/sys/fs/cgroup');
  });

  it('does not mistake an option that merely contains a controller name for the controller', () => {
    const text = 'cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=memory,release_agent=/cpu 0 0\n';
    expect(parseCgroupMounts(text)).toEqual({ mode: 'none', v1_controllers: [], v2_mount: null });
  });
});

describe('runDoctor on this host', () => {
  it('without the checkout, says the runtimes cannot be found and that parity is degraded', async () => {
    const report = await runDoctor({ projectRoot: null });
    expect(report.runtime).toHaveProperty('error');
    expect(report.parity).toBe('degraded');
    expect(report.notes.some((n) => /^runtimes: /.test(n))).toBe(true);
  });

  it('returns a plausible report', async () => {
    const report = await runDoctor({ projectRoot: join(__dirname, '..', '..') });
    // The limit backend, the sandbox and the runtimes are reported from the host and the runtime lock.
    expect(['cgroup-v2', 'cgroup-v1', 'systemd-scope', 'none']).toContain(report.limits.backend);
    expect(typeof report.sandbox.bubblewrap).toBe('boolean');
    if (report.sandbox.bubblewrap) {
      // Who a snippet is, read from the host's /proc: never uid 0, no capabilities, no_new_privs, seccomp.
      const id = report.sandbox.identity;
      expect(id && !('error' in id) ? id.problems : id).toEqual([]);
      if (id && !('error' in id)) {
        expect(id.host_uid.every((u) => u !== 0)).toBe(true);
        expect(id).toMatchObject({ ok: true, no_new_privs: true, seccomp: 'filter', mode: report.root ? 'root-drop' : 'user-namespace' });
      }
      expect(report.sandbox.seccomp_denies).toContain('mount');
    }
    if (!('error' in report.runtime)) expect(report.runtime.mismatches).toEqual([]);
    // debugpy (Python debug runs) is the emulator's own, installed as the manifest pins it, and no mismatch either way.
    if (!('error' in report.runtime)) {
      const dbg = report.runtime.debugger as { debugpy: { installed: string | null; expected: string | null } };
      expect(dbg).toMatchObject({ debugpy: { expected: expect.any(String), emulator_only: true } });
      expect(dbg.debugpy.installed).toBe(dbg.debugpy.expected);
    }
    expect(report.node).toBe(process.version);
    expect(report.platform).toBe(process.platform);
    expect(report.arch).toBe(process.arch);
    expect(report.root).toBe(typeof process.getuid === 'function' && process.getuid() === 0);
    expect(['v2', 'v1', 'hybrid', 'none']).toContain(report.cgroup.mode);
    expect(report.electron_binary).toBe(false);
    expect(report.notes.some((n) => /Electron binary not installed/.test(n))).toBe(true);

    if (process.platform === 'linux') {
      // The cgroup part is what /proc/mounts and the v2 mount's cgroup.controllers say.
      const expected = parseCgroupMounts(readFileSync('/proc/mounts', 'utf8'));
      expect(report.cgroup).toMatchObject(expected);
      const controllersFile = expected.v2_mount ? join(expected.v2_mount, 'cgroup.controllers') : null;
      const v2 =
        controllersFile && existsSync(controllersFile)
          ? readFileSync(controllersFile, 'utf8').trim().split(/\s+/).filter(Boolean).sort()
          : [];
      expect(report.cgroup.v2_controllers).toEqual(v2);
      const usable = (list: string[]) => ['memory', 'cpu', 'pids'].every((c) => list.includes(c));
      const enforceable = usable(report.cgroup.v1_controllers) || usable(report.cgroup.v2_controllers);
      expect(report.parity).toBe(enforceable ? 'full' : 'degraded');
      expect(report.notes.some((n) => /only the timeout can be enforced/.test(n))).toBe(!enforceable);
    } else {
      expect(report.parity).toBe('degraded');
    }
  });

  it('reports an installed Electron binary when the path file exists, and omits the note', async () => {
    const report = await runDoctor({ electronPathFile: join(process.cwd(), 'package.json') });
    expect(report.electron_binary).toBe(true);
    expect(report.notes.some((n) => /Electron/.test(n))).toBe(false);
    const missing = await runDoctor({ electronPathFile: join(process.cwd(), 'no-such-file.txt') });
    expect(missing.electron_binary).toBe(false);
  });

  it('is JSON-serialisable (it is served at /_emu/doctor and printed with --json)', async () => {
    const report = await runDoctor();
    expect(JSON.parse(JSON.stringify(report))).toEqual(report);
  });
});
