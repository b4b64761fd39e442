"""svc.store: the tenant's key-value store. Values are any JSON; keys are strings.

    from svc import store
    store.set("k", {"n": 1}, ttl_seconds=60)
    store.get("k")            # {"n": 1}, or None when missing or expired
    store.delete("k")         # True when a key was removed
    store.list(prefix="k")    # what the host lists for that prefix

Async handlers use the twins aget / aset / adelete / alist.
"""
from ._host import HostCallError, acall as _acall, call as _call

__all__ = ["get", "set", "delete", "list", "aget", "aset", "adelete", "alist", "HostCallError"]


def _set_args(key, value, ttl_seconds):
    args = {"key": key, "value": value}
    if ttl_seconds is not None:
        args["ttl_seconds"] = ttl_seconds
    return args


def _as_list(items):
    return [] if items is None else items


def get(key):
    """The value stored under `key`, or None."""
    return _call("store.get", {"key": key})


def set(key, value, ttl_seconds=None):  # noqa: A001 - the public name is the API
    """Stores a JSON value under `key`, expiring after `ttl_seconds` when given."""
    _call("store.set", _set_args(key, value, ttl_seconds))


def delete(key):
    """Removes `key`; returns whether the host reported that a key was removed."""
    return _call("store.delete", {"key": key}) is True


def list(prefix=""):  # noqa: A001 - the public name is the API
    """The entries whose keys start with `prefix`, as the host lists them."""
    return _as_list(_call("store.list", {"prefix": prefix}))


async def aget(key):
    return await _acall("store.get", {"key": key})


async def aset(key, value, ttl_seconds=None):
    await _acall("store.set", _set_args(key, value, ttl_seconds))


async def adelete(key):
    return (await _acall("store.delete", {"key": key})) is True


async def alist(prefix=""):
    return _as_list(await _acall("store.list", {"prefix": prefix}))
