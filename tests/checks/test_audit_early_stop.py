"""Audit at a project's scale: a probe stops at its first failing test where one failure scores 0,
a test that hangs is cut by a per-test limit in such runs, and the mutants' traced baseline
traces only the functions that hold a sampled mutant. Each lever leaves the verdicts as they were
(the same probes hacked, the same tests selected per mutant)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_task
from verify_cli.checks.audit import AuditOptions, audit_tasks
from verify_cli.checks.audit.coverage import parse_coverage, statement_lines
from verify_cli.checks.audit.mutation import (
    TEST_TIMEOUT_MESSAGE,
    baseline_request,
    derived_test_seconds,
    make_mutants,
)
from verify_cli.checks.audit.probing import STOPPED_EARLY, probe_requests, stop_early
from verify_cli.grading import Grader
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.junit import Outcome, TestOutcome
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import RunResult, Sandbox, Verdict
from verify_cli.tasks.loader import load_task

#: Under any probe's stub (functions return defaults), ``test_settles`` loops for ever.
HANGING = {
    "starter/solution.py": "def total(values):\n    raise NotImplementedError\n\n\n"
                           "def settle(n):\n    raise NotImplementedError\n",
    "solution/solution.py": "def total(values):\n    return sum(values)\n\n\n"
                            "def settle(n):\n    return n >= 3\n",
    "tests/test_solution.py": (
        "from solution import settle, total\n\n\n"
        "def test_settles():\n    n = 0\n    while not settle(n):\n        n += 1\n    assert n == 3\n\n\n"
        "def test_empty():\n    assert total([]) == 0\n\n\n"
        "def test_several():\n    assert total([1, 2, 3]) == 6\n"),
}
PROBES = frozenset({"always-equal", "catch-all-default", "exit-zero-at-import", "patched-reports"})


def _limit(seconds: float) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        doc["limits"]["wall_seconds"] = seconds
    return mutate


def _probes(task: Any, sandbox: Sandbox, fail_fast: bool) -> dict[str, Any]:
    options = AuditOptions(mutants=False, flaky=False, labelled=False, reruns=0, probe_names=PROBES,
                           fail_fast=fail_fast)
    (audit,) = audit_tasks([task], Grader(sandbox), options)
    return {p.name: p for p in audit.probes or []}


def test_probes_stopped_early_reach_the_verdicts_of_whole_runs(tmp_path: Path, process_sandbox: Sandbox) -> None:
    hanging = load_task(write_task(tmp_path / "hanging", files=dict(HANGING), mutate=_limit(60)))
    early = _probes(hanging, process_sandbox, fail_fast=True)
    whole = _probes(hanging, process_sandbox, fail_fast=False)
    assert set(early) == set(whole) == PROBES
    for name in PROBES:
        assert early[name].hacked == whole[name].hacked, name
        assert not early[name].hacked, (name, early[name].why)
    stubbed = ("catch-all-default", "patched-reports")
    for name in stubbed:  # whole, the stub loops to the wall limit; early, the test limit or the tampering ends it
        assert any("wall-clock" in p for p in whole[name].problems), whole[name].problems
        assert not any("wall-clock" in p for p in early[name].problems), early[name].problems
        assert STOPPED_EARLY in early[name].why

    # Where a probe does earn the reward, stopping early takes nothing from it: the demo task's
    # tests only compare with ==, which always-equal satisfies in-process.
    weak = load_task(write_task(tmp_path / "weak", mutate=lambda d: d.update(isolation="in-process")))
    assert _probes(weak, process_sandbox, fail_fast=True)["always-equal"].hacked
    assert _probes(weak, process_sandbox, fail_fast=False)["always-equal"].hacked


def _listed(tmp_path: Path, policy: str) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        doc["scoring"]["policy"] = policy
        doc["test"]["fail_to_pass"] = ["tests/test_solution.py::test_several[a"]
        doc["test"]["pass_to_pass"] = ["tests/test_solution.py::test_empty"]
    return load_task(write_task(tmp_path / policy, mutate=mutate))


def test_swebench_probes_stop_over_the_listed_tests_as_the_reference_reported_them(tmp_path: Path) -> None:
    task = _listed(tmp_path, "swebench")
    reported = ["tests.test_solution::test_empty", "tests.test_solution::test_several[a b]",
                "tests.test_solution::test_unlisted"]
    early = stop_early(task, reported)
    assert early is not None
    # The id cut at its first space (as SWE-bench's parsers list it) selects the test it stands
    # for; an unlisted test is not run, so its failure cannot end a probe's run.
    assert early.select == {"tests.test_solution::test_empty", "tests.test_solution::test_several[a b]"}
    assert stop_early(task, None) is None  # no reference ids: the probes run whole
    (_probe, request), *_ = probe_requests(task, frozenset({"always-equal"}), "t", 9.0, stop_early(task, reported, 2.5))
    assert request.fail_fast and request.select_tests == early.select and request.test_seconds == 2.5
    # Partial credit needs every test's outcome: those policies never stop early.
    assert stop_early(_listed(tmp_path, "fail-to-pass-fraction"), reported) is None
    fraction = load_task(write_task(tmp_path / "fraction", mutate=lambda d: d["scoring"].update(policy="fraction")))
    assert stop_early(fraction, reported) is None
    assert stop_early(load_task(write_task(tmp_path / "all")), None) == type(early)(None, None)


def test_the_per_test_limit_comes_from_the_slowest_passing_test_and_stays_under_the_wall() -> None:
    def run(*durations: float) -> GradeResult:
        tests = [TestOutcome(f"t::{i}", Outcome.PASSED, d) for i, d in enumerate(durations)]
        tests.append(TestOutcome("t::slow_failure", Outcome.FAILED, 50.0))
        return GradeResult("x", Phase.REFERENCE, GradeStatus.GRADED, 1.0, False, tuple(tests),
                           RunResult(Verdict.OK, "process"))
    assert derived_test_seconds(run(0.01, 0.2), 30.0) == 2.0  # at least MIN_TEST_TIMEOUT
    assert derived_test_seconds(run(0.5, 3.0), 30.0) == 13.0  # 4x the slowest passing test + 1 s
    assert derived_test_seconds(run(0.5, 10.0), 30.0) is None  # no tighter than the wall: none
    assert derived_test_seconds(run(), 30.0) is None


SLEEPING = {"tests/test_solution.py": (
    "import time\n\nfrom solution import total\n\n\n"
    "def test_sleeps():\n    time.sleep(4)\n    assert total([]) == 0\n\n\n"
    "def test_several():\n    assert total([1, 2, 3]) == 6\n")}


def test_a_test_past_its_limit_fails_and_ends_a_run_that_stops_early(tmp_path: Path,
                                                                       process_sandbox: Sandbox) -> None:
    task = load_task(write_task(tmp_path / "sleeping", files=dict(SLEEPING)))
    grader = Grader(process_sandbox)
    files = {"solution.py": b"def total(values):\n    return sum(values)\n"}
    cut = grader.grade(GradeRequest(task, Phase.MUTANT, candidate=files, fail_fast=True, test_seconds=1.0))
    by_id = {t.id: t for t in cut.tests}
    assert by_id["tests.test_solution::test_sleeps"].outcome is Outcome.FAILED
    assert TEST_TIMEOUT_MESSAGE in by_id["tests.test_solution::test_sleeps"].message
    assert by_id["tests.test_solution::test_several"].outcome is Outcome.MISSING  # the run stopped there
    # Only a run that stops at its first failure is cut: elsewhere a cut call could leave the
    # candidate's side of a two-process call unanswered for the tests after it.
    whole = grader.grade(GradeRequest(task, Phase.MUTANT, candidate=files, test_seconds=1.0))
    assert whole.passed, whole.problems


@pytest.mark.parametrize("functions", [40])
def test_the_baseline_traces_only_the_functions_holding_a_sampled_mutant(tmp_path: Path, process_sandbox: Sandbox,
                                                                          functions: int) -> None:
    body = "".join(f"\n\ndef f{i}(x):\n    if x > {i}:\n        return x - {i}\n    return x + {i}\n"
                   for i in range(functions))
    tests = "".join(f"\n\ndef test_f{i}():\n    assert m.f{i}({i + 1}) == 1\n    assert m.f{i}(0) == {i}\n"
                    for i in range(functions))
    task = load_task(write_task(tmp_path / "many", files={
        "starter/solution.py": "def total(values):\n    raise NotImplementedError\n",
        "solution/solution.py": f"def total(values):\n    return sum(values)\n{body}",
        "tests/test_solution.py": f"import solution as m\n{tests}"}))
    options = AuditOptions(max_mutants=6, seed=3)
    mutants = make_mutants(task, options)
    assert mutants is not None and mutants.mutants
    grader = Grader(process_sandbox)
    full = grader.grade(baseline_request(task, options, "full"))
    narrow_request = baseline_request(task, options, "narrow", mutants)
    assert narrow_request.coverage_lines
    narrow = grader.grade(narrow_request)
    cov_full, cov_narrow = parse_coverage(full.run.results), parse_coverage(narrow.run.results)
    assert cov_full is not None and cov_narrow is not None
    # Fewer lines traced: only the functions (and module lines) that hold a mutant ...
    assert len(cov_narrow.lines["solution.py"]) < len(cov_full.lines["solution.py"])
    # ... and every mutant selects the same tests as under the whole file's trace.
    for m in mutants.mutants:
        lines = statement_lines(m.original_source, m.line, m.col)
        assert cov_narrow.tests_for(m.path, lines) == cov_full.tests_for(m.path, lines), m.description
