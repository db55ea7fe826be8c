"""The in-process re-run of a failing reference takes the failing run of the lowest seed, not the
first to finish: the same re-run on every machine, however the runs were scheduled."""

from __future__ import annotations

from verify_cli.checks.solvability import _needs_in_process_run
from verify_cli.grading.grader import GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import RunResult, Verdict


def _run(seed: int, passed: bool) -> GradeResult:
    return GradeResult(task_id="t", phase=Phase.REFERENCE, status=GradeStatus.GRADED,
                       score=1.0 if passed else 0.0, passed=passed, tests=(),
                       run=RunResult(Verdict.OK if passed else Verdict.NONZERO_EXIT, "process"),
                       seed=seed, isolation="two-process")


def test_the_lowest_failing_seed_is_re_run_whatever_finished_first() -> None:
    completion_order = [_run(3, False), _run(1, True), _run(2, False)]
    chosen = _needs_in_process_run(completion_order)
    assert chosen is not None and chosen.seed == 2
    assert _needs_in_process_run([_run(1, True), _run(2, True)]) is None
