"""check-tasks tells the grader's nondeterminism apart from a flaky task before calling it flaky.

A test that changes outcome between two-process repeats of the same correct reference, fails
again when re-run two-process under the seed (the test order) of each run that failed it, and
passes in-process under that seed was failed by the grader, not by the task:
``grader-nondeterminism`` (not gradeable two-process), never ``flaky``. One that passes a
two-process re-run (chance, not order) or fails in-process too is flaky.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from verify_cli.checks.report import CheckStatus, TaskVerdict
from verify_cli.checks.solvability import (
    MAX_ORDER_RECHECKS,
    SAME_ORDER_REPEATS,
    CheckOptions,
    _order_recheck_seeds,
    check_tasks,
    evaluate,
)
from verify_cli.grading.grader import Grader, GradeResult, GradeStatus
from verify_cli.grading.junit import Outcome, TestOutcome
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import RunResult, Verdict
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks import load_task

TESTS = ("tests.t::test_a", "hidden_tests.t::test_b")


def _run(seed: int, failing: tuple[str, ...] = (), *, isolation: str = "two-process",
         phase: Phase = Phase.REFERENCE) -> GradeResult:
    tests = tuple(TestOutcome(t, Outcome.FAILED if t in failing else Outcome.PASSED,
                              message="NameError: name 'TAX' is not defined" if t in failing else "")
                  for t in TESTS)
    passed = not failing
    return GradeResult(task_id="t", phase=phase, status=GradeStatus.GRADED, score=1.0 if passed else 0.0,
                       passed=passed, tests=tests,
                       run=RunResult(Verdict.OK if passed else Verdict.NONZERO_EXIT, "bwrap"),
                       seed=seed, isolation=isolation)


def _starter() -> GradeResult:
    return _run(0, TESTS, phase=Phase.STARTER)


def _checks(make_task: Any, references: list[GradeResult], in_process: GradeResult | None,
            order: list[GradeResult]) -> dict[str, Any]:
    task = load_task(Path(make_task("t")))
    return {c.name: c for c in evaluate(task, references, _starter(), in_process, order)}


B = ("hidden_tests.t::test_b",)


def test_failures_the_order_repeats_two_process_only_are_the_graders(make_task: Any) -> None:
    refs = [_run(1), _run(2, B), _run(3), _run(4, B)]
    in_process = _run(2, isolation="in-process")
    # again two-process, every time; in-process
    order = [*[_run(2, B)] * SAME_ORDER_REPEATS, *[_run(4, B)] * SAME_ORDER_REPEATS, _run(4, isolation="in-process")]
    checks = _checks(make_task, refs, in_process, order)
    assert "flaky" not in checks or checks["flaky"].status is CheckStatus.PASS
    assert checks["grader-nondeterminism"].status is CheckStatus.NOT_GRADEABLE
    assert "hidden_tests.t::test_b" in checks["grader-nondeterminism"].message
    assert checks["reference-passes"].status is CheckStatus.PASS


def test_a_test_that_fails_in_process_too_is_still_flaky(make_task: Any) -> None:
    refs = [_run(1), _run(2, B), _run(3), _run(4, B)]
    in_process = _run(2, isolation="in-process")
    order = [*[_run(2, B)] * SAME_ORDER_REPEATS, *[_run(4, B)] * SAME_ORDER_REPEATS,
             _run(4, B, isolation="in-process")]  # the task's own flake
    checks = _checks(make_task, refs, in_process, order)
    assert checks["flaky"].status is CheckStatus.FAIL
    assert "grader-nondeterminism" not in checks


def test_a_failure_the_same_order_does_not_repeat_is_chance_flaky(make_task: Any) -> None:
    refs = [_run(1), _run(2, B), _run(3)]
    order = [_run(2)]  # re-run two-process under seed 2: it passes (random, not the order's)
    checks = _checks(make_task, refs, _run(2, isolation="in-process"), order)
    assert checks["flaky"].status is CheckStatus.FAIL
    assert "grader-nondeterminism" not in checks


def test_one_same_order_failure_is_not_enough_to_blame_the_grader(make_task: Any) -> None:
    """A test failing one run in four at random fails a single re-run under the same seed one
    time in four: the failure must repeat every one of SAME_ORDER_REPEATS re-runs."""
    refs = [_run(1), _run(2, B), _run(3)]
    order = [_run(2, B), *[_run(2)] * (SAME_ORDER_REPEATS - 1)]
    checks = _checks(make_task, refs, _run(2, isolation="in-process"), order)
    assert checks["flaky"].status is CheckStatus.FAIL
    assert "grader-nondeterminism" not in checks


def test_without_a_same_order_run_for_every_failure_it_stays_flaky(make_task: Any) -> None:
    refs = [_run(1), _run(2, B), _run(4, B)]
    checks = _checks(make_task, refs, _run(2, isolation="in-process"), [_run(2, B)])  # seed 4 never re-run
    assert checks["flaky"].status is CheckStatus.FAIL


def test_the_verdict_is_not_gradeable_never_defective(make_task: Any) -> None:
    from verify_cli.checks.report import TaskReport

    refs = [_run(1, ("tests.t::test_a",)), _run(2)]
    order = [_run(1, ("tests.t::test_a",))] * SAME_ORDER_REPEATS
    checks = list(_checks(make_task, refs, _run(1, isolation="in-process"), order).values())
    report = TaskReport(task_id="t", path="", domain="coding", language="python", checks=checks)
    assert report.verdict is TaskVerdict.NOT_GRADEABLE


def test_the_same_order_reruns_are_the_lowest_failing_seeds() -> None:
    refs = [_run(s, B if s % 2 else ()) for s in range(10, 0, -1)]
    assert _order_recheck_seeds(refs) == [1, 3, 5][:MAX_ORDER_RECHECKS]
    # A test that never passed two-process is a gap or the reference's failure, not a flake.
    assert _order_recheck_seeds([_run(s, B) for s in range(1, 4)]) == []


TAX_TESTS = '''\
import pricing


def test_tax_rate_is_read_at_call_time(monkeypatch):
    monkeypatch.setattr(pricing, "TAX", 0.2)
    assert pricing.price(10) == 12.0


def test_default_rate():
    assert pricing.price(100) == 110.0


def test_zero_rate(monkeypatch):
    monkeypatch.setattr(pricing, "TAX", 0)
    assert pricing.price(5) == 5
'''


@pytest.mark.bwrap
def test_a_task_monkeypatching_a_module_constant_is_sound_two_process(make_task: Any) -> None:
    """The held-out corpus's false alarm: called ``defective: flaky`` (NameError: name 'TAX' is
    not defined in some repeats) until the stand-in module kept the constant in its __dict__."""
    def mutate(doc: dict[str, Any]) -> None:
        doc["editable"] = ["pricing.py"]
        doc["test"]["command"] = doc["test"]["command"] + " hidden_tests"

    root = Path(make_task("tax", mutate=mutate, files={
        "starter/solution.py": None, "solution/solution.py": None, "tests/test_solution.py": None,
        "starter/pricing.py": "TAX = 0.1\n\n\ndef price(amount):\n    raise NotImplementedError\n",
        "solution/pricing.py": "TAX = 0.1\n\n\ndef price(amount):\n    return round(amount * (1 + TAX), 2)\n",
        "tests/test_pricing.py": "from pricing import price\n\n\ndef test_price():\n    assert price(10) == 11.0\n",
        "hidden_tests/test_tax.py": TAX_TESTS}))
    [report] = check_tasks([load_task(root)], Grader(create_sandbox("bwrap")),
                           CheckOptions(repeats=6, jobs=2, first_wave=3))
    assert report.isolation == "two-process"
    assert report.verdict is TaskVerdict.SOUND, [(c.name, c.message) for c in report.checks]
