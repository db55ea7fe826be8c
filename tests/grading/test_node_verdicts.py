"""Honest node candidates get identical verdicts two-process and in-process: the JS sample
tasks and the JS defective fixture, reference (passes) and starter (fails), test by test."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from verify_cli.grading import Grader, GradeRequest, GradeResult, Phase
from verify_cli.sandbox.base import Verdict
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Isolation, Task

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JS_TASKS = [ROOT / "sample_tasks" / "coding-word-wrap-js",
            ROOT / "sample_tasks" / "interface-spec-event-emitter-js",
            ROOT / "tests" / "fixtures" / "defective" / "memorisable-tests-js"]


# (memorisable-tests-js declares in-process, to show its hole to audit; graded both ways here.)
@pytest.mark.parametrize("folder", JS_TASKS, ids=lambda p: p.name)
def test_two_process_and_in_process_agree(folder: Path) -> None:
    grader = Grader(create_sandbox("bwrap"))
    task = load_task(folder)
    for phase, should_pass in ((Phase.REFERENCE, True), (Phase.STARTER, False)):
        two, one = _grade_both(grader, task, phase)
        assert (two.isolation, one.isolation) == ("two-process", "in-process")
        assert two.passed is should_pass, two.to_dict(with_run=False)
        assert (two.score, two.passed) == (one.score, one.passed)
        assert [(t.id, t.outcome) for t in two.tests] == [(t.id, t.outcome) for t in one.tests], (
            two.run.verdict, two.run.wall_seconds, one.run.verdict, one.run.wall_seconds)


def _grade_both(grader: Grader, task: Task, phase: Phase) -> tuple[GradeResult, GradeResult]:
    """The phase graded two-process and in-process. A run that hit the task's wall limit (this
    machine under the whole suite's load: a node two-process run starts two node processes) ends
    with the tests it finished, which is no verdict on the boundary: the pair is graded once more."""
    for _ in range(2):
        two = grader.grade(GradeRequest(replace(task, isolation=Isolation.TWO_PROCESS), phase))
        one = grader.grade(GradeRequest(replace(task, isolation=Isolation.IN_PROCESS), phase))
        if Verdict.TIMEOUT not in (two.run.verdict, one.run.verdict):
            break
    return two, one


def test_a_node_candidate_server_that_never_starts_is_an_infrastructure_fault() -> None:
    from verify_cli.grading.grader import GradeStatus
    from verify_cli.kinds import KINDS
    from verify_cli.kinds.base import TwoProcessRuntime

    kind = KINDS.get("node")
    runtime = kind.two_process
    assert runtime is not None
    def trusted_env(task: Task, root: Path, env: dict[str, str]) -> dict[str, str]:
        # the tests' side gives up after 2 s, not 20 (the host's override in the tests' environment)
        return {**runtime.trusted_env(task, root, env), "VERIFY_CONNECT_SECONDS": "2"}

    kind.two_process = TwoProcessRuntime("node", ("/bin/false",), trusted_env, runtime.code_suffixes)
    try:
        task = load_task(JS_TASKS[0])
        result = Grader(create_sandbox("process")).grade(GradeRequest(task, Phase.REFERENCE))
    finally:
        kind.two_process = runtime
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None, result.problems
