"""The stand-in importer and the candidate server, without a sandbox: what a test sees.

The server runs as a subprocess in a work folder holding the candidate's module; pytest runs
in another, with the stand-in plugin, the way a two-process run starts them (the sandboxes
around them are the backends' business, tested in test_hack_suite and the parity tests).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verify_cli.sandbox.environment import CANDIDATE_HARNESS_DIR, HARNESS_DIR, candidate_exec_prefix

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "two_process"


class Pair:
    """A candidate server in ``work`` and a way to run pytest against it."""

    def __init__(self, root: Path, modules: list[str]) -> None:
        self.work = root / "work"
        # A Unix socket path must stay under 108 bytes: pytest-xdist's tmp_path can be longer.
        self.channel = Path(tempfile.mkdtemp(prefix="verify-chan-")) / "sock"
        self.modules = modules
        self.server: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "VERIFY_CHANNEL": str(self.channel),
               "PYTHONPATH": str(CANDIDATE_HARNESS_DIR), "PYTHONHASHSEED": "0"}
        self.server = subprocess.Popen([sys.executable, str(CANDIDATE_HARNESS_DIR / "verify_candidate_server.py")],
                                       cwd=self.work, env=env)

    def pytest(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "VERIFY_CHANNEL": str(self.channel), "PYTHONPATH": str(HARNESS_DIR),
               "VERIFY_CANDIDATE_MODULES": json.dumps(self.modules), "VERIFY_WORKDIR": str(self.work),
               "PYTEST_PLUGINS": "verify_standin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
               "VERIFY_CANDIDATE_EXEC": candidate_exec_prefix(sys.executable, str(HARNESS_DIR), str(self.channel))}
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                              cwd=self.work, env=env, capture_output=True, text=True, timeout=120)

    def stop(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server.wait()
        shutil.rmtree(self.channel.parent, ignore_errors=True)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    made: list[Pair] = []

    def factory(task: str, phase: str, modules: list[str]) -> Pair:
        p = Pair(tmp_path / f"{task}-{phase}", modules)
        shutil.copytree(FIXTURES / task / phase, p.work)
        shutil.copytree(FIXTURES / task / "tests", p.work / "tests")
        p.start()
        made.append(p)
        return p

    yield factory  # type: ignore[misc]
    for p in made:
        p.stop()


@pytest.mark.parametrize(("task", "module"), [("class-inventory", "inventory"), ("event-bus", "bus")])
def test_reference_passes_and_starter_fails_through_stand_ins(pair: object, task: str, module: str) -> None:
    good = pair(task, "solution", [module])  # type: ignore[operator]
    out = good.pytest("tests")
    assert out.returncode == 0, out.stdout + out.stderr
    bad = pair(task, "starter", [module])  # type: ignore[operator]
    out = bad.pytest("tests")
    assert out.returncode == 1
    assert "NotImplementedError" in out.stdout


CANDIDATE = textwrap.dedent('''
    import sys

    SECRET_OF_THE_CANDIDATE = "in the candidate process"


    class Sneaky(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__


    def sneaky():
        return Sneaky("x")


    def where():
        return sys.modules.get("verify_harness") is None and sys.modules.get("_pytest") is None


    def call_private(cb):
        return cb.__globals__


    def shout(text):
        print(text.upper())
        print("warning", file=sys.stderr)
        return len(text)


    def floaty():
        return [1, 1.0, True, float("nan"), 10 ** 30, b"\\x00", (1,), {1, 2}]


    def leave(code):
        sys.exit(code)


    class Boom(LookupError):
        pass


    def boom():
        raise Boom("kaboom")
''')

TESTS = textwrap.dedent('''
    import math, os, shlex, subprocess, sys
    import pytest
    import cand
    from cand import Boom, boom, call_private, floaty, leave, shout, sneaky, where


    def test_always_equal_is_not_equal():
        assert sneaky() != "anything"
        assert not isinstance(sneaky(), str)


    def test_candidate_code_runs_elsewhere():
        assert where() is True
        assert "cand" in sys.modules and type(sys.modules["cand"]).__name__ == "CandidateModule"
        assert not any(getattr(m, "__file__", None) and m.__file__.endswith("/cand.py") for m in sys.modules.values())


    def test_private_attributes_of_callbacks_are_refused():
        with pytest.raises((AttributeError, PermissionError)):
            call_private(lambda: 1)


    def test_values_keep_their_types():
        got = floaty()
        assert [type(v) for v in got] == [int, float, bool, float, int, bytes, tuple, set]
        assert math.isnan(got[3]) and got[4] == 10 ** 30


    def test_output_and_exit(capsys):
        assert shout("hi") == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("HI\\n", "warning\\n")
        with pytest.raises(SystemExit) as e:
            leave(3)
        assert e.value.code == 3


    def test_exceptions_keep_builtin_bases_and_names():
        with pytest.raises(Boom, match="kaboom"):
            boom()
        with pytest.raises(LookupError):
            boom()
        assert cand.Boom is Boom


    def test_exec_runner():
        prefix = shlex.split(os.environ["VERIFY_CANDIDATE_EXEC"])
        p = subprocess.run([*prefix, sys.executable, "-c", "import sys; print(sys.stdin.read()[::-1]); sys.exit(7)"],
                           input="abc", capture_output=True, text=True, timeout=60)
        assert (p.returncode, p.stdout) == (7, "cba\\n")


    def test_the_work_folder_is_not_importable_here():
        with pytest.raises(ImportError):
            import helper  # noqa: F401
''')


def test_semantics_and_refusals(tmp_path: Path) -> None:
    p = Pair(tmp_path, ["cand"])
    (p.work / "tests").mkdir(parents=True)
    (p.work / "cand.py").write_text(CANDIDATE)
    (p.work / "helper.py").write_text("VALUE = 1\n")
    (p.work / "tests" / "test_cand.py").write_text(TESTS)
    p.start()
    try:
        deadline = time.monotonic() + 30
        while not p.channel.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        out = p.pytest("tests")
    finally:
        p.stop()
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "8 passed" in out.stdout


@pytest.mark.slow
def test_a_candidate_server_that_never_starts_is_an_infrastructure_fault(
        make_task: object, process_sandbox: object) -> None:
    from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
    from verify_cli.grading.workspace import Phase
    from verify_cli.kinds import KINDS
    from verify_cli.kinds.base import TwoProcessRuntime
    from verify_cli.tasks.loader import load_task

    kind = KINDS.get("pytest")
    runtime = kind.two_process
    assert runtime is not None
    def trusted_env(task: Any, root: Path, env: dict[str, str]) -> dict[str, str]:
        # the tests' side gives up after 2 s, not 20 (the host's override in the tests' environment)
        return {**runtime.trusted_env(task, root, env), "VERIFY_CONNECT_SECONDS": "2"}

    kind.two_process = TwoProcessRuntime("pytest", ("/bin/false",), trusted_env, runtime.code_suffixes)
    try:
        task = load_task(make_task())  # type: ignore[operator]
        result = Grader(process_sandbox).grade(GradeRequest(task, Phase.REFERENCE))  # type: ignore[arg-type]
    finally:
        kind.two_process = runtime
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None, result.problems
    assert "cannot reach the candidate process" in result.problems[0]
