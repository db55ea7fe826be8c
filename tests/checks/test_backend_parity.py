"""check-tasks reaches the same verdicts on docker as on bwrap, task by task and check by check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from verify_cli.checks.report import TaskReport
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.grading import Grader
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks import load_task_set


@pytest.fixture(scope="module")
def boxes() -> Iterator[dict[str, Sandbox]]:
    """One sandbox per backend for both task sets (each set gets graders of its own): a docker
    node pool and bwrap's set-up are started once, not once per set."""
    with create_sandbox("bwrap") as bwrap, create_sandbox("docker") as docker:
        yield {"bwrap": bwrap, "docker": docker}


def _verdicts(path: Path, box: Sandbox) -> dict[str, tuple[str, list[str]]]:
    with Grader(box, warm=True) as grader:
        reports: list[TaskReport] = check_tasks(load_task_set(path), grader, CheckOptions(repeats=3, jobs=2))
        stats = grader.warm_stats
        # bwrap grades the pytest tasks warm. Docker's warm nodes take in-process runs only: its
        # two-process runs (every sample pytest task) go cold in its containers.
        if box.name == "bwrap":
            assert stats is not None and stats.warm_runs > 0, stats
    return {r.task_id: (r.verdict.value, sorted(c.name for c in r.defects)) for r in reports}


@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.parametrize("which", ["sample", "defective"])
def test_docker_flags_exactly_what_bwrap_flags(which: str, sample_tasks_dir: Path,
                                               defective_tasks_dir: Path, boxes: dict[str, Sandbox]) -> None:
    path = sample_tasks_dir if which == "sample" else defective_tasks_dir
    on_bwrap = _verdicts(path, boxes["bwrap"])
    on_docker = _verdicts(path, boxes["docker"])
    assert on_docker == on_bwrap
    if which == "sample":
        assert {v for v, _ in on_docker.values()} == {"sound"}
    else:
        assert on_docker["defective/reference-fails"] == ("defective", ["reference-passes"])
        assert on_docker["defective/starter-passes"] == ("defective", ["starter-fails"])
        assert "flaky" in on_docker["defective/flaky-test"][1]
        assert "results" in on_docker["defective/missing-results"][1]
