"""The editable-path rule: a candidate reaches the grader only through the task's editable globs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from verify_cli.grading import Grader, GradeRequest, GradeStatus, Outcome, Phase, lay_out
from verify_cli.grading.workspace import solution_as_candidate
from verify_cli.kinds.pytest_config import TRUSTED_INI
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks import load_task

WRONG = b"def total(values):\n    return 42\n"
RIGHT = b"def total(values):\n    return sum(values)\n"

#: Makes every test pass by rewriting its report: the classic planted-conftest trick.
PLANTED_CONFTEST = b"""
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
"""

EDITED_TEST = b"def test_empty():\n    pass\n\n\ndef test_several():\n    pass\n"


def files_under(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_reference_is_starter_overlaid_with_solution(make_task: Any, tmp_path: Path) -> None:
    task = load_task(
        make_task(
            files={
                "starter/data.txt": "starter data\n",
                "hidden_tests/test_hidden.py": "def test_h():\n    pass\n",
            }
        )
    )
    work = tmp_path / "work"
    work.mkdir()
    laid = lay_out(task, Phase.REFERENCE, work)
    files = files_under(work)
    assert set(files) == {
        "solution.py",
        "data.txt",
        "tests/test_solution.py",
        "hidden_tests/test_hidden.py",
        TRUSTED_INI,  # the pytest kind's configuration, from the pristine task
    }
    assert files["solution.py"] == (task.root / "solution" / "solution.py").read_bytes()
    assert laid.ignored == ()


def test_starter_phase_has_no_solution(make_task: Any, tmp_path: Path) -> None:
    task = load_task(make_task())
    work = tmp_path / "work"
    work.mkdir()
    lay_out(task, Phase.STARTER, work, {"solution.py": RIGHT})
    assert files_under(work)["solution.py"] == (task.root / "starter" / "solution.py").read_bytes()


def test_candidate_takes_only_editable_paths(make_task: Any, tmp_path: Path) -> None:
    task = load_task(make_task(files={"hidden_tests/test_hidden.py": "def test_h():\n    pass\n"}))
    work = tmp_path / "work"
    work.mkdir()
    candidate = {
        "./solution.py": RIGHT,  # normalised to solution.py, taken
        "conftest.py": PLANTED_CONFTEST,
        "tests/test_solution.py": EDITED_TEST,
        "hidden_tests/test_hidden.py": EDITED_TEST,
        "../escape.py": b"x = 1\n",
        "/etc/evil.py": b"x = 1\n",
        "notes.txt": b"not editable\n",
    }
    laid = lay_out(task, Phase.CANDIDATE, work, candidate)
    files = files_under(work)
    assert files["solution.py"] == RIGHT
    assert "conftest.py" not in files
    assert "notes.txt" not in files
    assert (
        files["tests/test_solution.py"] == (task.root / "tests" / "test_solution.py").read_bytes()
    )
    assert (
        files["hidden_tests/test_hidden.py"]
        == (task.root / "hidden_tests" / "test_hidden.py").read_bytes()
    )
    assert not (tmp_path / "escape.py").exists()
    assert set(laid.ignored) == {
        "conftest.py",
        "tests/test_solution.py",
        "hidden_tests/test_hidden.py",
        "../escape.py",
        "/etc/evil.py",
        "notes.txt",
    }


def test_broad_editable_glob_never_reaches_the_test_folders(make_task: Any, tmp_path: Path) -> None:
    """Even with editable = ["**/*.py"], a candidate cannot add files among the pristine tests."""

    def broad(doc: dict[str, Any]) -> None:
        doc["editable"] = ["**/*.py"]

    task = load_task(make_task(mutate=broad))
    work = tmp_path / "work"
    work.mkdir()
    laid = lay_out(
        task,
        Phase.CANDIDATE,
        work,
        {
            "solution.py": RIGHT,
            "pkg/helper.py": b"X = 1\n",
            "tests/conftest.py": PLANTED_CONFTEST,
            "hidden_tests/test_new.py": EDITED_TEST,
        },
    )
    files = files_under(work)
    assert files["pkg/helper.py"] == b"X = 1\n"
    assert "tests/conftest.py" not in files
    assert "hidden_tests/test_new.py" not in files
    assert set(laid.ignored) == {"tests/conftest.py", "hidden_tests/test_new.py"}


def test_solution_as_candidate_is_the_solution(make_task: Any) -> None:
    task = load_task(make_task())
    assert solution_as_candidate(task) == {"solution.py": RIGHT}


def test_planted_conftest_and_edited_test_are_ignored_when_graded(
    make_task: Any, process_sandbox: Sandbox
) -> None:
    task = load_task(make_task())
    grader = Grader(process_sandbox)
    hack = {
        "solution.py": WRONG,
        "conftest.py": PLANTED_CONFTEST,
        "tests/test_solution.py": EDITED_TEST,
    }
    result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate=hack))
    assert result.status is GradeStatus.GRADED
    assert set(result.ignored_files) == {"conftest.py", "tests/test_solution.py"}
    # The pristine tests ran against the wrong solution, and failed.
    assert result.outcome_of("tests.test_solution::test_several") is Outcome.FAILED
    assert result.passed is False
    assert result.score == 0.0

    honest = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={"solution.py": RIGHT}))
    assert honest.passed is True
    assert honest.score == 1.0
    assert honest.ignored_files == ()


def test_clashing_candidate_paths_are_ignored_not_fatal(make_task: Any, tmp_path: Path) -> None:
    """A hostile candidate must not crash grading: a path that cannot be laid out is ignored."""

    def broad(doc: dict[str, Any]) -> None:
        doc["editable"] = ["**/*.py"]

    task = load_task(make_task(mutate=broad, files={"starter/pkg.py": "X = 1\n"}))
    work = tmp_path / "work"
    work.mkdir()
    laid = lay_out(
        task,
        Phase.CANDIDATE,
        work,
        {
            "solution.py": RIGHT,
            "solution.py/inner.py": b"x = 1\n",  # under a file the candidate itself wrote
            "pkg.py/inner.py": b"x = 1\n",  # under a starter file
        },
    )
    assert files_under(work)["solution.py"] == RIGHT
    assert set(laid.ignored) == {"solution.py/inner.py", "pkg.py/inner.py"}


def test_clashing_candidate_is_graded(make_task: Any, process_sandbox: Sandbox) -> None:
    def broad(doc: dict[str, Any]) -> None:
        doc["editable"] = ["**/*.py"]

    task = load_task(make_task(mutate=broad))
    candidate = {"solution.py": RIGHT, "solution.py/x.py": b""}
    result = Grader(process_sandbox).grade(GradeRequest(task, Phase.CANDIDATE, candidate=candidate))
    assert result.passed is True
    assert result.ignored_files == ("solution.py/x.py",)


@pytest.mark.parametrize("glob", ["**/*.py", "*.py"])
def test_files_named_like_harness_modules_are_refused(make_task: Any, tmp_path: Path, glob: str) -> None:
    """The built-in runners start as ``python -m verify_stdio`` in the work folder: a candidate's
    ``verify_stdio.py`` (or ``verify_wire.py``, ...) would run as the trusted side. Refused
    whatever the editable globs say."""

    def broad(doc: dict[str, Any]) -> None:
        doc["editable"] = ["solution.py", glob]

    task = load_task(make_task(mutate=broad))
    work = tmp_path / "work"
    work.mkdir()
    planted = {"verify_stdio.py": b"print('forged')\n", "pkg/verify_wire.py": b"X = 1\n",
               "verify_calls.py": b"X = 1\n"}
    laid = lay_out(task, Phase.CANDIDATE, work, {"solution.py": RIGHT, **planted})
    files = files_under(work)
    assert files["solution.py"] == RIGHT
    assert not set(planted) & set(files)
    assert set(planted) <= set(laid.ignored)
