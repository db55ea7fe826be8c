"""The trusted side of two-process grading: stand-in modules for the candidate's code.

A pytest plugin (``PYTEST_PLUGINS=...,verify_standin``), stdlib only (pytest when it loads it). With
``VERIFY_CHANNEL`` set, importing one of the candidate's modules (``VERIFY_CANDIDATE_MODULES``,
a JSON list of dotted names) gives a stand-in module: every attribute read, call and method
call crosses to the candidate server (docs/wire-protocol.md) and comes back by value. The test
process never imports candidate code: the work folder is taken off ``sys.path`` and a module
that would load from it (outside the test folders) is refused.

Handles of candidate objects answer ``==``, ``hash()`` and ``bool()`` here, from their
descriptor, so comparing a result never runs candidate code in this process. Exceptions arrive
as the same built-in type, or as a stand-in subclass (one per module and class name) of the
nearest built-in base.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import socket
import sys
import time
import types
from typing import Any

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "candidate"))

from verify_peer import ChannelClosed, Peer, RemoteError
from verify_wire import WireError

CHANNEL_ENV = "VERIFY_CHANNEL"
MODULES_ENV = "VERIFY_CANDIDATE_MODULES"
CONNECT_SECONDS = 20.0
#: Written to the results folder when the candidate server never came up: no candidate code
#: has run by then, so that is the infrastructure's fault (the grader reports infra_error).
NO_CANDIDATE_FILE = "verify-no-candidate-process.txt"
#: Dunders the candidate may call on objects the tests passed in (besides public names).
SERVED_DUNDERS = {"__call__", "__len__", "__iter__", "__next__", "__getitem__", "__contains__",
                  "__str__", "__repr__"}
#: Opt-in (audit's mutation runs): every message crossing between the tests and the candidate is
#: appended, as sent, to ``$VERIFY_RESULTS_DIR/verify-call-trace.jsonl`` (checks/audit/observed.py).
TRACE_ENV = "VERIFY_TRACE_CALLS"
TRACE_FILE = "verify-call-trace.jsonl"
TRACE_MAX_BYTES = 8 * 1024 * 1024


class CandidateUnavailable(RuntimeError):
    """The candidate process is gone or broke the protocol: no call can reach it."""


# --------------------------------------------------------------------------------------------
# The connection


class _Channel:
    def __init__(self) -> None:
        self.path = os.environ.get(CHANNEL_ENV, "")
        self.peer: Peer | None = None
        self.remotes: dict[int, Any] = {}

    def get(self) -> Peer:
        if self.peer is not None:
            return self.peer
        started = time.monotonic()
        deadline = started + CONNECT_SECONDS
        # The server starts beside this runner and listens within milliseconds: poll finely for
        # the first second (a coarse pause is paid on every run), then every 50 ms.
        pause = 0.0002
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.path)
                break
            except OSError as e:
                sock.close()
                if time.monotonic() > deadline:
                    _mark_infrastructure_fault(f"cannot reach the candidate process at {self.path}: {e}")
                    raise CandidateUnavailable(f"cannot reach the candidate process: {e}") from None
                time.sleep(pause)
                pause = min(pause * 1.5, 0.001 if time.monotonic() - started < 1.0 else 0.05)
        self.peer = Peer(sock, "trusted", describe=_describe_trusted, make_remote=self.remote,
                         dispatch=_serve_candidate, on_answer=_echo_output, remote_ref=_candidate_ref)
        return self.peer

    def remote(self, desc: dict[str, Any]) -> Any:
        kind = desc.get("kind")
        if kind == "exception_class":
            return standin_exception(desc["module"], desc["type"], desc.get("bases", []))
        hid = desc["$handle"]
        known = self.remotes.get(hid)
        if known is not None and kind in ("class", "module", "callable"):
            return known
        if kind == "class":
            made: Any = _class_proxy(desc)
        elif kind == "module":
            made = sys.modules.get(desc["module"])
            if not isinstance(made, CandidateModule):
                made = CandidateModule(desc["module"], desc)
            made.__dict__["_verify_desc"] = made.__dict__.get("_verify_desc") or desc
        elif kind == "namedtuple":
            made = CandidateNamedTuple(desc)
        else:
            made = CandidateObject(desc)
        self.remotes[hid] = made
        return made


CHANNEL = _Channel()


class _Tracer:
    """The call trace of one session, when ``VERIFY_TRACE_CALLS`` asks for it (else inert)."""

    def __init__(self) -> None:
        results = os.environ.get("VERIFY_RESULTS_DIR", "")
        self.path = os.path.join(results, TRACE_FILE) if results and os.environ.get(TRACE_ENV) else ""
        self.written = 0

    def record(self, kind: str, message: Any) -> None:
        if not self.path or self.written > TRACE_MAX_BYTES:
            return
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        line = json.dumps({"test": test, kind: message}, sort_keys=True, default=repr) + "\n"
        self.written += len(line)
        if self.written > TRACE_MAX_BYTES:
            line = json.dumps({"truncated": True}) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError:
            self.path = ""


TRACER = _Tracer()


def _mark_infrastructure_fault(message: str) -> None:
    results = os.environ.get("VERIFY_RESULTS_DIR", "")
    if results:
        try:
            with open(os.path.join(results, NO_CANDIDATE_FILE), "w", encoding="utf-8") as fh:
                fh.write(message)
        except OSError:
            pass


def _echo_output(msg: dict[str, Any]) -> None:
    """What candidate code printed during a call, into this process's (captured) streams."""
    TRACER.record("answer", msg)
    out, err = msg.get("stdout"), msg.get("stderr")
    if type(out) is str and out:
        sys.stdout.write(out)
    if type(err) is str and err:
        sys.stderr.write(err)


def _candidate_ref(obj: Any) -> dict[str, Any] | None:
    """A stand-in of a candidate object goes back as that object."""
    if isinstance(obj, CandidateObject):
        return _ref(object.__getattribute__(obj, "_desc"))
    if isinstance(obj, (CandidateNamedTuple, _CandidateClassMeta)):
        return _ref(obj._desc)
    if isinstance(obj, CandidateModule) and isinstance(obj.__dict__.get("_verify_desc"), dict):
        return _ref(obj.__dict__["_verify_desc"])
    return None


def _describe_trusted(obj: Any) -> dict[str, Any]:
    # Nothing of the object's state crosses: the candidate may only call what it was given.
    return {"kind": "callable" if callable(obj) else "object", "type": type(obj).__name__,
            "module": "trusted"}


def _serve_candidate(op: str, msg: dict[str, Any]) -> Any:
    """Requests from the candidate: it may call what the tests handed it, nothing else."""
    peer = CHANNEL.get()
    TRACER.record("served", msg)
    if op == "release":
        ids = msg.get("handles", [])
        peer.release([i for i in ids if type(i) is int] if type(ids) is list else [])
        return None
    if op not in ("call", "method"):
        raise PermissionError(f"the candidate may not {op!r} in the test process")
    target = peer.decode(msg.get("target"))
    args = peer.decode(msg.get("args", []))
    kwargs = peer.decode(msg.get("kwargs", {"$dict": []}))
    if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
        raise WireError("args must be a list and kwargs a dict with str keys")
    if op == "call":
        return target(*args, **kwargs)
    name = str(msg.get("name"))
    if name.startswith("_") and name not in SERVED_DUNDERS:
        raise PermissionError(f"the candidate may not call {name} in the test process")
    return getattr(target, name)(*args, **kwargs)


def _cross(op: str, **fields: Any) -> Any:
    """Ask the candidate; its exceptions are raised here as built-in types or stand-ins."""
    peer = CHANNEL.get()
    TRACER.record("request", {"op": op, **fields})
    try:
        return peer.request(op, **fields)
    except RemoteError as e:
        raise rebuild_exception(e.payload) from None
    except ChannelClosed as e:
        raise CandidateUnavailable(f"the candidate process cannot be reached: {e}") from None


def _call(op: str, ref: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any],
          **fields: Any) -> Any:
    peer = CHANNEL.get()
    try:
        encoded = {"args": peer.encode(list(args)),
                   "kwargs": peer.encode(kwargs) if kwargs else {"$dict": []}}
    except WireError as e:
        raise TypeError(f"cannot pass this to the candidate: {e}") from None
    return _cross(op, target=ref, **encoded, **fields)


# --------------------------------------------------------------------------------------------
# Exceptions

_STANDINS: dict[tuple[str, str], type[BaseException]] = {}
_SUBSTITUTES = {"KeyboardInterrupt", "GeneratorExit"}  # never abort the test session


def standin_exception(module: str, name: str, bases: list[str]) -> type[BaseException]:
    """The stand-in class for the candidate's exception class ``module.name`` (cached)."""
    key = (module, name)
    cls = _STANDINS.get(key)
    if cls is None:
        base: type[BaseException] = Exception
        for b in bases:
            found = getattr(builtins, b, None)
            if isinstance(found, type) and issubclass(found, Exception):
                base = found
                break

        def __str__(self: BaseException) -> str:
            return str(getattr(self, "_verify_message", BaseException.__str__(self)))

        cls = type(name.rsplit(".", 1)[-1], (base,), {"__module__": module, "__qualname__": name,
                                                      "__str__": __str__})
        _STANDINS[key] = cls
    return cls


def rebuild_exception(payload: dict[str, Any]) -> BaseException:
    name = str(payload.get("type", "Exception"))
    module = str(payload.get("module", ""))
    bases = [str(b) for b in payload.get("bases", []) if type(b) is str]
    message = str(payload.get("message", ""))
    try:
        args = [CHANNEL.get().decode(a) for a in payload.get("args", [])]
    except (WireError, ChannelClosed):
        args = [message]
    builtin = getattr(builtins, name, None)
    if module == "builtins" and isinstance(builtin, type) and issubclass(builtin, BaseException) \
            and name not in _SUBSTITUTES:
        try:
            return _with_trace(builtin(*args), payload)
        except Exception:
            return _with_trace(builtin(message), payload)
    cls = standin_exception(module, name, bases)
    exc = cls(*args)
    exc._verify_message = message  # type: ignore[attr-defined]
    return _with_trace(exc, payload)


def _with_trace(exc: BaseException, payload: dict[str, Any]) -> BaseException:
    trace = payload.get("traceback")
    if type(trace) is str and trace:
        exc.add_note("in the candidate process:\n" + trace.rstrip())
    return exc


# --------------------------------------------------------------------------------------------
# Handles


def _ref(desc: dict[str, Any]) -> dict[str, Any]:
    return {"$handle": desc["$handle"], "owner": "candidate"}


def _same_value(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["$handle"] == b["$handle"]:
        return True
    if a.get("eq") != "fields" or b.get("eq") != "fields":
        return False
    if a.get("fields") is None or b.get("fields") is None:
        return False
    return (a["module"], a["type"], a["fields"]) == (b["module"], b["type"], b["fields"])


def _value_hash(desc: dict[str, Any]) -> int:
    if desc.get("eq") != "fields" or desc.get("fields") is None:
        return hash(("verify-handle", desc["$handle"]))
    return hash((desc["module"], desc["type"], tuple(sorted(desc["fields"].items()))))


class CandidateObject:
    """An object (or callable, or iterator) that lives in the candidate process."""

    __slots__ = ("__weakref__", "_desc")

    def __init__(self, desc: dict[str, Any]) -> None:
        object.__setattr__(self, "_desc", desc)

    def __getattr__(self, name: str) -> Any:
        desc = object.__getattribute__(self, "_desc")
        if name in desc.get("methods", ()):
            return _BoundMethod(desc, name)
        return _cross("getattr", target=_ref(desc), name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        peer = CHANNEL.get()
        _cross("setattr", target=_ref(self._desc), name=name, value=peer.encode(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call("call", _ref(self._desc), args, kwargs)

    def _method(self, name: str, *args: Any) -> Any:
        return _call("method", _ref(self._desc), args, {}, name=name)

    # Never cross: answered from the descriptor.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, CandidateObject) and _same_value(self._desc, other._desc)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return _value_hash(self._desc)

    def __bool__(self) -> bool:
        return True

    # Cross as method calls.
    def __repr__(self) -> str:
        try:
            text = self._method("__repr__")
        except Exception:
            text = None
        return text if type(text) is str else f"<candidate {self._desc.get('type')}>"

    def __str__(self) -> str:
        text = self._method("__str__")
        if type(text) is not str:
            raise TypeError("__str__ returned non-string")
        return text

    def __len__(self) -> int:
        n = self._method("__len__")
        if type(n) is not int:
            raise TypeError("__len__ returned a non-int")
        return n

    def __iter__(self) -> Any:
        if self._desc.get("kind") == "iterator":
            return self
        return self._method("__iter__")

    def __next__(self) -> Any:
        return self._method("__next__")

    def __getitem__(self, key: Any) -> Any:
        return self._method("__getitem__", key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._method("__setitem__", key, value)

    def __delitem__(self, key: Any) -> None:
        self._method("__delitem__", key)

    def __contains__(self, item: Any) -> bool:
        return bool(self._method("__contains__", item) is True)

    def __enter__(self) -> Any:
        return self._method("__enter__")

    def __exit__(self, *exc: Any) -> Any:
        return self._method("__exit__", None, None, None)

    def __lt__(self, other: Any) -> Any:
        return self._method("__lt__", other)

    def __le__(self, other: Any) -> Any:
        return self._method("__le__", other)

    def __gt__(self, other: Any) -> Any:
        return self._method("__gt__", other)

    def __ge__(self, other: Any) -> Any:
        return self._method("__ge__", other)

    def __add__(self, other: Any) -> Any:
        return self._method("__add__", other)

    def __sub__(self, other: Any) -> Any:
        return self._method("__sub__", other)


class _BoundMethod:
    __slots__ = ("desc", "name")

    def __init__(self, desc: dict[str, Any], name: str) -> None:
        self.desc = desc
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call("method", _ref(self.desc), args, kwargs, name=self.name)

    def __repr__(self) -> str:
        return f"<candidate method {self.desc.get('type')}.{self.name}>"


class CandidateNamedTuple(tuple):
    """A named tuple of the candidate's: a tuple of its field values (by value), as in-process."""

    _desc: dict[str, Any]

    def __new__(cls, desc: dict[str, Any]) -> CandidateNamedTuple:
        self = super().__new__(cls, tuple((desc.get("fields") or {}).values()))
        self._desc = desc
        return self

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):  # fields first, as a named tuple's own properties are
            fields = tuple.__getattribute__(self, "_desc").get("fields") or {}
            if name in fields:
                return fields[name]
        return tuple.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        return _cross("getattr", target=_ref(self._desc), name=name)

    def __repr__(self) -> str:
        fields = self._desc.get("fields") or {}
        inner = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"{self._desc.get('type')}({inner})"


class _CandidateClassMeta(type):
    _desc: dict[str, Any]

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return _call("call", _ref(cls._desc), args, kwargs)

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _cross("getattr", target=_ref(cls._desc), name=name)

    def __instancecheck__(cls, obj: Any) -> bool:
        if isinstance(obj, CandidateNamedTuple):
            return obj._desc["type"] == cls._desc["type"] and obj._desc["module"] == cls._desc["module"]
        if not isinstance(obj, CandidateObject):
            return False
        wanted = f"{cls._desc['module']}.{cls._desc['type']}"
        return wanted in object.__getattribute__(obj, "_desc").get("bases", ())


def _class_proxy(desc: dict[str, Any]) -> type:
    name = str(desc["type"]).rsplit(".", 1)[-1]
    cls = _CandidateClassMeta(name, (), {"__module__": desc["module"], "__qualname__": desc["type"]})
    cls._desc = desc
    return cls


class CandidateModule(types.ModuleType):
    """A stand-in for a candidate module: attributes come from the candidate process."""

    def __init__(self, name: str, desc: dict[str, Any] | None = None) -> None:
        super().__init__(name)
        self.__dict__["_verify_desc"] = desc

    def _verify_load(self) -> None:
        module = _cross("import", module=self.__name__)
        desc = module.__dict__["_verify_desc"] if isinstance(module, CandidateModule) else None
        if not isinstance(desc, dict):
            raise ImportError(f"the candidate process did not import {self.__name__} as a module")
        self.__dict__["_verify_desc"] = desc
        names = desc.get("names")
        if names is not None:
            self.__dict__["__all__"] = list(names)

    def __getattr__(self, name: str) -> Any:
        desc = self.__dict__.get("_verify_desc")
        if desc is None or name.startswith("__"):
            raise AttributeError(name)
        try:
            value = _cross("getattr", target=_ref(desc), name=name)
        except AttributeError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None
        if isinstance(value, (type, CandidateModule)) or (
                isinstance(value, CandidateObject) and value._desc.get("kind") == "callable"):
            self.__dict__[name] = value  # functions and classes stay put: one crossing each
        return value

    def __dir__(self) -> list[str]:
        return list(self.__dict__.get("__all__", []))


# --------------------------------------------------------------------------------------------
# The importer


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = CandidateModule(spec.name)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        assert isinstance(module, CandidateModule)
        module._verify_load()


class StandInFinder(importlib.abc.MetaPathFinder):
    """Candidate modules become stand-ins; nothing else may load from the work folder."""

    def __init__(self, modules: list[str], workdir: str, allowed: list[str]) -> None:
        self.modules = set(modules)
        self.packages = {m.rsplit(".", i)[0] for m in modules for i in range(1, m.count(".") + 1)}
        self.workdir = os.path.realpath(workdir)
        self.allowed = [os.path.join(self.workdir, a) + os.sep for a in allowed]
        self._loader = _StandInLoader()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname in self.modules or fullname in self.packages:
            return importlib.util.spec_from_loader(fullname, self._loader,
                                                   is_package=fullname in self.packages)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = getattr(spec, "origin", None) or ""
        locations = list(getattr(spec, "submodule_search_locations", None) or [])
        for where in [origin, *locations]:
            real = os.path.realpath(where) if where else ""
            if real.startswith(self.workdir + os.sep) and not any(real.startswith(a) for a in self.allowed):
                raise ImportError(f"{fullname} would load from the work folder ({real}), which only "
                                  "the candidate process may run; list it among the editable files "
                                  "or move it under tests/")
        return None


def install() -> StandInFinder | None:
    """Put this session's stand-in importer in place, when the run grades two-process.

    Per session, not per import of this module: a warm worker imports the plugin once and
    forks one run per candidate, each with its own channel and modules."""
    global CHANNEL, TRACER
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, StandInFinder)]
    CHANNEL = _Channel()
    TRACER = _Tracer()
    if not os.environ.get(CHANNEL_ENV):
        return None
    try:
        modules = [str(m) for m in json.loads(os.environ.get(MODULES_ENV, "[]"))]
    except ValueError:
        modules = []
    workdir = os.environ.get("VERIFY_WORKDIR") or os.getcwd()
    dirs = [d for d in os.environ.get("VERIFY_TEST_DIRS", "tests,hidden_tests").split(",") if d]
    real = os.path.realpath(workdir)
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != real]
    finder = StandInFinder(modules, workdir, dirs)
    sys.meta_path.insert(0, finder)
    importlib.invalidate_caches()
    _no_core_dumps()
    return finder


def _no_core_dumps() -> None:
    """Not dumpable: a process of the same user cannot read this one's memory (the seal key)
    through /proc, should a test start one here."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except Exception:
        pass


def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    install()


# A pytest plugin only when pytest loads it (pytest is then imported): the calls runner imports
# this module without pytest, whose import would cost more than the rest of its run.
if "pytest" in sys.modules:
    pytest_load_initial_conftests = sys.modules["pytest"].hookimpl(tryfirst=True)(
        pytest_load_initial_conftests)
