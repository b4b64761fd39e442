import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { chmodSync, closeSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bwrapArgv, bwrapAvailable } from '../../executor/sandbox/bwrap';
import {
  coreIsRoot,
  nprocCap,
  nprocCountedPerNamespace,
  openSeccomp,
  parseIdentity,
  probeIdentity,
  sandboxProfile,
  sandboxUser,
  DEFAULT_SANDBOX_UID,
  SHARED_NPROC_SANDBOXES,
} from '../../executor/sandbox/profile';
import { CLONE_NAMESPACE_FLAGS, DENIED_SYSCALLS, hostSeccompArch, seccompFilter } from '../../executor/sandbox/seccomp';
import { pythonBinds, pythonPath } from './host';

// The hardened sandbox (executor/sandbox/): who a snippet is on the host, what it may call, where it may write.

describe('seccomp program (pure)', () => {
  for (const arch of ['x86_64', 'aarch64'] as const) {
    it(`${arch}: checks the architecture first, ends in verdicts, jumps stay in range`, () => {
      const prog = seccompFilter(arch);
      expect(prog.length % 8).toBe(0);
      const n = prog.length / 8;
      const insn = (i: number) => ({
        code: prog.readUInt16LE(i * 8),
        jt: prog[i * 8 + 2]!,
        jf: prog[i * 8 + 3]!,
        k: prog.readUInt32LE(i * 8 + 4),
      });
      expect(insn(0)).toEqual({ code: 0x20, jt: 0, jf: 0, k: 4 }); // ld arch
      expect(insn(1).k).toBe(arch === 'x86_64' ? 0xc000003e : 0xc00000b7);
      for (let i = 0; i < n; i++) {
        const { code, jt, jf } = insn(i);
        if ((code & 0x07) === 0x05) {
          expect(i + 1 + jt).toBeLessThan(n);
          expect(i + 1 + jf).toBeLessThan(n);
        }
      }
      expect(insn(n - 1).code).toBe(0x06); // a return closes the program
      expect(n).toBeLessThan(4096); // BPF_MAXINSNS
    });
  }

  it('denies the calls Docker leaves out, and namespace flags on clone', () => {
    for (const name of [
      'mount',
      'unshare',
      'setns',
      'ptrace',
      'bpf',
      'keyctl',
      'kexec_load',
      'init_module',
      'open_by_handle_at',
      'perf_event_open',
      'io_uring_setup',
      'userfaultfd',
    ]) {
      expect(DENIED_SYSCALLS).toContain(name);
    }
    expect(CLONE_NAMESPACE_FLAGS & 0x10000000).toBeTruthy(); // CLONE_NEWUSER
    expect(hostSeccompArch('x64')).toBe('x86_64');
    expect(hostSeccompArch('arm64')).toBe('aarch64');
    expect(hostSeccompArch('ia32')).toBeNull();
  });
});

describe('bwrapArgv for a root core (pure)', () => {
  const argv = bwrapArgv({
    bwrap: '/usr/bin/bwrap',
    runtimeBinds: [{ src: '/root/.pyenv/versions/3.11.7', dest: '/root/.pyenv/versions/3.11.7' }],
    bundleDir: '/data/bundles/v3',
    tmpSizeMb: 64,
    env: {},
    dropTo: { uid: DEFAULT_SANDBOX_UID, gid: DEFAULT_SANDBOX_UID, setpriv: '/usr/bin/setpriv' },
    seccompFd: 4,
  });
  const text = argv.join(' ');

  it('makes no user namespace (it would map the sandbox to host root) and drops to the dedicated uid before the runner', () => {
    expect(argv).not.toContain('--unshare-user');
    expect(argv).not.toContain('--unshare-all');
    expect(argv).not.toContain('--uid');
    expect(text).toContain('--unshare-pid --unshare-net --unshare-ipc --unshare-uts');
    expect(text).toContain('--cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID --cap-add CAP_SETPCAP');
    const dash = argv.indexOf('--');
    expect(argv.slice(dash + 1)).toEqual([
      '/usr/bin/setpriv',
      `--reuid=${DEFAULT_SANDBOX_UID}`,
      `--regid=${DEFAULT_SANDBOX_UID}`,
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--no-new-privs',
      '--',
    ]);
  });

  it('loads the seccomp program, remounts everything but /tmp and /dev/shm read-only, masks /proc', () => {
    expect(text).toContain('--seccomp 4');
    expect(text).toContain('--remount-ro /run --remount-ro /dev --remount-ro /');
    expect(text).toMatch(/--size \d+ --perms 1777 --tmpfs \/dev\/shm/);
    expect(text).toContain('--ro-bind-try /proc/sys /proc/sys');
  });

  it('makes the parents of binds traversable (bwrap would make them 0700 root)', () => {
    expect(text).toContain('--perms 0755 --dir /root --perms 0755 --dir /root/.pyenv --perms 0755 --dir /root/.pyenv/versions --ro-bind');
  });

  it('refuses a drop to uid 0', () => {
    expect(() =>
      bwrapArgv({ runtimeBinds: [], bundleDir: '/b', tmpSizeMb: 8, env: {}, dropTo: { uid: 0, gid: 5, setpriv: '/usr/bin/setpriv' } }),
    ).toThrow(/non-zero/);
  });

  it('takes the dedicated uid from the environment, refusing system ids and nobody', () => {
    expect(sandboxUser({})).toEqual({ uid: DEFAULT_SANDBOX_UID, gid: DEFAULT_SANDBOX_UID });
    expect(sandboxUser({ SVC_EMU_SANDBOX_UID: '70000', SVC_EMU_SANDBOX_GID: '70001' })).toEqual({ uid: 70000, gid: 70001 });
    expect(() => sandboxUser({ SVC_EMU_SANDBOX_UID: '0' })).toThrow(/at least 1000/);
    expect(() => sandboxUser({ SVC_EMU_SANDBOX_UID: '65534' })).toThrow(/65534/);
  });
});

describe('a process cap without a pids controller (pure)', () => {
  it('prlimit runs last, inside the user namespace, where the kernel counts it for this sandbox alone', () => {
    const argv = bwrapArgv({ runtimeBinds: [], bundleDir: '/b', tmpSizeMb: 8, env: {}, nproc: { prlimit: '/usr/bin/prlimit', max: 256 } });
    expect(argv.slice(-3)).toEqual(['/usr/bin/prlimit', '--nproc=256:256', '--']);
    expect(() => bwrapArgv({ runtimeBinds: [], bundleDir: '/b', tmpSizeMb: 8, env: {}, nproc: { prlimit: 'prlimit', max: 256 } })).toThrow(
      /absolute/,
    );
  });
  it('is counted per user namespace only since Linux 5.14; a root core shares it among its sandboxes', async () => {
    expect(nprocCountedPerNamespace('5.13.19')).toBe(false);
    expect(nprocCountedPerNamespace('5.14.0-427.el9.x86_64')).toBe(true);
    expect(nprocCountedPerNamespace('6.1.0-28-amd64')).toBe(true);
    expect(nprocCountedPerNamespace('weird')).toBe(false);
    const features = { disableUserns: true, size: true, perms: true };
    const user = await sandboxProfile({
      bwrap: { bin: '/usr/bin/bwrap', features },
      setpriv: null,
      prlimit: '/usr/bin/prlimit',
      workDir: join(work, 'n1'),
      root: false,
      release: '5.10.0',
    });
    expect(user.prlimit).toBeNull(); // it would count every process of the user
    const newer = await sandboxProfile({
      bwrap: { bin: '/usr/bin/bwrap', features },
      setpriv: null,
      prlimit: '/usr/bin/prlimit',
      workDir: join(work, 'n2'),
      root: false,
      release: '6.1.0',
    });
    expect(nprocCap(newer, 256)).toEqual({ prlimit: '/usr/bin/prlimit', max: 256 });
    const root = await sandboxProfile({
      bwrap: { bin: '/usr/bin/bwrap', features },
      setpriv: '/usr/bin/setpriv',
      prlimit: '/usr/bin/prlimit',
      workDir: join(work, 'n3'),
      root: true,
      env: {},
    });
    expect(nprocCap(root, 256)).toEqual({ prlimit: '/usr/bin/prlimit', max: 256 * SHARED_NPROC_SANDBOXES });
  });
});

describe('parseIdentity (pure)', () => {
  const status = (uid: string, capEff: string, nnp: string, seccomp: string) =>
    `Name:\tcat\nUid:\t${uid}\t${uid}\t${uid}\t${uid}\nGid:\t${uid}\t${uid}\t${uid}\t${uid}\nCapPrm:\t${capEff}\nCapEff:\t${capEff}\nCapBnd:\t0000000000000000\nNoNewPrivs:\t${nnp}\nSeccomp:\t${seccomp}\nSeccomp_filters:\t1\n`;
  it('accepts an unprivileged, capless, filtered process', () => {
    expect(parseIdentity(status('2000000000', '0000000000000000', '1', '2'), 'root-drop')).toMatchObject({ ok: true, problems: [] });
  });
  it('names every way it is wrong', () => {
    const id = parseIdentity(status('0', '000001ffffffffff', '0', '0'), 'user-namespace');
    expect(id.ok).toBe(false);
    expect(id.problems.join('\n')).toMatch(/host uid 0/);
    expect(id.problems.join('\n')).toMatch(/capabilities/);
    expect(id.problems.join('\n')).toMatch(/no_new_privs/);
    expect(id.problems.join('\n')).toMatch(/seccomp/);
  });
});

// ---- real bubblewrap, as the executor starts it on this host ---------------------------------------

const probe = await bwrapAvailable();
const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p)) ?? null;
const work = mkdtempSync(join(tmpdir(), 'svc-emu-profile-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the sandbox as this host runs it (real)', () => {
  it('is, seen from the host, a non-root uid with no capabilities, no_new_privs and a seccomp filter', async (ctx) => {
    if (!probe.ok) ctx.skip(`bubblewrap unusable: ${probe.reason}`);
    const profile = await sandboxProfile({ bwrap: { bin: probe.bwrap, features: probe.features }, setpriv, workDir: join(work, 'a') });
    const id = await probeIdentity(profile);
    expect(id.problems).toEqual([]);
    expect(id.host_uid.every((u) => u !== 0)).toBe(true);
    if (coreIsRoot()) expect(id.host_uid).toEqual([DEFAULT_SANDBOX_UID, DEFAULT_SANDBOX_UID, DEFAULT_SANDBOX_UID, DEFAULT_SANDBOX_UID]);
    else expect(id.host_uid[0]).toBe(process.getuid!());
    expect(id.cap_eff).toMatch(/^0+$/);
    expect(id.no_new_privs).toBe(true);
    expect(id.seccomp).toBe('filter');
  });

  it('as root, a user-namespace sandbox (the old one) is caught by the probe as host root', async (ctx) => {
    if (!probe.ok) ctx.skip(`bubblewrap unusable: ${probe.reason}`);
    if (!coreIsRoot()) ctx.skip('the core is not root here: a user namespace maps to this user, not to root');
    const profile = await sandboxProfile({
      bwrap: { bin: probe.bwrap, features: probe.features },
      setpriv,
      workDir: join(work, 'b'),
      root: false,
    });
    const id = await probeIdentity(profile);
    expect(id.ok).toBe(false);
    expect(id.problems.join('\n')).toMatch(/host uid 0/);
  });

  it('refuses a root core without setpriv rather than run snippets as root', async () => {
    await expect(
      sandboxProfile({ bwrap: { bin: '/usr/bin/bwrap', features: probe.features }, setpriv: null, workDir: join(work, 'c'), root: true }),
    ).rejects.toThrow(/root/);
  });

  // Inside: what the snippet's own calls get. Python's ctypes makes the raw syscalls.
  const PY = pythonPath();
  const SCRIPT = String.raw`
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def sc(name, nr, *a):
    r = libc.syscall(nr, *a)
    out[name] = 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')
def write(path, data=b'x'):
    try:
        with open(path, 'wb') as f: f.write(data)
        return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, '?')
def fill(path):
    n = 0
    try:
        with open(path, 'wb') as f:
            while n < 256 << 20:
                f.write(b'\0' * (1 << 20)); f.flush(); n += 1 << 20
    except OSError:
        pass
    return n >> 20
sc('unshare_user', 272, 0x10000000)
sc('mount', 165, b'none', b'/tmp', b'tmpfs', 0, None)
sc('ptrace_attach_1', 101, 16, 1, 0, 0)
sc('keyctl', 250, 0, 0)
sc('clone_newuser', 56, 0x10000000 | 17, 0, 0, 0, 0)
sc('setuid0', 105, 0)
for p in ['/proc/sys/kernel/printk_ratelimit_burst', '/proc/sys/kernel/core_pattern', '/x', '/etc/x', '/run/x', '/dev/x', '/opt/svc/app/x']:
    out[p] = write(p, b'1\n')
out['tmp_mb'] = fill('/tmp/fill')
out['shm_mb'] = fill('/dev/shm/fill')
pid = os.fork()
if pid == 0: os._exit(7)
out['fork'] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(out))
`;

  it('refuses mounts, namespaces, ptrace, keyrings and setuid, keeps /proc/sys and all but /tmp and /dev/shm read-only, caps both', async (ctx) => {
    if (!probe.ok) ctx.skip(`bubblewrap unusable: ${probe.reason}`);
    if (!PY) ctx.skip('no python3 on this host');
    if (process.arch !== 'x64') ctx.skip(`the raw syscall numbers in this probe are x86_64's (this is ${process.arch})`);
    const profile = await sandboxProfile({ bwrap: { bin: probe.bwrap, features: probe.features }, setpriv, workDir: join(work, 'd') });
    const bundle = join(work, 'bundle');
    rmSync(bundle, { recursive: true, force: true });
    mkdirSync(bundle);
    writeFileSync(join(bundle, 'probe.py'), SCRIPT);
    chmodSync(bundle, 0o755);
    chmodSync(join(bundle, 'probe.py'), 0o644);
    const fd = openSeccomp(profile.seccomp!);
    const argv = bwrapArgv({
      bwrap: profile.bin,
      features: profile.features,
      runtimeBinds: pythonBinds(PY!),
      bundleDir: bundle,
      tmpSizeMb: 8,
      shmSizeMb: 4,
      env: { PATH: '/usr/bin:/bin' },
      ...(profile.dropTo ? { dropTo: profile.dropTo } : {}),
      seccompFd: 3,
    });
    const child = spawn(argv[0]!, [...argv.slice(1), PY!, '/opt/svc/app/probe.py'], { stdio: ['ignore', 'pipe', 'pipe', fd] });
    closeSync(fd);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c));
    child.stderr!.on('data', (c: Buffer) => (stderr += c));
    const code = await new Promise<number | null>((r) => child.once('close', r));
    expect(code, stderr).toBe(0);
    const out = JSON.parse(stdout) as Record<string, string | number>;
    for (const call of ['unshare_user', 'mount', 'ptrace_attach_1', 'keyctl', 'clone_newuser', 'setuid0'])
      expect(out[call], call).toBe('EPERM');
    expect(out['/proc/sys/kernel/printk_ratelimit_burst']).toBe('EROFS');
    expect(out['/proc/sys/kernel/core_pattern']).toBe('EROFS');
    for (const p of ['/x', '/etc/x', '/run/x', '/dev/x', '/opt/svc/app/x']) expect(['EROFS', 'EACCES'], p).toContain(out[p]);
    expect(out.tmp_mb).toBeLessThanOrEqual(8);
    expect(out.shm_mb).toBeLessThanOrEqual(4);
    expect(out.fork).toBe(7); // ordinary processes still work
  });
});
