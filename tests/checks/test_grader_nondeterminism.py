"""check-tasks tells the grader's nondeterminism apart from a flaky task before calling it flaky.

A test that changes outcome between two-process repeats of the same correct reference and
passes in-process under the seed (the test order) of every two-process run that failed it was
failed by the grader, not by the task: ``grader-nondeterminism`` (not gradeable two-process),
never ``flaky``. One that fails in-process under such a seed too is the task's own flake.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from verify_cli.checks.report import CheckStatus, TaskVerdict
from verify_cli.checks.solvability import (
    MAX_ORDER_RECHECKS,
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


def test_failures_that_pass_in_process_in_the_same_order_are_the_graders(make_task: Any) -> None:
    refs = [_run(1), _run(2, ("hidden_tests.t::test_b",)), _run(3), _run(4, ("hidden_tests.t::test_b",))]
    in_process = _run(2, isolation="in-process")
    order = [_run(4, isolation="in-process")]
    checks = _checks(make_task, refs, in_process, order)
    assert "flaky" not in checks or checks["flaky"].status is CheckStatus.PASS
    assert checks["grader-nondeterminism"].status is CheckStatus.NOT_GRADEABLE
    assert "hidden_tests.t::test_b" in checks["grader-nondeterminism"].message
    assert checks["reference-passes"].status is CheckStatus.PASS


def test_a_test_that_fails_in_process_too_is_still_flaky(make_task: Any) -> None:
    refs = [_run(1), _run(2, ("hidden_tests.t::test_b",)), _run(3), _run(4, ("hidden_tests.t::test_b",))]
    in_process = _run(2, isolation="in-process")
    order = [_run(4, ("hidden_tests.t::test_b",), isolation="in-process")]  # the task's own flake
    checks = _checks(make_task, refs, in_process, order)
    assert checks["flaky"].status is CheckStatus.FAIL
    assert "grader-nondeterminism" not in checks


def test_without_a_same_order_run_for_every_failure_it_stays_flaky(make_task: Any) -> None:
    refs = [_run(1), _run(2, ("hidden_tests.t::test_b",)), _run(4, ("hidden_tests.t::test_b",))]
    checks = _checks(make_task, refs, _run(2, isolation="in-process"), [])  # seed 4 never re-run
    assert checks["flaky"].status is CheckStatus.FAIL


def test_the_verdict_is_not_gradeable_never_defective(make_task: Any) -> None:
    from verify_cli.checks.report import TaskReport

    refs = [_run(1, ("tests.t::test_a",)), _run(2)]
    checks = list(_checks(make_task, refs, _run(1, isolation="in-process"), []).values())
    report = TaskReport(task_id="t", path="", domain="coding", language="python", checks=checks)
    assert report.verdict is TaskVerdict.NOT_GRADEABLE


def test_the_same_order_reruns_are_the_failing_seeds_less_the_one_already_run() -> None:
    refs = [_run(s, ("hidden_tests.t::test_b",) if s % 2 else ()) for s in range(1, 11)]
    seeds = _order_recheck_seeds(refs, _run(1, isolation="in-process"))
    assert seeds == [3, 5, 7][:MAX_ORDER_RECHECKS]
    # A test that never passed two-process is a gap or the reference's failure, not a flake.
    always = [_run(s, ("hidden_tests.t::test_b",)) for s in range(1, 4)]
    assert _order_recheck_seeds(always, None) == []


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
