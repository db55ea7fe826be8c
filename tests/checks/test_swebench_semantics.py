"""Repository tasks are curated as SWE-bench counts: an XFAIL passes, a skipped PASS_TO_PASS test
is kept, and only the listed tests are judged for flakiness (every test on request)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import write_task
from verify_cli.checks.solvability import evaluate
from verify_cli.grading.grader import GradeResult, GradeStatus
from verify_cli.grading.junit import Outcome, TestOutcome, parse_junit
from verify_cli.grading.scoring import TestLists
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import RunResult, Verdict
from verify_cli.tasks.loader import load_task

JUNIT = b"""<testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_x"/>
<testcase classname="tests.test_a" name="test_xfail"><skipped type="pytest.xfail" message="known"/></testcase>
<testcase classname="tests.test_a" name="test_skip"><skipped type="pytest.skip" message="no network"/></testcase>
<testcase classname="tests.test_a" name="test_bad"><failure message="boom"/></testcase>
</testsuite></testsuites>"""


def test_an_xfail_is_its_own_outcome_and_passes_a_list_as_swebench_counts_it() -> None:
    by_id = {t.id: t.outcome for t in parse_junit(JUNIT)}
    assert by_id["tests.test_a::test_xfail"] is Outcome.XFAILED
    assert by_id["tests.test_a::test_skip"] is Outcome.SKIPPED
    lists = TestLists(fail_to_pass=("tests.test_a::test_xfail", "tests.test_a::test_skip"),
                      pass_to_pass=("tests.test_a::test_skip", "tests.test_a::test_bad", "tests.test_a::test_gone"))
    f2p, p2p = lists.outcomes(parse_junit(JUNIT))
    assert f2p == [True, False]  # XFAIL passes; a skipped FAIL_TO_PASS test did not pass
    assert p2p == [True, False, False]  # skipped kept; failed and absent break


def _task(tmp_path: Path) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        doc["test"]["fail_to_pass"] = ["tests/test_solution.py::test_several"]
        doc["test"]["pass_to_pass"] = ["tests/test_solution.py::test_empty"]
        doc["scoring"] = {"policy": "swebench"}

    return load_task(write_task(tmp_path / "repo", mutate=mutate))


def _run(phase: Phase, seed: int | None, outcomes: dict[str, Outcome]) -> GradeResult:
    tests = tuple(TestOutcome(tid, o) for tid, o in outcomes.items())
    return GradeResult("repo", phase, GradeStatus.GRADED, 1.0, True, tests, RunResult(Verdict.OK, "fixed"),
                       seed=seed)


def test_only_the_listed_tests_are_judged_flaky_unless_asked(tmp_path: Path) -> None:
    task = _task(tmp_path)
    listed = {"tests.test_solution::test_several": Outcome.PASSED, "tests.test_solution::test_empty": Outcome.PASSED}
    refs = [_run(Phase.REFERENCE, seed, {**listed, "tests.test_solution::test_unrelated": outcome})
            for seed, outcome in ((1, Outcome.PASSED), (2, Outcome.FAILED), (3, Outcome.PASSED))]
    starter = _run(Phase.STARTER, None, {"tests.test_solution::test_several": Outcome.FAILED,
                                         "tests.test_solution::test_empty": Outcome.SKIPPED})
    names = {c.name: c for c in evaluate(task, refs, starter)}
    assert names["flaky"].status.value == "pass"
    assert names["pass-to-pass"].status.value == "pass"  # skipped on the starter: kept, not broken
    everything = {c.name: c for c in evaluate(task, refs, starter, flaky_all_tests=True)}
    assert everything["flaky"].status.value == "fail"
    assert "test_unrelated" in everything["flaky"].message
