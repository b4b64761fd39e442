"""The Python runner's egress relay, to the spec of docs/egress-relay.md: a TCP listener on 127.0.0.1 inside
the sandbox that forwards each connection to the core's egress proxy over the unix socket bound in at
SVC_EGRESS_SOCKET, after one preamble line naming the invocation running when the connection was accepted:

    SVC-EGRESS 1 <invocation id or ->\r\n      then the bytes of an ordinary HTTP proxy connection

HTTP_PROXY & co. point at the relay, NO_PROXY is empty (urllib, requests and httpx then send loopback
targets through the proxy too). It runs on its own thread (a sync handler blocks the main one), with
_socket and select.epoll directly: the socket and selectors modules cost ~6 ms of every cold start.
A connection belongs to one invocation: the runner calls close_all() when an invocation starts and when it
ends, so a pooled keep-alive connection is never reused under another invocation's name.

Imported by _svc_runner_core (its folder is on sys.path only while the runner imports), so its bytecode
is compiled ahead with the runner's by scripts/setup.mjs.
"""
import _thread

PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")
NO_PROXY_NAMES = ("NO_PROXY", "no_proxy")
_BAD_GATEWAY_BODY = b"the sandbox cannot reach the emulator's egress proxy\n"
_BAD_GATEWAY = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
    % (len(_BAD_GATEWAY_BODY), _BAD_GATEWAY_BODY)
)


def _preamble_id(inv_id):
    """An id fit for the preamble line: 1-200 printable ASCII characters without spaces, else "-"."""
    if inv_id and len(inv_id) <= 200 and all(0x21 <= ord(c) <= 0x7E for c in inv_id):
        return inv_id
    return "-"


class _Side:
    """One side of a relayed connection: the client's TCP socket or the upstream unix socket."""

    __slots__ = ("sock", "fd", "queue", "done", "gone", "ended", "mask")

    def __init__(self, sock):
        self.sock = sock
        self.fd = sock.fileno() if sock is not None else -1
        self.queue = []  # bytes waiting to be written to this side
        self.done = False  # no more bytes come from it (EOF, or it is gone)
        self.gone = False  # closed: nothing can be written to it any more
        self.ended = False  # we sent it our FIN
        self.mask = -1  # the events registered for it (-1: not registered)


class _Link:
    __slots__ = ("client", "upstream", "closed")

    def __init__(self, client, upstream):
        self.client = client
        self.upstream = upstream
        self.closed = False

    def other(self, side):
        return self.upstream if side is self.client else self.client


class Relay:
    def __init__(self, path, current_id, note):
        import _socket
        import select

        self._s = _socket
        self.path = path
        self._current_id = current_id  # () -> the running invocation's id, or None
        self._note = note
        listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        listener.setblocking(False)
        self.listener = listener
        self.port = listener.getsockname()[1]
        if hasattr(select, "epoll"):
            self.poller = select.epoll()
            self.IN, self.OUT, self.HUP = select.EPOLLIN, select.EPOLLOUT, select.EPOLLHUP | select.EPOLLERR
        else:
            self.poller = select.poll()
            self.IN, self.OUT, self.HUP = select.POLLIN, select.POLLOUT, select.POLLHUP | select.POLLERR
        self.poller.register(listener.fileno(), self.IN)
        self.sides = {}  # fd -> (link, side)
        self.links = set()
        # Held while a socket is closed (relay thread) or shut down (close_all, on the main thread), so a
        # shutdown never reaches a descriptor number that was closed and given to a new connection.
        self.lock = _thread.allocate_lock()

    # -- the main thread's part --

    def close_all(self):
        SHUT_RDWR = self._s.SHUT_RDWR
        with self.lock:
            for link in self.links:
                for side in (link.client, link.upstream):
                    if side.sock is not None and not side.gone:
                        try:
                            side.sock.shutdown(SHUT_RDWR)
                        except OSError:
                            pass
                link.closed = True  # the relay thread closes it on the events that follow

    # -- the relay thread --

    def run(self):
        poll = self.poller.poll
        listener_fd = self.listener.fileno()
        while True:
            try:
                events = poll()
            except InterruptedError:
                continue
            for fd, ev in events:
                if fd == listener_fd:
                    self._accept()
                    continue
                entry = self.sides.get(fd)
                if entry is None:
                    continue
                link, side = entry
                try:
                    self._event(link, side, ev)
                except Exception as e:  # never let one connection stop the relay
                    self._note("egress: relay error: %s: %s" % (type(e).__name__, e))
                    self._close_link(link)
                else:
                    self._update(link)

    def _accept(self):
        _socket = self._s
        while True:
            try:
                fd, _addr = self.listener._accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # e.g. EMFILE: nothing to do but leave it in the backlog
                self._note("egress: accept failed: %s" % e)
                return
            client = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, 0, fd)
            client.setblocking(False)
            preamble = ("SVC-EGRESS 1 %s\r\n" % _preamble_id(self._current_id())).encode("ascii")
            upstream = None
            try:
                upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
                upstream.settimeout(5)
                upstream.connect(self.path)
                upstream.setblocking(False)
            except OSError as e:
                self._note("egress: cannot reach the egress proxy at %s: %s" % (self.path, e))
                if upstream is not None:
                    upstream.close()
                upstream = None
            link = _Link(_Side(client), _Side(upstream))
            if upstream is None:
                # Answer 502 and close once the client has sent its request (or gone).
                link.upstream.gone = link.upstream.done = True
                link.client.queue.append(_BAD_GATEWAY)
            else:
                link.upstream.queue.append(preamble)
            with self.lock:
                self.links.add(link)
                for side in (link.client, link.upstream):
                    if side.sock is not None:
                        self.sides[side.fd] = (link, side)
            self._flush(link, link.upstream)
            self._flush(link, link.client)
            self._update(link)

    def _event(self, link, side, ev):
        if link.closed:
            self._close_link(link)
            return
        if ev & self.HUP:
            # Closed both ways (or reset): read what is left, then it is gone.
            while not side.done:
                self._read(link, side, True)
            self._gone(link, side)
            return
        if ev & self.OUT:
            self._flush(link, side)
        if ev & self.IN and not side.done:
            self._read(link, side, False)

    def _read(self, link, side, draining):
        try:
            data = side.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            if draining:
                side.done = True
            return
        except OSError:
            data = b""
        dst = link.other(side)
        if not data:
            side.done = True
            self._flush(link, dst)  # ends dst once its queue is written
            return
        if dst.gone:
            return  # nobody reads it any more
        if dst.queue:
            dst.queue.append(data)
            return
        try:
            n = dst.sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            self._gone(link, dst)
            return
        if n < len(data):
            dst.queue.append(data[n:])

    def _flush(self, link, dst):
        """Writes what waits for dst; once all of it is written and its source is done, ends dst."""
        if dst.gone or dst.sock is None:
            return
        queue = dst.queue
        while queue:
            try:
                n = dst.sock.send(queue[0])
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._gone(link, dst)
                return
            if n < len(queue[0]):
                queue[0] = queue[0][n:]
                return
            queue.pop(0)
        if link.other(dst).done and not dst.ended:
            dst.ended = True
            try:
                dst.sock.shutdown(self._s.SHUT_WR)
            except OSError:
                pass

    def _gone(self, link, side):
        side.gone = True
        side.done = True
        del side.queue[:]
        self._flush(link, link.other(side))

    def _update(self, link):
        """Registers each side for what it waits on, and closes the link when both directions are over."""
        if link.closed:
            self._close_link(link)
            return
        c, u = link.client, link.upstream
        over = lambda s: s.gone or (s.done and s.ended and not s.queue)  # noqa: E731
        if over(c) and over(u):
            self._close_link(link)
            return
        for side in (c, u):
            if side.sock is None:
                continue
            if side.gone:
                self._close_side(side)
                continue
            other = link.other(side)
            mask = 0
            # Backpressure: read a side only while what it sent before has been written on.
            if not side.done and not other.queue:
                mask |= self.IN
            if side.queue:
                mask |= self.OUT
            if mask != side.mask:
                if side.mask < 0:
                    self.poller.register(side.fd, mask)
                else:
                    self.poller.modify(side.fd, mask)
                side.mask = mask

    def _close_side(self, side):
        with self.lock:
            if side.sock is None:
                return
            if side.mask >= 0:
                try:
                    self.poller.unregister(side.fd)
                except (KeyError, OSError, ValueError):
                    pass
            self.sides.pop(side.fd, None)
            side.sock.close()
            side.sock = None
            side.gone = True

    def _close_link(self, link):
        link.closed = True
        self._close_side(link.client)
        self._close_side(link.upstream)
        with self.lock:
            self.links.discard(link)


def start(path, current_id, note):
    """Starts the relay on its own thread; None (with a note) when it cannot listen, and the runner serves
    without it. current_id() names the running invocation (None between invocations)."""
    try:
        relay = Relay(path, current_id, note)
    except OSError as e:
        note("egress: the relay could not start: %s" % e)
        return None
    _thread.start_new_thread(relay.run, ())
    url = "http://127.0.0.1:%d" % relay.port
    relay.url = url
    relay.env = dict([(name, url) for name in PROXY_NAMES] + [(name, "") for name in NO_PROXY_NAMES])
    return relay
