"""A candidate's code runs on the candidate server's main thread, as its own program would.

Python lets only the main thread set a signal handler. The two-process candidate server served
every connection on a thread of its own, so a candidate that timed itself out with
``signal.alarm``, or a module that installs a handler when it is imported (common in real
projects: a SIGINT handler, a timeout decorator), failed with "signal only works in main thread":
a correct candidate graded as wrong, on every backend, warm and cold. Graded here as the CLI
grades (two-process, cold and warm) for the ``calls`` kind and for a ``pytest`` task.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_task
from tests.grading.test_builtin_runners import calls_task
from verify_cli.grading.grader import Grader, GradeRequest
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks.loader import load_task

pytestmark = pytest.mark.bwrap

#: Sets a handler when imported and another in every call, and times its own work out with
#: an alarm: what only the main thread may do.
SIGNALLING = """\
import signal

signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # at import, as some libraries do


class TookTooLong(Exception):
    pass


def _alarm(signum, frame):
    raise TookTooLong


def double(x):
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(5)
    try:
        return 2 * x
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
"""

CHECK = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-3) == -6\n"


@pytest.fixture(scope="module")
def bwrap() -> Iterator[Sandbox]:
    from verify_cli.sandbox.registry import create_sandbox

    with create_sandbox("bwrap") as box:
        yield box


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_calls_candidate_that_sets_signal_handlers_is_graded_on_its_answers(
        bwrap: Sandbox, tmp_path: Path, warm: bool) -> None:
    task = calls_task(tmp_path, "def double(x):\n    return 2 * x\n", "check.py", CHECK, entry="double")
    with Grader(bwrap, warm=warm) as grader:
        for _ in range(2):  # warm: the second run is the forked one
            result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={"solution.py": SIGNALLING.encode()}))
            assert result.isolation == "two-process"
            assert result.passed and result.score == 1.0, (result.problems, [(t.id, t.message) for t in result.tests])
        wrong = SIGNALLING.replace("return 2 * x", "return 3 * x").encode()
        assert not grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={"solution.py": wrong})).passed


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_pytest_candidate_module_that_sets_a_handler_at_import_is_graded(
        bwrap: Sandbox, tmp_path: Path, warm: bool) -> None:
    root = write_task(tmp_path / "task", files={
        "tests/test_solution.py": "from solution import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
        "solution/solution.py": "def double(x):\n    return 2 * x\n",
        "starter/solution.py": "def double(x):\n    raise NotImplementedError\n",
    })
    task = load_task(root)
    with Grader(bwrap, warm=warm) as grader:
        for _ in range(2):
            result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={"solution.py": SIGNALLING.encode()}))
            assert result.isolation == "two-process"
            assert result.passed, (result.problems, [(t.id, t.message) for t in result.tests])
