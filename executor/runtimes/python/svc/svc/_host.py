"""The link between the svc libraries and the snippet runner: the runner calls _register() at start-up
with its two call functions, which send a `call` frame and return the `reply` frame (a dict)."""

_call_sync = None
_call_async = None


class HostCallError(Exception):
    """A host call the host refused or could not complete. `code` says why (e.g. `payload_too_large`,
    `not_found`, `host_error`). An integration the remote API answered with an HTTP error has `code`
    `integration_error`, and `status` and `body` say what the API answered (else both are None)."""

    def __init__(self, code, message, status=None, body=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.body = body

    def __reduce__(self):
        return (HostCallError, (self.code, self.message, self.status, self.body))


HostCallError.__module__ = "svc"  # tracebacks say svc.HostCallError, the name users import


def _register(call_sync, call_async):
    global _call_sync, _call_async
    _call_sync = call_sync
    _call_async = call_async


def _no_runner():
    return HostCallError("no_runner", "the svc libraries work only inside a snippet runner")


def _unwrap(reply):
    if reply.get("ok"):
        return reply.get("value")
    error = reply.get("error") or {}
    raise HostCallError(
        error.get("code") or "host_error",
        error.get("message") or "the host call failed",
        error.get("status"),
        error.get("body"),
    )


def call(op, args):
    """Makes a host call and blocks until its reply; returns the reply's value or raises HostCallError."""
    if _call_sync is None:
        raise _no_runner()
    return _unwrap(_call_sync(op, args))


async def acall(op, args):
    """Makes a host call from async code; returns the reply's value or raises HostCallError."""
    if _call_async is None:
        raise _no_runner()
    return _unwrap(await _call_async(op, args))
