"""pytest plugin loaded by the harness (PYTEST_PLUGINS=verify_shuffle,verify_harness).

Stdlib and pytest only: it runs under the task's interpreter. Every feature is off unless its
variable is set, and each session starts afresh in ``pytest_load_initial_conftests`` (before any
conftest or candidate code is imported), so a warm worker that imported this module once still
gives every forked run its own state.

- ``VERIFY_SEAL_FD``: the descriptor of a pipe holding the grader's per-run secret (never in any
  environment). Read once and closed at once, this process made not dumpable; at the
  end of the session the plugin writes ``$VERIFY_RESULTS_DIR/verify-seal-<pid>.json``: what
  pytest itself collected and reported, whether the test framework, the builtins or the task's
  test files were tampered with, and an HMAC under the key. The grader trusts a JUnit file only
  as far as this record agrees with it (a forged results file written by candidate code before
  ``os._exit(0)`` has no valid record).
- ``VERIFY_TEST_DIRS``: folders (relative to ``$VERIFY_WORKDIR``) whose files must not change.
- ``VERIFY_SELECT_TESTS``: a JSON list of test ids (``classname::name``, as in the JUnit file):
  only those run, the rest are deselected.
- ``VERIFY_FAIL_FAST=1``: stop at the first failing test (like ``-x``), or at the first sign
  of tampering (the run is untrusted whatever follows).
- ``VERIFY_TEST_TIMEOUT``: seconds (with ``VERIFY_FAIL_FAST`` only): a test's call that runs
  longer fails (SIGALRM in the main thread), which ends the run, instead of a hang holding it
  to its wall limit. Never in a run that goes on after a failure: a test cut mid-call may leave
  the candidate's end of a two-process call unanswered.
- ``VERIFY_COVERAGE``: a JSON list of files (relative to ``$VERIFY_WORKDIR``) whose executed
  lines are recorded per test into ``$VERIFY_RESULTS_DIR/verify-coverage.json``, with the lines
  run outside any test (imports) and the tests that started subprocesses (not traced). A JSON
  object ``{file: [line, ...]}`` instead traces only the functions (code objects) that hold one
  of the lines given: the rest of the file runs untraced.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import sys
import threading
from typing import Any

import pytest
from verify_runner_common import take_seal_key

# Bound now, before candidate code can replace them in their modules.
_dumps = json.dumps
_loads = json.loads
_hmac_new = hmac.new
_sha256 = hashlib.sha256
_open = open
_signal = signal.signal
_setitimer = signal.setitimer

#: How a test cut by ``VERIFY_TEST_TIMEOUT`` fails (audit reads it: a mutant's timeout).
TEST_TIMEOUT_MESSAGE = "the test ran past its time limit (VERIFY_TEST_TIMEOUT)"

SEAL_KEY_ENV = "VERIFY_SEAL_KEY"
SEAL_PREFIX = "verify-seal-"
COVERAGE_FILE = "verify-coverage.json"
OUTSIDE_TESTS = "<outside tests>"


def junit_id(nodeid: str) -> str:
    """The test id the grader reads from pytest's JUnit XML (``classname::name``)."""
    try:
        from _pytest.junitxml import bin_xml_escape, mangle_test_address

        names = [str(bin_xml_escape(n)) for n in mangle_test_address(nodeid)]
    except Exception:
        return nodeid
    classname = ".".join(names[:-1])
    return f"{classname}::{names[-1]}" if classname else names[-1]


# --------------------------------------------------------------------------------------------
# Tamper evidence: what candidate code must leave alone


#: (module, class or None): the namespaces whose entries candidate code must not replace.
#: Modules this pytest version lacks are skipped.
_WATCHED = (
    ("builtins", None), ("pytest", None), ("_pytest.runner", None), ("_pytest.runner", "CallInfo"),
    ("_pytest.reports", None), ("_pytest.reports", "TestReport"), ("_pytest.reports", "BaseReport"),
    ("_pytest.outcomes", None), ("_pytest.python_api", None), ("_pytest.raises", None),
    ("_pytest.approx", None), ("_pytest.main", None), ("_pytest.python", None),
    ("_pytest.python", "Function"), ("_pytest.junitxml", None), ("_pytest.junitxml", "LogXML"),
    ("_pytest.junitxml", "_NodeReporter"), ("unittest.case", None), ("unittest.case", "TestCase"),
)


def _namespaces() -> dict[str, Any]:
    """The live namespaces whose entries candidate code must not replace."""
    import importlib

    out: dict[str, Any] = {}
    for module_name, cls in _WATCHED:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if cls is None:
            out[module_name] = module.__dict__
        elif isinstance(getattr(module, cls, None), type):
            out[f"{module_name}.{cls}"] = vars(getattr(module, cls))
    return out


def _behaviour(value: Any) -> bool:
    return callable(value) or isinstance(value, (classmethod, staticmethod, property))


_VOLATILE = {"_", "__warningregistry__", "__loader__"}


def _hash_tree(root: str, folders: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for folder in folders:
        base = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(dirpath, name)
                out[os.path.relpath(path, root)] = _hash_file(path)
    return out


def _conftests(root: str, limit: int = 200) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", "node_modules", ".git")]
        if "conftest.py" in filenames:
            path = os.path.join(dirpath, "conftest.py")
            out[os.path.relpath(path, root)] = _hash_file(path)
            if len(out) >= limit:
                break
    return out


def _hash_file(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return _sha256(fh.read()).hexdigest()
    except OSError:
        return "unreadable"


class _Run:
    """The state of one pytest session."""

    def __init__(self) -> None:
        self.key = take_seal_key().encode()
        self.workdir = os.environ.get("VERIFY_WORKDIR") or os.getcwd()
        self.results_dir = os.environ.get("VERIFY_RESULTS_DIR", "")
        dirs = os.environ.get("VERIFY_TEST_DIRS", "")
        self.test_dirs = [d for d in dirs.split(",") if d]
        self.test_files = _hash_tree(self.workdir, self.test_dirs) if self.key else {}
        # conftest files laid out before the session (the task's, or a candidate's where the
        # task's editable paths name conftest.py): pytest may load these, and no others.
        self.start_conftests = _conftests(self.workdir) if self.key else {}
        # Callables only: tests may legitimately set data (unittest.TestCase.maxDiff = None).
        self.snapshot = {k: {n: v for n, v in ns.items() if _behaviour(v)}
                         for k, ns in _namespaces().items()} if self.key else {}
        self.tampered: list[str] = []
        self.collected: list[str] = []
        self.outcomes: dict[str, str] = {}
        self.session: Any = None
        selected = os.environ.get("VERIFY_SELECT_TESTS")
        self.select: set[str] | None = None
        if selected:
            try:
                self.select = {str(t) for t in json.loads(selected)}
            except ValueError:
                self.select = None
        self.fail_fast = os.environ.get("VERIFY_FAIL_FAST") == "1"
        self.test_timeout = 0.0
        if self.fail_fast:
            try:
                self.test_timeout = max(0.0, float(os.environ.get("VERIFY_TEST_TIMEOUT") or 0))
            except ValueError:
                self.test_timeout = 0.0
        self.coverage: _Coverage | None = None
        cov = os.environ.get("VERIFY_COVERAGE")
        if cov:
            wanted: dict[str, set[int]] | None = None
            try:
                doc = json.loads(cov)
                if isinstance(doc, dict):
                    wanted = {str(f): {int(n) for n in lines} for f, lines in doc.items()}
                    files = list(wanted)
                else:
                    files = [str(f) for f in doc]
            except (ValueError, TypeError):
                files = []
            if files:
                self.coverage = _Coverage(self.workdir, files, wanted)

    # -- tamper evidence ----------------------------------------------------------------------
    def check_untouched(self, where: str) -> None:
        if not self.key:
            return
        live = _namespaces()
        for space, saved in self.snapshot.items():
            now = live.get(space, {})
            for name, value in saved.items():
                if name in _VOLATILE:
                    continue
                if now.get(name, _MISSING) is not value:
                    self._flag(f"{space}.{name} was replaced ({where})")

    def check_test_files(self, where: str, path: str | None = None) -> None:
        if not self.key:
            return
        if path is not None:
            rel = os.path.relpath(path, self.workdir)
            if rel in self.test_files and _hash_file(path) != self.test_files[rel]:
                self._flag(f"test file {rel} changed ({where})")
            return
        now = _hash_tree(self.workdir, self.test_dirs)
        for rel in sorted(set(now) | set(self.test_files)):
            if now.get(rel) != self.test_files.get(rel):
                what = "added" if rel not in self.test_files else (
                    "deleted" if rel not in now else "changed")
                self._flag(f"test file {rel} {what} ({where})")

    def check_plugins(self, config: Any) -> None:
        """Plugins defined in the work folder must be the task's own conftest files."""
        if not self.key:
            return
        for plugin in config.pluginmanager.get_plugins():
            module = plugin if hasattr(plugin, "__file__") else sys.modules.get(
                getattr(type(plugin), "__module__", ""), None)
            path = getattr(module, "__file__", None)
            if not path:
                continue
            path = os.path.realpath(path)
            root = os.path.realpath(self.workdir)
            if not path.startswith(root + os.sep):
                continue
            rel = os.path.relpath(path, root)
            if rel not in self.test_files and rel not in self.start_conftests:
                self._flag(f"a pytest plugin from {rel} was registered")

    def _flag(self, message: str) -> None:
        if message not in self.tampered and len(self.tampered) < 50:
            self.tampered.append(message)
        if self.fail_fast and self.session is not None:
            # A tampered run is never trusted, whatever its tests say: stop it here.
            self.session.shouldfail = "stopped: the test framework was tampered with (VERIFY_FAIL_FAST)"

    # -- the record ---------------------------------------------------------------------------
    def record(self, tid: str, outcome: str) -> None:
        previous = self.outcomes.get(tid)
        rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
        if previous is None or rank[outcome] > rank.get(previous, 0):
            self.outcomes[tid] = outcome

    def write_seal(self, exitstatus: int) -> None:
        if not self.key or not self.results_dir:
            return
        payload = _dumps({"version": 1, "pid": os.getpid(), "exitstatus": int(exitstatus),
                              "collected": self.collected, "outcomes": self.outcomes,
                              "tampered": self.tampered}, sort_keys=True)
        mac = _hmac_new(self.key, payload.encode(), _sha256).hexdigest()
        path = os.path.join(self.results_dir, f"{SEAL_PREFIX}{os.getpid()}.json")
        try:
            with _open(path, "w", encoding="utf-8") as fh:
                fh.write(_dumps({"payload": payload, "mac": mac}))
        except OSError:
            pass


_MISSING = object()
_RUN: _Run | None = None


# --------------------------------------------------------------------------------------------
# Coverage


class _Coverage:
    """Lines of the watched files executed per test (sys.settrace; only those files are traced)."""

    def __init__(self, workdir: str, files: list[str], wanted: dict[str, set[int]] | None = None) -> None:
        self.workdir = workdir
        self.paths = {os.path.realpath(os.path.join(workdir, f)): f for f in files}
        self.current = OUTSIDE_TESTS
        self.lines: dict[str, dict[int, set[str]]] = {f: {} for f in files}
        self.spawners: set[str] = set()
        self.wanted = wanted
        self._code_files: dict[Any, str | None] = {}

    def _file_of(self, code: Any) -> str | None:
        try:
            return self._code_files[code]
        except KeyError:
            rel = self.paths.get(os.path.realpath(code.co_filename))
            if rel is not None and self.wanted is not None and not self._holds(code, self.wanted.get(rel, set())):
                rel = None
            self._code_files[code] = rel
            return rel

    @staticmethod
    def _holds(code: Any, lines: set[int]) -> bool:
        """Whether ``code``'s own instructions (not its nested functions') are on any of ``lines``."""
        if not lines:
            return False
        try:
            own = {n for _start, _end, n in code.co_lines() if n is not None}
        except AttributeError:  # before Python 3.10
            import dis

            own = {n for _offset, n in dis.findlinestarts(code)}
        own.add(code.co_firstlineno)
        return not own.isdisjoint(lines)

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        rel = self._file_of(frame.f_code)
        if rel is None:
            return None
        per_line = self.lines[rel]
        test = self.current

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                per_line.setdefault(frame.f_lineno, set()).add(self.current)
            return local

        per_line.setdefault(frame.f_lineno, set()).add(test)
        return local

    def start(self) -> None:
        self._patch_spawning()
        sys.settrace(self._global)
        threading.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)

    def _patch_spawning(self) -> None:
        import subprocess

        cov = self

        def mark() -> None:
            cov.spawners.add(cov.current)

        original_init = subprocess.Popen.__init__

        def popen_init(self: Any, *args: Any, **kwargs: Any) -> None:
            mark()
            original_init(self, *args, **kwargs)

        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        for name in ("system", "fork", "posix_spawn", "posix_spawnp", "execv", "execve", "spawnv"):
            original = getattr(os, name, None)
            if original is None:
                continue

            def wrapper(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                mark()
                return _original(*args, **kwargs)

            setattr(os, name, wrapper)

    def write(self, results_dir: str) -> None:
        doc = {"files": {rel: {str(line): sorted(tests) for line, tests in sorted(per_line.items())}
                         for rel, per_line in self.lines.items()},
               "spawners": sorted(self.spawners)}
        try:
            with open(os.path.join(results_dir, COVERAGE_FILE), "w", encoding="utf-8") as fh:
                fh.write(_dumps(doc))
        except OSError:
            pass


# --------------------------------------------------------------------------------------------
# Hooks


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    global _RUN
    _RUN = _Run()
    if _RUN.coverage is not None:
        _RUN.coverage.start()


def pytest_sessionstart(session: Any) -> None:
    if _RUN is not None:
        _RUN.session = session


def pytest_collect_file(file_path: Any, parent: Any) -> None:
    if _RUN is not None and _RUN.key:
        _RUN.check_test_files("before collecting it", str(file_path))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    if _RUN is None or _RUN.select is None:
        return
    keep: list[Any] = []
    drop: list[Any] = []
    for item in items:
        (keep if junit_id(item.nodeid) in _RUN.select else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_finish(session: Any) -> None:
    if _RUN is not None:
        _RUN.collected = [junit_id(item.nodeid) for item in session.items]
        _RUN.check_untouched("after collection")


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    if _RUN is None:
        return
    _RUN.check_untouched(f"before {junit_id(nodeid)}")
    if _RUN.coverage is not None:
        _RUN.coverage.current = junit_id(nodeid)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    if _RUN is not None and _RUN.coverage is not None:
        _RUN.coverage.current = OUTSIDE_TESTS


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Any:
    limit = _RUN.test_timeout if _RUN is not None else 0.0
    if not limit or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: Any) -> None:
        pytest.fail(f"{TEST_TIMEOUT_MESSAGE}: {limit:g} s", pytrace=False)

    previous = _signal(signal.SIGALRM, expired)
    _setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        _setitimer(signal.ITIMER_REAL, 0)
        _signal(signal.SIGALRM, previous)


def pytest_runtest_logreport(report: Any) -> None:
    if _RUN is None:
        return
    tid = junit_id(report.nodeid)
    if report.failed:
        _RUN.record(tid, "failed" if report.when == "call" else "error")
        if _RUN.fail_fast and _RUN.session is not None:
            _RUN.session.shouldfail = "stopped at the first failure (VERIFY_FAIL_FAST)"
    elif report.skipped:
        _RUN.record(tid, "skipped")
    elif report.when == "call":
        _RUN.record(tid, "passed")


def pytest_collectreport(report: Any) -> None:
    if _RUN is None or report.passed:
        return
    _RUN.record(junit_id(report.nodeid), "error" if report.failed else "skipped")
    if report.failed and _RUN.fail_fast and _RUN.session is not None:
        _RUN.session.shouldfail = "stopped at the first failure (VERIFY_FAIL_FAST)"


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if _RUN is None:
        return
    if _RUN.coverage is not None:
        _RUN.coverage.stop()
        if _RUN.results_dir:
            _RUN.coverage.write(_RUN.results_dir)
    _RUN.check_untouched("at the end of the session")
    _RUN.check_test_files("at the end of the session")
    _RUN.check_plugins(session.config)
    _RUN.write_seal(exitstatus)
