"""Docker node mode proves the tests' nested sandbox of a two-process run started.

The node's own bubblewrap already says whether the run began (its ready byte); the tests'
nested bubblewrap inside it marks its start in the results folder (which only the tests' side
sees). A run without that mark never ran its tests: ``infra_error`` with bubblewrap's words.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SAMPLE_TASKS
from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.docker import two_process
from verify_cli.sandbox.docker.two_process import TESTS_STARTED_FILE
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task

pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def grader() -> Grader:
    return Grader(create_sandbox("docker"))


def test_a_started_run_is_graded_and_its_mark_is_not_a_result(grader: Grader) -> None:
    result = grader.grade(GradeRequest(load_task(SAMPLE_TASKS / "coding-roman-numerals"), Phase.REFERENCE))
    assert result.isolation == "two-process" and result.status is GradeStatus.GRADED and result.score == 1.0
    assert TESTS_STARTED_FILE not in result.run.results


def test_a_nested_sandbox_that_fails_to_start_is_infra(grader: Grader, monkeypatch: pytest.MonkeyPatch) -> None:
    real = two_process.trusted_argv

    def failing(spec: object) -> list[str]:  # the nested bwrap fails before its namespaces exist
        argv = real(spec)  # type: ignore[arg-type]
        at = argv.index("--")
        return [*argv[:at], "--ro-bind", "/nonexistent-verify-source", "/x", *argv[at:]]

    monkeypatch.setattr(two_process, "trusted_argv", failing)
    result = grader.grade(GradeRequest(load_task(Path(SAMPLE_TASKS / "coding-roman-numerals")), Phase.REFERENCE))
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None
    assert "nested sandbox never began" in result.problems[0]
    assert "bwrap: Can't find source path /nonexistent-verify-source" in result.problems[0]
