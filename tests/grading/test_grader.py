"""Grading trust rules: untrusted evidence never scores; an infrastructure failure is no score."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from verify_cli.grading import Grader, GradeRequest, GradeResult, GradeStatus, Outcome, Phase
from verify_cli.grading.seal import SEAL_KEY_ENV, seal_matching
from verify_cli.sandbox.base import RunResult, RunSpec, Sandbox, Verdict
from verify_cli.sandbox.kit.testing import FakeSandbox
from verify_cli.tasks import load_task

IDS = {"tests.test_solution::test_empty", "tests.test_solution::test_several"}
PASSING_XML = (
    b'<testsuites><testsuite name="pytest">'
    b'<testcase classname="tests.test_solution" name="test_empty"/>'
    b'<testcase classname="tests.test_solution" name="test_several"/>'
    b"</testsuite></testsuites>"
)
FAILING_XML = PASSING_XML.replace(
    b'name="test_several"/>', b'name="test_several"><failure message="no"/></testcase>'
)


def FixedSandbox(result: RunResult) -> FakeSandbox:
    """A backend whose every run ends as told: the grader, not the sandbox, is under test here."""

    def sealed(spec: RunSpec) -> RunResult:
        # A real pytest run carries the harness's signed session record; the stand-in signs the
        # JUnit it hands back, so these tests exercise the rules after that check.
        key = spec.env.get(SEAL_KEY_ENV)
        junit = result.results.get("junit.xml")
        if key and junit is not None:
            try:
                name, data = seal_matching(key, junit)
            except ValueError:  # malformed XML: nothing to sign, as in a real run
                return result
            return replace(result, results={**result.results, name: data})
        return result

    return FakeSandbox(sealed)


def grade_with(
    sandbox: Sandbox, task_root: Path, phase: Phase = Phase.REFERENCE, **kwargs: Any
) -> GradeResult:
    return Grader(sandbox).grade(GradeRequest(load_task(task_root), phase, **kwargs))


def with_command(command: str) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        doc["test"]["command"] = command

    return mutate


# --- with the real process backend --------------------------------------------------------


def test_reference_passes(make_task: Any, process_sandbox: Sandbox) -> None:
    result = grade_with(process_sandbox, make_task())
    assert result.status is GradeStatus.GRADED
    assert result.passed is True
    assert result.score == 1.0
    assert {t.id for t in result.tests} == IDS
    assert result.problems == ()
    assert result.run.verdict is Verdict.OK


def test_starter_fails(make_task: Any, process_sandbox: Sandbox) -> None:
    result = grade_with(process_sandbox, make_task(), Phase.STARTER)
    assert result.status is GradeStatus.GRADED
    assert result.passed is False
    assert result.score == 0.0
    assert {t.outcome for t in result.tests} == {Outcome.FAILED}
    assert result.run.verdict is Verdict.NONZERO_EXIT
    assert result.problems == ()


def test_missing_results_file_scores_zero_with_a_problem(
    make_task: Any, process_sandbox: Sandbox
) -> None:
    root = make_task(mutate=with_command("python -m pytest -q -p no:cacheprovider tests"))
    result = grade_with(process_sandbox, root)
    assert result.status is GradeStatus.GRADED
    assert result.run.verdict is Verdict.OK  # the tests really passed ...
    assert result.score == 0.0  # ... but without results nothing is proven
    assert result.passed is False
    assert result.tests == ()
    assert (
        "no results file matching 'junit.xml' was written to $VERIFY_RESULTS_DIR" in result.problems
    )


def test_expected_test_absent_is_missing_and_failed(
    make_task: Any, process_sandbox: Sandbox
) -> None:
    expected = frozenset({*IDS, "tests.test_solution::test_vanished"})
    result = grade_with(process_sandbox, make_task(), expected_tests=expected)
    assert result.outcome_of("tests.test_solution::test_vanished") is Outcome.MISSING
    assert result.passed is False
    assert result.score == 0.0
    missing = [t for t in result.failed_tests if t.outcome is Outcome.MISSING]
    assert [t.message for t in missing] == ["expected test absent from the results"]


def test_exit_code_contradicting_results_is_not_trusted(
    make_task: Any, process_sandbox: Sandbox
) -> None:
    root = make_task(
        mutate=with_command(
            'python -m pytest -q -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" '
            "tests; exit 1"
        )
    )
    result = grade_with(process_sandbox, root)
    assert {t.outcome for t in result.tests} == {Outcome.PASSED}
    assert result.run.exit_code == 1
    assert result.passed is False
    assert result.score == 0.0
    assert "exit code 1 contradicts the results (every test passed)" in result.problems


def test_timeout_scores_zero_not_infra(make_task: Any, process_sandbox: Sandbox) -> None:
    def slow(doc: dict[str, Any]) -> None:
        doc["test"]["command"] = "sleep 30"
        doc["limits"]["wall_seconds"] = 1

    result = grade_with(process_sandbox, make_task(mutate=slow))
    assert result.run.verdict is Verdict.TIMEOUT
    assert result.status is GradeStatus.GRADED
    assert result.score == 0.0
    assert result.passed is False
    assert any(p.startswith("the run ended with timeout") for p in result.problems)
    assert result.seconds < 10


def test_fraction_policy_scores_partial_credit(make_task: Any, process_sandbox: Sandbox) -> None:
    def fraction(doc: dict[str, Any]) -> None:
        doc["scoring"]["policy"] = "fraction"

    root = make_task(mutate=fraction, fast=True)
    result = grade_with(
        process_sandbox,
        root,
        Phase.CANDIDATE,
        candidate={"solution.py": b"def total(values):\n    return 0\n"},
    )
    assert result.outcome_of("check::test_empty") is Outcome.PASSED
    assert result.outcome_of("check::test_several") is Outcome.FAILED
    assert result.score == 0.5
    assert result.passed is False


def test_seed_reaches_the_run_environment(make_task: Any, process_sandbox: Sandbox) -> None:
    script = (
        'import os; print(os.environ["PYTHONHASHSEED"], os.environ.get("VERIFY_SHUFFLE_SEED"), '
        'os.environ.get("PYTEST_PLUGINS"))'
    )
    root = make_task(mutate=with_command(f"python -c '{script}'"))
    seeded = grade_with(process_sandbox, root, seed=7)
    # Two-process (the default) puts the stand-in importer first.
    assert seeded.run.stdout.text.split() == ["7", "7", "verify_standin,verify_shuffle,verify_harness"]
    assert seeded.seed == 7
    unseeded = grade_with(process_sandbox, root)
    assert unseeded.run.stdout.text.split() == ["0", "None", "verify_standin,verify_shuffle,verify_harness"]


def test_shuffled_order_still_passes(make_task: Any, process_sandbox: Sandbox) -> None:
    results = [grade_with(process_sandbox, make_task(), seed=s) for s in (1, 2)]
    assert all(r.passed for r in results)


def test_grade_many_streams_every_result(make_task: Any, process_sandbox: Sandbox) -> None:
    task = load_task(make_task(fast=True))
    requests = [
        GradeRequest(task, Phase.REFERENCE, seed=1, label="a"),
        GradeRequest(task, Phase.STARTER, label="b"),
        GradeRequest(task, Phase.REFERENCE, seed=2, label="c"),
    ]
    seen: list[str] = []
    results = list(
        Grader(process_sandbox).grade_many(
            requests, jobs=2, on_result=lambda r: seen.append(r.label)
        )
    )
    assert sorted(r.label for r in results) == ["a", "b", "c"]
    assert sorted(seen) == ["a", "b", "c"]
    assert {r.label: r.passed for r in results} == {"a": True, "b": False, "c": True}


def test_agrade(make_task: Any, process_sandbox: Sandbox) -> None:
    task = load_task(make_task(fast=True))
    result = asyncio.run(Grader(process_sandbox).agrade(GradeRequest(task, Phase.REFERENCE)))
    assert result.passed is True


def test_work_folder_is_removed(make_task: Any, process_sandbox: Sandbox, tmp_path: Path) -> None:
    work_root = tmp_path / "work-root"
    work_root.mkdir()
    task = load_task(make_task(fast=True))
    Grader(process_sandbox, work_root=work_root).grade(GradeRequest(task, Phase.REFERENCE))
    assert list(work_root.iterdir()) == []


# --- with a backend whose verdict is fixed -------------------------------------------------


@pytest.mark.parametrize("verdict", [Verdict.INFRA_ERROR, Verdict.SETUP_ERROR])
def test_infrastructure_failure_is_a_status_not_a_score(make_task: Any, verdict: Verdict) -> None:
    box = FixedSandbox(
        RunResult(
            verdict, "fixed", message="the daemon is gone", results={"junit.xml": PASSING_XML}
        )
    )
    result = grade_with(box, make_task())
    assert result.status is GradeStatus.INFRA_ERROR
    assert result.score is None
    assert result.passed is False
    assert result.tests == ()
    assert result.problems == (f"sandbox {verdict.value}: the daemon is gone",)
    assert result.to_dict()["status"] == "infra_error"


def test_backend_exception_is_infra_error(make_task: Any) -> None:
    result = grade_with(FakeSandbox.broken(RuntimeError("daemon went away")), make_task())
    assert result.status is GradeStatus.INFRA_ERROR
    assert result.score is None
    assert result.problems == ("sandbox infra_error: RuntimeError: daemon went away",)


def test_contradiction_from_a_fixed_run(make_task: Any) -> None:
    box = FixedSandbox(
        RunResult(Verdict.NONZERO_EXIT, "fixed", exit_code=1, results={"junit.xml": PASSING_XML})
    )
    result = grade_with(box, make_task())
    assert (result.score, result.passed) == (0.0, False)
    assert result.problems == ("exit code 1 contradicts the results (every test passed)",)


def test_exit_zero_with_failures_is_noted_and_not_passed(make_task: Any) -> None:
    box = FixedSandbox(
        RunResult(Verdict.OK, "fixed", exit_code=0, results={"junit.xml": FAILING_XML})
    )
    result = grade_with(box, make_task())
    assert result.passed is False
    assert result.score == 0.0
    assert result.problems == ("exit code 0 contradicts the results (some tests did not pass)",)


def test_malformed_results_score_zero(make_task: Any) -> None:
    box = FixedSandbox(
        RunResult(Verdict.OK, "fixed", exit_code=0, results={"junit.xml": b"<testsuites"})
    )
    result = grade_with(box, make_task())
    assert (result.score, result.passed) == (0.0, False)
    assert result.problems[0].startswith("results file junit.xml: not well-formed XML")


def test_one_malformed_file_among_good_ones_scores_zero(make_task: Any) -> None:
    def any_xml(doc: dict[str, Any]) -> None:
        doc["test"]["results"] = "*.xml"

    box = FixedSandbox(
        RunResult(
            Verdict.OK, "fixed", exit_code=0, results={"a.xml": PASSING_XML, "b.xml": b"garbage"}
        )
    )
    result = grade_with(box, make_task(mutate=any_xml))
    assert (result.score, result.passed) == (0.0, False)


def test_empty_results_prove_nothing(make_task: Any) -> None:
    box = FixedSandbox(
        RunResult(Verdict.OK, "fixed", exit_code=0, results={"junit.xml": b"<testsuites/>"})
    )
    result = grade_with(box, make_task())
    assert (result.score, result.passed) == (0.0, False)
    assert result.problems == ("the results hold no test case",)


def test_results_outside_the_glob_are_not_read(make_task: Any) -> None:
    box = FixedSandbox(
        RunResult(Verdict.OK, "fixed", exit_code=0, results={"other.xml": PASSING_XML})
    )
    result = grade_with(box, make_task())
    assert (result.score, result.passed) == (0.0, False)
    assert result.problems[0].startswith("no results file matching 'junit.xml'")


@pytest.mark.parametrize("verdict", [Verdict.MEMORY_LIMIT, Verdict.OUTPUT_LIMIT, Verdict.SIGNAL])
def test_abnormal_end_with_passing_results_scores_zero(make_task: Any, verdict: Verdict) -> None:
    box = FixedSandbox(
        RunResult(verdict, "fixed", message="stopped", results={"junit.xml": PASSING_XML})
    )
    result = grade_with(box, make_task())
    assert result.status is GradeStatus.GRADED
    assert (result.score, result.passed) == (0.0, False)
    assert f"the run ended with {verdict.value}: stopped" in result.problems


def test_run_spec_carries_the_task(make_task: Any) -> None:
    def custom(doc: dict[str, Any]) -> None:
        doc["limits"] = {"wall_seconds": 12, "memory_mb": 256, "processes": 8, "output_bytes": 4096}

    box = FixedSandbox(
        RunResult(Verdict.OK, "fixed", exit_code=0, results={"junit.xml": PASSING_XML})
    )
    result = grade_with(box, make_task(mutate=custom), seed=3)
    assert result.passed is True
    (spec,) = box.specs
    task = load_task(make_task("again", mutate=custom))
    assert list(spec.command) == ["/bin/sh", "-c", task.test.command]
    assert (
        spec.limits.wall_seconds,
        spec.limits.memory_mb,
        spec.limits.processes,
        spec.limits.output_bytes,
    ) == (12, 256, 8, 4096)
    assert spec.env["PYTHONHASHSEED"] == "3"
    assert spec.image == "verify-cli/python:3.11"
    assert spec.runtime == "python"
    assert spec.labels == {"verify-cli.task": "demo/total", "verify-cli.phase": "reference"}
