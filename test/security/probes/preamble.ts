/**
 * The shared helpers every escape probe body can use (test/security/probes/table.ts), one set per runtime.
 * Raw syscalls go through libc's `syscall()` (x86_64 numbers): bun:ffi from Bun, ctypes from Python.
 *
 * Each probe body returns `R(succeeded, detail)`: `succeeded` means the attack worked (the sandbox did not
 * hold); a probe that could not be tried throws, and the harness reports it as attempted=false.
 */

/** Helpers for Bun bodies; `FFI` is bun:ffi (imported in a snippet, required in a helper process). */
export const BUN_HELPERS = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const ERRNO = { 1: 'EPERM', 2: 'ENOENT', 3: 'ESRCH', 4: 'EINTR', 5: 'EIO', 6: 'ENXIO', 8: 'ENOEXEC', 9: 'EBADF', 10: 'ECHILD', 11: 'EAGAIN',
  12: 'ENOMEM', 13: 'EACCES', 14: 'EFAULT', 16: 'EBUSY', 17: 'EEXIST', 19: 'ENODEV', 20: 'ENOTDIR', 21: 'EISDIR', 22: 'EINVAL', 24: 'EMFILE',
  25: 'ENOTTY', 28: 'ENOSPC', 30: 'EROFS', 38: 'ENOSYS', 93: 'EPROTONOSUPPORT', 95: 'EOPNOTSUPP', 97: 'EAFNOSUPPORT', 101: 'ENETUNREACH',
  111: 'ECONNREFUSED', 116: 'ESTALE', 125: 'ECANCELED' };
let libc = null;
let libcError = null;
try {
  const I = FFI.FFIType.i64;
  libc = FFI.dlopen('libc.so.6', {
    syscall: { args: [I, I, I, I, I, I, I], returns: I },
    __errno_location: { args: [], returns: FFI.FFIType.ptr },
  });
} catch (e) {
  libcError = String(e);
}
/** A raw syscall: numbers as they are, strings as C strings, Buffers/TypedArrays as pointers. */
function sys(nr, ...args) {
  if (!libc) throw new Error('bun:ffi cannot open libc: ' + libcError);
  const keep = args.map((x) => (typeof x === 'string' ? Buffer.from(x + '\0') : x));
  const a = keep.map((x) => (x === null || x === undefined ? 0 : typeof x === 'object' ? FFI.ptr(x) : x));
  while (a.length < 6) a.push(0);
  const ret = Number(libc.symbols.syscall(nr, ...a));
  const errno = ret === -1 ? FFI.read.i32(libc.symbols.__errno_location(), 0) : 0;
  return { ret, errno, e: ret === -1 ? ERRNO[errno] || 'errno ' + errno : 'ok', keep };
}
const okRet = (s) => s.ret >= 0;
/** The permission check passed: the call succeeded, or failed later than the check (bad arguments). */
const passedPerm = (s) => s.ret >= 0 || !['EPERM', 'EACCES', 'ENOSYS'].includes(s.e);
const R = (succeeded, detail) => ({ attempted: true, succeeded: !!succeeded, detail: String(detail).slice(0, 3000) });
function tryDo(fn) {
  try {
    return { ok: true, v: fn() };
  } catch (e) {
    return { ok: false, err: (e && e.code) || String((e && e.message) || e) };
  }
}
const show = (t) => (t.ok ? 'ok' : t.err);
function openW(path) {
  return tryDo(() => fs.closeSync(fs.openSync(path, fs.constants.O_WRONLY)));
}
function openR(path) {
  return tryDo(() => fs.closeSync(fs.openSync(path, fs.constants.O_RDONLY)));
}
function readText(path, max = 65536) {
  return tryDo(() => {
    const fd = fs.openSync(path, 'r');
    try {
      const b = Buffer.alloc(max);
      const n = fs.readSync(fd, b, 0, max, null);
      return b.subarray(0, n).toString('latin1');
    } finally {
      fs.closeSync(fd);
    }
  });
}
function selfStatus() {
  const t = fs.readFileSync('/proc/self/status', 'utf8');
  const out = {};
  for (const line of t.split('\n')) {
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1).trim();
  }
  return out;
}
function pids() {
  return fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number);
}
/** Runs argv; {code, out, err} or {spawnError}. */
function run(argv, opts = {}) {
  try {
    const p = Bun.spawnSync({ cmd: argv, stdin: opts.stdin ?? 'ignore', stdout: 'pipe', stderr: 'pipe', timeout: opts.timeout ?? 10000 });
    return { code: p.exitCode, signal: p.signalCode ?? null, out: p.stdout.toString().slice(0, 2000), err: p.stderr.toString().slice(0, 2000) };
  } catch (e) {
    return { spawnError: String(e && e.code || e) };
  }
}
/** A TCP or unix connect: 'connected' or the error code. */
function connect(opts, ms = 3000) {
  return new Promise((resolve) => {
    let done = false;
    const s = net.connect(opts);
    const end = (v) => {
      if (done) return;
      done = true;
      clearTimeout(t);
      s.destroy();
      resolve(v);
    };
    const t = setTimeout(() => end('timeout'), ms);
    s.once('connect', () => end('connected'));
    s.once('error', (e) => end(e.code || String(e)));
  });
}
/** struct sockaddr_un for a path or an abstract name (leading NUL). */
function sockaddrUn(name) {
  const b = Buffer.alloc(110);
  b.writeUInt16LE(1, 0);
  const n = Buffer.from(name, 'latin1');
  n.copy(b, 2);
  return { buf: b, len: 2 + n.length + (name.startsWith('\0') ? 0 : 1) };
}
/** connect() through raw syscalls: 'connected' or the errno name. */
function rawUnixConnect(name) {
  const s = sys(41, 1, 1 | 0x80000, 0);
  if (s.ret < 0) return 'socket ' + s.e;
  const a = sockaddrUn(name);
  const c = sys(42, s.ret, a.buf, a.len);
  sys(3, s.ret);
  return c.ret === 0 ? 'connected' : c.e;
}
/** A fresh Bun process running body (with these helpers) and printing its JSON result. */
function inHelper(body, timeout = 15000) {
  const src = 'const FFI = require("bun:ffi");\n' + HELPER_SRC + '\nconst __r = (() => {\n' + body + '\n})();\nprocess.stdout.write(JSON.stringify(__r));';
  const p = run([process.execPath, '-e', src], { timeout });
  if (p.spawnError) throw new Error('cannot start a helper: ' + p.spawnError);
  try {
    return JSON.parse(p.out);
  } catch {
    throw new Error('helper said: ' + JSON.stringify(p).slice(0, 1500));
  }
}
`;

/** Helpers for Python bodies (module level of the snippet; each probe runs in a forked child). */
export const PY_HELPERS = String.raw`
import ctypes, errno as _errno, json, os, select, signal, socket, struct, subprocess, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def sysc(nr, *args):
    a = []
    keep = []
    for x in args:
        if x is None:
            a.append(ctypes.c_long(0))
        elif isinstance(x, str):
            b = ctypes.create_string_buffer(x.encode('latin1'))
            keep.append(b)
            a.append(b)
        elif isinstance(x, (bytes, bytearray)):
            b = ctypes.create_string_buffer(bytes(x), max(len(x), 1))
            keep.append(b)
            a.append(b)
        elif isinstance(x, ctypes.Array):
            a.append(x)
        else:
            a.append(ctypes.c_long(x))
    ctypes.set_errno(0)
    ret = libc.syscall(ctypes.c_long(nr), *a)
    e = ctypes.get_errno() if ret == -1 else 0
    return {'ret': ret, 'errno': e, 'e': (_errno.errorcode.get(e, 'errno %d' % e) if ret == -1 else 'ok')}

def ok_ret(s):
    return s['ret'] >= 0

def passed_perm(s):
    return s['ret'] >= 0 or s['e'] not in ('EPERM', 'EACCES', 'ENOSYS')

def R(succeeded, detail):
    return {'attempted': True, 'succeeded': bool(succeeded), 'detail': str(detail)[:3000]}

def try_do(fn):
    try:
        return {'ok': True, 'v': fn()}
    except OSError as e:
        return {'ok': False, 'err': _errno.errorcode.get(e.errno, str(e)) if e.errno else str(e)}
    except Exception as e:
        return {'ok': False, 'err': type(e).__name__ + ': ' + str(e)}

def show(t):
    return 'ok' if t['ok'] else t['err']

def open_w(path):
    return try_do(lambda: os.close(os.open(path, os.O_WRONLY)))

def open_r(path):
    return try_do(lambda: os.close(os.open(path, os.O_RDONLY)))

def read_text(path, limit=65536):
    def rd():
        with open(path, 'rb') as f:
            return f.read(limit).decode('latin1')
    return try_do(rd)

def self_status():
    out = {}
    with open('/proc/self/status') as f:
        for line in f:
            k, _, v = line.partition(':')
            out[k] = v.strip()
    return out

def pids():
    return [int(n) for n in os.listdir('/proc') if n.isdigit()]

def run(argv, timeout=10, stdin=None):
    try:
        p = subprocess.run(argv, stdin=stdin if stdin is not None else subprocess.DEVNULL, capture_output=True, timeout=timeout)
        return {'code': p.returncode, 'out': p.stdout.decode('latin1')[:2000], 'err': p.stderr.decode('latin1')[:2000]}
    except Exception as e:
        return {'spawnError': type(e).__name__ + ': ' + str(e)}

def connect(addr, family=socket.AF_INET, timeout=3):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(addr)
        return 'connected'
    except OSError as e:
        return _errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__
    finally:
        s.close()
`;
