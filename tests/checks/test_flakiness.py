"""Flakiness reruns: the flaky fixture is caught within the default reruns, quarantined and
listed with its flip rate; a sound task has none."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from verify_cli.checks.audit import AuditOptions, audit_tasks
from verify_cli.checks.audit.flakiness import flakiness_report, rerun_requests
from verify_cli.grading import Grader, GradeResult, GradeStatus, Outcome, Phase, TestOutcome
from verify_cli.sandbox import RunResult, Sandbox, Verdict, create_sandbox, sandbox_class
from verify_cli.tasks import load_task, load_task_set

REPO = Path(__file__).resolve().parents[2]
BACKEND = "bwrap" if sandbox_class("bwrap").availability().available else "process"


@pytest.fixture(scope="module")
def grader() -> Iterator[Grader]:
    box: Sandbox
    with create_sandbox(BACKEND) as box, Grader(box) as g:
        yield g


def test_flaky_fixture_is_caught_within_the_default_reruns(grader: Grader) -> None:
    options = AuditOptions(mutants=False, probes=False, labelled=False, jobs=2)
    assert options.reruns == 11  # the fewest that catch a 1-in-4 flaky test with 95% probability
    (audit,) = audit_tasks(load_task_set(REPO / "tests/fixtures/defective/flaky-test"), grader, options)
    assert audit.flakiness is not None
    flaky = {t.id: t for t in audit.flakiness.flaky}
    assert list(flaky) == ["tests.test_dedupe::test_two_distinct_tags"]
    test = flaky["tests.test_dedupe::test_two_distinct_tags"]
    assert (test.passes, test.runs) == (4, 11)  # passes with PYTHONHASHSEED 1, 4, 7 and 11 (README)
    assert 0 < test.flip_rate <= 1
    stable = [t for t in audit.flakiness.tests if not t.flaky]
    assert {t.id for t in stable} == {"tests.test_dedupe::test_empty",
                                      "tests.test_dedupe::test_keeps_first_occurrence_order"}
    assert all(t.passes == t.runs == 11 for t in stable)
    assert audit.verdict().value == "unreliable"
    assert "1 flaky test(s): tests.test_dedupe::test_two_distinct_tags" in audit.findings()
    listed = audit.to_dict()["flakiness"]["flaky"]  # quarantined: listed, never hidden
    assert [t["id"] for t in listed] == ["tests.test_dedupe::test_two_distinct_tags"]


def test_sound_task_has_no_flaky_test(grader: Grader) -> None:
    options = AuditOptions(mutants=False, probes=False, labelled=False, reruns=3, jobs=2)
    (audit,) = audit_tasks(load_task_set(REPO / "sample_tasks/coding-interval-merge"), grader, options)
    assert audit.flakiness is not None
    assert audit.flakiness.flaky == [] and audit.flakiness.reruns == 3
    assert all(t.passes == t.runs == 3 for t in audit.flakiness.tests)
    assert audit.findings() == []


def test_reruns_shuffle_and_reseed_each_run() -> None:
    task = load_task(REPO / "sample_tasks/coding-interval-merge")
    requests = rerun_requests(task, 4, "x")
    assert [r.seed for r in requests] == [1, 2, 3, 4]
    assert {r.phase for r in requests} == {Phase.REFERENCE}


def _result(seed: int, outcomes: dict[str, Outcome], status: GradeStatus = GradeStatus.GRADED) -> GradeResult:
    tests = tuple(TestOutcome(tid, o) for tid, o in outcomes.items())
    return GradeResult("t", Phase.REFERENCE, status, 1.0, True, tests, RunResult(Verdict.OK, "fixed"),
                       seed=seed)


def test_flip_rate_counts_changes_between_consecutive_reruns() -> None:
    ok, bad = Outcome.PASSED, Outcome.FAILED
    runs = [_result(3, {"a": ok, "b": ok}), _result(1, {"a": ok, "b": bad}),
            _result(2, {"a": ok}),  # b missing: not a pass
            _result(4, {"a": ok, "b": ok}),
            _result(5, {}, GradeStatus.INFRA_ERROR)]
    report = flakiness_report(runs)
    by_id = {t.id: t for t in report.tests}
    assert (by_id["a"].passes, by_id["a"].runs, by_id["a"].flip_rate) == (4, 4, 0.0)
    # seed order 1..4: failed, missing, passed, passed -> one change in three pairs
    assert (by_id["b"].passes, by_id["b"].runs) == (2, 4)
    assert by_id["b"].flip_rate == pytest.approx(1 / 3)
    assert [t.id for t in report.flaky] == ["b"]
    assert report.errors == 1 and report.reruns == 5
