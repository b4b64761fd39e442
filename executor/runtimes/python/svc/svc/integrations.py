"""svc.integrations: requests to the tenant's configured integrations, made by the host with the
tenant's credentials (the core adds them to the request: the snippet's code does not handle them).

    from svc import integrations
    res = integrations.call("github", method="GET", path="/user")
    res["status"], res["headers"], res["body"]

`json` is the request body (any JSON value). A call the host refuses or cannot make raises
HostCallError; so does a non-2xx answer from the remote API (`code` "integration_error", with the answer's
`status` and `body`). Async: `await acall(...)`.
"""
from ._host import HostCallError, acall as _acall, call as _call

__all__ = ["call", "acall", "HostCallError"]


def _args(name, method, path, query, headers, json):
    if method is None or path is None:
        raise TypeError("integrations.call(name, method=..., path=...): method and path are required")
    args = {"name": name, "method": method, "path": path}
    if query is not None:
        args["query"] = query
    if headers is not None:
        args["headers"] = headers
    if json is not None:
        args["body"] = json
    return args


def call(name, method=None, path=None, query=None, headers=None, json=None):
    """Returns {"status", "headers", "body"}."""
    return _call("integrations.call", _args(name, method, path, query, headers, json))


async def acall(name, method=None, path=None, query=None, headers=None, json=None):
    return await _acall("integrations.call", _args(name, method, path, query, headers, json))
