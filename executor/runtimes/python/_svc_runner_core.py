"""The Python runner (its entry is svc_runner.py, which imports this module so that its bytecode is cached):
loads one version's bundle once, then serves invocations over fd 3 with the NDJSON frames of
executor/protocol.ts (read that file for the contract).

    PYTHON -u executor/runtimes/python/svc_runner.py --bundle DIR --entry main.py      (fd 3 open)

One invocation at a time, on the main thread. Between invocations the main thread reads fd 3 itself, so a
warm call is one wakeup of one thread (no handoff between threads, no contention for the GIL). While a host
call waits for its reply, a helper thread reads fd 3 instead (the handler is busy): `reply` frames wake the
call waiting for them, any `invoke` frame goes to a queue the main thread serves; the helper parks again
once no call is pending (see "frames in"). sys.stdout / sys.stderr
writes made while an invocation runs become its `log` frames (capped per invocation); outside one they
reach the real streams. Host calls (svc.store, svc.integrations) go through svc._host, which this runner
fills in at start-up. Exits when fd 3 closes.

Start-up is kept lean: JSON goes through the C accelerator `_json` directly (the json package imports
`re`, ~7 ms in a fresh interpreter), threads and locks through `_thread`; asyncio and traceback are
imported only when first needed.
"""
import _json
import _thread
from _queue import SimpleQueue
import os
import sys
import time

import _svc_egress_relay

FD = 3
# Keep in step with MAX_FRAME_BYTES in executor/protocol.ts.
MAX_FRAME_BYTES = 8 * 1024 * 1024
# A chunk or result whose JSON is longer than this is refused (the envelope fits in the rest).
MAX_PAYLOAD_BYTES = MAX_FRAME_BYTES - 64 * 1024
# stdout + stderr kept per invocation; the rest is dropped and counted (logs_dropped on the result).
LOG_CAP_BYTES = 1024 * 1024
# Partial lines are held back until a newline, a frame or the end of the invocation, up to this size.
LOG_HOLD_CHARS = 8192
HOST_OPS = frozenset(("store.get", "store.set", "store.delete", "store.list", "integrations.call"))

RUNNER_DIR = os.path.dirname(os.path.abspath(__file__))
# The runner's own files: their frames never show in a tenant's traceback.
RUNNER_FILES = frozenset(
    os.path.join(RUNNER_DIR, name)
    for name in ("_svc_runner_core.py", "_svc_egress_relay.py", "svc_runner.py", "_svc_agent_hooks.py", "_svc_debug.py")
)


# ---- JSON, the way json.dumps / json.loads do it in C (same output, same error messages) -----------------


def _unserialisable(o):
    raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)


def _dumps(value, allow_nan=False):
    """Compact JSON of `value` (json.dumps(value, separators=(",", ":"), allow_nan=...))."""
    # A fresh encoder per call: its circular-reference markers are left dirty by an exception.
    encode = _json.make_encoder({}, _unserialisable, _json.encode_basestring_ascii, None, ":", ",", False, False, allow_nan)
    return "".join(encode(value, 0))


def _dumps_loose(value):
    return _dumps(value, True)


class _DecodeContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
    memo = None


_scan_once = _json.make_scanner(_DecodeContext())
_WS = " \t\n\r"


def _loads(data):
    """json.loads for one frame line (bytes); ValueError when it is not one JSON value."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    start = len(text) - len(text.lstrip(_WS))
    try:
        value, end = _scan_once(text, start)
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip(_WS):
        raise ValueError("extra data after the JSON value")
    return value


def _note(message):
    try:
        _real_stderr.write("[svc-runner] %s\n" % message)
        _real_stderr.flush()
    except Exception:
        pass


# ---- frames out ----------------------------------------------------------------------------------------

_write_lock = _thread.allocate_lock()


def _write_line(text):
    """Writes one whole line to fd 3; frames never interleave and leave in the order they were made."""
    data = text.encode("utf-8", "surrogatepass")
    with _write_lock:
        try:
            n = os.write(FD, data)  # one write is the usual case (a frame under the socket's buffer)
            if n == len(data):
                return
            view = memoryview(data)[n:]
            while view:
                n = os.write(FD, view)
                view = view[n:]
        except (BrokenPipeError, ConnectionResetError, OSError) as e:
            if isinstance(e, (BrokenPipeError, ConnectionResetError)) or getattr(e, "errno", None) == 9:  # EBADF
                os._exit(0)  # the executor is gone
            raise


def _send(frame):
    _write_line(_dumps_loose(frame) + "\n")


# ---- JSON checks ---------------------------------------------------------------------------------------


class _NotJson(Exception):
    pass


def _to_json(value, what):
    try:
        text = _dumps(value)
    except RecursionError:
        raise _NotJson("%s is not JSON-serialisable: it is nested too deeply (or contains a circular reference)" % what) from None
    except (TypeError, ValueError) as e:
        raise _NotJson("%s is not JSON-serialisable: %s" % (what, e)) from None
    if len(text) > MAX_PAYLOAD_BYTES:
        raise _NotJson("%s is too large to send: %d bytes of JSON, at most %d" % (what, len(text), MAX_PAYLOAD_BYTES))
    return text


# ---- the current invocation and its logs ---------------------------------------------------------------


class _Invocation:
    __slots__ = ("id", "id_json", "log_bytes", "truncated", "dropped", "done", "t0")

    def __init__(self, inv_id):
        self.t0 = time.perf_counter()  # the agent steps' clock (at_ms)
        self.id = inv_id
        self.id_json = _json.encode_basestring_ascii(inv_id)  # a str (_valid_invoke): what _dumps makes of it
        self.log_bytes = 0
        self.truncated = False
        self.dropped = 0
        self.done = False


_current = None


def _emit_log(inv, stream, data):
    if inv.done or not data:
        return
    size = len(data.encode("utf-8", "surrogatepass"))
    if inv.truncated:
        inv.dropped += size
        return
    if inv.log_bytes + size > LOG_CAP_BYTES:
        room = LOG_CAP_BYTES - inv.log_bytes
        head = data.encode("utf-8", "surrogatepass")[: max(room, 0)].decode("utf-8", "ignore")
        inv.truncated = True
        inv.dropped += size - len(head.encode("utf-8", "surrogatepass"))
        inv.log_bytes = LOG_CAP_BYTES
        if not head:
            return
        data = head
    else:
        inv.log_bytes += size
    _write_line('{"t":"log","id":%s,"stream":"%s","data":%s}\n' % (inv.id_json, stream, _dumps_loose(data)))


class _LogStream:
    """Stands in for sys.stdout / sys.stderr for the runner's whole life (so references taken at import
    time, e.g. by logging, are captured too): an invocation's writes become its log frames, line by line;
    anything else goes to the real stream."""

    encoding = "utf-8"
    errors = "surrogateescape"

    def __init__(self, name, real):
        self._name = name
        self._real = real
        self._hold = []
        self._held = 0
        self._lock = _thread.allocate_lock()

    def write(self, s):
        if _current is None:
            return len(s) if _muted else self._real.write(s)
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        with self._lock:
            self._hold.append(s)
            self._held += len(s)
            if "\n" not in s and self._held < LOG_HOLD_CHARS:
                return len(s)
            text = "".join(self._hold)
            if self._held < LOG_HOLD_CHARS:
                cut = text.rfind("\n") + 1
                self._hold = [text[cut:]] if cut < len(text) else []
                self._held = len(text) - cut
                text = text[:cut]
            else:
                self._hold = []
                self._held = 0
        inv = _current
        if inv is not None:
            _emit_log(inv, self._name, text)
        return len(s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def _drain(self, inv):
        if not self._hold:  # nothing held (a write racing this check is one made after the drain)
            return
        with self._lock:
            if not self._hold:
                return
            text = "".join(self._hold)
            self._hold = []
            self._held = 0
        if inv is not None:
            _emit_log(inv, self._name, text)

    def flush(self):
        inv = _current
        if inv is not None:
            self._drain(inv)
        else:
            self._real.flush()

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def seekable(self):
        return False

    def fileno(self):
        return self._real.fileno()

    def __getattr__(self, name):
        return getattr(self._real, name)


# While a spare's warm-up runs (before any bundle): what it prints is dropped.
_muted = False
_real_stdout = sys.stdout
_real_stderr = sys.stderr
_stdout = _LogStream("stdout", _real_stdout)
_stderr = _LogStream("stderr", _real_stderr)
sys.stdout = _stdout
sys.stderr = _stderr


def _drain_logs(inv):
    _stdout._drain(inv)
    _stderr._drain(inv)


# ---- env -----------------------------------------------------------------------------------------------

_base_env = dict(os.environ)
_invocation_env_keys = ()


def _apply_env(env):
    global _invocation_env_keys
    environ = os.environ
    for key in _invocation_env_keys:
        if key in env:
            continue
        base = _base_env.get(key)
        if base is None:
            environ.pop(key, None)
        else:
            environ[key] = base
    for key, value in env.items():
        environ[key] = value
    _invocation_env_keys = tuple(env)
    # The way out stays the relay whatever the invocation's env (or code run before it) says; a value already
    # right is not set again (a read costs half a putenv).
    get = environ.get
    for key, value in _egress_env.items():
        if get(key) != value:
            environ[key] = value


# ---- egress --------------------------------------------------------------------------------------------
#
# The way out of the sandbox: the relay of _svc_egress_relay.py (docs/egress-relay.md), started before the
# bundle loads, on its own thread.

_egress_env = {}
_egress = None


def _start_egress():
    """Starts the relay when the executor gave a way out (SVC_EGRESS_SOCKET); before any tenant code runs."""
    global _egress
    path = os.environ.get("SVC_EGRESS_SOCKET")
    if not path:
        return
    relay = _svc_egress_relay.start(path, lambda: _current.id if _current is not None else None, _note)
    if relay is None:
        return
    _egress_env.update(relay.env)
    os.environ.update(_egress_env)
    _base_env.update(_egress_env)
    _egress = relay


# ---- debug runs ----------------------------------------------------------------------------------------


def _start_debug():
    """A debug run (SVC_DEBUG, executor/debug/types.ts): debugpy listens, relayed to the host, and a debugger has
    attached when this returns (_svc_debug.py). Loaded by its path, and only here: a normal run never imports it."""
    spec_from_file_location, module_from_spec = _import_helpers()
    spec = spec_from_file_location("_svc_debug", os.path.join(RUNNER_DIR, "_svc_debug.py"))
    module = module_from_spec(spec)
    spec.loader.exec_module(module)
    for key in module.start(RUNNER_DIR, _note):
        _base_env.pop(key, None)


# ---- host calls ----------------------------------------------------------------------------------------

_pending = {}
_pending_lock = _thread.allocate_lock()
_call_seq = [0]


def _refuse(code, message):
    return {"t": "reply", "ok": False, "error": {"code": code, "message": message}}


def _start_call(op, args, on_reply):
    """Sends a call frame; on_reply(frame) runs on the reader thread. Returns a refusal frame instead when
    the call cannot be made."""
    inv = _current
    if inv is None or inv.done:
        return _refuse("no_invocation", "%s: host calls can only be made while a handler runs" % op)
    if op not in HOST_OPS:
        return _refuse("unknown_op", "unknown host operation %r" % (op,))
    if not isinstance(args, dict):
        return _refuse("bad_args", "%s: the arguments must be a dict" % op)
    try:
        args_json = _to_json(args, "the arguments of %s" % op)
    except _NotJson as e:
        return _refuse("bad_args", str(e))
    with _read_lock:
        # Under the lock that hands fd 3 between the threads: once the invocation has ended (_release) the
        # main thread may be reading fd 3 itself, and a late call must not start the helper beside it.
        if inv.done:
            return _refuse("no_invocation", "%s: host calls can only be made while a handler runs" % op)
        with _pending_lock:
            _call_seq[0] += 1
            cid = "c%d" % _call_seq[0]
            _pending[cid] = on_reply
        _helper_read()
    _drain_logs(inv)
    _write_line('{"t":"call","id":%s,"cid":"%s","op":"%s","args":%s}\n' % (inv.id_json, cid, op, args_json))
    return None


def call_sync(op, args):
    """Blocks the calling thread until the reply arrives; returns the reply frame."""
    done = _thread.allocate_lock()
    done.acquire()
    box = []

    def on_reply(frame):
        box.append(frame)
        done.release()

    refused = _start_call(op, args, on_reply)
    if refused is not None:
        return refused
    done.acquire()  # released by the reader thread when the reply arrives
    return box[0]


async def call_async(op, args):
    """Awaits the reply on the running event loop; returns the reply frame."""
    import asyncio

    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(frame):
        if not future.done():
            future.set_result(frame)

    def on_reply(frame):
        try:
            loop.call_soon_threadsafe(settle, frame)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    refused = _start_call(op, args, on_reply)
    if refused is not None:
        return refused
    return await future


def _on_reply(frame):
    with _pending_lock:
        on_reply = _pending.pop(frame["cid"], None)
    if on_reply is None:
        _note("reply for unknown call %r ignored" % (frame["cid"],))
        return
    on_reply(frame)


_svc_dir = ""


def _register_host():
    """Hands our call functions to svc._host (when the svc package is installed)."""
    global _svc_dir
    try:
        from svc import _host as svc_host
    except ImportError:
        return
    svc_host._register(call_sync, call_async)
    _svc_dir = os.path.dirname(os.path.abspath(svc_host.__file__)) + os.sep


# ---- agent steps ---------------------------------------------------------------------------------------
#
# LangChain / LangGraph steps come from the frameworks' own hooks (_svc_agent_hooks.py), installed right after
# langchain_core's tracer context or LangGraph's Pregel is imported (by the bundle, a framework spare or a
# handler). Until then nothing of it is loaded: a plain snippet pays one name check per import it makes.

_AGENT_TRIGGERS = frozenset(("langchain_core.tracers.context", "langgraph.pregel.main"))
_agent_hooks = None


def _install_agent_hooks():
    global _agent_hooks
    try:
        if _agent_hooks is None:
            # By its path: the runner's directory is not on sys.path once the bundle's is (main()).
            spec_from_file_location, module_from_spec = _import_helpers()
            spec = spec_from_file_location("_svc_agent_hooks", os.path.join(RUNNER_DIR, "_svc_agent_hooks.py"))
            module = module_from_spec(spec)
            spec.loader.exec_module(module)
            _agent_hooks = module
        if _agent_hooks.install(sys.modules[__name__]):
            _remove_import_watch()
    except Exception as exc:  # noqa: BLE001 - no steps, the snippet runs on
        _note("agent steps are off: %s: %s" % (type(exc).__name__, exc))
        _remove_import_watch()


class _ThenInstall:
    """A module's loader, then the agent hooks once the module has run."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _install_agent_hooks()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _ImportWatch:
    """On sys.meta_path: finds nothing itself; for the trigger modules, wraps the real finder's loader."""

    def find_spec(self, name, path=None, target=None):
        if name not in _AGENT_TRIGGERS:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenInstall(spec.loader)
                return spec
        return None


_import_watch = _ImportWatch()


def _watch_imports():
    if any(name in sys.modules for name in _AGENT_TRIGGERS):
        _install_agent_hooks()
    if _import_watch not in sys.meta_path:
        sys.meta_path.insert(0, _import_watch)


def _remove_import_watch():
    try:
        sys.meta_path.remove(_import_watch)
    except ValueError:
        pass


# ---- tracebacks ----------------------------------------------------------------------------------------

_bundle_prefix = ""


def _relative(path):
    if _bundle_prefix and isinstance(path, str) and path.startswith(_bundle_prefix):
        return path[len(_bundle_prefix):]
    return path


def _internal(filename):
    if filename in RUNNER_FILES or filename.startswith("<frozen importlib"):
        return True
    if _svc_dir and filename.startswith(_svc_dir):
        return True  # our own libraries: a failed host call's traceback ends at the tenant's line
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        base = os.path.dirname(asyncio.__file__) + os.sep
        if filename.startswith(base):
            return True
    return False


def _filter_tb(te, seen):
    import traceback

    if id(te) in seen:
        return
    seen.add(id(te))
    kept = []
    for frame in te.stack:
        if _internal(frame.filename):
            continue
        frame.line  # read the source line before the file name changes
        frame.filename = _relative(frame.filename)
        kept.append(frame)
    te.stack = traceback.StackSummary.from_list(kept)
    if getattr(te, "filename", None):
        te.filename = _relative(te.filename)
    for nested in (te.__cause__, te.__context__):
        if nested is not None:
            _filter_tb(nested, seen)
    for nested in getattr(te, "exceptions", None) or ():
        _filter_tb(nested, seen)


def _describe(exc):
    """(message, stack) of an exception, as the tenant's code produced it."""
    try:
        text = str(exc)
    except Exception:
        text = "<str() of the exception failed>"
    name = type(exc).__name__
    message = "%s: %s" % (name, text) if text else name
    if _bundle_prefix:
        message = message.replace(_bundle_prefix, "")
    try:
        import traceback

        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        _filter_tb(te, set())
        stack = "".join(te.format()).rstrip("\n")
    except Exception as e:  # a broken __str__ or the like: the message must still get out
        stack = "%s\n(traceback unavailable: %s)" % (message, type(e).__name__)
    return message, stack


# ---- load the bundle -----------------------------------------------------------------------------------


def _parse_args(argv):
    opts = {}
    i = 1
    while i < len(argv):
        if argv[i] in ("--bundle", "--entry", "--preload", "--warmup") and i + 1 < len(argv):
            opts[argv[i][2:]] = argv[i + 1]
            i += 2
        else:
            i += 1
    return opts


def _import_helpers():
    """importlib.util's spec_from_file_location and module_from_spec, from the frozen modules the
    interpreter has already loaded (importlib.util itself pulls in contextlib and collections: ~3 ms)."""
    try:
        import _frozen_importlib
        import _frozen_importlib_external

        return _frozen_importlib_external.spec_from_file_location, _frozen_importlib.module_from_spec
    except (ImportError, AttributeError):
        import importlib.util

        return importlib.util.spec_from_file_location, importlib.util.module_from_spec


def _load(bundle_dir, entry):
    """Imports the entry module once. Returns the handler, or None after sending init_error."""
    entry_path = os.path.join(bundle_dir, entry)
    rel = os.path.relpath(entry_path, bundle_dir)
    module_name = rel[:-3] if rel.endswith(".py") else rel
    module_name = module_name.replace(os.sep, ".")
    if module_name.endswith(".__init__"):
        module_name = module_name[: -len(".__init__")]
    t0 = time.perf_counter()
    try:
        spec_from_file_location, module_from_spec = _import_helpers()
        spec = spec_from_file_location(module_name, entry_path)
        if spec is None or spec.loader is None:
            raise ImportError("cannot load %s" % rel)
        module = module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
    except BaseException as exc:
        message, stack = _describe(exc)
        _send({"t": "init_error", "message": message, "stack": stack})
        return None
    init_ms = (time.perf_counter() - t0) * 1000
    handler = getattr(module, "handler", None)
    if not callable(handler):
        _send({"t": "init_error", "message": "%s defines no handler: add `def handler(input): ...`" % rel})
        return None
    v = sys.version_info
    _send({"t": "ready", "init_ms": round(init_ms, 3), "runtime": {"name": "python", "version": "%d.%d.%d" % (v[0], v[1], v[2])}})
    return handler


def _warm_up(file):
    """A framework spare's warm-up (a _svc_warmup_*.py beside this file, executor/import-profile.ts): one agent run of
    our own, in this process, before any bundle, then the TLS contexts a first run builds made ahead (see that file).
    The module is run without being put in sys.modules; what it prints and warns is dropped (a warning shown here
    would not be shown to the snippet); the environment is put back as it was. Returns the `preloaded` frame's
    warmup_ms (and warmup_failed: the spare serves anyway)."""
    global _muted
    t0 = time.perf_counter()
    out = {}
    env = dict(os.environ)
    if not (file.startswith("_svc_warmup_") and file.endswith(".py") and os.sep not in file):
        out["warmup_failed"] = "not a warm-up file: %s" % file
    else:
        import gc
        import warnings

        _muted = True
        try:
            spec_from_file_location, module_from_spec = _import_helpers()
            spec = spec_from_file_location("_svc_warmup", os.path.join(RUNNER_DIR, file))
            module = module_from_spec(spec)
            spec.loader.exec_module(module)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module.warm_up()
                module.prebuild_ssl_contexts()
        except BaseException as exc:  # noqa: BLE001 - a spare whose warm-up failed still serves
            out["warmup_failed"] = ("%s: %s" % (type(exc).__name__, exc))[:500]
            _note("the warm-up %s failed: %s" % (file, out["warmup_failed"]))
        finally:
            _muted = False
            if dict(os.environ) != env:
                os.environ.clear()
                os.environ.update(env)
            module = spec = None
            gc.collect()
    out["warmup_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    return out


def _preload(names, warmup=None):
    """A spare's imports (a framework spare's, executor/import-profile.ts; none for a plain one), made before any
    bundle is given and before the bundle dir is on sys.path, then a `preloaded` frame (the spare is up: the host
    may cap it and hand it a bundle) naming the top-level modules they added: a bundle that
    defines one of those names (it would shadow it in a fresh runner) is not given to this spare. One that
    fails is noted and left to the snippet."""
    t0 = time.perf_counter()
    before = set(sys.modules)
    failed = []
    for name in [n for n in names.split(",") if n]:
        try:
            __import__(name)
        except BaseException as exc:  # noqa: BLE001 - a spare that cannot preload still serves as a plain one
            failed.append(name)
            _note("preloading %s failed: %s: %s" % (name, type(exc).__name__, exc))
    frame = {"t": "preloaded", "ms": round((time.perf_counter() - t0) * 1000, 3)}
    if failed:
        frame["failed"] = failed
    elif warmup:
        frame.update(_warm_up(warmup))
    # After the warm-up: what it imported would be shadowed by a bundle's module of the same name too.
    frame["modules"] = sorted({m.split(".")[0] for m in set(sys.modules) - before})
    _send(frame)


# ---- serve ---------------------------------------------------------------------------------------------

_loop = None


def _event_loop():
    """One asyncio event loop for the runner's life, made on first use."""
    global _loop
    import asyncio

    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    asyncio.set_event_loop(_loop)
    return _loop


def _send_chunk(inv, value):
    data = _to_json(value, "a yielded value")
    _drain_logs(inv)
    _write_line('{"t":"chunk","id":%s,"data":%s}\n' % (inv.id_json, data))


async def _drain_async_gen(agen, inv):
    async for value in agen:
        _send_chunk(inv, value)


def _invoke(handler, frame):
    global _current
    inv = _Invocation(frame["id"])
    try:
        _apply_env(frame["env"])
    except (ValueError, OSError) as e:  # e.g. a NUL byte in a value
        _send({"t": "error", "id": inv.id, "code": "handler_error", "message": "the invocation's environment could not be set: %s" % e})
        return
    _drain_logs(None)  # partial lines a stray thread left after the previous invocation ended
    if _egress is not None:
        _egress.close_all()  # connections opened outside this invocation are not to be reused under its name
    _current = inv
    try:
        try:
            result = handler(frame["input"])
            if hasattr(result, "__await__"):
                result = _event_loop().run_until_complete(result)
            if hasattr(result, "__aiter__"):
                _event_loop().run_until_complete(_drain_async_gen(result, inv))
                result = None
            elif hasattr(result, "__next__") and hasattr(result, "send") and hasattr(result, "throw"):
                while True:
                    try:
                        value = next(result)
                    except StopIteration as stop:
                        result = stop.value
                        break
                    _send_chunk(inv, value)
            output = _to_json(result, "the return value")
        except _NotJson as e:
            _drain_logs(inv)
            _release(inv)
            _send(_with_dropped(inv, {"t": "error", "id": inv.id, "code": "handler_error", "message": str(e)}))
            return
        except BaseException as exc:
            message, stack = _describe(exc)
            exc = None
            _drain_logs(inv)
            _release(inv)
            _send(_with_dropped(inv, {"t": "error", "id": inv.id, "code": "handler_error", "message": message, "stack": stack}))
            return
        _drain_logs(inv)
        _release(inv)
        dropped = ',"logs_dropped":%d' % inv.dropped if inv.dropped else ""
        _write_line('{"t":"result","id":%s,"output":%s%s}\n' % (inv.id_json, output, dropped))
    finally:
        _release(inv)


def _release(inv):
    """Ends the invocation on this side before its last frame goes out (once): it stops naming new relay
    connections, and the ones opened under it are closed. Done after the frame, a close_all could meet a
    connection accepted once the executor had the answer (a thread's race: the relay has its own)."""
    global _current
    with _read_lock:
        inv.done = True
    if _current is not inv:
        return
    _current = None
    if _agent_hooks is not None:
        _agent_hooks.forget()
    if _egress is not None:
        _egress.close_all()


def _with_dropped(inv, frame):
    # The invocation's last frame says how much of its output was dropped past the cap.
    if inv.dropped:
        frame["logs_dropped"] = inv.dropped
    return frame


def _valid_invoke(f):
    if not isinstance(f.get("id"), str) or not isinstance(f.get("input"), dict):
        return False
    env = f.get("env")
    if not isinstance(env, dict):
        return False
    for v in env.values():
        if not isinstance(v, str):
            return False
    return True


def _handle_line(line, queue):
    if not line.strip():
        return
    try:
        frame = _loads(line)
    except ValueError:
        _note("ignored a line that is not JSON (%d bytes)" % len(line))
        return
    if not isinstance(frame, dict):
        _note("ignored a frame that is not an object")
        return
    t = frame.get("t")
    if t == "invoke":
        if _valid_invoke(frame):
            queue.put(frame)
        else:
            _note("ignored a malformed invoke frame")
    elif t == "load":
        if isinstance(frame.get("entry"), str) and frame["entry"]:
            queue.put(frame)
        else:
            _note("ignored a malformed load frame")
    elif t == "reply":
        if isinstance(frame.get("cid"), str) and isinstance(frame.get("ok"), bool):
            _on_reply(frame)
        else:
            _note("ignored a malformed reply frame")
    else:
        _note("ignored a frame of unknown type %r" % (t,))


# ---- frames in ----------------------------------------------------------------------------------------
#
# One thread at a time reads fd 3. Between invocations it is the main thread (_serve): a warm invoke wakes
# only the thread that runs it. While a host call waits for its reply the handler is busy, so the helper
# thread reads instead: _start_call turns it on (under _read_lock, with the call registered), and it turns
# itself off, under the same lock, after a read that leaves no call pending, then queues _WAKE so a main
# thread waiting on the queue goes back to reading fd 3. Whichever reads carries on the partial line the other
# left (_inbox).

_WAKE = object()
_read_lock = _thread.allocate_lock()
_helper_on = False  # the helper thread owns fd 3 (guarded by _read_lock)
_helper_go = _thread.allocate_lock()  # released to let the parked helper read
_helper_go.acquire()
_helper_started = False
_handoff = SimpleQueue()  # frames the helper read for the main thread


class _Inbox:
    """The bytes read from fd 3 that do not yet make a whole line."""

    parts = []
    held = 0
    discarding = False


def _read_frames(sink):
    """One read of fd 3; each whole frame goes to _handle_line (invoke / load frames: sink.put). False at the
    end of fd 3."""
    while True:
        try:
            data = os.read(FD, 1 << 16)
            break
        except InterruptedError:
            continue
        except OSError:
            data = b""
            break
    if not data:
        return False
    box = _Inbox
    start = 0
    nl = data.find(b"\n")
    while nl >= 0:
        if box.discarding:
            box.discarding = False
        elif box.parts:
            box.parts.append(data[start:nl])
            line = b"".join(box.parts)
            box.parts = []
            box.held = 0
            _handle_line(line, sink)
        else:
            _handle_line(data[start:nl], sink)
        start = nl + 1
        nl = data.find(b"\n", start)
    if start < len(data) and not box.discarding:
        box.parts.append(data[start:])
        box.held += len(data) - start
        if box.held > MAX_FRAME_BYTES:
            _note("ignored a frame over %d bytes" % MAX_FRAME_BYTES)
            box.parts = []
            box.held = 0
            box.discarding = True
    return True


def _helper_read():
    """Has the helper thread read fd 3 (a host call is about to wait for its reply). Called with _read_lock held."""
    global _helper_on, _helper_started
    if _helper_on:
        return
    _helper_on = True
    if not _helper_started:
        _helper_started = True
        _thread.start_new_thread(_helper, ())
    _helper_go.release()


def _helper():
    """Reads fd 3 while host calls are pending (replies to their waiters, invokes to the queue), then parks."""
    global _helper_on
    while True:
        _helper_go.acquire()
        while True:
            if not _read_frames(_handoff):
                # fd 3 closed: the helper keeps it (_helper_on stays set), the main thread stops at the None.
                if _current is not None:
                    os._exit(0)  # nobody is left to answer the running invocation
                _handoff.put(None)
                return
            with _read_lock:
                with _pending_lock:
                    idle = not _pending
                if idle:
                    _helper_on = False
                    break
        _handoff.put(_WAKE)


class _MainSink:
    __slots__ = ("put",)

    def __init__(self, frames):
        self.put = frames.append


def main():
    global _bundle_prefix
    opts = _parse_args(sys.argv)
    if "bundle" not in opts:
        # Without --entry the runner is a spare: started ahead, it loads the entry named by a `load` frame.
        _note("usage: svc_runner.py --bundle DIR [--entry FILE]   (fd 3 open)")
        sys.exit(2)
    try:
        os.fstat(FD)
    except OSError:
        _note("fd %d is not open" % FD)
        sys.exit(2)
    _start_egress()
    if "SVC_DEBUG" in os.environ:
        _start_debug()
    bundle_dir = os.path.abspath(opts["bundle"])
    _bundle_prefix = bundle_dir.rstrip(os.sep) + os.sep
    # The runner's own directory is no place to import a tenant's modules from.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != RUNNER_DIR]
    _register_host()
    _watch_imports()
    if "entry" not in opts:
        _preload(opts.get("preload", ""), opts.get("warmup"))
    sys.path.insert(0, bundle_dir)

    queue = _handoff
    mine = []  # frames the main thread read itself, in order
    sink = _MainSink(mine)

    loaded = "entry" in opts
    handler = _load(bundle_dir, opts["entry"]) if loaded else None
    while True:
        if mine:
            frame = mine.pop(0)
        else:
            with _read_lock:
                helper = _helper_on
            if helper or not queue.empty():
                frame = queue.get()
                if frame is _WAKE:
                    continue
            else:
                if not _read_frames(sink):
                    break
                continue
        if frame is None:
            break
        if frame["t"] == "load":
            if loaded:
                _note("ignored a second load frame")
            else:
                loaded = True
                handler = _load(bundle_dir, frame["entry"])
            continue
        if handler is None:
            _send({"t": "error", "id": frame["id"], "code": "handler_error", "message": "the bundle failed to load (see init_error)"})
            continue
        _invoke(handler, frame)
    try:
        _real_stdout.flush()
        _real_stderr.flush()
    except Exception:
        pass
    os._exit(0)
