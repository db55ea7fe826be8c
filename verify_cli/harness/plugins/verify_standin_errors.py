"""The trusted side's exceptions for a candidate's errors (docs/wire-protocol.md, "Errors").

Stdlib only. A candidate error arrives as data: its class is a standard-library class (the real
one), a built-in one, or a stand-in class named as the candidate's, whose bases are the
stand-ins of the candidate's base classes and the built-in ones; its arguments and attributes
are set from plain data. Nothing of the candidate's code runs here: a stand-in class has no
methods but ``__str__``, which returns the message the candidate's ``str()`` gave.
"""

from __future__ import annotations

import builtins
import importlib
import sys
from typing import Any

from verify_peer import ChannelClosed, Peer
from verify_wire import WireError

_STANDINS: dict[tuple[str, str], type[BaseException]] = {}
_SUBSTITUTES = {"KeyboardInterrupt", "GeneratorExit"}  # never abort the test session
#: Standard-library modules whose exception classes a candidate's error arrives as (the real
#: class: ``pytest.raises(json.JSONDecodeError)`` matches). Not unittest (SkipTest would skip),
#: not bdb, nothing of pytest's or the harness's.
STDLIB_ERROR_MODULES = frozenset({
    "dataclasses", "json", "json.decoder", "subprocess", "asyncio", "asyncio.exceptions",
    "concurrent.futures", "concurrent.futures._base", "queue", "_queue", "decimal", "re", "csv",
    "_csv", "configparser", "zipfile", "tomllib", "socket", "shutil", "http.client", "urllib.error",
    "email.errors", "pickle", "_pickle", "struct", "zlib", "binascii", "tarfile", "xml.etree.ElementTree",
    "xml.parsers.expat", "pyexpat", "sqlite3", "locale", "calendar", "statistics", "argparse", "getopt",
    "copy", "ipaddress", "graphlib", "gzip", "lzma", "bz2", "io", "_io", "enum", "string", "shlex",
    "datetime", "zoneinfo", "base64", "codecs", "ast", "inspect", "fractions", "numbers", "functools",
    "itertools", "operator", "collections", "heapq", "bisect", "math", "random", "time", "threading",
    "select", "signal", "ssl", "errno", "array", "uuid", "hashlib", "hmac", "secrets", "textwrap",
    "difflib", "pprint", "reprlib", "contextlib", "typing", "types", "weakref", "abc", "warnings",
    "logging", "tempfile", "glob", "fnmatch", "pathlib", "os", "stat", "filecmp", "netrc", "plistlib",
    "mimetypes", "html.parser", "urllib.parse", "wave", "colorsys", "sched", "selectors",
})


def _stdlib_error_class(module: str, name: str) -> type[BaseException] | None:
    if module not in STDLIB_ERROR_MODULES or "." in name:
        return None
    found = getattr(sys.modules.get(module), name, None)
    if found is None:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            return None
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


def standin_exception(module: str, name: str, bases: list[str],
                      classes: list[Any] | None = None) -> type[BaseException]:
    """The class the candidate's exception class ``module.name`` is here (cached): the real
    class of a standard-library module, else a stand-in whose bases are the stand-ins of the
    candidate's base classes (``classes``: ``[module, qualname, [direct bases]]`` along the
    MRO) and the built-in ones, so ``pytest.raises(mod.BaseError)`` matches a subclass."""
    real = _stdlib_error_class(module, name)
    if real is not None:
        return real
    key = (module, name)
    cls = _STANDINS.get(key)
    if cls is not None:
        return cls
    by_name = {f"{c[0]}.{c[1]}": c for c in classes or ()
               if type(c) is list and len(c) == 3 and type(c[0]) is str and type(c[1]) is str
               and type(c[2]) is list}
    parents: list[type] = []
    own = by_name.get(f"{module}.{name}")
    for base in (own[2] if own else []):
        if type(base) is not str:
            continue
        found = getattr(builtins, base, None)
        if isinstance(found, type) and issubclass(found, BaseException):
            if issubclass(found, Exception) and found not in parents:
                parents.append(found)
            continue
        parent = by_name.get(base)
        if parent is not None and parent is not own:
            made = standin_exception(parent[0], parent[1], bases, classes)
            if made not in parents:
                parents.append(made)
    if not parents:
        base_cls: type[BaseException] = Exception
        for b in bases:
            found = getattr(builtins, b, None)
            if isinstance(found, type) and issubclass(found, Exception):
                base_cls = found
                break
        parents = [base_cls]

    def __str__(self: BaseException) -> str:
        return str(getattr(self, "_verify_message", BaseException.__str__(self)))

    namespace = {"__module__": module, "__qualname__": name, "__str__": __str__}
    try:
        cls = type(name.rsplit(".", 1)[-1], tuple(parents), namespace)
    except TypeError:  # an MRO the stand-ins cannot have: the first base alone
        cls = type(name.rsplit(".", 1)[-1], (parents[0],), namespace)
    _STANDINS[key] = cls
    return cls


def rebuild_exception(payload: dict[str, Any], peer: Peer) -> BaseException:
    """The exception an error answer stands for (the test's own one, when it came back)."""
    name = str(payload.get("type", "Exception"))
    module = str(payload.get("module", ""))
    bases = [str(b) for b in payload.get("bases", []) if type(b) is str]
    message = str(payload.get("message", ""))
    value = payload.get("value")
    if type(value) is dict and value.get("owner") == "trusted" and type(value.get("$handle")) is int:
        try:  # the test's own exception, let through by the candidate: the very same object
            own = peer.owned(value["$handle"])
        except WireError:
            own = None
        if isinstance(own, BaseException):
            return own
    try:
        args = [peer.decode(a) for a in payload.get("args", [])]
    except (WireError, ChannelClosed):
        args = [message]
    builtin = getattr(builtins, name, None)
    if module == "builtins" and isinstance(builtin, type) and issubclass(builtin, BaseException) \
            and name not in _SUBSTITUTES:
        try:
            return _with_fields(_with_trace(builtin(*args), payload), payload, peer)
        except Exception:
            return _with_fields(_with_trace(builtin(message), payload), payload, peer)
    classes = payload.get("classes") if type(payload.get("classes")) is list else None
    cls = standin_exception(module, name, bases, classes)
    if cls in _STANDINS.values():
        exc = cls(*args)
        exc._verify_message = message  # type: ignore[attr-defined]
    else:  # a standard-library class: built without its __init__ (its args and fields are data)
        exc = cls.__new__(cls)
        exc.args = tuple(args)
    return _with_fields(_with_trace(exc, payload), payload, peer)


def _with_fields(exc: BaseException, payload: dict[str, Any], peer: Peer) -> BaseException:
    """The candidate exception's attributes (``e.line``), by value or as handles."""
    fields = payload.get("fields")
    if type(fields) is dict:
        for key, data in fields.items():
            if type(key) is str and not key.startswith("_"):
                try:
                    setattr(exc, key, peer.decode(data))
                except (WireError, AttributeError, TypeError):
                    continue
    return exc


def _with_trace(exc: BaseException, payload: dict[str, Any]) -> BaseException:
    trace = payload.get("traceback")
    if type(trace) is str and trace:
        exc.add_note("in the candidate process:\n" + trace.rstrip())
    return exc
