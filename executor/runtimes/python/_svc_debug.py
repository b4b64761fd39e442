"""Debug runs of the Python runner (executor/debug/types.ts): debugpy, speaking DAP, reached from the host.

When the runner starts with SVC_DEBUG=dap and SVC_DEBUG_SOCKET=<path>, _svc_runner_core calls start() before the
bundle loads:

1. a unix socket is bound at SVC_DEBUG_SOCKET (in the host's directory bound at /run/svc-debug) and made
   connectable by the host's user (the sandbox runs as another uid);
2. a relay thread accepts on it and pipes each connection both ways to debugpy's TCP port on 127.0.0.1 inside the
   sandbox (the sandbox's network namespace has only `lo`: the host cannot reach that port itself). It is
   started before debugpy is imported and marked the way pydevd marks its own threads, so the debugger never
   traces it nor suspends it at a breakpoint (which would cut the debugger's own connection);
3. debugpy listens with `in_process_debug_adapter=True` (pydevd speaks DAP itself: no adapter subprocess);
4. wait_for_client() returns once a debugger has attached and sent `configurationDone`: the bundle is loaded only
   then, so breakpoints set at attach bind, even on module-level lines.

debugpy is not in the runtime venv's site-packages (production has no debugpy, and a snippet must not find it):
scripts/setup/python.mjs installs the version executor/runtimes/manifest.json pins under tools.debugpy into
<venv>/svc-debug (bound into the sandbox with the venv, read-only). Only a debug run puts that directory on
sys.path, so a normal run neither imports nor pays for it.

The runner's own files are given to the debugger as library code: with `justMyCode` (the default) stepping never
enters them.
"""
import os
import sys

# Beside the venv's bin/ and lib/ (scripts/setup/python.mjs: DEBUGPY_DIR_NAME).
DEBUGPY_DIR_NAME = "svc-debug"
_CHUNK = 1 << 16


def _debugpy_dir():
    return os.path.join(sys.prefix, DEBUGPY_DIR_NAME)


def _library_roots(runner_dir):
    """pydevd's default library roots (its FilesFiltering), with the runner's directory and debugpy's."""
    import sysconfig

    roots = []
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            roots.append(sysconfig.get_path(name))
        except KeyError:
            pass
    roots.append(os.path.dirname(os.__file__))
    roots.append(runner_dir)
    roots.append(_debugpy_dir())
    seen = []
    for root in roots:
        if root and root not in seen:
            seen.append(root)
    return os.pathsep.join(seen)


class _Relay:
    """SVC_DEBUG_SOCKET → 127.0.0.1:<debugpy's port>, one pair of sockets per debugger connection."""

    def __init__(self, path, note):
        import socket
        import threading

        self._socket = socket
        self._note = note
        self.path = path
        self.port = None
        self._port_set = threading.Event()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        # The host connects as its own uid, not the sandbox's: anyone who can reach the directory may connect
        # (the directory is the host's private one, executor/debug/types.ts).
        os.chmod(path, 0o777)
        listener.listen(8)
        self.listener = listener
        thread = threading.Thread(target=self._accept_loop, name="svc-debug-relay", daemon=True)
        # pydevd's own markers (its PyDBDaemonThread): never traced, never suspended, not listed to the debugger.
        thread.pydev_do_not_trace = True
        thread.is_pydev_daemon_thread = True
        self._thread_class = threading.Thread
        thread.start()

    def set_port(self, port):
        self.port = port
        self._port_set.set()

    def _spawn(self, target, *args):
        t = self._thread_class(target=target, args=args, name="svc-debug-pipe", daemon=True)
        t.pydev_do_not_trace = True
        t.is_pydev_daemon_thread = True
        t.start()

    def _accept_loop(self):
        socket = self._socket
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError as e:
                self._note("the debug relay stopped accepting: %s" % e)
                return
            self._port_set.wait()
            try:
                upstream = socket.create_connection(("127.0.0.1", self.port))
            except OSError as e:
                self._note("the debug relay could not reach debugpy on port %s: %s" % (self.port, e))
                client.close()
                continue
            self._spawn(self._pipe, client, upstream, True)
            self._spawn(self._pipe, upstream, client, False)

    def _pipe(self, src, dst, from_debugger):
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            # The other direction ends too: a debugger that leaves closes both.
            for s in (src, dst):
                try:
                    s.shutdown(self._socket.SHUT_RDWR)
                except OSError:
                    pass
            try:
                src.close()
            except OSError:
                pass
            if from_debugger:
                _release_debuggee(self._note)


def _release_debuggee(note):
    """What a DAP `disconnect` request does (pydevd's on_disconnect_request): breakpoints removed, every thread
    resumed. Done whenever a debugger's connection ends, so one that vanished without saying `disconnect` (killed,
    its connection dropped) leaves no run stopped at a breakpoint nobody can continue; after a proper `disconnect`
    it changes nothing. A debugger that attaches again sets its breakpoints again."""
    pydevd = sys.modules.get("pydevd")
    if pydevd is None:
        return
    try:
        from _pydevd_bundle.pydevd_api import PyDevdAPI

        py_db = pydevd.get_global_debugger()
        if py_db is not None:
            PyDevdAPI().request_disconnect(py_db, resume_threads=True)
    except Exception as e:  # noqa: BLE001 - the run goes on; its clock runs again without a debugger
        note("could not release the run after the debugger left: %s: %s" % (type(e).__name__, e))


def start(runner_dir, note):
    """Starts the relay and debugpy and waits for a debugger (SVC_DEBUG=dap). Returns what to remove from the
    snippet's environment. Exits the runner (status 3) with a note when debugging cannot start: a debug run
    without a debugger would only sit there until its attach timeout."""
    protocol = os.environ.pop("SVC_DEBUG", None)
    path = os.environ.pop("SVC_DEBUG_SOCKET", None)
    if protocol != "dap" or not path:
        note("SVC_DEBUG=%r with SVC_DEBUG_SOCKET=%r: a Python debug run needs dap and a socket path" % (protocol, path))
        sys.exit(3)
    try:
        relay = _Relay(path, note)
    except OSError as e:
        note("cannot listen for the debugger on %s: %s" % (path, e))
        sys.exit(3)
    where = _debugpy_dir()
    if not os.path.isdir(os.path.join(where, "debugpy")):
        note("debugpy is not installed in %s: run `node scripts/setup.mjs`" % where)
        sys.exit(3)
    os.environ["LIBRARY_ROOTS"] = _library_roots(runner_dir)
    # pydevd warns that the stdlib's frozen modules may miss breakpoints: they are the stdlib's, never a snippet's.
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    sys.path.insert(0, where)
    try:
        import debugpy

        host, port = debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
    except Exception as e:  # noqa: BLE001 - said, then the run ends
        note("debugpy could not start: %s: %s" % (type(e).__name__, e))
        sys.exit(3)
    finally:
        sys.path.remove(where)
        os.environ.pop("LIBRARY_ROOTS", None)
        os.environ.pop("PYDEVD_DISABLE_FILE_VALIDATION", None)
    relay.set_port(port)
    note("debugpy %s listens on %s:%s, relayed from %s; waiting for a debugger" % (debugpy.__version__, host, port, path))
    debugpy.wait_for_client()
    return ("SVC_DEBUG", "SVC_DEBUG_SOCKET")
