import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { detectLimitBackend } from '../../executor/limits/detect';
import { CgroupV1Backend } from '../../executor/limits/cgroup-v1';
import { CgroupV2Backend } from '../../executor/limits/cgroup-v2';
import { cgroupDir, parseCgroupMounts, parseProcSelfCgroup } from '../../executor/limits/mountinfo';
import {
  MOUNTINFO_HYBRID,
  MOUNTINFO_NONE,
  MOUNTINFO_V1_HOST,
  MOUNTINFO_V2,
  USER_SERVICE,
  fakeExec,
  fakeTree,
  hookedFs,
} from './fake-cgroupfs';

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});
function tree(files: Record<string, string>, dirs: string[] = []) {
  const t = fakeTree(files, dirs);
  cleanups.push(t.cleanup);
  return t;
}

const V1_DIRS = ['cpu', 'cpuacct', 'cpuset', 'memory', 'pids', 'devices', 'freezer', 'blkio'].map((d) => `sys/fs/cgroup/${d}`);
const SYSTEMD_DOWN = fakeExec({
  'systemctl --user is-system-running': { code: 1, stdout: 'offline\n', stderr: 'Failed to connect to bus' },
});
const UNIT = 'app-svc\\x2demu-1234.scope';

describe('mountinfo parsing', () => {
  it('finds v1 hierarchies (separate and combined cpu/cpuacct), named ones, and the cgroup2 mount', () => {
    const host = parseCgroupMounts(MOUNTINFO_V1_HOST);
    expect(host.filter((m) => m.version === 1).map((m) => m.controllers.join(','))).toEqual([
      'cpu',
      'cpuacct',
      'cpuset',
      'memory',
      'devices',
      'freezer',
      'blkio',
      'pids',
      '',
    ]);
    expect(host.find((m) => m.name === 'systemd')?.mountPoint).toBe('/sys/fs/cgroup/systemd');
    expect(host.find((m) => m.version === 2)?.mountPoint).toBe('/sys/fs/cgroup/unified');
    const hybrid = parseCgroupMounts(MOUNTINFO_HYBRID);
    expect(hybrid.find((m) => m.controllers.includes('cpuacct'))).toMatchObject({
      mountPoint: '/sys/fs/cgroup/cpu,cpuacct',
      controllers: ['cpu', 'cpuacct'],
    });
    expect(parseCgroupMounts(MOUNTINFO_NONE)).toEqual([]);
  });

  it('unescapes mount points and maps cgroup paths through a non-"/" mount root', () => {
    const [m] = parseCgroupMounts('40 31 0:37 /docker/abc /sys/fs/cgroup/my\\040mem rw - cgroup cgroup rw,memory\n');
    expect(m).toMatchObject({ mountPoint: '/sys/fs/cgroup/my mem', root: '/docker/abc' });
    expect(cgroupDir(m!, '/docker/abc/x', '/fake')).toBe('/fake/sys/fs/cgroup/my mem/x');
    expect(cgroupDir(m!, '/elsewhere')).toBeNull();
  });

  it('parses /proc/self/cgroup for v1 and v2', () => {
    const s = parseProcSelfCgroup('12:pids:/a\n4:cpu,cpuacct:/b\n1:name=systemd:/c\n0::/user.slice/x.scope\n');
    expect(s.v2).toBe('/user.slice/x.scope');
    expect(s.v1.get('cpuacct')).toBe('/b');
    expect(s.v1.get('pids')).toBe('/a');
  });
});

describe('detectLimitBackend decision table', () => {
  it('v2-only host as root → cgroup-v2 at /sys/fs/cgroup/svc-emu, controllers enabled down the tree', async () => {
    const t = tree({
      'sys/fs/cgroup/cgroup.controllers': 'cpuset cpu io memory hugetlb pids rdma misc\n',
      'sys/fs/cgroup/cgroup.subtree_control': 'memory pids\n',
      'sys/fs/cgroup/cgroup.procs': '1\n',
    });
    const r = await detectLimitBackend({
      platform: 'linux',
      uid: 0,
      mountinfoText: MOUNTINFO_V2,
      selfCgroupText: '0::/init.scope\n',
      fsRoot: t.root,
      env: {},
      exec: SYSTEMD_DOWN.exec,
    });
    expect(r.backend.name).toBe('cgroup-v2');
    expect(r.backend.degraded).toBeNull();
    expect((r.backend as CgroupV2Backend).base).toBe(`${t.root}/sys/fs/cgroup/svc-emu`);
    // only the missing controller is added at the root; all three for svc-emu's children
    expect(t.read('sys/fs/cgroup/cgroup.subtree_control')).toBe('+cpu');
    expect(t.read('sys/fs/cgroup/svc-emu/cgroup.subtree_control')).toBe('+memory +pids +cpu');
    expect(r.reason).toMatch(/^cgroup-v2 — root/);
  });

  it('v2 root without the cpu controller → cgroup-v2, degraded: CPU cap not enforced', async () => {
    const t = tree({
      'sys/fs/cgroup/cgroup.controllers': 'memory pids\n',
      'sys/fs/cgroup/cgroup.subtree_control': '',
      'sys/fs/cgroup/cgroup.procs': '',
    });
    const r = await detectLimitBackend({
      platform: 'linux',
      uid: 0,
      mountinfoText: MOUNTINFO_V2,
      selfCgroupText: '0::/\n',
      fsRoot: t.root,
      env: {},
      exec: SYSTEMD_DOWN.exec,
    });
    expect(r.backend.name).toBe('cgroup-v2');
    expect(r.backend.degraded).toMatch(/CPU cap is not enforced/);
    expect(r.reason).toMatch(/parity degraded/);
  });

  it('v2 delegated user cgroup (Delegate=yes) → cgroup-v2 in our own cgroup, our processes moved to a leaf', async () => {
    const self = `${USER_SERVICE}/app.slice/${UNIT}`;
    const d = `sys/fs/cgroup${self}`;
    const t = tree({
      [`${d}/cgroup.controllers`]: 'cpu memory pids\n',
      [`${d}/cgroup.subtree_control`]: '',
      [`${d}/cgroup.procs`]: '4242\n4243\n',
    });
    const anchor = `${t.root}/${d}`;
    const moved: string[] = [];
    // The kernel refuses to enable controllers while the anchor has processes (no internal processes).
    const fs = hookedFs({
      write: (path, data) => {
        if (path === `${anchor}/cgroup.subtree_control` && readFileSync(`${anchor}/cgroup.procs`, 'utf8').trim()) {
          const e = new Error('EBUSY') as NodeJS.ErrnoException;
          e.code = 'EBUSY';
          throw e;
        }
        if (path === `${anchor}/svc-emu-core/cgroup.procs`) {
          moved.push(data);
          const left = readFileSync(`${anchor}/cgroup.procs`, 'utf8')
            .split('\n')
            .filter((l) => l && l !== data);
          writeFileSync(`${anchor}/cgroup.procs`, left.map((l) => `${l}\n`).join(''));
          return;
        }
        return 'default';
      },
    });
    const ex = fakeExec({
      'systemctl --user is-system-running': { stdout: 'running\n' },
      [`systemctl --user show -p Delegate --value ${UNIT}`]: { stdout: 'yes\n' },
    });
    const r = await detectLimitBackend({
      platform: 'linux',
      uid: 1000,
      mountinfoText: MOUNTINFO_V2,
      selfCgroupText: `0::${self}\n`,
      fsRoot: t.root,
      env: {},
      exec: ex.exec,
      fs,
    });
    expect(r.backend.name).toBe('cgroup-v2');
    expect((r.backend as CgroupV2Backend).base).toBe(`${anchor}/svc-emu`);
    expect(moved).toEqual(['4242', '4243']);
    expect(t.read(`${d}/cgroup.subtree_control`)).toBe('+memory +pids +cpu');
    expect(r.backend.notes?.join(' ')).toMatch(/moved 2 process\(es\)/);
    expect(r.checked[0]).toMatch(/^cgroup-v2: chosen — delegated subtree/);
  });

  it('v2 user cgroup of a non-delegated unit → systemd-scope (degraded when cpu is not delegated to the user manager)', async () => {
    const self = `${USER_SERVICE}/app.slice/${UNIT}`;
    const t = tree({
      [`sys/fs/cgroup${self}/cgroup.controllers`]: 'memory pids\n',
      [`sys/fs/cgroup${self}/cgroup.subtree_control`]: '',
      [`sys/fs/cgroup${self}/cgroup.procs`]: '4242\n',
      [`sys/fs/cgroup${USER_SERVICE}/cgroup.controllers`]: 'memory pids\n',
    });
    const ex = fakeExec({
      'systemctl --user is-system-running': { stdout: 'degraded\n', code: 1 },
      [`systemctl --user show -p Delegate --value ${UNIT}`]: { stdout: 'no\n' },
      'systemd-run --version': { stdout: 'systemd 249 (249.11)\n' },
    });
    const r = await detectLimitBackend({
      platform: 'linux',
      uid: 1000,
      mountinfoText: MOUNTINFO_V2,
      selfCgroupText: `0::${self}\n`,
      fsRoot: t.root,
      env: {},
      exec: ex.exec,
    });
    expect(r.backend.name).toBe('systemd-scope');
    expect(r.backend.degraded).toMatch(/cpu controller is not available/);
    expect(r.checked[0]).toMatch(/cgroup-v2: not usable — our cgroup belongs to systemd unit .* not delegated/);
    expect(r.checked[1]).toMatch(/cgroup-v1: not usable — no cgroup v1 hierarchies/);
  });

  it('v2 user on systemd ≥ 252 (cpu delegated) via $XDG_RUNTIME_DIR/systemd/private → systemd-scope, not degraded', async () => {
    const t = tree({
      [`sys/fs/cgroup${USER_SERVICE}/cgroup.controllers`]: 'cpu memory pids\n',
      'run/user/1000/systemd/private': '',
    });
    const ex = fakeExec({ 'systemd-run --version': { stdout: 'systemd 255\n' } });
    // our cgroup is a session scope owned by root: not writable, so v2 is skipped
    const fs = hookedFs({ writable: (p) => (p.includes('session-2.scope') ? false : undefined) });
    const r = await detectLimitBackend({
      platform: 'linux',
      uid: 1000,
      mountinfoText: MOUNTINFO_V2,
      selfCgroupText: '0::/user.slice/user-1000.slice/session-2.scope\n',
      fsRoot: t.root,
      env: { XDG_RUNTIME_DIR: '/run/user/1000' },
      exec: ex.exec,
      fs,
    });
    expect(r.backend.name).toBe('systemd-scope');
    expect(r.backend.degraded).toBeNull();
    expect(r.checked[0]).toMatch(/^cgroup-v2: not usable/);
  });

  it("v1 root (this host's layout) → cgroup-v1 with a svc-emu parent in memory, cpu, cpuacct and pids", async () => {
    const t = tree({ 'sys/fs/cgroup/unified/cgroup.controllers': '' }, V1_DIRS);
    const r = await detectLimitBackend({
      platform: 'linux',
      uid: 0,
      mountinfoText: MOUNTINFO_V1_HOST,
      selfCgroupText: '4:memory:/\n0::/\n',
      fsRoot: t.root,
      env: {},
      exec: SYSTEMD_DOWN.exec,
    });
    expect(r.backend.name).toBe('cgroup-v1');
    expect(r.checked[0]).toMatch(/cgroup-v2: not usable — .*hybrid host/);
    const b = r.backend as CgroupV1Backend;
    expect(b.parents).toEqual({
      memory: `${t.root}/sys/fs/cgroup/memory/svc-emu`,
      cpu: `${t.root}/sys/fs/cgroup/cpu/svc-emu`,
      cpuacct: `${t.root}/sys/fs/cgroup/cpuacct/svc-emu`,
      pids: `${t.root}/sys/fs/cgroup/pids/svc-emu`,
    });
    for (const p of Object.values(b.parents)) expect(existsSync(p)).toBe(true);
  });

  it('hybrid root with a combined cpu,cpuacct mount → cgroup-v1, cpu and cpuacct share one group dir', async () => {
    const t = tree({ 'sys/fs/cgroup/unified/cgroup.controllers': '', 'proc/swaps': 'Filename\tType\tSize\tUsed\tPriority\n' }, [
      'sys/fs/cgroup/cpu,cpuacct',
      'sys/fs/cgroup/memory',
      'sys/fs/cgroup/pids',
    ]);
    const r = await detectLimitBackend({
      platform: 'linux',
      uid: 0,
      mountinfoText: MOUNTINFO_HYBRID,
      selfCgroupText: '0::/\n',
      fsRoot: t.root,
      env: {},
      exec: SYSTEMD_DOWN.exec,
    });
    expect(r.backend.name).toBe('cgroup-v1');
    const b = r.backend as CgroupV1Backend;
    expect(b.parents.cpu).toBe(b.parents.cpuacct);
    expect(b.notes.join(' ')).toMatch(/no swap on this host/);
    const g = await b.create('combo', { memoryMb: 64, pidsMax: 8 });
    // one cgroup.procs write per distinct hierarchy directory: memory, cpu+cpuacct, pids
    expect(g.wrap(['true'])[2]!.match(/cgroup\.procs/g)).toHaveLength(3);
    expect(t.read('sys/fs/cgroup/cpu,cpuacct/svc-emu/combo/cpu.cfs_quota_us')).toBe('-1');
    await g.setCpuPercent(25);
    expect(t.read('sys/fs/cgroup/cpu,cpuacct/svc-emu/combo/cpu.cfs_quota_us')).toBe('25000');
    expect(t.read('sys/fs/cgroup/memory/svc-emu/combo/memory.limit_in_bytes')).toBe(String(64 * 1024 * 1024));
    expect(existsSync(`${t.root}/sys/fs/cgroup/memory/svc-emu/combo/memory.memsw.limit_in_bytes`)).toBe(false);
  });

  it('v1 host, not root, no user manager → none, with every reason listed', async () => {
    const t = tree({ 'sys/fs/cgroup/unified/cgroup.controllers': '' }, V1_DIRS);
    const r = await detectLimitBackend({
      platform: 'linux',
      uid: 1000,
      mountinfoText: MOUNTINFO_V1_HOST,
      selfCgroupText: '0::/\n',
      fsRoot: t.root,
      env: {},
      exec: SYSTEMD_DOWN.exec,
    });
    expect(r.backend.name).toBe('none');
    expect(r.backend.degraded).toBe('no cgroup backend on this host: only the timeout is enforced');
    expect(r.checked).toHaveLength(3);
    expect(r.checked[1]).toMatch(/cgroup v1 needs root/);
    expect(r.checked[2]).toMatch(/no systemd user manager reachable/);
  });

  it('macOS → none (limits live in the Lima VM)', async () => {
    const r = await detectLimitBackend({ platform: 'darwin', uid: 501, mountinfoText: '', env: {} });
    expect(r.backend.name).toBe('none');
    expect(r.reason).toMatch(/macOS.*Lima/);
  });

  it('SVC_EMU_LIMITS pins a backend; an unusable pinned backend gives none with the reason, never another backend', async () => {
    const t = tree({ 'sys/fs/cgroup/unified/cgroup.controllers': '' }, V1_DIRS);
    const base = {
      platform: 'linux' as const,
      uid: 0,
      mountinfoText: MOUNTINFO_V1_HOST,
      selfCgroupText: '0::/\n',
      fsRoot: t.root,
      exec: SYSTEMD_DOWN.exec,
    };
    expect((await detectLimitBackend({ ...base, env: { SVC_EMU_LIMITS: 'none' } })).backend.name).toBe('none');
    const pinned = await detectLimitBackend({ ...base, env: { SVC_EMU_LIMITS: 'cgroup-v2' } });
    expect(pinned.backend.name).toBe('none');
    expect(pinned.reason).toMatch(/SVC_EMU_LIMITS=cgroup-v2 could not be used/);
    expect((await detectLimitBackend({ ...base, env: { SVC_EMU_LIMITS: 'cgroup-v1' } })).backend.name).toBe('cgroup-v1');
  });

  it('on this real host it picks something and says why', async () => {
    const r = await detectLimitBackend();
    console.warn(
      `[limits] this host: ${r.reason}\n  ${r.checked.join('\n  ')}${r.backend.notes?.length ? `\n  notes: ${r.backend.notes.join('; ')}` : ''}`,
    );
    expect(['cgroup-v2', 'cgroup-v1', 'systemd-scope', 'none']).toContain(r.backend.name);
    if (process.getuid?.() === 0 && existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes')) expect(r.backend.name).toBe('cgroup-v1');
  });
});
