"""A run whose image lacks the task's runtime did not start: unscored, never a graded 0.

``verify-cli/node:20`` has no Python: the roman task's reference there once came back graded
0.0 (``python: not found``, status 127, read as the command's failure).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_TASKS
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Verdict
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task

pytestmark = [pytest.mark.docker]

NODE_IMAGE = "verify-cli/node:20"


def _python_task_on(image: str, dest: Path) -> Path:
    shutil.copytree(SAMPLE_TASKS / "coding-roman-numerals", dest)
    toml = dest / "task.toml"
    toml.write_text(toml.read_text().replace('image = "verify-cli/python:3.11"', f'image = "{image}"'))
    return dest


@pytest.fixture(scope="module")
def grader() -> Grader:
    return Grader(create_sandbox("docker"))


def test_a_python_task_on_an_image_without_python_is_unscored(grader: Grader, tmp_path: Path) -> None:
    task = load_task(_python_task_on(NODE_IMAGE, tmp_path / "roman"))
    for phase in (Phase.REFERENCE, Phase.STARTER):
        result = grader.grade(GradeRequest(task, phase))
        assert result.status is GradeStatus.INFRA_ERROR and result.score is None
        assert result.run.verdict is Verdict.SETUP_ERROR
        assert "no python runtime" in result.problems[0] and NODE_IMAGE in result.problems[0]
        assert "/environment/image" in result.problems[0]


def test_check_tasks_never_calls_it_a_failing_reference(grader: Grader, tmp_path: Path) -> None:
    task = load_task(_python_task_on(NODE_IMAGE, tmp_path / "roman"))
    [report] = check_tasks([task], grader, CheckOptions(repeats=2, jobs=1, first_wave=2))
    assert report.verdict.value == "error"
    assert "reference fails" not in " ".join(c.message for c in report.checks)


def test_the_same_task_on_its_own_image_still_grades(grader: Grader) -> None:
    result = grader.grade(GradeRequest(load_task(SAMPLE_TASKS / "coding-roman-numerals"), Phase.REFERENCE))
    assert result.status is GradeStatus.GRADED and result.score == 1.0
