/**
 * The escape probes: one entry per attack, with a Bun body and a Python body doing the same thing from a
 * real snippet (rendered by test/security/probes/render.ts, run by test/security/escape.test.ts).
 *
 * A body gets `ctx` (the invocation's input, see ProbeInput) and returns R(succeeded, detail):
 * succeeded = the attack worked. Where a call must not have an effect even when it is allowed (kexec,
 * modules, reboot, swap, time), the body passes arguments that fail only AFTER the kernel's permission
 * check, and `passedPerm` counts any answer but EPERM/EACCES/ENOSYS as success: the check let it through.
 * /proc/sys knobs are written with their current value (zero-valued ones first: a pair such as
 * vm.overcommit_kbytes/ratio zeroes its twin on any write), /proc/sysrq-trigger and /sys files only opened.
 *
 * `tries` and `stops` feed docs/security.md's probe table.
 */

/** What the test passes to the probe snippets. */
export interface ProbeInput {
  nonce: string;
  corePid: number;
  corePort: number;
  /** A TCP listener of the test process on 127.0.0.1. */
  canaryPort: number;
  /** A value set in the core's environment only. */
  canaryEnv: string;
  /** An abstract unix socket the test process listens on (host network namespace). */
  abstractName: string;
  dataDir: { db: string; secretKey: string; emulatorJson: string; egressSock: string };
  /** Host paths bound into the sandbox read-only (runtimes, runners). */
  runtimeDirs: string[];
  tenantB: { pid: number; marker: string; tag: string };
  only?: string[];
  skip?: string[];
  /** fork and disk bombs: their caps. */
  forkCap?: number;
  diskCapMb?: number;
}

export interface Probe {
  id: string;
  /** What it tries (docs/security.md). */
  tries: string;
  /** What stops it once the sandbox holds (docs/security.md). */
  stops: string;
  timeoutMs?: number;
  /** Runs in its own invocation, with its own limits (fork and disk bombs). */
  own?: boolean;
  /** The host decides success (the snippet's own report is only the attempt). */
  hostJudged?: boolean;
  bun: string;
  py: string;
}

const S = String.raw;

export const PROBES: Probe[] = [
  {
    id: 'proc_sys_all',
    tries: 'write every writable-looking /proc/sys knob (mode has a w bit), each with its current value',
    stops:
      'the snippet is never host uid 0 and holds no capability (root-owned knobs: EACCES); /proc/sys is read-only in the sandbox (EROFS)',
    timeoutMs: 45_000,
    bun: S`
const tried = [], opened = [], errs = {};
let unreadable = 0, empty = 0;
const walk = (dir) => {
  let names = [];
  try { names = fs.readdirSync(dir); } catch { return; }
  for (const n of names) {
    const p = dir + '/' + n;
    let st;
    try { st = fs.lstatSync(p); } catch { continue; }
    if (st.isDirectory()) { walk(p); continue; }
    if (!st.isFile() || (st.mode & 0o222) === 0) continue;
    const cur = readText(p);
    if (!cur.ok) { unreadable++; continue; }
    if (cur.v.length === 0) { empty++; continue; }
    knobs.push([p, cur.v]);
  }
};
const knobs = [];
walk('/proc/sys');
// Knobs set as pairs (vm.overcommit_kbytes/ratio, vm.dirty_*bytes/ratio) zero their twin on ANY write: the
// zero-valued ones go first, so writing the other last leaves both as they were.
knobs.sort((a, b) => (b[1].trim() === '0') - (a[1].trim() === '0'));
for (const [p, v] of knobs) {
  tried.push(p);
  const w = tryDo(() => { const fd = fs.openSync(p, fs.constants.O_WRONLY); try { fs.writeSync(fd, v); } finally { fs.closeSync(fd); } });
  if (w.ok) opened.push(p); else errs[w.err] = (errs[w.err] || 0) + 1;
}
if (tried.length === 0) throw new Error('no writable-looking readable knob found under /proc/sys (' + unreadable + ' unreadable)');
return R(opened.length > 0, 'tried ' + tried.length + ' knobs (' + unreadable + ' write-only skipped, ' + empty + ' empty); written: ' + opened.length + ' ' + JSON.stringify(opened.slice(0, 15)) + '; errors ' + JSON.stringify(errs));
`,
    py: S`
tried, opened, errs, knobs = [], [], {}, []
unreadable = empty = 0
for root, dirs, files in os.walk('/proc/sys'):
    for n in files:
        p = os.path.join(root, n)
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if not (st.st_mode & 0o222) or not (st.st_mode & 0o170000) == 0o100000:
            continue
        cur = read_text(p)
        if not cur['ok']:
            unreadable += 1
            continue
        if not cur['v']:
            empty += 1
            continue
        knobs.append((p, cur['v']))
# Knobs set as pairs (vm.overcommit_kbytes/ratio, vm.dirty_*bytes/ratio) zero their twin on ANY write: the
# zero-valued ones go first, so writing the other last leaves both as they were.
knobs.sort(key=lambda k: k[1].strip() != '0')
for p, v in knobs:
    tried.append(p)
    def w(p=p, v=v):
        fd = os.open(p, os.O_WRONLY)
        try:
            os.write(fd, v.encode('latin1'))
        finally:
            os.close(fd)
    r = try_do(w)
    if r['ok']:
        opened.append(p)
    else:
        errs[r['err']] = errs.get(r['err'], 0) + 1
if not tried:
    raise RuntimeError('no writable-looking readable knob under /proc/sys (%d unreadable)' % unreadable)
return R(opened, 'tried %d knobs (%d write-only skipped, %d empty); written: %d %s; errors %s' % (len(tried), unreadable, empty, len(opened), json.dumps(opened[:15]), json.dumps(errs)))
`,
  },
  {
    id: 'proc_sys_core_pattern',
    tries: 'write kernel.core_pattern (a pipe there runs as host root on the next crash) with its current value',
    stops: 'as proc_sys_all',
    bun: S`
const p = '/proc/sys/kernel/core_pattern';
const cur = readText(p);
if (!cur.ok) return R(false, 'cannot read: ' + cur.err);
const w = tryDo(() => { const fd = fs.openSync(p, fs.constants.O_WRONLY); try { fs.writeSync(fd, cur.v); } finally { fs.closeSync(fd); } });
return R(w.ok, 'write back ' + JSON.stringify(cur.v.trim()) + ': ' + show(w));
`,
    py: S`
p = '/proc/sys/kernel/core_pattern'
cur = read_text(p)
if not cur['ok']:
    return R(False, 'cannot read: ' + cur['err'])
def w():
    fd = os.open(p, os.O_WRONLY)
    try:
        os.write(fd, cur['v'].encode('latin1'))
    finally:
        os.close(fd)
r = try_do(w)
return R(r['ok'], 'write back %r: %s' % (cur['v'].strip(), show(r)))
`,
  },
  {
    id: 'proc_sys_printk_burst',
    tries: 'write kernel.printk_ratelimit_burst with its current value (the knob issue 14 found written)',
    stops: 'as proc_sys_all',
    bun: S`
const p = '/proc/sys/kernel/printk_ratelimit_burst';
const cur = readText(p);
if (!cur.ok) return R(false, 'cannot read: ' + cur.err);
const w = tryDo(() => { const fd = fs.openSync(p, fs.constants.O_WRONLY); try { fs.writeSync(fd, cur.v); } finally { fs.closeSync(fd); } });
return R(w.ok, 'write back ' + JSON.stringify(cur.v.trim()) + ': ' + show(w));
`,
    py: S`
p = '/proc/sys/kernel/printk_ratelimit_burst'
cur = read_text(p)
if not cur['ok']:
    return R(False, 'cannot read: ' + cur['err'])
def w():
    fd = os.open(p, os.O_WRONLY)
    try:
        os.write(fd, cur['v'].encode('latin1'))
    finally:
        os.close(fd)
r = try_do(w)
return R(r['ok'], 'write back %r: %s' % (cur['v'].strip(), show(r)))
`,
  },
  {
    id: 'sysrq_trigger',
    tries: 'open /proc/sysrq-trigger for writing (nothing is written: one byte there reboots or crashes the host)',
    stops: "absent from the sandbox's /proc (ENOENT); a root-owned 0200 file besides",
    bun: S`
const w = openW('/proc/sysrq-trigger');
return R(w.ok, 'open O_WRONLY: ' + show(w));
`,
    py: S`
w = open_w('/proc/sysrq-trigger')
return R(w['ok'], 'open O_WRONLY: ' + show(w))
`,
  },
  {
    id: 'sys_write',
    tries: 'open /sys files that change the host for writing (uevent_helper, power/state, THP, cgroup files)',
    stops: 'no /sys in the sandbox; mounting one is refused (mount_*)',
    bun: S`
const targets = ['/sys/kernel/uevent_helper', '/sys/power/state', '/sys/kernel/mm/transparent_hugepage/enabled', '/sys/fs/cgroup/cgroup.procs',
  '/sys/fs/cgroup/memory/memory.limit_in_bytes', '/sys/fs/cgroup/pids/pids.max', '/sys/kernel/profiling', '/sys/class/net/lo/mtu'];
const got = targets.map((p) => [p, show(openW(p))]);
return R(got.some(([, v]) => v === 'ok'), 'exists(/sys)=' + fs.existsSync('/sys') + ' ' + JSON.stringify(got));
`,
    py: S`
targets = ['/sys/kernel/uevent_helper', '/sys/power/state', '/sys/kernel/mm/transparent_hugepage/enabled', '/sys/fs/cgroup/cgroup.procs',
           '/sys/fs/cgroup/memory/memory.limit_in_bytes', '/sys/fs/cgroup/pids/pids.max', '/sys/kernel/profiling', '/sys/class/net/lo/mtu']
got = [(p, show(open_w(p))) for p in targets]
return R(any(v == 'ok' for _, v in got), 'exists(/sys)=%s %s' % (os.path.exists('/sys'), json.dumps(got)))
`,
  },
  {
    id: 'mount_tmpfs',
    tries: 'mount(2) a tmpfs',
    stops: 'seccomp (mount → EPERM); no CAP_SYS_ADMIN',
    bun: S`
fs.mkdirSync('/tmp/m-' + ctx.nonce, { recursive: true });
const s = sys(165, 'none', '/tmp/m-' + ctx.nonce, 'tmpfs', 0, '');
if (s.ret === 0) sys(166, '/tmp/m-' + ctx.nonce, 2);
return R(okRet(s), 'mount tmpfs: ' + s.e);
`,
    py: S`
d = '/tmp/m-' + ctx['nonce']
os.makedirs(d, exist_ok=True)
s = sysc(165, 'none', d, 'tmpfs', 0, '')
return R(ok_ret(s), 'mount tmpfs: ' + s['e'])
`,
  },
  {
    id: 'mount_bind',
    tries: 'bind-mount / (and the runtime dirs) somewhere writable',
    stops: 'seccomp (mount → EPERM); no CAP_SYS_ADMIN',
    bun: S`
const d = '/tmp/b-' + ctx.nonce;
fs.mkdirSync(d, { recursive: true });
const s = sys(165, '/', d, 0, 4096 | 16384, 0);
if (s.ret === 0) sys(166, d, 2);
return R(okRet(s), 'mount --rbind / : ' + s.e);
`,
    py: S`
d = '/tmp/b-' + ctx['nonce']
os.makedirs(d, exist_ok=True)
s = sysc(165, '/', d, None, 4096 | 16384, None)
return R(ok_ret(s), 'mount --rbind / : ' + s['e'])
`,
  },
  {
    id: 'mount_proc',
    tries: 'mount a fresh procfs (a writable /proc/sys)',
    stops: 'seccomp (mount → EPERM); no CAP_SYS_ADMIN',
    bun: S`
const d = '/tmp/p-' + ctx.nonce;
fs.mkdirSync(d, { recursive: true });
const s = sys(165, 'proc', d, 'proc', 0, '');
if (s.ret === 0) sys(166, d, 2);
return R(okRet(s), 'mount proc: ' + s.e);
`,
    py: S`
d = '/tmp/p-' + ctx['nonce']
os.makedirs(d, exist_ok=True)
s = sysc(165, 'proc', d, 'proc', 0, '')
return R(ok_ret(s), 'mount proc: ' + s['e'])
`,
  },
  {
    id: 'mount_cgroup_sysfs',
    tries: 'mount cgroup v1 (release_agent, CVE-2022-0492) and sysfs',
    stops: 'seccomp (mount → EPERM); no CAP_SYS_ADMIN',
    bun: S`
const d = '/tmp/c-' + ctx.nonce;
fs.mkdirSync(d, { recursive: true });
const a = sys(165, 'cgroup', d, 'cgroup', 0, 'memory');
if (a.ret === 0) sys(166, d, 2);
const b = sys(165, 'sysfs', d, 'sysfs', 0, '');
if (b.ret === 0) sys(166, d, 2);
return R(okRet(a) || okRet(b), 'mount cgroup(memory): ' + a.e + '; mount sysfs: ' + b.e);
`,
    py: S`
d = '/tmp/c-' + ctx['nonce']
os.makedirs(d, exist_ok=True)
a = sysc(165, 'cgroup', d, 'cgroup', 0, 'memory')
b = sysc(165, 'sysfs', d, 'sysfs', 0, '')
return R(ok_ret(a) or ok_ret(b), 'mount cgroup(memory): %s; mount sysfs: %s' % (a['e'], b['e']))
`,
  },
  {
    id: 'mount_remount_rw',
    tries: 'remount / read-write and unmount /proc (lazily)',
    stops: 'seccomp (mount, umount2 → EPERM); no CAP_SYS_ADMIN',
    bun: S`
const a = sys(165, 0, '/', 0, 32 | 4096, 0);
const b = inHelper('return sys(166, "/proc", 2).e;');
return R(okRet(a) || b === 'ok', 'remount / rw: ' + a.e + '; umount2(/proc) in a helper: ' + b);
`,
    py: S`
a = sysc(165, None, '/', None, 32 | 4096, None)
b = sysc(166, '/proc', 2)
return R(ok_ret(a) or ok_ret(b), 'remount / rw: %s; umount2(/proc): %s' % (a['e'], b['e']))
`,
  },
  {
    id: 'mount_api_new',
    tries: 'the new mount API: fsopen("tmpfs") and open_tree(/usr, OPEN_TREE_CLONE)',
    stops: 'seccomp (fsopen, fsconfig, fsmount, fspick, open_tree, move_mount, mount_setattr → EPERM); no CAP_SYS_ADMIN',
    bun: S`
const a = sys(430, 'tmpfs', 0);
if (a.ret >= 0) sys(3, a.ret);
const b = sys(428, -100, '/usr', 1 | 0x80000);
if (b.ret >= 0) sys(3, b.ret);
return R(okRet(a) || okRet(b), 'fsopen(tmpfs): ' + a.e + '; open_tree(/usr, CLONE): ' + b.e);
`,
    py: S`
a = sysc(430, 'tmpfs', 0)
b = sysc(428, -100, '/usr', 1 | 0x80000)
return R(ok_ret(a) or ok_ret(b), 'fsopen(tmpfs): %s; open_tree(/usr, CLONE): %s' % (a['e'], b['e']))
`,
  },
  {
    id: 'unshare_user',
    tries: 'unshare(CLONE_NEWUSER): a new user namespace (the way in to namespace-root exploits)',
    stops: 'seccomp (unshare with namespace flags → EPERM); --disable-userns (non-root core)',
    bun: S`
const u = run(['unshare', '--user', 'true']);
const f = sys(272, 0x10000000);
return R(u.code === 0 || okRet(f), 'unshare(1) --user: ' + JSON.stringify(u) + '; unshare(2) in the runner: ' + f.e);
`,
    py: S`
s = sysc(272, 0x10000000)
return R(ok_ret(s), 'unshare(CLONE_NEWUSER): ' + s['e'])
`,
  },
  {
    id: 'unshare_mount',
    tries: 'unshare(CLONE_NEWNS): a private mount namespace to mount in',
    stops: 'seccomp (unshare with namespace flags → EPERM); no CAP_SYS_ADMIN',
    bun: S`
const u = run(['unshare', '--mount', '--propagation', 'unchanged', 'true']);
const f = sys(272, 0x20000);
return R(u.code === 0 || okRet(f), 'unshare(1) --mount: ' + JSON.stringify(u) + '; unshare(2) in the runner: ' + f.e);
`,
    py: S`
s = sysc(272, 0x20000)
return R(ok_ret(s), 'unshare(CLONE_NEWNS): ' + s['e'])
`,
  },
  {
    id: 'unshare_net',
    tries: 'unshare(CLONE_NEWNET)',
    stops: 'seccomp (unshare with namespace flags → EPERM); no CAP_SYS_ADMIN',
    bun: S`
const u = run(['unshare', '--net', 'true']);
const f = sys(272, 0x40000000);
return R(u.code === 0 || okRet(f), 'unshare(1) --net: ' + JSON.stringify(u) + '; unshare(2) in the runner: ' + f.e);
`,
    py: S`
s = sysc(272, 0x40000000)
return R(ok_ret(s), 'unshare(CLONE_NEWNET): ' + s['e'])
`,
  },
  {
    id: 'unshare_other',
    tries: 'unshare the PID, IPC, UTS and cgroup namespaces',
    stops: 'seccomp (unshare with namespace flags → EPERM); no CAP_SYS_ADMIN',
    bun: S`
const flags = { pid: 0x20000000, ipc: 0x08000000, uts: 0x04000000, cgroup: 0x02000000 };
const got = {};
for (const [k, v] of Object.entries(flags)) got[k] = sys(272, v).e;
const u = run(['unshare', '--pid', '--ipc', '--uts', '--cgroup', 'true']);
return R(Object.values(got).includes('ok') || u.code === 0, JSON.stringify(got) + '; unshare(1): ' + JSON.stringify(u));
`,
    py: S`
flags = {'pid': 0x20000000, 'ipc': 0x08000000, 'uts': 0x04000000, 'cgroup': 0x02000000}
got = {k: sysc(272, v)['e'] for k, v in flags.items()}
return R('ok' in got.values(), json.dumps(got))
`,
  },
  {
    id: 'clone_newuser',
    tries: 'clone(CLONE_NEWUSER) and clone3, and a nested bubblewrap (which clones namespaces itself)',
    stops: 'seccomp (clone with namespace flags → EPERM, clone3 → ENOSYS); --disable-userns',
    bun: S`
const c = inHelper('const r = sys(56, 0x10000000 | 17, 0, 0, 0, 0); if (r.ret === 0) sys(60, 0); if (r.ret > 0) sys(61, r.ret, 0, 0, 0); return r.e;');
const args = Buffer.alloc(88);
args.writeBigUInt64LE(0x10000000n, 0);
args.writeBigUInt64LE(17n, 32);
const c3 = inHelper('const a = Buffer.alloc(88); a.writeBigUInt64LE(0x10000000n, 0); a.writeBigUInt64LE(17n, 32); const r = sys(435, a, 88); if (r.ret === 0) sys(60, 0); return r.e;');
const b = run(['bwrap', '--unshare-user', '--ro-bind', '/', '/', 'true']);
return R(c === 'ok' || c3 === 'ok' || b.code === 0, 'clone(NEWUSER): ' + c + '; clone3(NEWUSER): ' + c3 + '; bwrap: ' + JSON.stringify(b));
`,
    py: S`
r = sysc(56, 0x10000000 | 17, 0, 0, 0, 0)
if r['ret'] == 0:
    os._exit(0)
if r['ret'] > 0:
    os.waitpid(r['ret'], 0)
a = bytearray(88)
struct.pack_into('<Q', a, 0, 0x10000000)
struct.pack_into('<Q', a, 32, 17)
c3 = sysc(435, bytes(a), 88)
if c3['ret'] == 0:
    os._exit(0)
if c3['ret'] > 0:
    os.waitpid(c3['ret'], 0)
b = run(['bwrap', '--unshare-user', '--ro-bind', '/', '/', 'true'])
return R(ok_ret(r) or ok_ret(c3) or b.get('code') == 0, 'clone(NEWUSER): %s; clone3(NEWUSER): %s; bwrap: %s' % (r['e'], c3['e'], json.dumps(b)))
`,
  },
  {
    id: 'setns',
    tries: 'setns(2) into the namespaces of pid 1 and of the core (by its host pid)',
    stops: "seccomp (setns → EPERM); the core is not in the sandbox's PID namespace",
    bun: S`
const out = inHelper(
  'const got = {}; for (const pid of [1, ' + ctx.corePid + ']) for (const ns of ["user", "mnt", "net", "pid", "uts", "ipc", "cgroup"]) {' +
  ' let fd = -1; try { fd = fs.openSync("/proc/" + pid + "/ns/" + ns, "r"); } catch (e) { got[pid + "/" + ns] = "open " + (e.code || e); continue; }' +
  ' got[pid + "/" + ns] = sys(308, fd, 0).e; fs.closeSync(fd); } return got;');
return R(Object.values(out).includes('ok'), JSON.stringify(out));
`,
    py: S`
got = {}
for pid in (1, ctx['corePid']):
    for ns in ('user', 'mnt', 'net', 'pid', 'uts', 'ipc', 'cgroup'):
        try:
            fd = os.open('/proc/%d/ns/%s' % (pid, ns), os.O_RDONLY)
        except OSError as e:
            got['%d/%s' % (pid, ns)] = 'open ' + _errno.errorcode.get(e.errno, str(e))
            continue
        got['%d/%s' % (pid, ns)] = sysc(308, fd, 0)['e']
        os.close(fd)
return R('ok' in got.values(), json.dumps(got))
`,
  },
  {
    id: 'ptrace_runner',
    tries: "PTRACE_ATTACH to the runner (the process that holds the run's secrets and its channel to the core)",
    stops: 'seccomp (ptrace → EPERM)',
    bun: S`
const out = inHelper('const pid = process.ppid; const a = sys(101, 16, pid, 0, 0); let d = null; if (a.ret === 0) { for (let i = 0; i < 50 && (d = sys(101, 17, pid, 0, 0)).ret !== 0; i++) Bun.sleepSync(10); } return { pid, attach: a.e, seize: sys(101, 0x4206, pid, 0, 0).e, detach: d && d.e };');
return R(out.attach === 'ok' || out.seize === 'ok', JSON.stringify(out));
`,
    py: S`
pid = os.getppid()
a = sysc(101, 16, pid, 0, 0)
if a['ret'] == 0:
    os.waitpid(pid, 0x40000000)
    sysc(101, 17, pid, 0, 0)
s = sysc(101, 0x4206, pid, 0, 0)
if s['ret'] == 0:
    sysc(101, 17, pid, 0, 0)
return R(ok_ret(a) or ok_ret(s), 'runner pid %d: attach %s, seize %s' % (pid, a['e'], s['e']))
`,
  },
  {
    id: 'ptrace_runner_parent',
    tries: "PTRACE_ATTACH/SEIZE to the runner's parent (bubblewrap's init in the sandbox)",
    stops: 'seccomp (ptrace → EPERM); a different uid',
    bun: S`
const pid = process.ppid;
const a = sys(101, 0x4206, pid, 0, 0);
if (a.ret === 0) sys(101, 17, pid, 0, 0);
return R(okRet(a), 'parent pid ' + pid + ': seize ' + a.e);
`,
    py: S`
runner = os.getppid()
with open('/proc/%d/stat' % runner) as f:
    pid = int(f.read().rsplit(')', 1)[1].split()[1])
a = sysc(101, 0x4206, pid, 0, 0)
if a['ret'] == 0:
    sysc(101, 17, pid, 0, 0)
return R(ok_ret(a), 'runner\'s parent pid %d: seize %s' % (pid, a['e']))
`,
  },
  {
    id: 'ptrace_pid1',
    tries: "PTRACE_SEIZE pid 1 and the core's host pid",
    stops: 'seccomp (ptrace → EPERM); the core is outside the PID namespace',
    bun: S`
const got = {};
for (const pid of [1, ctx.corePid]) { const a = sys(101, 0x4206, pid, 0, 0); if (a.ret === 0) sys(101, 17, pid, 0, 0); got[pid] = a.e; }
return R(Object.values(got).includes('ok'), JSON.stringify(got));
`,
    py: S`
got = {}
for pid in (1, ctx['corePid']):
    a = sysc(101, 0x4206, pid, 0, 0)
    if a['ret'] == 0:
        sysc(101, 17, pid, 0, 0)
    got[pid] = a['e']
return R('ok' in got.values(), json.dumps(got))
`,
  },
  {
    id: 'process_vm_readv',
    tries: "process_vm_readv another process's memory (the runner's, or a child's)",
    stops: 'seccomp (process_vm_readv/writev → EPERM)',
    bun: S`
const child = Bun.spawn({ cmd: ['sleep', '30'], stdout: 'ignore', stderr: 'ignore' });
try {
  let maps = null;
  for (let i = 0; i < 100 && !(maps = readText('/proc/' + child.pid + '/maps')).ok; i++) Bun.sleepSync(10);
  const line = (maps.v || '').split('\n').find((l) => (l.split(' ')[1] || '').startsWith('r'));
  if (!line) throw new Error('cannot read the child\'s maps: ' + JSON.stringify(maps).slice(0, 300));
  const addr = BigInt('0x' + line.split('-')[0]);
  const buf = Buffer.alloc(16);
  const local = Buffer.alloc(16); local.writeBigUInt64LE(BigInt(FFI.ptr(buf)), 0); local.writeBigUInt64LE(16n, 8);
  const remote = Buffer.alloc(16); remote.writeBigUInt64LE(addr, 0); remote.writeBigUInt64LE(16n, 8);
  const s = sys(310, child.pid, local, 1, remote, 1, 0);
  return R(s.ret > 0, 'read ' + s.ret + ' bytes of pid ' + child.pid + ' at 0x' + addr.toString(16) + ': ' + s.e);
} finally { child.kill(9); }
`,
    py: S`
secret = b'process-vm-readv-canary-' + ctx['nonce'].encode()
pid = os.getppid()
addr = id(secret) + 32
buf = ctypes.create_string_buffer(16)
local = struct.pack('<QQ', ctypes.addressof(buf), 16)
remote = struct.pack('<QQ', addr, 16)
s = sysc(310, pid, local, 1, remote, 1, 0)
return R(s['ret'] > 0, 'read %d bytes of the runner (pid %d): %s %r' % (s['ret'], pid, s['e'], buf.raw[:s['ret']] if s['ret'] > 0 else b''))
`,
  },
  {
    id: 'read_data_dir',
    tries: 'read the data dir by its host paths (db.json, secret.key, emulator.json), directly and through /proc/*/root',
    stops: "the data dir is not in the sandbox's mount namespace; /proc shows only the sandbox's own processes",
    bun: S`
const d = ctx.dataDir;
const paths = [d.db, d.secretKey, d.emulatorJson];
const got = {};
for (const p of paths) for (const pre of ['', '/proc/1/root', '/proc/' + ctx.corePid + '/root', '/proc/self/root']) {
  const r = readText(pre + p, 64); got[pre + p] = r.ok ? 'READ ' + r.v.length + ' bytes' : r.err;
}
return R(Object.values(got).some((v) => v.startsWith('READ')), JSON.stringify(got));
`,
    py: S`
d = ctx['dataDir']
got = {}
for p in (d['db'], d['secretKey'], d['emulatorJson']):
    for pre in ('', '/proc/1/root', '/proc/%d/root' % ctx['corePid'], '/proc/self/root'):
        r = read_text(pre + p, 64)
        got[pre + p] = ('READ %d bytes' % len(r['v'])) if r['ok'] else r['err']
return R(any(v.startswith('READ') for v in got.values()), json.dumps(got))
`,
  },
  {
    id: 'admin_token',
    tries: "find the admin token (emu_…): emulator.json, every visible process's environ and cmdline",
    stops: "the data dir is not mounted; the core's process is outside the PID namespace; --clearenv",
    bun: S`
const re = /emu_[0-9A-Za-z]{20,}/;
const where = [];
const places = [ctx.dataDir.emulatorJson, '/proc/' + ctx.corePid + '/environ', '/proc/' + ctx.corePid + '/cmdline'];
for (const pid of pids()) places.push('/proc/' + pid + '/environ', '/proc/' + pid + '/cmdline');
let readable = 0;
for (const p of places) { const r = readText(p); if (r.ok) { readable++; if (re.test(r.v)) where.push(p); } }
return R(where.length > 0, 'searched ' + places.length + ' places (' + readable + ' readable); token found in ' + JSON.stringify(where));
`,
    py: S`
import re
rx = re.compile(r'emu_[0-9A-Za-z]{20,}')
places = [ctx['dataDir']['emulatorJson'], '/proc/%d/environ' % ctx['corePid'], '/proc/%d/cmdline' % ctx['corePid']]
for pid in pids():
    places += ['/proc/%d/environ' % pid, '/proc/%d/cmdline' % pid]
where, readable = [], 0
for p in places:
    r = read_text(p)
    if r['ok']:
        readable += 1
        if rx.search(r['v']):
            where.append(p)
return R(where, 'searched %d places (%d readable); token found in %s' % (len(places), readable, json.dumps(where)))
`,
  },
  {
    id: 'core_environ',
    tries:
      "read the core's environment (a canary variable set only there): /proc/<core pid>/environ, /proc/1/environ, every visible environ",
    stops: 'separate PID namespace; --clearenv (the sandbox gets only the variables the executor lists)',
    bun: S`
const places = ['/proc/' + ctx.corePid + '/environ', '/proc/1/environ', ...pids().map((p) => '/proc/' + p + '/environ')];
const seen = {};
let found = [];
for (const p of places) { const r = readText(p); seen[p] = r.ok ? 'read' : r.err; if (r.ok && r.v.includes(ctx.canaryEnv)) found.push(p); }
if (Object.values(process.env).some((v) => String(v).includes(ctx.canaryEnv))) found.push('process.env');
return R(found.length > 0, 'canary found in ' + JSON.stringify(found) + '; ' + JSON.stringify(seen).slice(0, 1500));
`,
    py: S`
places = ['/proc/%d/environ' % ctx['corePid'], '/proc/1/environ'] + ['/proc/%d/environ' % p for p in pids()]
seen, found = {}, []
for p in places:
    r = read_text(p)
    seen[p] = 'read' if r['ok'] else r['err']
    if r['ok'] and ctx['canaryEnv'] in r['v']:
        found.append(p)
if any(ctx['canaryEnv'] in v for v in os.environ.values()):
    found.append('os.environ')
return R(found, 'canary found in %s; %s' % (json.dumps(found), json.dumps(seen)[:1500]))
`,
  },
  {
    id: 'proc_root_host',
    tries: 'read host files outside the sandbox: /etc/shadow, /root, through / and /proc/<pid>/root',
    stops: "the sandbox's own root (only /usr, a minimal /etc and the runtimes); its own PID namespace",
    bun: S`
const got = {};
for (const p of ['/etc/shadow', '/proc/1/root/etc/shadow', '/proc/' + ctx.corePid + '/root/etc/shadow', '/root/.bashrc', '/proc/1/root/root/.bashrc', '/home']) {
  const r = p === '/home' ? tryDo(() => fs.readdirSync(p).join(',')) : readText(p, 64);
  got[p] = r.ok ? 'READ' : r.err;
}
return R(Object.values(got).includes('READ'), JSON.stringify(got));
`,
    py: S`
got = {}
for p in ('/etc/shadow', '/proc/1/root/etc/shadow', '/proc/%d/root/etc/shadow' % ctx['corePid'], '/root/.bashrc', '/proc/1/root/root/.bashrc', '/home'):
    r = try_do(lambda: ','.join(os.listdir(p))) if p == '/home' else read_text(p, 64)
    got[p] = 'READ' if r['ok'] else r['err']
return R('READ' in got.values(), json.dumps(got))
`,
  },
  {
    id: 'tenant_b_tmp',
    tries: "read a file another tenant's snippet wrote to its /tmp (directly, by its host pid, through every /proc/*/root)",
    stops: 'a private /tmp per sandbox; a PID namespace per sandbox',
    bun: S`
const b = ctx.tenantB;
const places = ['/tmp/' + b.marker, '/dev/shm/' + b.marker, '/run/' + b.marker, '/proc/' + b.pid + '/root/tmp/' + b.marker, ...pids().map((p) => '/proc/' + p + '/root/tmp/' + b.marker)];
const found = places.filter((p) => readText(p).ok);
return R(found.length > 0, 'looked in ' + places.length + ' places; found ' + JSON.stringify(found));
`,
    py: S`
b = ctx['tenantB']
places = ['/tmp/' + b['marker'], '/dev/shm/' + b['marker'], '/run/' + b['marker'], '/proc/%d/root/tmp/%s' % (b['pid'], b['marker'])] + ['/proc/%d/root/tmp/%s' % (p, b['marker']) for p in pids()]
found = [p for p in places if read_text(p)['ok']]
return R(found, 'looked in %d places; found %s' % (len(places), json.dumps(found)))
`,
  },
  {
    id: 'tenant_b_procs',
    tries: "see or signal another tenant's processes (its thread name in /proc/*/task/*/comm; kill -0 its host pid)",
    stops: 'a PID namespace per sandbox',
    bun: S`
const b = ctx.tenantB;
const found = [];
for (const pid of pids()) {
  let tasks = [];
  try { tasks = fs.readdirSync('/proc/' + pid + '/task'); } catch {}
  for (const t of tasks) { const r = readText('/proc/' + pid + '/task/' + t + '/comm'); if (r.ok && r.v.includes(b.tag)) found.push(pid + '/' + t); }
}
const k = sys(62, b.pid, 0);
const own = pids().length;
return R(found.length > 0, 'visible pids: ' + own + '; B\'s thread found at ' + JSON.stringify(found) + '; kill(' + b.pid + ', 0): ' + k.e + ' (a pid of this namespace if ok)');
`,
    py: S`
b = ctx['tenantB']
found = []
for pid in pids():
    try:
        tasks = os.listdir('/proc/%d/task' % pid)
    except OSError:
        tasks = []
    for t in tasks:
        r = read_text('/proc/%d/task/%s/comm' % (pid, t))
        if r['ok'] and b['tag'] in r['v']:
            found.append('%d/%s' % (pid, t))
k = sysc(62, b['pid'], 0)
return R(found, 'visible pids: %d; B\'s thread found at %s; kill(%d, 0): %s (a pid of this namespace if ok)' % (len(pids()), json.dumps(found), b['pid'], k['e']))
`,
  },
  {
    id: 'core_port_direct',
    tries: "connect to the core's port and to a host listener directly (127.0.0.1, ::1, localhost, 0.0.0.0), not through the egress proxy",
    stops: 'a network namespace with only its own loopback',
    bun: S`
const got = {};
for (const [h, p] of [['127.0.0.1', ctx.corePort], ['::1', ctx.corePort], ['localhost', ctx.corePort], ['0.0.0.0', ctx.corePort], ['127.0.0.1', ctx.canaryPort], ['::1', ctx.canaryPort]])
  got[h + ':' + p] = await connect({ host: h, port: p }, 2000);
return R(Object.values(got).includes('connected'), JSON.stringify(got));
`,
    py: S`
got = {}
for h, p, fam in (('127.0.0.1', ctx['corePort'], socket.AF_INET), ('::1', ctx['corePort'], socket.AF_INET6), ('0.0.0.0', ctx['corePort'], socket.AF_INET),
                  ('127.0.0.1', ctx['canaryPort'], socket.AF_INET), ('::1', ctx['canaryPort'], socket.AF_INET6)):
    got['%s:%d' % (h, p)] = connect((h, p), fam, 2)
try:
    got['localhost:%d' % ctx['corePort']] = connect(('localhost', ctx['corePort']), socket.AF_INET, 2)
except Exception as e:
    got['localhost'] = str(e)
return R('connected' in got.values(), json.dumps(got))
`,
  },
  {
    id: 'host_unix_sockets',
    tries:
      "connect to host unix sockets: the core's egress socket by its host path, an abstract socket of the host, docker/dbus/systemd sockets",
    stops:
      "the sandbox's own mount and network namespaces (abstract sockets are per network namespace); only the egress socket is bound in, at /run",
    bun: S`
const got = {};
for (const p of [ctx.dataDir.egressSock, '\0' + ctx.abstractName, '/run/docker.sock', '/var/run/docker.sock', '/run/dbus/system_bus_socket', '/run/systemd/private'])
  got[JSON.stringify(p)] = rawUnixConnect(p);
return R(Object.values(got).includes('connected'), JSON.stringify(got));
`,
    py: S`
got = {}
for p in (ctx['dataDir']['egressSock'], '\0' + ctx['abstractName'], '/run/docker.sock', '/var/run/docker.sock', '/run/dbus/system_bus_socket', '/run/systemd/private'):
    got[repr(p)] = connect(p, socket.AF_UNIX, 2)
return R('connected' in got.values(), json.dumps(got))
`,
  },
  {
    id: 'dev_mem',
    tries: 'open /dev/mem, /dev/kmem, /dev/port, /proc/kcore',
    stops: "bubblewrap's minimal /dev (null, zero, full, random, urandom, tty, pts, shm); no CAP_SYS_RAWIO",
    bun: S`
const got = {};
for (const p of ['/dev/mem', '/dev/kmem', '/dev/port', '/proc/kcore']) got[p] = show(openR(p));
return R(Object.values(got).includes('ok'), JSON.stringify(got));
`,
    py: S`
got = {p: show(open_r(p)) for p in ('/dev/mem', '/dev/kmem', '/dev/port', '/proc/kcore')}
return R('ok' in got.values(), json.dumps(got))
`,
  },
  {
    id: 'dev_kmsg_syslog',
    tries: 'read or write the kernel log: /dev/kmsg, syslog(2) READ_ALL',
    stops: 'no /dev/kmsg in the sandbox; seccomp (syslog → EPERM); dmesg_restrict',
    bun: S`
const a = show(openR('/dev/kmsg')), b = show(openW('/dev/kmsg'));
const buf = Buffer.alloc(4096);
const s = sys(103, 3, buf, buf.length);
return R(a === 'ok' || b === 'ok' || s.ret > 0, 'open /dev/kmsg r: ' + a + ', w: ' + b + '; syslog(READ_ALL): ' + s.e + ' ' + s.ret);
`,
    py: S`
a, b = show(open_r('/dev/kmsg')), show(open_w('/dev/kmsg'))
buf = ctypes.create_string_buffer(4096)
s = sysc(103, 3, buf, 4096)
return R(a == 'ok' or b == 'ok' or s['ret'] > 0, 'open /dev/kmsg r: %s, w: %s; syslog(READ_ALL): %s %d' % (a, b, s['e'], s['ret']))
`,
  },
  {
    id: 'dev_block',
    tries: "open the host's block devices (/dev/sd*, vd*, nvme*, xvd*, loop*, dm-*)",
    stops: "bubblewrap's minimal /dev has no block devices; mknod is refused (mknod_dev)",
    bun: S`
let names = [];
try { names = fs.readdirSync('/dev'); } catch (e) { throw new Error('cannot list /dev: ' + e); }
const blk = names.filter((n) => /^(sd|vd|hd|xvd|nvme|loop|dm-|mmcblk)/.test(n));
const got = {};
for (const n of blk.concat(['sda', 'vda', 'nvme0n1'])) got['/dev/' + n] = show(openR('/dev/' + n));
return R(Object.values(got).includes('ok'), '/dev has ' + JSON.stringify(names) + '; ' + JSON.stringify(got));
`,
    py: S`
names = os.listdir('/dev')
blk = [n for n in names if n.startswith(('sd', 'vd', 'hd', 'xvd', 'nvme', 'loop', 'dm-', 'mmcblk'))]
got = {'/dev/' + n: show(open_r('/dev/' + n)) for n in blk + ['sda', 'vda', 'nvme0n1']}
return R('ok' in got.values(), '/dev has %s; %s' % (json.dumps(names), json.dumps(got)))
`,
  },
  {
    id: 'mknod_dev',
    tries: 'mknod a block device (253:0, the host disk) and a char device (1:1, /dev/mem) in /tmp',
    stops: "no CAP_MKNOD; seccomp; nodev on the sandbox's tmpfs",
    bun: S`
const a = sys(259, -100, '/tmp/blk-' + ctx.nonce, 0o060600, (253 << 8) | 0);
const b = sys(259, -100, '/tmp/chr-' + ctx.nonce, 0o020600, (1 << 8) | 1);
const oa = a.ret === 0 ? show(openR('/tmp/blk-' + ctx.nonce)) : '-';
const ob = b.ret === 0 ? show(openR('/tmp/chr-' + ctx.nonce)) : '-';
return R(okRet(a) || okRet(b), 'mknod block: ' + a.e + ' (open ' + oa + '); mknod char 1:1: ' + b.e + ' (open ' + ob + ')');
`,
    py: S`
a = sysc(259, -100, '/tmp/blk-' + ctx['nonce'], 0o060600, (253 << 8) | 0)
b = sysc(259, -100, '/tmp/chr-' + ctx['nonce'], 0o020600, (1 << 8) | 1)
oa = show(open_r('/tmp/blk-' + ctx['nonce'])) if a['ret'] == 0 else '-'
ob = show(open_r('/tmp/chr-' + ctx['nonce'])) if b['ret'] == 0 else '-'
return R(ok_ret(a) or ok_ret(b), 'mknod block: %s (open %s); mknod char 1:1: %s (open %s)' % (a['e'], oa, b['e'], ob))
`,
  },
  {
    id: 'setuid_binaries',
    tries: 'run the setuid-root binaries in the sandbox (su, passwd, chsh, chfn, mount, newuidmap…) and watch their effective uid',
    stops: "no_new_privs; nosuid on every bind mount; the snippet's uid owns nothing setuid",
    timeoutMs: 30_000,
    bun: S`
const dirs = ['/usr/bin', '/usr/sbin', '/bin', '/sbin', '/usr/lib/openssh', '/usr/lib/dbus-1.0', '/usr/lib/polkit-1'];
const suid = new Set();
for (const d of dirs) { let ns = []; try { ns = fs.readdirSync(d); } catch {} for (const n of ns) { try { const st = fs.statSync(d + '/' + n); if (st.isFile() && (st.mode & 0o4000)) suid.add(fs.realpathSync(d + '/' + n)); } catch {} } }
const me = selfStatus().Uid.split(/\s+/)[1];
const seen = {};
let elevated = [];
for (const bin of suid) {
  let p;
  try { p = Bun.spawn({ cmd: [bin, ...(/\/(su|passwd|chsh|chfn|newgrp|gpasswd)$/.test(bin) ? [] : ['--help'])], stdin: 'pipe', stdout: 'ignore', stderr: 'ignore' }); }
  catch (e) { seen[bin] = 'exec ' + (e.code || e); continue; }
  const uids = new Set();
  const t0 = Date.now();
  while (Date.now() - t0 < 1500 && p.exitCode === null) {
    const s = readText('/proc/' + p.pid + '/status');
    if (s.ok) { const m = /\nUid:\s+(\d+)\s+(\d+)/.exec(s.v); if (m) uids.add(m[2]); }
    Bun.sleepSync(5);
  }
  p.kill(9);
  seen[bin] = [...uids];
  if ([...uids].some((u) => u !== me)) elevated.push(bin);
}
if (suid.size === 0) return R(false, 'no setuid binary in the sandbox; NoNewPrivs=' + selfStatus().NoNewPrivs);
return R(elevated.length > 0, 'my uid ' + me + ', NoNewPrivs=' + selfStatus().NoNewPrivs + '; effective uids seen: ' + JSON.stringify(seen));
`,
    py: S`
dirs = ['/usr/bin', '/usr/sbin', '/bin', '/sbin', '/usr/lib/openssh', '/usr/lib/dbus-1.0', '/usr/lib/polkit-1']
suid = set()
for d in dirs:
    try:
        ns = os.listdir(d)
    except OSError:
        ns = []
    for n in ns:
        try:
            st = os.stat(os.path.join(d, n))
            if (st.st_mode & 0o170000) == 0o100000 and st.st_mode & 0o4000:
                suid.add(os.path.realpath(os.path.join(d, n)))
        except OSError:
            pass
me = self_status()['Uid'].split()[1]
seen, elevated = {}, []
for b in sorted(suid):
    args = [] if os.path.basename(b) in ('su', 'passwd', 'chsh', 'chfn', 'newgrp', 'gpasswd') else ['--help']
    try:
        p = subprocess.Popen([b] + args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as e:
        seen[b] = 'exec ' + _errno.errorcode.get(e.errno, str(e))
        continue
    uids = set()
    t0 = time.time()
    while time.time() - t0 < 1.5 and p.poll() is None:
        r = read_text('/proc/%d/status' % p.pid)
        if r['ok']:
            for line in r['v'].splitlines():
                if line.startswith('Uid:'):
                    uids.add(line.split()[2])
        time.sleep(0.005)
    p.kill()
    p.wait()
    seen[b] = sorted(uids)
    if any(u != me for u in uids):
        elevated.append(b)
if not suid:
    return R(False, 'no setuid binary in the sandbox; NoNewPrivs=' + self_status()['NoNewPrivs'])
return R(elevated, 'my uid %s, NoNewPrivs=%s; effective uids seen: %s' % (me, self_status()['NoNewPrivs'], json.dumps(seen)))
`,
  },
  {
    id: 'no_new_privs_seccomp',
    tries: "check the snippet's own NoNewPrivs (must be 1) and Seccomp (must be 2, a filter)",
    stops: 'the runner is started with no_new_privs and the seccomp filter (executor/sandbox/seccomp.ts)',
    bun: S`
const s = selfStatus();
return R(s.NoNewPrivs !== '1' || s.Seccomp !== '2', 'NoNewPrivs=' + s.NoNewPrivs + ' Seccomp=' + s.Seccomp + ' Seccomp_filters=' + s.Seccomp_filters);
`,
    py: S`
s = self_status()
return R(s.get('NoNewPrivs') != '1' or s.get('Seccomp') != '2', 'NoNewPrivs=%s Seccomp=%s Seccomp_filters=%s' % (s.get('NoNewPrivs'), s.get('Seccomp'), s.get('Seccomp_filters')))
`,
  },
  {
    id: 'capabilities',
    tries: 'hold any capability (CapEff, CapPrm, CapAmb, CapInh non-zero)',
    stops: "every capability dropped before the runner is exec'd (bwrap as a user; setpriv --inh-caps=-all --bounding-set=-all as root)",
    bun: S`
const s = selfStatus();
const held = ['CapInh', 'CapPrm', 'CapEff', 'CapAmb'].filter((k) => /[1-9a-f]/.test(s[k] || ''));
return R(held.length > 0, ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'].map((k) => k + '=' + s[k]).join(' '));
`,
    py: S`
s = self_status()
held = [k for k in ('CapInh', 'CapPrm', 'CapEff', 'CapAmb') if any(c in '123456789abcdef' for c in s.get(k, ''))]
return R(held, ' '.join('%s=%s' % (k, s.get(k)) for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb')))
`,
  },
  {
    id: 'setuid_root',
    tries: 'setuid(0), setgid(0), setresuid(0,0,0), setgroups(0)',
    stops: 'no CAP_SETUID/CAP_SETGID (EPERM); in a user namespace uid 0 is not even mapped (EINVAL)',
    bun: S`
const out = inHelper('return { setgroups: sys(116, 0, 0).e, setgid: sys(106, 0).e, setresuid: sys(117, 0, 0, 0).e, setuid: sys(105, 0).e };');
return R(Object.values(out).includes('ok'), JSON.stringify(out));
`,
    py: S`
out = {'setgroups': sysc(116, 0, 0)['e'], 'setgid': sysc(106, 0)['e'], 'setresuid': sysc(117, 0, 0, 0)['e'], 'setuid': sysc(105, 0)['e']}
return R('ok' in out.values(), json.dumps(out))
`,
  },
  {
    id: 'keyctl',
    tries: 'add_key, request_key and keyctl (the kernel keyring is not namespaced)',
    stops: 'seccomp (keyctl, add_key, request_key → EPERM)',
    bun: S`
const a = sys(248, 'user', 'escape-' + ctx.nonce, 'x', 1, -2);
const b = sys(250, 0, -3, 1);
const c = sys(249, 'user', 'escape-none-' + ctx.nonce, 0, -2);
return R(okRet(a) || okRet(b), 'add_key: ' + a.e + '; keyctl(GET_KEYRING_ID session): ' + b.e + '; request_key: ' + c.e);
`,
    py: S`
a = sysc(248, 'user', 'escape-' + ctx['nonce'], 'x', 1, -2)
b = sysc(250, 0, -3, 1)
c = sysc(249, 'user', 'escape-none-' + ctx['nonce'], None, -2)
return R(ok_ret(a) or ok_ret(b), 'add_key: %s; keyctl(GET_KEYRING_ID session): %s; request_key: %s' % (a['e'], b['e'], c['e']))
`,
  },
  {
    id: 'bpf',
    tries: 'bpf(BPF_MAP_CREATE)',
    stops: 'seccomp (bpf → EPERM); unprivileged_bpf_disabled',
    bun: S`
const attr = Buffer.alloc(72);
attr.writeUInt32LE(2, 0); attr.writeUInt32LE(4, 4); attr.writeUInt32LE(4, 8); attr.writeUInt32LE(1, 12);
const s = sys(321, 0, attr, 72);
if (s.ret >= 0) sys(3, s.ret);
return R(okRet(s), 'BPF_MAP_CREATE: ' + s.e);
`,
    py: S`
attr = struct.pack('<IIII', 2, 4, 4, 1) + bytes(56)
s = sysc(321, 0, attr, 72)
return R(ok_ret(s), 'BPF_MAP_CREATE: ' + s['e'])
`,
  },
  {
    id: 'perf_event_open',
    tries: 'perf_event_open a software counter on itself (user space only)',
    stops: 'seccomp (perf_event_open → EPERM)',
    bun: S`
const attr = Buffer.alloc(128);
attr.writeUInt32LE(1, 0); attr.writeUInt32LE(128, 4); attr.writeBigUInt64LE(0n, 8);
attr.writeBigUInt64LE((1n << 0n) | (1n << 5n) | (1n << 6n), 40);
const s = sys(298, attr, 0, -1, -1, 0);
if (s.ret >= 0) sys(3, s.ret);
return R(okRet(s), 'perf_event_open(SW_CPU_CLOCK, self, exclude_kernel|hv): ' + s.e);
`,
    py: S`
attr = bytearray(128)
struct.pack_into('<II', attr, 0, 1, 128)
struct.pack_into('<Q', attr, 40, (1 << 0) | (1 << 5) | (1 << 6))
s = sysc(298, bytes(attr), 0, -1, -1, 0)
return R(ok_ret(s), 'perf_event_open(SW_CPU_CLOCK, self, exclude_kernel|hv): ' + s['e'])
`,
  },
  {
    id: 'kexec',
    tries: 'kexec_load and kexec_file_load (bad arguments: only the permission check is tested)',
    stops: 'seccomp (kexec_* → EPERM); no CAP_SYS_BOOT',
    bun: S`
const a = sys(246, 0, 0, 0, 0xffff0000);
const b = sys(320, -1, -1, 0, 0, 0);
return R(passedPerm(a) || passedPerm(b), 'kexec_load: ' + a.e + '; kexec_file_load: ' + b.e);
`,
    py: S`
a = sysc(246, 0, 0, None, 0xffff0000)
b = sysc(320, -1, -1, 0, None, 0)
return R(passed_perm(a) or passed_perm(b), 'kexec_load: %s; kexec_file_load: %s' % (a['e'], b['e']))
`,
  },
  {
    id: 'kernel_modules',
    tries: 'init_module, finit_module (/dev/null) and delete_module (a name that is not loaded): the permission check only',
    stops: 'seccomp (init/finit/delete_module → EPERM); no CAP_SYS_MODULE',
    bun: S`
const a = sys(175, 0, 0, '');
const fd = fs.openSync('/dev/null', 'r');
const b = sys(313, fd, '', 0);
fs.closeSync(fd);
const c = sys(176, 'svc_escape_none', 0o4000);
return R(passedPerm(a) || passedPerm(b) || passedPerm(c), 'init_module: ' + a.e + '; finit_module: ' + b.e + '; delete_module: ' + c.e);
`,
    py: S`
a = sysc(175, None, 0, '')
fd = os.open('/dev/null', os.O_RDONLY)
b = sysc(313, fd, '', 0)
os.close(fd)
c = sysc(176, 'svc_escape_none', 0o4000)
return R(passed_perm(a) or passed_perm(b) or passed_perm(c), 'init_module: %s; finit_module: %s; delete_module: %s' % (a['e'], b['e'], c['e']))
`,
  },
  {
    id: 'open_by_handle_at',
    tries: 'open_by_handle_at with a forged handle for the root inode of /usr\'s file system (the "shocker" escape), and name_to_handle_at',
    stops: 'seccomp (open_by_handle_at, name_to_handle_at → EPERM); no CAP_DAC_READ_SEARCH',
    bun: S`
const mfd = fs.openSync('/usr', 'r');
const h = Buffer.alloc(16);
h.writeUInt32LE(8, 0); h.writeInt32LE(1, 4); h.writeUInt32LE(2, 8);
const a = sys(304, mfd, h, 0);
if (a.ret >= 0) sys(3, a.ret);
const n = Buffer.alloc(136); n.writeUInt32LE(128, 0);
const mid = Buffer.alloc(8);
const b = sys(303, -100, '/usr', n, mid, 0);
fs.closeSync(mfd);
return R(okRet(a) || a.e === 'ESTALE', 'open_by_handle_at(inode 2): ' + a.e + '; name_to_handle_at(/usr): ' + b.e);
`,
    py: S`
mfd = os.open('/usr', os.O_RDONLY)
h = struct.pack('<IiII', 8, 1, 2, 0)
a = sysc(304, mfd, h, 0)
n = bytearray(136)
struct.pack_into('<I', n, 0, 128)
b = sysc(303, -100, '/usr', bytes(n), bytes(8), 0)
os.close(mfd)
return R(ok_ret(a) or a['e'] == 'ESTALE', 'open_by_handle_at(inode 2): %s; name_to_handle_at(/usr): %s' % (a['e'], b['e']))
`,
  },
  {
    id: 'reboot',
    tries: 'reboot(2) with bad magic numbers (the permission check only)',
    stops: 'seccomp (reboot → EPERM); no CAP_SYS_BOOT',
    bun: S`
const s = sys(169, 0, 0, 0, 0);
return R(passedPerm(s), 'reboot(bad magic): ' + s.e + ' (EINVAL = permitted)');
`,
    py: S`
s = sysc(169, 0, 0, 0, 0)
return R(passed_perm(s), 'reboot(bad magic): %s (EINVAL = permitted)' % s['e'])
`,
  },
  {
    id: 'swap',
    tries: 'swapon/swapoff a path that does not exist (the permission check only)',
    stops: 'seccomp (swapon/swapoff → EPERM); no CAP_SYS_ADMIN',
    bun: S`
const a = sys(167, '/nonexistent-' + ctx.nonce, 0);
const b = sys(168, '/nonexistent-' + ctx.nonce);
return R(passedPerm(a) || passedPerm(b), 'swapon: ' + a.e + '; swapoff: ' + b.e + ' (ENOENT = permitted)');
`,
    py: S`
a = sysc(167, '/nonexistent-' + ctx['nonce'], 0)
b = sysc(168, '/nonexistent-' + ctx['nonce'])
return R(passed_perm(a) or passed_perm(b), 'swapon: %s; swapoff: %s (ENOENT = permitted)' % (a['e'], b['e']))
`,
  },
  {
    id: 'set_time',
    tries: 'settimeofday(NULL, NULL), adjtimex(ADJ_TICK, the current tick), then clock_settime(REALTIME, now) only if both were refused',
    stops: 'seccomp (settimeofday, clock_settime, adjtimex with modes → EPERM); no CAP_SYS_TIME',
    bun: S`
const a = sys(164, 0, 0);
const tx = Buffer.alloc(208);
const r0 = sys(159, tx);
const tick = tx.readBigInt64LE(88);
tx.writeUInt32LE(0x4000, 0);
const b = sys(159, tx);
let c = { e: 'not tried (already permitted)' , ret: -1 };
if (!okRet(a) && !okRet(b)) {
  const ts = Buffer.alloc(16);
  sys(228, 0, ts);
  c = sys(227, 0, ts);
}
return R(okRet(a) || okRet(b) || okRet(c), 'settimeofday(NULL,NULL): ' + a.e + '; adjtimex read: ' + r0.e + ' tick=' + tick + ', ADJ_TICK same: ' + b.e + '; clock_settime(now): ' + c.e);
`,
    py: S`
a = sysc(164, None, None)
tx = ctypes.create_string_buffer(208)
r0 = sysc(159, tx)
tick = struct.unpack_from('<q', tx.raw, 88)[0]
struct.pack_into('<I', tx, 0, 0x4000)
b = sysc(159, tx)
c = {'e': 'not tried (already permitted)', 'ret': -1}
if not ok_ret(a) and not ok_ret(b):
    ts = ctypes.create_string_buffer(16)
    sysc(228, 0, ts)
    c = sysc(227, 0, ts)
return R(ok_ret(a) or ok_ret(b) or ok_ret(c), 'settimeofday(NULL,NULL): %s; adjtimex read: %s tick=%d, ADJ_TICK same: %s; clock_settime(now): %s' % (a['e'], r0['e'], tick, b['e'], c['e']))
`,
  },
  {
    id: 'sethostname',
    tries: "sethostname and setdomainname (the host's hostname is compared by the test)",
    stops: 'a UTS namespace per sandbox; no CAP_SYS_ADMIN',
    bun: S`
const a = sys(170, 'escape-' + ctx.nonce.slice(0, 8), 15);
const b = sys(171, 'escape', 6);
return R(okRet(a) || okRet(b), 'sethostname: ' + a.e + '; setdomainname: ' + b.e);
`,
    py: S`
a = sysc(170, 'escape-' + ctx['nonce'][:8], 15)
b = sysc(171, 'escape', 6)
return R(ok_ret(a) or ok_ret(b), 'sethostname: %s; setdomainname: %s' % (a['e'], b['e']))
`,
  },
  {
    id: 'raw_sockets',
    tries: 'open raw IPv4/IPv6 and AF_PACKET sockets',
    stops: "no CAP_NET_RAW; the sandbox's network namespace has only loopback anyway",
    bun: S`
const got = { 'inet raw icmp': sys(41, 2, 3, 1), 'inet6 raw icmpv6': sys(41, 10, 3, 58), 'packet raw all': sys(41, 17, 3, 0x0300) };
for (const s of Object.values(got)) if (s.ret >= 0) sys(3, s.ret);
return R(Object.values(got).some(okRet), JSON.stringify(Object.fromEntries(Object.entries(got).map(([k, v]) => [k, v.e]))));
`,
    py: S`
got = {'inet raw icmp': sysc(41, 2, 3, 1), 'inet6 raw icmpv6': sysc(41, 10, 3, 58), 'packet raw all': sysc(41, 17, 3, 0x0300)}
for s in got.values():
    if s['ret'] >= 0:
        os.close(s['ret'])
return R(any(ok_ret(s) for s in got.values()), json.dumps({k: v['e'] for k, v in got.items()}))
`,
  },
  {
    id: 'io_uring',
    tries: 'io_uring_setup (a second syscall surface that seccomp does not see)',
    stops: 'seccomp (io_uring_* → EPERM)',
    bun: S`
const params = Buffer.alloc(120);
const s = sys(425, 1, params);
if (s.ret >= 0) sys(3, s.ret);
return R(okRet(s), 'io_uring_setup: ' + s.e);
`,
    py: S`
s = sysc(425, 1, bytes(120))
return R(ok_ret(s), 'io_uring_setup: ' + s['e'])
`,
  },
  {
    id: 'userfaultfd',
    tries: 'userfaultfd (user-mode only), a race-widening primitive of kernel exploits',
    stops: 'seccomp (userfaultfd → EPERM)',
    bun: S`
const s = sys(323, 0x80000 | 1);
if (s.ret >= 0) sys(3, s.ret);
return R(okRet(s), 'userfaultfd(UFFD_USER_MODE_ONLY): ' + s.e);
`,
    py: S`
s = sysc(323, 0x80000 | 1)
return R(ok_ret(s), 'userfaultfd(UFFD_USER_MODE_ONLY): ' + s['e'])
`,
  },
  {
    id: 'uid_map',
    tries: 'write /proc/self/uid_map, gid_map and setgroups (map uid 0)',
    stops: 'the maps are already written (once only); no CAP_SETUID in the parent namespace',
    bun: S`
const got = {};
for (const [p, v] of [['/proc/self/setgroups', 'allow'], ['/proc/self/uid_map', '0 0 1\n'], ['/proc/self/gid_map', '0 0 1\n']])
  got[p] = show(tryDo(() => { const fd = fs.openSync(p, fs.constants.O_WRONLY); try { fs.writeSync(fd, v); } finally { fs.closeSync(fd); } }));
return R(got['/proc/self/uid_map'] === 'ok' || got['/proc/self/gid_map'] === 'ok', JSON.stringify(got) + '; uid_map reads ' + JSON.stringify(readText('/proc/self/uid_map').v));
`,
    py: S`
got = {}
for p, v in (('/proc/self/setgroups', 'allow'), ('/proc/self/uid_map', '0 0 1\n'), ('/proc/self/gid_map', '0 0 1\n')):
    def w(p=p, v=v):
        fd = os.open(p, os.O_WRONLY)
        try:
            os.write(fd, v.encode())
        finally:
            os.close(fd)
    got[p] = show(try_do(w))
return R(got['/proc/self/uid_map'] == 'ok' or got['/proc/self/gid_map'] == 'ok', '%s; uid_map reads %r' % (json.dumps(got), read_text('/proc/self/uid_map').get('v')))
`,
  },
  {
    id: 'write_bundle_runtimes',
    tries: 'create files in the bundle (/opt/svc/app), the runtime dirs (Bun, the venv, the Python install, the runners) and /usr',
    stops: 'read-only binds; root-owned files',
    bun: S`
const dirs = ['/opt/svc/app', '/opt/svc/node_modules', '/usr/bin', '/usr/lib', ...ctx.runtimeDirs];
const got = {};
for (const d of dirs) { const p = d + '/escape-' + ctx.nonce; got[d] = show(tryDo(() => fs.writeFileSync(p, 'x', { flag: 'wx' }))); }
return R(Object.values(got).includes('ok'), JSON.stringify(got));
`,
    py: S`
dirs = ['/opt/svc/app', '/opt/svc/node_modules', '/usr/bin', '/usr/lib'] + ctx['runtimeDirs']
got = {}
for d in dirs:
    p = d + '/escape-' + ctx['nonce']
    def w(p=p):
        with open(p, 'x') as f:
            f.write('x')
    got[d] = show(try_do(w))
return R('ok' in got.values(), json.dumps(got))
`,
  },
  {
    id: 'write_root_etc',
    tries: "create files in the sandbox's / and /etc (which would sit outside the sized /tmp)",
    stops: 'a read-only root and /etc (only /tmp, /dev/shm and /run are writable, each sized)',
    bun: S`
const got = {};
for (const d of ['/', '/etc', '/opt', '/var', '/home']) got[d] = show(tryDo(() => fs.writeFileSync(d.replace(/\/$/, '') + '/escape-' + ctx.nonce, 'x', { flag: 'wx' })));
got['mkdir /escape'] = show(tryDo(() => fs.mkdirSync('/escape-dir-' + ctx.nonce)));
return R(Object.values(got).includes('ok'), JSON.stringify(got));
`,
    py: S`
got = {}
for d in ('/', '/etc', '/opt', '/var', '/home'):
    p = d.rstrip('/') + '/escape-' + ctx['nonce']
    def w(p=p):
        with open(p, 'x') as f:
            f.write('x')
    got[d] = show(try_do(w))
got['mkdir /escape'] = show(try_do(lambda: os.mkdir('/escape-dir-' + ctx['nonce'])))
return R('ok' in got.values(), json.dumps(got))
`,
  },
  {
    id: 'kill_core',
    tries: 'SIGKILL the core by its host pid (kill and pidfd_send_signal) (the test checks the core still answers)',
    stops: "a PID namespace per sandbox: the core's pid does not exist there",
    bun: S`
const a = sys(62, ctx.corePid, 9);
const fd = sys(434, ctx.corePid, 0);
const b = fd.ret >= 0 ? sys(424, fd.ret, 9, 0, 0) : fd;
return R(okRet(a) || okRet(b), 'kill(' + ctx.corePid + ', KILL): ' + a.e + '; pidfd_open/send_signal: ' + b.e);
`,
    py: S`
a = sysc(62, ctx['corePid'], 9)
fd = sysc(434, ctx['corePid'], 0)
b = sysc(424, fd['ret'], 9, None, 0) if fd['ret'] >= 0 else fd
return R(ok_ret(a) or ok_ret(b), 'kill(%d, KILL): %s; pidfd_open/send_signal: %s' % (ctx['corePid'], a['e'], b['e']))
`,
  },
  {
    id: 'chroot_pivot_root',
    tries: 'chroot and pivot_root (the classic chroot-escape set-up)',
    stops: 'seccomp (chroot, pivot_root → EPERM); no CAP_SYS_CHROOT',
    bun: S`
const out = inHelper('return { chroot: sys(161, "/tmp").e, pivot_root: sys(155, "/tmp", "/tmp").e };');
return R(Object.values(out).includes('ok'), JSON.stringify(out));
`,
    py: S`
out = {'chroot': sysc(161, '/tmp')['e'], 'pivot_root': sysc(155, '/tmp', '/tmp')['e']}
return R('ok' in out.values(), json.dumps(out))
`,
  },
  {
    id: 'iopl_ioperm',
    tries: 'iopl(3) and ioperm on port 0x80 (direct hardware I/O)',
    stops: 'seccomp (iopl, ioperm → EPERM); no CAP_SYS_RAWIO',
    bun: S`
const out = inHelper('return { iopl: sys(172, 3).e, ioperm: sys(173, 0x80, 1, 1).e };');
return R(Object.values(out).includes('ok'), JSON.stringify(out));
`,
    py: S`
out = {'iopl': sysc(172, 3)['e'], 'ioperm': sysc(173, 0x80, 1, 1)['e']}
return R('ok' in out.values(), json.dumps(out))
`,
  },
  {
    id: 'privileged_misc',
    tries: 'acct (process accounting on), vhangup, quotactl(Q_SYNC), lookup_dcookie, nfsservctl',
    stops: 'seccomp (→ EPERM); no capability',
    bun: S`
const a = sys(163, '/tmp/acct-' + ctx.nonce);
if (a.ret === 0) sys(163, 0);
const got = { acct: a.e, vhangup: sys(153).e, quotactl: sys(179, 0x800001, 0, 0, 0).e, lookup_dcookie: sys(212, 0, 0, 0).e, nfsservctl: sys(180, 0, 0, 0).e };
return R(got.acct === 'ok' || got.vhangup === 'ok' || got.quotactl === 'ok', JSON.stringify(got));
`,
    py: S`
a = sysc(163, '/tmp/acct-' + ctx['nonce'])
if a['ret'] == 0:
    sysc(163, None)
got = {'acct': a['e'], 'vhangup': sysc(153)['e'], 'quotactl': sysc(179, 0x800001, None, 0, None)['e'], 'lookup_dcookie': sysc(212, 0, None, 0)['e'], 'nfsservctl': sysc(180, 0, None, None)['e']}
return R(got['acct'] == 'ok' or got['vhangup'] == 'ok' or got['quotactl'] == 'ok', json.dumps(got))
`,
  },
  {
    id: 'survive_destroy',
    tries:
      "leave a detached, setsid'd process behind (double fork) and outlive the run and the sandbox (each snippet also leaves one while loading)",
    stops:
      "the end of each run reaps what it started (Sandbox.reap); the destroy kills the limit group and the sandbox's PID namespace dies with its init; the host looks for both sleepers",
    hostJudged: true,
    bun: S`
const r = run(['sh', '-c', 'setsid sh -c "sleep 600 & exit 0" < /dev/null > /dev/null 2>&1 &']);
return R(false, 'left a detached sleep 600 behind (' + JSON.stringify(r) + '); the host checks it is gone after the destroy');
`,
    py: S`
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/usr/bin/sleep', ['sleep', '600'])
    os._exit(0)
os.waitpid(pid, 0)
return R(False, 'left a detached sleep 600 behind; the host checks it is gone after the destroy')
`,
  },
  {
    id: 'fork_bomb',
    tries: 'start processes until refused (at most forkCap, 20 s); the host measures that the core keeps answering',
    stops: "the limit group's pids.max (cgroup); the core answers meanwhile",
    own: true,
    timeoutMs: 60_000,
    bun: S`
// A shell forks the sleepers (Bun itself aborts when it cannot start a thread); they are counted in /proc,
// which shows only this sandbox's processes.
const cap = ctx.forkCap || 2000;
const t0 = Date.now();
const sh = run(['sh', '-c', 'n=0; while [ $n -lt ' + cap + ' ]; do sleep 60 & n=$((n+1)); done; echo $n'], { timeout: 25000 });
const sleepers = pids().filter((p) => (readText('/proc/' + p + '/comm').v || '').trim() === 'sleep');
const n = sleepers.length;
for (const p of sleepers) sys(62, p, 9);
return R(n >= cap, 'started ' + n + ' processes in ' + (Date.now() - t0) + ' ms (' + (n >= cap ? 'hit the cap ' + cap + ': no limit stopped it' : 'then refused') + '); the shell: ' + JSON.stringify(sh).slice(0, 300));
`,
    py: S`
cap = ctx.get('forkCap') or 2000
kids, err = [], None
t0 = time.time()
while len(kids) < cap and time.time() - t0 < 20:
    try:
        pid = os.fork()
    except OSError as e:
        err = _errno.errorcode.get(e.errno, str(e))
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
n = len(kids)
for k in kids:
    try:
        os.kill(k, 9)
    except OSError:
        pass
for k in kids:
    try:
        os.waitpid(k, 0)
    except OSError:
        pass
return R(n >= cap, 'started %d processes in %d ms, then %s' % (n, (time.time() - t0) * 1000, err or ('hit the cap %d (no limit stopped it)' % cap if n >= cap else 'time ran out')))
`,
  },
  {
    id: 'disk_bomb',
    tries: 'write 1 MiB chunks to /tmp, /, /etc, /dev/shm, /run, /var/tmp until ENOSPC/EROFS (at most diskCapMb each, deleted after)',
    stops: 'a read-only root and /etc; sized tmpfs for /tmp, /dev/shm and /run',
    own: true,
    timeoutMs: 90_000,
    bun: S`
const cap = ctx.diskCapMb || 256;
const chunk = Buffer.alloc(1 << 20, 120);
const got = {};
let unbounded = [];
for (const d of ['/tmp', '/', '/etc', '/dev/shm', '/run', '/var/tmp']) {
  const p = d.replace(/\/$/, '') + '/bomb-' + ctx.nonce;
  let mb = 0, err = 'cap';
  let fd = null;
  try {
    fd = fs.openSync(p, 'wx');
    while (mb < cap) { fs.writeSync(fd, chunk); mb++; }
  } catch (e) { err = e.code || String(e); }
  if (fd !== null) fs.closeSync(fd);
  try { fs.unlinkSync(p); } catch {}
  got[d] = mb + ' MiB, ' + err;
  if (mb >= cap) unbounded.push(d);
}
return R(unbounded.length > 0, JSON.stringify(got));
`,
    py: S`
cap = ctx.get('diskCapMb') or 256
chunk = b'x' * (1 << 20)
got, unbounded = {}, []
for d in ('/tmp', '/', '/etc', '/dev/shm', '/run', '/var/tmp'):
    p = d.rstrip('/') + '/bomb-' + ctx['nonce']
    mb, err = 0, 'cap'
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        fd, err = None, _errno.errorcode.get(e.errno, str(e))
    if fd is not None:
        try:
            while mb < cap:
                n = os.write(fd, chunk)
                if n < len(chunk):
                    err = 'short write'
                    break
                mb += 1
        except OSError as e:
            err = _errno.errorcode.get(e.errno, str(e))
        os.close(fd)
        try:
            os.unlink(p)
        except OSError:
            pass
    got[d] = '%d MiB, %s' % (mb, err)
    if mb >= cap:
        unbounded.append(d)
return R(unbounded, json.dumps(got))
`,
  },
];
