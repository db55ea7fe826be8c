"""The candidate server of two-process grading (docs/wire-protocol.md), stdlib only.

Runs in the candidate's own sandbox, working folder = the work folder without the tests:
``python verify_candidate_server.py`` with ``VERIFY_CHANNEL`` naming the socket to listen on.
It imports candidate modules when asked, keeps every object of the candidate's classes, and
answers ``import``/``getattr``/``setattr``/``call``/``method``/``release``/``exec``. Callables
the tests pass in arrive as handles of the trusted side; calling one asks the trusted side to
run it, on the same connection.
"""

from __future__ import annotations

import _thread
import contextlib
import copy
import dataclasses
import enum
import functools
import importlib
import inspect
import io
import operator
import os
import pickle
import select
import socket
import subprocess
import sys
import threading
import time
import traceback
import types
from typing import Any

from verify_peer import ChannelClosed, Peer, RemoteError
from verify_process_state import ProcessState
from verify_wire import WireError

#: Dunders a stand-in forwards through ``method`` (the rest of a class's dunders never cross).
FORWARDED: dict[str, Any] = {
    "__len__": len, "__iter__": iter, "__next__": next, "__str__": str, "__repr__": repr,
    "__getitem__": operator.getitem, "__setitem__": operator.setitem,
    "__delitem__": operator.delitem, "__contains__": operator.contains,
    "__enter__": None, "__exit__": None, "__call__": None, "__reversed__": reversed,
    "__add__": operator.add, "__sub__": operator.sub, "__mul__": operator.mul,
    "__truediv__": operator.truediv, "__floordiv__": operator.floordiv, "__mod__": operator.mod,
    "__neg__": operator.neg, "__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt,
    "__ge__": operator.ge, "__int__": int, "__float__": float, "__index__": operator.index,
    "__format__": format, "__bytes__": bytes, "__abs__": abs, "__bool__": bool,
    "__copy__": copy.copy, "__deepcopy__": copy.deepcopy, "__verify_pickle__": pickle.dumps,
}
EXEC_OUTPUT_LIMIT = 16 * 1024 * 1024
#: The pids of the programs ``exec`` calls are running now (each in its own session).
_RUNNING: set[int] = set()
_RUNNING_LOCK = threading.Lock()


def _public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if isinstance(names, (list, tuple)) and all(type(n) is str for n in names):
        return list(names)
    return [n for n in vars(module) if not n.startswith("_")]


def _methods(cls: type) -> list[str]:
    out: list[str] = []
    for klass in cls.__mro__[:-1]:
        for name, value in vars(klass).items():
            if isinstance(value, (types.FunctionType, classmethod, staticmethod)) and name not in out \
                    and not (name.startswith("__") and name not in FORWARDED):
                out.append(name)
    return out


def _defines_eq(cls: type) -> bool:
    for klass in cls.__mro__:
        if "__eq__" in vars(klass):
            return klass.__module__ != "builtins"
    return False


class CandidateSide:
    """The objects and the dispatch of one connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.peer = Peer(sock, "candidate", describe=self.describe, make_remote=self.remote,
                         dispatch=self.dispatch, reply_extras=self.reply_extras,
                         remote_ref=_trusted_ref, on_request=self.on_request)
        self._describing: set[int] = set()
        self.output = ("", "")
        self.state = ProcessState(self.peer)
        self._loop: Any = None
        self._subclasses: dict[Any, type] = {}
        self._classes_sent: set[int] = set()

    # -- what a candidate object looks like on the other side ---------------------------------
    def describe(self, obj: Any) -> dict[str, Any]:
        cls = type(obj)
        desc: dict[str, Any] = {"type": getattr(cls, "__qualname__", cls.__name__),
                                "module": str(getattr(cls, "__module__", "") or "")}
        if isinstance(obj, types.ModuleType):
            desc.update(kind="module", type=obj.__name__, module=obj.__name__,
                        names=_public_names(obj))
            return desc
        if isinstance(obj, type):
            desc.update(type=obj.__qualname__, module=obj.__module__)
            if issubclass(obj, BaseException):
                desc.update(kind="exception_class", bases=[
                    c.__name__ for c in obj.__mro__ if c.__module__ == "builtins"],
                    classes=exception_classes(obj))
            else:
                desc["kind"] = "class"
                desc["bases"] = [f"{c.__module__}.{c.__qualname__}" for c in obj.__mro__
                                 if c.__module__ != "builtins"]
                desc["methods"] = _methods(obj)
                if dataclasses.is_dataclass(obj):
                    params = getattr(obj, "__dataclass_params__", None)
                    desc["dataclass"] = [[f.name, bool(f.init)] for f in dataclasses.fields(obj)]
                    desc["frozen"] = bool(params is not None and params.frozen)
            return desc
        if isinstance(obj, tuple) and hasattr(cls, "_fields"):
            desc.update(kind="namedtuple", eq="fields")
            desc["fields"] = self._fields(obj, {f: getattr(obj, f) for f in cls._fields})
            return desc
        if isinstance(obj, types.GeneratorType):
            desc["kind"] = "generator"
            return desc
        if isinstance(obj, types.CoroutineType) or (
                hasattr(cls, "__await__") and not isinstance(obj, type) and not hasattr(cls, "__next__")):
            desc["kind"] = "coroutine"
            return desc
        if isinstance(obj, types.AsyncGeneratorType):
            desc["kind"] = "async_iterator"
            return desc
        if hasattr(cls, "__next__") and hasattr(cls, "__iter__") and not hasattr(obj, "__dict__"):
            desc["kind"] = "iterator"
            return desc
        if isinstance(obj, (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                            types.BuiltinMethodType, types.MethodWrapperType, functools.partial)):
            desc["kind"] = "callable"
            if inspect.iscoroutinefunction(obj):
                desc["async"] = True
            return desc
        desc["kind"] = "object"
        desc["bases"] = [f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__
                         if c.__module__ != "builtins"]
        desc["methods"] = _methods(cls)
        if cls.__module__ != "builtins":
            desc["class"] = self._class_ref(cls)
        if isinstance(obj, enum.Enum) and isinstance(obj, (int, str, float)):
            # an IntEnum / StrEnum member equals its value, as in-process (decided from data)
            plain = obj._value_
            if type(plain) in (int, str, float):
                desc["plain"] = self.peer.encode(plain)
        if dataclasses.is_dataclass(obj):
            params = getattr(cls, "__dataclass_params__", None)
            desc["eq"] = "fields" if params is None or params.eq else "identity"
            desc["fields"] = self._fields(obj, {f.name: getattr(obj, f.name, None)
                                                for f in dataclasses.fields(obj) if f.compare})
        else:
            desc["eq"] = "fields" if _defines_eq(cls) else "identity"
            state = getattr(obj, "__dict__", None)
            if isinstance(state, dict):
                desc["fields"] = self._fields(obj, dict(state))
        return desc

    def _class_ref(self, cls: type) -> dict[str, Any]:
        """The handle of an object's class: described the first time, a reference after."""
        hid = self.peer._ids.get(id(cls))
        if hid is not None and hid in self._classes_sent and self.peer._owned.get(hid) is cls:
            return {"$handle": hid, "owner": "candidate"}
        ref = self.peer.handle_for(cls)
        self._classes_sent.add(ref["$handle"])
        return ref

    def _fields(self, obj: Any, values: dict[str, Any]) -> dict[str, Any] | None:
        if id(obj) in self._describing:
            return None
        self._describing.add(id(obj))
        try:
            return {str(k): self.peer.encode(v) for k, v in values.items()}
        except WireError:
            return None
        finally:
            self._describing.discard(id(obj))

    def remote(self, desc: dict[str, Any]) -> Any:
        return TrustedHandle(self.peer, desc)

    # -- ops ----------------------------------------------------------------------------------
    def _target(self, msg: dict[str, Any]) -> Any:
        return self.peer.decode(msg.get("target"))

    def _args(self, msg: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        args = self.peer.decode(msg.get("args", []))
        kwargs = self.peer.decode(msg.get("kwargs", {"$dict": []}))
        if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
            raise WireError("args must be a list and kwargs a dict with str keys")
        return args, kwargs

    def on_request(self, msg: dict[str, Any]) -> None:
        """The tests' process state (environment, working folder, argv, stdin, random, logging),
        applied before the request runs."""
        state = msg.get("state")
        if state is not None:
            self.state.apply(state)

    def dispatch(self, op: str, msg: dict[str, Any]) -> Any:
        """Serve one request; what candidate code prints meanwhile goes back with the answer."""
        if op in ("exec", "release"):
            return self._dispatch(op, msg)
        if getattr(self.state.local, "depth", 0):  # nested (a callback calls back): one capture
            return self._dispatch(op, msg)
        saved = sys.stdout, sys.stderr
        out, err = io.StringIO(), io.StringIO()
        sys.stdout, sys.stderr = out, err
        self.state.local.depth = 1
        try:
            return self._dispatch(op, msg)
        finally:
            self.state.local.depth = 0
            sys.stdout, sys.stderr = saved
            self.output = (out.getvalue()[:EXEC_OUTPUT_LIMIT], err.getvalue()[:EXEC_OUTPUT_LIMIT])

    def reply_extras(self) -> dict[str, Any]:
        out, err = self.output
        self.output = ("", "")
        extras: dict[str, Any] = self.state.answer_fields()
        if out:
            extras["stdout"] = out
        if err:
            extras["stderr"] = err
        return extras

    def _dispatch(self, op: str, msg: dict[str, Any]) -> Any:
        if op == "import":
            name = msg.get("module")
            if type(name) is not str:
                raise WireError("import needs a module name")
            return importlib.import_module(name)
        if op == "getattr":
            target = self._target(msg)
            value = getattr(target, str(msg.get("name")))
            if isinstance(target, (types.ModuleType, type)) and type(value) in (list, dict, set):
                self.peer.share_answer()  # mod.CACHE.clear(), monkeypatch.setitem(mod.CONFIG, ...)
            return value
        if op == "setattr":
            setattr(self._target(msg), str(msg.get("name")), self.peer.decode(msg.get("value")))
            return None
        if op == "delattr":
            delattr(self._target(msg), str(msg.get("name")))
            return None
        if op == "await":
            return self._await(self._target(msg))
        if op == "exit":
            target = self._target(msg)
            error = msg.get("error")
            if error is None:
                return bool(target.__exit__(None, None, None))
            if type(error) is not dict:
                raise WireError("exit needs an error object or null")
            exc = _rebuild(error, self.peer)
            return bool(target.__exit__(type(exc), exc, None))
        if op == "call":
            target = self._target(msg)
            args, kwargs = self._args(msg)
            return target(*args, **kwargs)
        if op == "method":
            target = self._target(msg)
            name = str(msg.get("name"))
            args, kwargs = self._args(msg)
            builtin = FORWARDED.get(name)
            if builtin is not None and not kwargs:
                return builtin(target, *args)
            return getattr(target, name)(*args, **kwargs)
        if op == "release":
            ids = msg.get("handles", [])
            self.peer.release([i for i in ids if type(i) is int] if type(ids) is list else [])
            return None
        if op == "exec":
            return run_program(msg, self.peer)
        if op == "subclass":
            return self._subclass_object(msg)
        if op == "unpickle":
            data = self.peer.decode(msg.get("data"))
            if type(data) is not bytes:
                raise WireError("unpickle needs bytes")
            return pickle.loads(data)
        raise WireError(f"unknown op {op!r}")

    def _subclass_object(self, msg: dict[str, Any]) -> Any:
        """An object of a subclass of a candidate class that the tests derived: the methods the
        tests override call back the test's object (``peer``), the rest are the class's own."""
        base = self._target(msg)
        peer_obj = self.peer.decode(msg.get("peer"))
        overrides = msg.get("overrides")
        name = msg.get("name")
        if not isinstance(base, type) or not isinstance(peer_obj, TrustedHandle) or type(name) is not str \
                or type(overrides) is not list or not all(type(o) is str for o in overrides):
            raise WireError("subclass needs a class, the test's object, a name and overrides")
        key = (base, peer_obj._desc["$handle"], tuple(overrides))
        sub = self._subclasses.get(key)
        if sub is None:
            namespace: dict[str, Any] = {"__module__": "tests", "__qualname__": name}
            for method in overrides:
                namespace[method] = _override(method)
            sub = type(name, (base,), namespace)
            self._subclasses[key] = sub
        args, kwargs = self._args(msg)
        if msg.get("init") is True:
            obj = sub.__new__(sub, *args, **kwargs) if sub.__new__ is not object.__new__ else object.__new__(sub)
            obj.__dict__["_verify_test_half"] = peer_obj
            type.__getattribute__(sub, "__init__")(obj, *args, **kwargs)
        else:
            obj = object.__new__(sub)
            obj.__dict__["_verify_test_half"] = peer_obj
        return obj

    def _await(self, awaitable: Any) -> Any:
        """Run a coroutine (or other awaitable) of the candidate's to its end, on this
        connection's event loop (the test's loop drives the stand-in, this one the candidate)."""
        import asyncio

        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        if self._loop.is_running():
            raise RuntimeError("a candidate coroutine awaited while another runs (nested event loops)")

        async def drive() -> Any:
            return await awaitable

        return self._loop.run_until_complete(drive())


def _override(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.__dict__["_verify_test_half"], name)(*args, **kwargs)

    method.__name__ = name
    return method


def _trusted_ref(obj: Any) -> dict[str, Any] | None:
    if isinstance(obj, TrustedHandle):
        return obj._ref()
    return None


class TrustedHandle:
    """A callable or object the tests passed in: using it asks the trusted side."""

    def __init__(self, peer: Peer, desc: dict[str, Any]) -> None:
        self._peer = peer
        self._desc = desc

    def _ref(self) -> dict[str, Any]:
        return {"$handle": self._desc["$handle"], "owner": "trusted"}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _remote_call(self._peer, "call", {"target": self._ref(), "args": self._peer.encode(list(args)),
                                                 "kwargs": self._peer.encode(kwargs)})

    def _method(self, name: str, *args: Any) -> Any:
        return _BoundTrusted(self, name)(*args)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        methods = self._desc.get("methods")
        if methods is None or name in methods:
            return _BoundTrusted(self, name)
        return _remote_call(self._peer, "getattr", {"target": self._ref(), "name": name})

    def __iter__(self) -> Any:
        if self._desc.get("kind") == "iterator":
            return self
        return self._method("__iter__")

    def __next__(self) -> Any:
        return self._method("__next__")

    def __len__(self) -> int:
        n = self._method("__len__")
        if type(n) is not int:
            raise TypeError("__len__ returned a non-int")
        return n

    def __getitem__(self, key: Any) -> Any:
        return self._method("__getitem__", key)

    def __contains__(self, item: Any) -> bool:
        return bool(self._method("__contains__", item))

    def __bool__(self) -> bool:
        methods = self._desc.get("methods") or ()
        if "__bool__" in methods or "__len__" in methods:
            return bool(self._method("__bool__"))
        return True

    def __str__(self) -> str:
        return str(self._method("__str__"))

    def __repr__(self) -> str:
        return f"<trusted {self._desc.get('type', 'object')}>"


class _BoundTrusted:
    def __init__(self, handle: TrustedHandle, name: str) -> None:
        self.handle = handle
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        peer = self.handle._peer
        return _remote_call(peer, "method", {"target": self.handle._ref(), "name": self.name,
                                             "args": peer.encode(list(args)), "kwargs": peer.encode(kwargs)})


def _remote_call(peer: Peer, op: str, fields: dict[str, Any]) -> Any:
    try:
        return peer.request(op, **fields)
    except RemoteError as e:
        raise _rebuild(e.payload, peer) from None


_TRUSTED_ERRORS: dict[tuple[str, str, type], type] = {}


def _rebuild(payload: dict[str, Any], peer: Peer | None = None) -> BaseException:
    """An exception raised on the trusted side (a callback's), here: an instance of a class
    named as the test's, subclassing the nearest built-in base (the candidate cannot see the
    tests' classes); the test's own exception object when it reaches the tests again."""
    import builtins

    name = str(payload.get("type", "Exception"))
    base: type = RuntimeError
    for b in [name, *payload.get("bases", [])]:
        cls = getattr(builtins, str(b), None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            base = cls
            break
    message = str(payload.get("message", ""))
    value = payload.get("value")
    if payload.get("module") == "builtins" and base.__name__ == name and value is None:
        return base(message)
    key = (str(payload.get("module", "")), name, base)
    cls = _TRUSTED_ERRORS.get(key)
    if cls is None:
        cls = type(name.rsplit(".", 1)[-1], (base,), {"__module__": key[0], "__qualname__": name,
                                                      "__str__": lambda self: self._verify_message})
        _TRUSTED_ERRORS[key] = cls
    exc = cls(message)
    exc._verify_message = message
    if type(value) is dict and type(value.get("$handle")) is int and value.get("owner") == "trusted":
        exc._verify_ref = {"$handle": value["$handle"], "owner": "trusted"}
    return exc


def exception_classes(cls: type) -> list[list[Any]]:
    """``[module, qualname, [direct bases]]`` of each class outside ``builtins`` in ``cls``'s
    MRO; a base is ``module.qualname`` or a built-in name."""
    out: list[list[Any]] = []
    for klass in cls.__mro__:
        if klass.__module__ == "builtins":
            continue
        bases = [b.__name__ if b.__module__ == "builtins" else f"{b.__module__}.{b.__qualname__}"
                 for b in klass.__bases__]
        out.append([klass.__module__, klass.__qualname__, bases])
    return out


def run_program(msg: dict[str, Any], peer: Peer) -> dict[str, Any]:
    """The ``exec`` op: run a program here, with its output bounded, killed when the requester
    goes away or its timeout passes."""
    argv = peer.decode(msg.get("argv"))
    env = peer.decode(msg.get("env"))
    stdin = peer.decode(msg.get("stdin"))
    cwd = peer.decode(msg.get("cwd"))
    timeout = peer.decode(msg.get("timeout"))
    if type(argv) is not list or not argv or not all(type(a) is str for a in argv):
        raise WireError("exec needs argv, a non-empty list of strings")
    if env is not None and (type(env) is not dict or not all(
            type(k) is str and type(v) is str for k, v in env.items())):
        raise WireError("exec env must map strings to strings")
    with _RUNNING_LOCK:
        proc = subprocess.Popen(argv, cwd=cwd if type(cwd) is str else None, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        _RUNNING.add(proc.pid)
    out: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}

    def drain(stream: Any, sink: bytearray) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            if len(sink) < EXEC_OUTPUT_LIMIT:
                sink += chunk[: EXEC_OUTPUT_LIMIT - len(sink)]

    threads = [threading.Thread(target=drain, args=(proc.stdout, out["stdout"]), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, out["stderr"]), daemon=True)]
    for t in threads:
        t.start()

    def feed() -> None:
        try:
            if type(stdin) in (bytes, bytearray):
                proc.stdin.write(stdin)  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass

    threading.Thread(target=feed, daemon=True).start()
    deadline = time.monotonic() + float(timeout) if type(timeout) in (int, float) else None
    sock = peer.sock
    try:
        while proc.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                _kill(proc)
                raise TimeoutError(f"{argv[0]} ran past its {timeout} s timeout")
            ready, _, _ = select.select([sock], [], [], 0.02)
            if ready and not sock.recv(1, socket.MSG_PEEK):  # the requester went away
                _kill(proc)
                raise ChannelClosed("the requester closed the channel")
    finally:
        # Nothing the program started outlives it: its whole process group goes with it (a
        # test that wants a long-lived server starts it in the background of one exec and
        # talks to it within that exec, docs/task-kinds.md).
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, 9)
        proc.wait()
        with _RUNNING_LOCK:
            _RUNNING.discard(proc.pid)
        # What left the process group (``setsid``, a double fork) goes too.
        kill_strays()
        for t in threads:
            t.join(timeout=5)
    return {"returncode": proc.returncode, "stdout": bytes(out["stdout"]),
            "stderr": bytes(out["stderr"])}


def _newest_pid() -> int:
    """About the highest pid in use in this pid namespace (pids are handed out in rising order):
    that of a child forked and reaped just now."""
    try:
        pid = os.fork()
    except OSError:  # at the process limit: look further
        return 1 << 15
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def kill_strays() -> None:
    """Once no ``exec`` is running: kill every process of this sandbox outside this server's own
    session, with the pid namespace's init (pid 1) and this server (pid 2) spared. A program runs
    in a session of its own and everything it starts inherits that session or makes another
    (``setsid``, a double fork: outside the process group the group kill reached); the candidate
    module's own subprocesses stay in the server's session and are left alone.

    Only where this server is pid 2 of a pid namespace of its own (the cold bwrap start, the warm
    candidate parent's runs, docker nodes): there every pid is the candidate's. The process
    backend's server shares the host's, and only its program's process group is killed."""
    if os.getpid() != 2:
        return
    mine = os.getsid(0)
    killed: set[int] = set()
    with _RUNNING_LOCK:  # no program starts during the sweep
        if _RUNNING:
            return  # another program is running: the last to end sweeps
        for _ in range(100):
            found = []
            for pid in range(3, _newest_pid() + 64):
                try:
                    if os.getsid(pid) != mine and pid not in killed:
                        found.append(pid)
                except OSError:
                    continue
            if not found:
                return
            for pid in found:
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
            killed.update(found)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, 9)
    proc.wait()


def _serve_connection(conn: socket.socket) -> None:
    side = CandidateSide(conn)
    try:
        side.peer.serve_forever()
    finally:
        conn.close()


#: A socket already listening at ``$VERIFY_CHANNEL``, handed to this server by the warm candidate
#: parent (verify_candidate_parent.py: the trusted side bound it before its tests started);
#: None in a cold start, where the server binds the socket itself.
LISTENING_FD: int | None = None


def close_inherited(keep: int | None) -> None:
    """Close every descriptor above 2 but ``keep``: nothing the trusted side's processes held
    (a results pipe, a key's pipe) is ever the candidate's, whatever the backend let through."""
    if keep is None:
        os.closerange(3, 1 << 16)
    else:
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)


def main() -> int:
    close_inherited(LISTENING_FD)
    path = os.environ.get("VERIFY_CHANNEL", "")
    if not path:
        print("verify_candidate_server: VERIFY_CHANNEL is not set", file=sys.stderr)
        return 2
    workdir = os.getcwd()
    # Candidate modules come from the work folder; this server's own folder stays last.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [workdir] + [p for p in sys.path if p not in ("", here, workdir)] + [here]
    if LISTENING_FD is not None:  # bound and listening at ``path`` already (a warm start)
        server = socket.socket(fileno=LISTENING_FD)
    else:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        tmp = f"{path}.{os.getpid()}"
        server.bind(tmp)
        server.listen(64)
        os.rename(tmp, path)  # the socket appears only once it is listening
    _accept_and_serve(server, on_main_thread=True)
    return 0


#: How many threads wait in ``accept`` (an accepting thread serves what it accepted only with
#: another left waiting, so that a second connection is never left in the backlog).
_ACCEPTING = [0]
_ACCEPTING_LOCK = threading.Lock()


def _accept_and_serve(server: socket.socket, on_main_thread: bool = False) -> None:
    """Accept, make sure another thread accepts meanwhile, serve the connection, and again; a
    thread other than the main one ends once it has served and another thread accepts.

    The main thread serves what it accepts: the tests' first connection (in most runs the only
    one) runs the candidate's code on the main thread, as the candidate's own program would.
    Python lets only the main thread set a signal handler, so a candidate that times itself out
    with ``signal.alarm`` or a module that installs a handler when imported (common in real
    projects) failed on every connection served by a thread of its own (``signal only works in
    main thread``), graded as its own failure. (Acceptors start through ``_thread``: no wait for
    the new thread to run, as ``threading.Thread.start`` would make before the connection is served.)"""
    while True:
        with _ACCEPTING_LOCK:
            _ACCEPTING[0] += 1
        try:
            conn, _ = server.accept()
        finally:
            with _ACCEPTING_LOCK:
                _ACCEPTING[0] -= 1
                alone = _ACCEPTING[0] == 0
        if alone:
            _thread.start_new_thread(_accept_and_serve, (server,))
        try:
            _serve_connection(conn)
        except Exception:  # as a thread of its own would end: said, and the server goes on
            traceback.print_exc()
        if not on_main_thread:
            with _ACCEPTING_LOCK:
                if _ACCEPTING[0]:
                    return


if __name__ == "__main__":
    sys.exit(main())
