"""The function-call runner: ``python -m verify_calls`` (a task of kind 'calls').

The trusted side of the run. It never imports candidate code: the candidate's module is a
stand-in (``verify_standin``) whose entry point is a remote callable; every call crosses to the
candidate server (docs/wire-protocol.md) by value, and what comes back is plain data or a handle
that equals only itself, so a returned object claiming to equal everything cannot pass. The
tests run here, in this process:

- ``check``: ``check.py`` (tests/ or hidden_tests/) defines ``check(candidate)`` (HumanEval);
  helpers the prompt defined are part of check.py, so the candidate cannot redefine them;
- ``asserts``: ``asserts.py`` holds assert statements calling the entry point by name (MBPP),
  one test each; its other top-level statements run first, once (setup);
- ``table``: ``table.json`` lists ``{"args": [...], "kwargs": {...}, "expected": ...}`` rows.

Under two-process grading the candidate server runs in a sandbox of its own and
``VERIFY_CHANNEL`` names its socket. Without one (a backend that cannot, or a task that asks for
in-process), this runner starts the server itself, as a separate process: the candidate still
never shares a process with the tests, but it shares their sandbox, so the runner holds the
test folders against a snapshot and signs only its own results.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
import time
from typing import Any

from verify_runner_common import (
    CaseResult,
    candidate_environment,
    case_classname,
    changed_test_files,
    find_files,
    finish,
    hash_test_files,
    start_runner,
    write_results,
)

CHANNEL_ENV = "VERIFY_CHANNEL"
MODULES_ENV = "VERIFY_CANDIDATE_MODULES"
HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "candidate", "verify_candidate_server.py")
STYLE_FILES = {"check": "check.py", "asserts": "asserts.py", "table": "table.json"}


class CallTimeout(BaseException):
    """A test ran past its time limit (BaseException: test code catching Exception misses it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise CallTimeout()


Test = tuple[CaseResult, Any]  # the case, and a function that runs it given the candidate


def _check_tests(rel: str, path: str, entry: str) -> list[Test]:
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    code = compile(source, path, "exec")
    case = CaseResult(case_classname(rel), "check")

    def run(candidate: Any) -> None:
        namespace: dict[str, Any] = {"__name__": "verify_check", entry.rpartition(".")[2]: candidate}
        exec(code, namespace)
        check = namespace.get("check")
        if not callable(check):
            raise LookupError(f"{rel} defines no check(candidate)")
        check(candidate)

    return [(case, run)]


def _assert_tests(rel: str, path: str, entry: str) -> list[Test]:
    import ast

    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    tree = ast.parse(source, path)
    setup = ast.Module(body=[n for n in tree.body if not isinstance(n, ast.Assert)], type_ignores=[])
    setup_code = compile(setup, path, "exec")
    namespace: dict[str, Any] = {"__name__": "verify_asserts"}
    state: dict[str, bool] = {}
    tests: list[Test] = []
    for i, node in enumerate((n for n in tree.body if isinstance(n, ast.Assert)), start=1):
        code = compile(ast.Module(body=[node], type_ignores=[]), path, "exec")

        def run(candidate: Any, code: Any = code) -> None:
            if not state:
                namespace[entry.rpartition(".")[2]] = candidate
                state["ready"] = True
                exec(setup_code, namespace)
            exec(code, namespace)

        tests.append((CaseResult(case_classname(rel), f"assert_{i}"), run))
    return tests


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively (JSON has no tuples); anything else as it is."""
    if type(value) in (list, tuple):
        return [_plain(v) for v in value]
    if type(value) is dict:
        return {k: _plain(v) for k, v in value.items()}
    return value


def _same(got: Any, want: Any) -> bool:
    """``got == want`` for plain data, where a NaN equals a NaN (a table may expect one)."""
    if type(got) is float and type(want) is float and got != got and want != want:
        return True
    if type(got) is list and type(want) is list:
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    if type(got) is dict and type(want) is dict:
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in got)
    return bool(got == want)


def _table_tests(rel: str, path: str, entry: str) -> list[Test]:
    with open(path, encoding="utf-8") as fh:
        rows = json.load(fh)
    tests: list[Test] = []
    for i, row in enumerate(rows if isinstance(rows, list) else [], start=1):
        def run(candidate: Any, row: Any = row) -> None:
            got = candidate(*row.get("args", []), **row.get("kwargs", {}))
            # Only plain data decodes as such; a handle equals only itself, never a JSON value.
            # ``expected_any``: values any one of which passes (APPS: a result or [result]).
            accepted = row["expected_any"] if isinstance(row.get("expected_any"), list) else [row.get("expected")]
            if type(got) not in (int, float, str, bool, list, tuple, dict, type(None)) or \
                    not any(_same(_plain(got), want) for want in accepted):
                raise AssertionError(f"{entry}(*{row.get('args', [])!r}) returned {got!r}, "
                                     f"expected {row.get('expected')!r}")

        tests.append((CaseResult(case_classname(rel), f"row_{i}"), run))
    return tests


LOADERS = {"check": _check_tests, "asserts": _assert_tests, "table": _table_tests}


def load_tests(root: str, style: str, entry: str) -> list[Test]:
    tests: list[Test] = []
    for rel, path in find_files(root, STYLE_FILES.get(style, "check.py")):
        if os.path.basename(rel) != STYLE_FILES.get(style):
            continue
        try:
            tests.extend(LOADERS[style](rel, path, entry))
        except (SyntaxError, ValueError, OSError) as e:
            tests.append((CaseResult(case_classname(rel), "load", "error", f"{rel}: {e}"), lambda c: None))
    return tests


def start_local_server(root: str) -> tuple[Any, str]:
    """The candidate server as a process of its own in this sandbox (no second sandbox here)."""
    import subprocess
    import tempfile

    folder = tempfile.mkdtemp(prefix="verify-channel-")
    channel = os.path.join(folder, "channel.sock")
    env = candidate_environment()
    env.update({CHANNEL_ENV: channel, "PYTHONPATH": os.path.dirname(SERVER),
                "VERIFY_CANDIDATE_HARNESS": os.path.dirname(SERVER)})
    proc = subprocess.Popen([sys.executable, SERVER], cwd=root, env=env, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    return proc, folder


def main() -> None:
    key, config, root, results_dir = start_runner()
    entry = str(config.get("entry_point", ""))
    module_file = str(config.get("module", "solution.py"))
    module_name = module_file[:-3].replace("/", ".") if module_file.endswith(".py") else module_file
    style = str(config.get("style", "check"))
    call_seconds = float(config.get("call_seconds", 5.0))
    total_seconds = float(config.get("total_seconds", 60.0))
    started = time.monotonic()
    local: tuple[Any, str] | None = None
    if not os.environ.get(CHANNEL_ENV):  # first, so that its start overlaps the runner's
        local = start_local_server(root)
        os.environ[CHANNEL_ENV] = os.path.join(local[1], "channel.sock")
    pristine = hash_test_files(root)
    tests = load_tests(root, style, entry)
    os.environ[MODULES_ENV] = json.dumps([module_name])
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        run_tests(tests, module_name, entry, call_seconds, total_seconds, started)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if local is not None:
            with contextlib.suppress(OSError):
                os.killpg(local[0].pid, signal.SIGKILL)
            local[0].wait()
            import shutil

            shutil.rmtree(local[1], ignore_errors=True)
    cases = [case for case, _ in tests]
    if not cases:
        cases.append(CaseResult("", "calls", "error", f"no {STYLE_FILES.get(style)} under tests/ or hidden_tests/"))
    write_results(results_dir, "calls", cases, key, changed_test_files(root, pristine))
    finish(cases)


def run_tests(tests: list[Test], module_name: str, entry: str, call_seconds: float,
              total_seconds: float, started: float) -> None:
    import verify_standin

    verify_standin.install()  # the stand-in importer: the candidate's module is remote

    candidate: Any = None
    broken = ""
    try:
        signal.setitimer(signal.ITIMER_REAL, max(call_seconds, 10.0))
        module = importlib.import_module(module_name)
        candidate = entry_callable(module, entry)
    except CallTimeout:
        broken = "the candidate's module did not load in time"
    except BaseException as e:  # whatever the candidate's import raised, it is its failure
        broken = f"the candidate's {entry} is not available: {type(e).__name__}: {e}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    for case, run in tests:
        if case.outcome != "passed":
            continue
        if broken:
            case.outcome, case.message = "failed", broken
            continue
        left = total_seconds - (time.monotonic() - started)
        if left <= 0:
            case.outcome, case.message = "failed", f"not run: the total time limit ({total_seconds:g}s) was spent"
            continue
        limit = min(call_seconds, left)
        t0 = time.monotonic()
        try:
            signal.setitimer(signal.ITIMER_REAL, limit)
            run(candidate)
        except CallTimeout:
            case.outcome, case.message = "failed", f"time limit exceeded ({limit:g}s)"
            # The call may still be running in the candidate: its answer would arrive out of
            # turn, so no later call can use this channel.
            broken = "not run: an earlier call ran past its time limit"
        except AssertionError as e:
            case.outcome = "failed"
            case.message = f"AssertionError{': ' + str(e) if str(e) else ''}{_where_any(e)}"
        except verify_standin.CandidateUnavailable as e:
            case.outcome, case.message = "failed", f"the candidate process is gone: {e}"
            broken = "not run: the candidate process is gone"
        except BaseException as e:  # a test error or the candidate's exception, raised here
            case.outcome, case.message = "failed", f"{type(e).__name__}: {str(e)[:500]}{_where_any(e)}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            case.seconds = time.monotonic() - t0


def entry_callable(module: Any, entry: str) -> Any:
    """The entry point: ``name`` is the module's function, ``Class.name`` the method of a new
    instance of the module's class for each call (a LeetCode-style ``Solution``)."""
    owner, _, method = entry.rpartition(".")
    if not owner:
        return getattr(module, entry)
    cls = getattr(module, owner)

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(cls(), method)(*args, **kwargs)

    call.__name__ = call.__qualname__ = method
    return call


def _where_any(exc: BaseException) -> str:
    """The test-file line where ``exc`` surfaced (the innermost frame in a test folder)."""
    import traceback

    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename and ("/tests/" in frame.filename or "/hidden_tests/" in frame.filename):
            return f" (line {frame.lineno}: {(frame.line or '').strip()[:200]})"
    return ""


if __name__ == "__main__":
    main()
