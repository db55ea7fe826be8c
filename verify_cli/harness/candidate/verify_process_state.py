"""Process-wide state that the tests set for the code under test (docs/wire-protocol.md, "State").

Stdlib only; both sides import it. The trusted side (:class:`TestsState`) sends, with a request,
what changed since the last one: the environment variables the tests set or removed (never the
rest of the test process's environment), the working folder, ``sys.argv``, a replaced
``sys.stdin`` (as a handle: reads go back to the test's object), ``random``'s state once the
tests seeded it, and the logging levels. The candidate side (:class:`ProcessState`) applies it
before the call, and answers with the log records the candidate emitted and, once ``random`` is
in step, its new state. Nothing here runs anything the other side sent: states are plain data.
"""

from __future__ import annotations

import importlib
import logging
import os
import random
import sys
import threading
from typing import Any

#: Attributes of shared library modules that suites patch for the code under test
#: (``monkeypatch.setattr(time, "sleep", ...)``, ``mock.patch("subprocess.run")``): a replacement
#: the tests put there is put in the candidate's copy of the module too, and taken out again.
PATCHABLE: dict[str, tuple[str, ...]] = {
    "time": ("time", "sleep", "monotonic", "perf_counter", "time_ns", "strftime", "localtime",
             "gmtime"),
    "builtins": ("input", "open", "print"),
    "subprocess": ("run", "check_output", "check_call", "call", "Popen"),
    "shutil": ("which", "rmtree", "copy", "move"),
    "os": ("getcwd", "listdir", "remove", "getpid", "cpu_count", "urandom"),
    "os.path": ("exists", "isfile", "isdir", "expanduser", "getmtime", "getsize"),
    "uuid": ("uuid4", "uuid1"),
    "socket": ("gethostname", "create_connection"),
    "platform": ("system", "machine", "node", "python_version"),
    "getpass": ("getuser", "getpass"),
    "urllib.request": ("urlopen",),
    "webbrowser": ("open",),
    "requests": ("get", "post", "put", "delete", "request"),
    "datetime": ("datetime", "date"),
}
#: Environment variables that never cross: the harness's own and pytest's per-test marker.
PRIVATE_ENV_PREFIXES = ("VERIFY_", "PYTEST_")
MAX_LOG_RECORDS = 10_000
RANDOM_VERSION = 3


def _random_state_value(state: Any) -> list[Any]:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def random_state(value: Any) -> tuple[Any, ...]:
    """A ``random.setstate`` argument from its wire form, checked to be only that."""
    if (type(value) is not list or len(value) != 3 or value[0] != RANDOM_VERSION
            or type(value[1]) is not list or len(value[1]) != 625
            or not all(type(x) is int and 0 <= x < 2 ** 32 for x in value[1])
            or not (value[2] is None or type(value[2]) is float)):
        raise ValueError("not a random state")
    return (value[0], tuple(value[1]), value[2])


# --------------------------------------------------------------------------------------------
# The tests' side


class TestsState:
    """What of the test process's state the candidate must see; ``fields()`` before each
    request gives the changes since the last one (an empty dict when nothing changed)."""

    def __init__(self, handle_for: Any) -> None:
        self._handle_for = handle_for
        self._env0 = dict(os.environ)
        self._env_data = self._env_snapshot()
        self._env_sent: dict[str, str | None] = {}
        self._cwd0 = os.getcwd()
        self._cwd_sent: str | None = None
        self._argv0 = list(sys.argv)
        self._argv_sent: list[str] | None = None
        self._stdin0 = sys.stdin
        self._stdin_sent: Any = sys.stdin
        self.random_synced = False
        self._random_known: Any = None
        self._log_version = 0
        self._log_sent = 0
        self._patch0: dict[tuple[str, str], Any] = {}
        self._unseen = set(PATCHABLE)  # modules not imported yet: their originals when they are
        self._see_modules()
        self._patch_sent: dict[tuple[str, str], Any] = {}
        self.patches_dirty = True
        _watch(self)

    @staticmethod
    def _env_snapshot() -> Any:
        data = getattr(os.environ, "_data", None)
        return dict(data) if isinstance(data, dict) else dict(os.environ)

    def _env_changed(self) -> bool:
        data = getattr(os.environ, "_data", None)
        current = data if isinstance(data, dict) else dict(os.environ)
        if current == self._env_data:
            return False
        self._env_data = dict(current)
        return True

    def fields(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        if self._env_changed():
            env = dict(os.environ)
            overrides: dict[str, str | None] = {}
            for key in set(env) | set(self._env0):
                if key.startswith(PRIVATE_ENV_PREFIXES):
                    continue
                if env.get(key) != self._env0.get(key):
                    overrides[key] = env.get(key)
            if overrides != self._env_sent:
                self._env_sent = overrides
                state["env"] = {"$dict": sorted([k, v] for k, v in overrides.items())}
        try:
            cwd: str | None = os.getcwd()
        except OSError:
            cwd = None
        if cwd == self._cwd0:
            cwd = None
        if cwd != self._cwd_sent:
            self._cwd_sent = cwd
            state["cwd"] = cwd
        argv = sys.argv
        if argv != (self._argv_sent if self._argv_sent is not None else self._argv0):
            self._argv_sent = list(argv) if argv != self._argv0 else None
            if all(type(a) is str for a in argv):
                state["argv"] = list(argv) if self._argv_sent is not None else None
        stdin = sys.stdin
        if stdin is not self._stdin_sent:
            self._stdin_sent = stdin
            # pytest's own stand-in while it captures is not the tests' replacement
            ours = stdin is self._stdin0 or type(stdin).__module__.startswith("_pytest")
            state["stdin"] = None if ours else self._handle_for(stdin)
        if self.random_synced:
            current = random.getstate()
            if current != self._random_known:
                self._random_known = current
                version, internal, gauss = current
                state["random"] = [version, list(internal),
                                   None if gauss is None else {"$float": repr(gauss)}]
        patches = self._patches()
        if patches is not None:
            state["patches"] = patches
        if self._log_version != self._log_sent:
            self._log_sent = self._log_version
            state["logging"] = logging_levels()
        return {"state": state} if state else {}

    def _see_modules(self) -> None:
        modules = sys.modules
        for name in [m for m in self._unseen if m in modules]:
            self._unseen.discard(name)
            for attr in PATCHABLE[name]:
                self._patch0[(name, attr)] = getattr(modules[name], attr, None)

    def _patches(self) -> list[list[Any]] | None:
        """``[[module, attr, value-or-null]...]``: the library attributes the tests replaced
        (null: put back) since the last request, or None when none changed."""
        if self._unseen:
            self._see_modules()
        if not _HOOKED["mock"] and "unittest.mock" in sys.modules:
            _watch_patching()
        if not self.patches_dirty:
            return None
        self.patches_dirty = False
        changed: list[list[Any]] = []
        modules = sys.modules
        for key, original in self._patch0.items():
            module = modules.get(key[0])
            current = getattr(module, key[1], None) if module is not None else original
            sent = self._patch_sent.get(key, original)
            if current is sent:
                continue
            if current is original:
                del self._patch_sent[key]
                changed.append([key[0], key[1], None])
            else:
                self._patch_sent[key] = current
                changed.append([key[0], key[1], self._handle_for(current) if callable(current)
                                else None])
        return changed or None

    def random_from_candidate(self, value: Any) -> None:
        state = random_state(value)
        random.setstate(state)
        self._random_known = random.getstate()

    def seeded(self) -> None:
        self.random_synced = True
        self._random_known = None

    def logging_changed(self) -> None:
        self._log_version += 1


def logging_levels() -> dict[str, Any]:
    levels = [["", logging.root.level]]
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and logger.level != logging.NOTSET:
            levels.append([name, logger.level])
    return {"levels": levels, "disable": logging.root.manager.disable}


_WATCHED: list[TestsState] = []


def _watch(state: TestsState) -> None:
    """Seeding ``random`` and setting a logger's level mark the state to send (cheaper than
    comparing them before every call)."""
    _WATCHED[:] = [state]
    _watch_patching()
    if getattr(random.seed, "_verify_watch", False):
        return
    seed, setstate, set_level, disable = random.seed, random.setstate, logging.Logger.setLevel, logging.disable

    def watched_seed(*args: Any, **kwargs: Any) -> Any:
        result = seed(*args, **kwargs)
        for s in _WATCHED:
            s.seeded()
        return result

    def watched_setstate(value: Any) -> Any:
        result = setstate(value)
        for s in _WATCHED:
            s.seeded()
        return result

    def watched_set_level(self: logging.Logger, level: Any) -> None:
        set_level(self, level)
        for s in _WATCHED:
            s.logging_changed()

    def watched_disable(level: int = logging.CRITICAL) -> None:
        disable(level)
        for s in _WATCHED:
            s.logging_changed()

    watched_seed._verify_watch = True  # type: ignore[attr-defined]
    random.seed, random.setstate = watched_seed, watched_setstate  # type: ignore[assignment]
    logging.Logger.setLevel = watched_set_level  # type: ignore[method-assign]
    logging.disable = watched_disable


_HOOKED = {"mock": False}


def _patched(*_: Any) -> None:
    for s in _WATCHED:
        s.patches_dirty = True


def _watch_patching() -> None:
    """``monkeypatch.setattr``/``delattr``/``undo`` and ``mock.patch``'s start and stop mark
    the library patches to compare before the next request (direct assignments to a library
    module's attribute are not seen)."""
    targets: list[tuple[Any, str]] = []
    mp = sys.modules.get("_pytest.monkeypatch")
    if mp is not None:
        targets += [(mp.MonkeyPatch, n) for n in ("setattr", "delattr", "undo")]
    mock = sys.modules.get("unittest.mock")  # never imported here: only when the tests use it
    if mock is not None:
        targets += [(mock._patch, "__enter__"), (mock._patch, "__exit__")]
        _HOOKED["mock"] = True
    for owner, name in targets:
        original = getattr(owner, name)
        if getattr(original, "_verify_watch", False):
            continue

        def wrapper(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            try:
                return __original(*args, **kwargs)
            finally:
                _patched()

        wrapper._verify_watch = True  # type: ignore[attr-defined]
        setattr(owner, name, wrapper)


def emit_records(records: Any) -> None:
    """Log records the candidate emitted, handed to this process's loggers (``caplog``)."""
    if type(records) is not list:
        return
    for rec in records[:MAX_LOG_RECORDS]:
        if type(rec) is not list or len(rec) != 7:
            continue
        name, levelno, message, pathname, lineno, func, exc_text = rec
        if not (type(name) is str and type(levelno) is int and type(message) is str):
            continue
        logger = logging.getLogger(name) if name and name != "root" else logging.root
        if not logger.isEnabledFor(levelno):
            continue
        pathname = pathname if type(pathname) is str else ""
        logger.handle(logging.makeLogRecord({
            "name": name, "levelno": levelno, "levelname": logging.getLevelName(levelno),
            "msg": message, "args": None, "pathname": pathname,
            "filename": os.path.basename(pathname), "module": os.path.splitext(os.path.basename(pathname))[0],
            "lineno": lineno if type(lineno) is int else 0, "funcName": func if type(func) is str else "",
            "exc_text": exc_text if type(exc_text) is str else None}))


# --------------------------------------------------------------------------------------------
# The candidate's side


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[list[Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) >= MAX_LOG_RECORDS:
            return
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        exc_text = None
        if record.exc_info:
            try:
                exc_text = logging.Formatter().formatException(record.exc_info)
            except Exception:
                exc_text = None
        self.records.append([record.name, record.levelno, message, record.pathname, record.lineno,
                             record.funcName, exc_text])


class ProcessState:
    """Applies the tests' state in the candidate's process, and collects what goes back."""

    def __init__(self, peer: Any) -> None:
        self.peer = peer
        self.local = threading.local()
        self._env0 = dict(os.environ)
        self._env_set: set[str] = set()
        self._cwd0 = os.getcwd()
        self._argv0 = list(sys.argv)
        self._stdin0 = sys.stdin
        self._levels0: dict[str, int] = {}
        self.random_synced = False
        self._random_sent: Any = None
        self._capture = _Capture()
        logging.root.addHandler(self._capture)
        self._patched: dict[tuple[str, str], Any] = {}

    def apply(self, state: Any) -> None:
        if type(state) is not dict:
            raise ValueError("state must be an object")
        if "env" in state:
            env = self.peer.decode(state["env"])
            if type(env) is not dict or not all(type(k) is str and (v is None or type(v) is str)
                                                 for k, v in env.items()):
                raise ValueError("state env must map names to strings or null")
            for key in self._env_set - set(env):
                if key in self._env0:
                    os.environ[key] = self._env0[key]
                else:
                    os.environ.pop(key, None)
            for key, value in env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._env_set = set(env)
        if "cwd" in state:
            cwd = state["cwd"]
            target = self._cwd0 if cwd is None else cwd
            if type(target) is not str:
                raise ValueError("state cwd must be a string or null")
            try:
                os.chdir(target)
            except OSError as e:
                raise FileNotFoundError(
                    f"the tests' working folder {target} (os.chdir / monkeypatch.chdir) is not "
                    f"visible to the candidate process: {e.strerror}") from None
        if "argv" in state:
            argv = state["argv"]
            if argv is not None and not (type(argv) is list and all(type(a) is str for a in argv)):
                raise ValueError("state argv must be a list of strings or null")
            sys.argv[:] = self._argv0 if argv is None else argv
        if "stdin" in state:
            stdin = self.peer.decode(state["stdin"])
            sys.stdin = self._stdin0 if stdin is None else stdin
        if "random" in state:
            value = state["random"]
            if type(value) is list and len(value) == 3 and type(value[2]) is dict:
                value = [value[0], value[1], self.peer.decode(value[2])]
            random.setstate(random_state(value))
            self.random_synced = True
            self._random_sent = random.getstate()
        if "logging" in state:
            self._apply_logging(state["logging"])
        if "patches" in state:
            self._apply_patches(state["patches"])

    def _apply_patches(self, patches: Any) -> None:
        if type(patches) is not list:
            raise ValueError("state patches must be a list")
        for item in patches:
            if not (type(item) is list and len(item) == 3 and item[0] in PATCHABLE
                    and item[1] in PATCHABLE[item[0]]):
                raise ValueError("a patch names a module attribute outside the list")
            module = importlib.import_module(item[0])
            key = (item[0], item[1])
            if item[2] is None:
                if key in self._patched:
                    setattr(module, item[1], self._patched.pop(key))
                continue
            self._patched.setdefault(key, getattr(module, item[1], None))
            setattr(module, item[1], self.peer.decode(item[2]))

    def _apply_logging(self, config: Any) -> None:
        if type(config) is not dict or type(config.get("levels")) is not list:
            raise ValueError("state logging needs levels")
        wanted: dict[str, int] = {}
        for item in config["levels"]:
            if type(item) is list and len(item) == 2 and type(item[0]) is str and type(item[1]) is int:
                wanted[item[0]] = item[1]
        for name, level in list(self._levels0.items()):
            if name not in wanted:
                (logging.getLogger(name) if name else logging.root).setLevel(level)
                del self._levels0[name]
        for name, level in wanted.items():
            logger = logging.getLogger(name) if name else logging.root
            self._levels0.setdefault(name, logger.level)
            logger.setLevel(level)
        disable = config.get("disable")
        if type(disable) is int:
            logging.disable(disable)

    def answer_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self._capture.records:
            out["logs"] = self._capture.records
            self._capture.records = []
        if self.random_synced:
            current = random.getstate()
            if current != self._random_sent:
                self._random_sent = current
                version, internal, gauss = current
                out["random"] = [version, list(internal),
                                 None if gauss is None else {"$float": repr(gauss)}]
        return out
