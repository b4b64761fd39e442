"""The snippet libraries for Python snippets.

    from svc import store, integrations

    store.set("greeting", {"hello": "world"}, ttl_seconds=60)
    store.get("greeting")                      # the value, or None
    await store.aget("greeting")               # in an async handler
    integrations.call("github", method="GET", path="/user")   # {"status", "headers", "body"}

Every call is a host call through the snippet runner; a failed call raises HostCallError (with `.code`).
The submodules are imported on first use, so `import svc` costs next to nothing.
"""
from ._host import HostCallError

__all__ = ["store", "integrations", "HostCallError"]


def __getattr__(name):
    if name in ("store", "integrations"):
        import importlib

        return importlib.import_module("svc." + name)
    raise AttributeError("module 'svc' has no attribute %r" % (name,))
