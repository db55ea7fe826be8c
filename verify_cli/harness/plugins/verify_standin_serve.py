"""What the trusted side serves of its own objects to the candidate (docs/wire-protocol.md).

Stdlib only. The candidate may call what the tests handed it (callbacks, mocks, files, the
tests' iterators) and read its public attributes; never a private name, never anything of a
module, of the environment, or of the harness's or pytest's objects, and nothing of an object's
state crosses unless the candidate reads it.
"""

from __future__ import annotations

import os
import types
from typing import Any

from verify_peer import Peer
from verify_wire import WireError

#: Dunders the candidate may call on objects the tests passed in (besides public names).
SERVED_DUNDERS: dict[str, Any] = {
    "__call__": None, "__len__": len, "__iter__": iter, "__next__": next,
    "__getitem__": lambda obj, key: obj[key], "__contains__": lambda obj, item: item in obj,
    "__str__": str, "__repr__": repr, "__bool__": bool}
#: Objects of the test process whose attributes the candidate may never read or call, even when
#: the tests hand them over: modules, the environment, and the harness's and pytest's objects.
PRIVATE_MODULES = frozenset({"_pytest", "pytest", "pluggy", "os", "posix", "sys", "importlib", "gc",
                             "inspect", "ctypes", "_ctypes", "py"})

_TRUSTED_METHODS: dict[type, list[str]] = {}


def describe_trusted(obj: Any) -> dict[str, Any]:
    # Nothing of the object's state crosses: the candidate may only use what it was given.
    cls = type(obj)
    desc: dict[str, Any] = {"type": cls.__name__, "module": "trusted"}
    if hasattr(cls, "__next__") and hasattr(cls, "__iter__"):
        desc["kind"] = "iterator"
    elif callable(obj) and (isinstance(obj, type) or not hasattr(obj, "__dict__")
                            or isinstance(obj, types.FunctionType)):
        desc["kind"] = "callable"
    else:
        desc["kind"] = "callable" if callable(obj) else "object"
        methods = _TRUSTED_METHODS.get(cls)
        if methods is None:
            methods = [n for n in dir(cls) if (not n.startswith("_") or n in SERVED_DUNDERS)
                       and callable(getattr(cls, n, None))]
            _TRUSTED_METHODS[cls] = methods
        desc["methods"] = methods
    return desc


def _private(obj: Any) -> bool:
    """Whether the candidate is refused everything of ``obj`` but calling what it was handed."""
    if isinstance(obj, types.ModuleType) or obj is os.environ:
        return True
    module = str(getattr(type(obj), "__module__", "") or "")
    top = module.split(".")[0]
    return top in PRIVATE_MODULES or top.startswith("verify_")


def serve_candidate(peer: Peer, op: str, msg: dict[str, Any]) -> Any:
    """Requests from the candidate: it may call what the tests handed it and read its public
    attributes, nothing else."""
    if op == "release":
        ids = msg.get("handles", [])
        peer.release([i for i in ids if type(i) is int] if type(ids) is list else [])
        return None
    if op not in ("call", "method", "getattr"):
        raise PermissionError(f"the candidate may not {op!r} in the test process")
    target = peer.decode(msg.get("target"))
    name = str(msg.get("name"))
    if op == "getattr":
        if name.startswith("_") or _private(target) or isinstance(target, BaseException):
            raise PermissionError(f"the candidate may not read {name} in the test process")
        return getattr(target, name)
    args = peer.decode(msg.get("args", []))
    kwargs = peer.decode(msg.get("kwargs", {"$dict": []}))
    if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
        raise WireError("args must be a list and kwargs a dict with str keys")
    if op == "call":
        return target(*args, **kwargs)
    if (name.startswith("_") and name not in SERVED_DUNDERS) or (_private(target) and name != "__call__"):
        raise PermissionError(f"the candidate may not call {name} in the test process")
    builtin = SERVED_DUNDERS.get(name)
    if builtin is not None and not kwargs:
        return builtin(target, *args)
    return getattr(target, name)(*args, **kwargs)
