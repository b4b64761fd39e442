import { arch as nodeArch } from 'node:os';

/**
 * The sandbox's seccomp filter: a classic-BPF program handed to bubblewrap (`--seccomp FD`), which loads it
 * (with no_new_privs) right before it execs the runner, so every process of the snippet is under it.
 *
 * It is a deny-list modelled on the default profiles of Docker and containerd (their allow-lists leave these
 * out, or allow them only with capabilities a snippet never holds): whatever a kernel bug or a stray
 * capability could turn into an escape or a change of the host — mounts, namespaces, kernel keyrings, eBPF,
 * perf, kexec and modules, ptrace and cross-process memory access, file handles (the "shocker" escape),
 * clocks, swap, reboot, io_uring, userfaultfd — answers EPERM. clone() with any namespace flag answers
 * EPERM too; clone3() answers ENOSYS (its flags live in memory a filter cannot read), so libc falls back to
 * clone(), where the flags are checked. personality() keeps the values Docker keeps (no turning off ASLR).
 * A syscall of another ABI (i386 `int 0x80`, x32 on x86_64) is refused as a whole: the numbers below
 * would not mean the same calls there.
 *
 * Everything else is allowed: the runtimes (Bun, CPython) and their libraries need the ordinary calls, and
 * the other walls (no capabilities, an unprivileged uid, read-only mounts, namespaces, cgroups) hold them.
 */

export type SeccompArch = 'x86_64' | 'aarch64';

/** Denied syscalls by name, with their numbers per architecture (from the kernel's unistd headers). */
const SYSCALLS: Record<string, { x86_64?: number; aarch64?: number }> = {
  // mounts and the new mount API
  mount: { x86_64: 165, aarch64: 40 },
  umount2: { x86_64: 166, aarch64: 39 },
  pivot_root: { x86_64: 155, aarch64: 41 },
  chroot: { x86_64: 161, aarch64: 51 },
  open_tree: { x86_64: 428, aarch64: 428 },
  move_mount: { x86_64: 429, aarch64: 429 },
  fsopen: { x86_64: 430, aarch64: 430 },
  fsconfig: { x86_64: 431, aarch64: 431 },
  fsmount: { x86_64: 432, aarch64: 432 },
  fspick: { x86_64: 433, aarch64: 433 },
  mount_setattr: { x86_64: 442, aarch64: 442 },
  // namespaces
  unshare: { x86_64: 272, aarch64: 97 },
  setns: { x86_64: 308, aarch64: 268 },
  // kernel keyrings
  add_key: { x86_64: 248, aarch64: 217 },
  request_key: { x86_64: 249, aarch64: 218 },
  keyctl: { x86_64: 250, aarch64: 219 },
  // eBPF, perf, kernel code
  bpf: { x86_64: 321, aarch64: 280 },
  perf_event_open: { x86_64: 298, aarch64: 241 },
  kexec_load: { x86_64: 246, aarch64: 104 },
  kexec_file_load: { x86_64: 320, aarch64: 294 },
  init_module: { x86_64: 175, aarch64: 105 },
  finit_module: { x86_64: 313, aarch64: 273 },
  delete_module: { x86_64: 176, aarch64: 106 },
  create_module: { x86_64: 174 },
  get_kernel_syms: { x86_64: 177 },
  query_module: { x86_64: 178 },
  // other processes' memory and files
  ptrace: { x86_64: 101, aarch64: 117 },
  process_vm_readv: { x86_64: 310, aarch64: 270 },
  process_vm_writev: { x86_64: 311, aarch64: 271 },
  kcmp: { x86_64: 312, aarch64: 272 },
  pidfd_getfd: { x86_64: 438, aarch64: 438 },
  name_to_handle_at: { x86_64: 303, aarch64: 264 },
  open_by_handle_at: { x86_64: 304, aarch64: 265 },
  // the machine: clocks, swap, power, accounting, quotas, I/O ports, the kernel log
  settimeofday: { x86_64: 164, aarch64: 170 },
  clock_settime: { x86_64: 227, aarch64: 112 },
  clock_adjtime: { x86_64: 305, aarch64: 266 },
  adjtimex: { x86_64: 159, aarch64: 171 },
  swapon: { x86_64: 167, aarch64: 224 },
  swapoff: { x86_64: 168, aarch64: 225 },
  reboot: { x86_64: 169, aarch64: 142 },
  acct: { x86_64: 163, aarch64: 89 },
  quotactl: { x86_64: 179, aarch64: 60 },
  quotactl_fd: { x86_64: 443, aarch64: 443 },
  iopl: { x86_64: 172 },
  ioperm: { x86_64: 173 },
  syslog: { x86_64: 103, aarch64: 116 },
  vhangup: { x86_64: 153, aarch64: 58 },
  fanotify_init: { x86_64: 300, aarch64: 262 },
  lookup_dcookie: { x86_64: 212, aarch64: 18 },
  nfsservctl: { x86_64: 180, aarch64: 42 },
  uselib: { x86_64: 134 },
  ustat: { x86_64: 136 },
  sysfs: { x86_64: 139 },
  _sysctl: { x86_64: 156 },
  move_pages: { x86_64: 279, aarch64: 239 },
  migrate_pages: { x86_64: 256, aarch64: 238 },
  // kernel attack surface a snippet never needs
  userfaultfd: { x86_64: 323, aarch64: 282 },
  io_uring_setup: { x86_64: 425, aarch64: 425 },
  io_uring_enter: { x86_64: 426, aarch64: 426 },
  io_uring_register: { x86_64: 427, aarch64: 427 },
};

const CLONE = { x86_64: 56, aarch64: 220 } as const;
const CLONE3 = { x86_64: 435, aarch64: 435 } as const;
const PERSONALITY = { x86_64: 135, aarch64: 92 } as const;

/** The names the filter denies (EPERM), for doctor and the docs; clone with namespace flags and clone3 besides. */
export const DENIED_SYSCALLS: readonly string[] = Object.keys(SYSCALLS);

/** CLONE_NEWTIME | NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET. */
export const CLONE_NAMESPACE_FLAGS = 0x80 | 0x20000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000;
/** personality() values Docker's profile keeps: PER_LINUX, PER_LINUX32, UNAME26, both, and the query. */
const PERSONALITY_OK = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];

const AUDIT_ARCH: Record<SeccompArch, number> = { x86_64: 0xc000003e, aarch64: 0xc00000b7 };
const X32_SYSCALL_BIT = 0x40000000;

const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
const EPERM = 1;
const ENOSYS = 38;

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JSET_K = 0x45;
const RET_K = 0x06;

/** struct seccomp_data offsets: nr, arch, then args[6] as u64 (little-endian: the low word first). */
const OFF_NR = 0;
const OFF_ARCH = 4;
const OFF_ARG0_LO = 16;

type Label = 'allow' | 'eperm' | 'enosys' | 'clone' | 'personality';
type Insn =
  | { op: 'ld'; k: number }
  | { op: 'jeq' | 'jset'; k: number; jt: Label | null; jf: Label | null }
  | { op: 'ret'; k: number }
  | { op: 'label'; name: Label };

export function hostSeccompArch(arch: string = nodeArch()): SeccompArch | null {
  if (arch === 'x64') return 'x86_64';
  if (arch === 'arm64') return 'aarch64';
  return null;
}

/** The program as bytes: an array of `struct sock_filter` (u16 code, u8 jt, u8 jf, u32 k), little-endian (as both architectures are). */
export function seccompFilter(arch: SeccompArch): Buffer {
  const prog: Insn[] = [
    { op: 'ld', k: OFF_ARCH },
    { op: 'jeq', k: AUDIT_ARCH[arch], jt: null, jf: 'enosys' },
    { op: 'ld', k: OFF_NR },
  ];
  if (arch === 'x86_64') prog.push({ op: 'jset', k: X32_SYSCALL_BIT, jt: 'enosys', jf: null });
  for (const nrs of Object.values(SYSCALLS)) {
    const nr = nrs[arch];
    if (nr !== undefined) prog.push({ op: 'jeq', k: nr, jt: 'eperm', jf: null });
  }
  prog.push({ op: 'jeq', k: CLONE3[arch], jt: 'enosys', jf: null });
  prog.push({ op: 'jeq', k: CLONE[arch], jt: 'clone', jf: null });
  prog.push({ op: 'jeq', k: PERSONALITY[arch], jt: 'personality', jf: null });
  prog.push({ op: 'ret', k: RET_ALLOW });
  // Classic BPF jumps only forward: the blocks that look at arguments come after, then the verdicts.
  prog.push({ op: 'label', name: 'clone' }, { op: 'ld', k: OFF_ARG0_LO });
  prog.push({ op: 'jset', k: CLONE_NAMESPACE_FLAGS, jt: 'eperm', jf: 'allow' });
  prog.push({ op: 'label', name: 'personality' }, { op: 'ld', k: OFF_ARG0_LO });
  for (const v of PERSONALITY_OK) prog.push({ op: 'jeq', k: v, jt: 'allow', jf: null });
  prog.push({ op: 'label', name: 'eperm' }, { op: 'ret', k: RET_ERRNO | EPERM });
  prog.push({ op: 'label', name: 'enosys' }, { op: 'ret', k: RET_ERRNO | ENOSYS });
  prog.push({ op: 'label', name: 'allow' }, { op: 'ret', k: RET_ALLOW });
  return assemble(prog);
}

/** Resolves labels to relative jumps (jt/jf count the instructions skipped, at most 255). */
function assemble(prog: Insn[]): Buffer {
  const at = new Map<Label, number>();
  const code: Exclude<Insn, { op: 'label' }>[] = [];
  for (const i of prog) {
    if (i.op === 'label') at.set(i.name, code.length);
    else code.push(i);
  }
  const buf = Buffer.alloc(code.length * 8);
  const rel = (from: number, to: Label | null): number => {
    if (to === null) return 0;
    const target = at.get(to);
    if (target === undefined) throw new Error(`seccomp: no label ${to}`);
    const d = target - from - 1;
    if (d < 0 || d > 255) throw new Error(`seccomp: jump to ${to} out of range (${d})`);
    return d;
  };
  code.forEach((i, n) => {
    const o = n * 8;
    const le = (v: number, off: number, bytes: 2 | 4) => (bytes === 2 ? buf.writeUInt16LE(v, off) : buf.writeUInt32LE(v >>> 0, off));
    if (i.op === 'ld') {
      le(LD_W_ABS, o, 2);
      le(i.k, o + 4, 4);
    } else if (i.op === 'ret') {
      le(RET_K, o, 2);
      le(i.k, o + 4, 4);
    } else {
      le(i.op === 'jeq' ? JEQ_K : JSET_K, o, 2);
      buf.writeUInt8(rel(n, i.jt), o + 2);
      buf.writeUInt8(rel(n, i.jf), o + 3);
      le(i.k, o + 4, 4);
    }
  });
  return buf;
}
