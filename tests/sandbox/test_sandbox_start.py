"""A sandbox that did not start is ``infra_error`` with its own words, never the command's failure.

bubblewrap fails to create namespaces when the host runs out of user namespaces
(``max_user_namespaces``); it then exits 1 before running anything. The stand-ins of
:mod:`verify_cli.sandbox.kit.standins` make that happen on demand: first on ``PATH`` (the run's
own bwrap), or bound over the bwrap a two-process run nests inside its sandbox.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Limits, RunSpec, Verdict
from verify_cli.sandbox.bwrap import sandbox as bwrap_sandbox
from verify_cli.sandbox.bwrap.sandbox import BwrapSandbox
from verify_cli.sandbox.kit.standins import NAMESPACE_FAILURE, standin_bwrap, standin_starts
from verify_cli.tasks.loader import load_task

pytestmark = [pytest.mark.bwrap]

ROMAN = Path(__file__).resolve().parents[2] / "sample_tasks" / "coding-roman-numerals"


def _on_path(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    import os

    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")


def _spec(tmp_path: Path, command: str) -> RunSpec:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return RunSpec(command=["/bin/sh", "-c", command], workdir=work,
                   limits=Limits(wall_seconds=20, memory_mb=256, processes=32))


def test_a_command_that_fails_is_still_its_own_failure(tmp_path: Path) -> None:
    run = BwrapSandbox().run(_spec(tmp_path, "echo 'bwrap: Creating new namespace failed' >&2; exit 1"))
    assert run.verdict is Verdict.NONZERO_EXIT and run.exit_code == 1


def test_bwrap_that_cannot_create_namespaces_is_infra_with_its_message(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = BwrapSandbox()  # the availability probe ran (and succeeded) before the host ran out
    _on_path(monkeypatch, standin_bwrap(tmp_path / "bin"))
    run = sandbox.run(_spec(tmp_path, "exit 0"))
    assert run.verdict is Verdict.INFRA_ERROR
    assert NAMESPACE_FAILURE in run.message and "did not start" in run.message


def test_a_correct_reference_is_never_scored_0_when_one_start_in_three_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_task(ROMAN)
    folder = standin_bwrap(tmp_path / "bin", fail_every=3)
    _on_path(monkeypatch, folder)
    grader = Grader(BwrapSandbox())
    results = list(grader.grade_many([GradeRequest(task, Phase.REFERENCE, seed=s) for s in range(6)], jobs=2))
    assert standin_starts(folder) == 6
    infra = [r for r in results if r.status is GradeStatus.INFRA_ERROR]
    graded = [r for r in results if r.status is GradeStatus.GRADED]
    assert len(infra) == 2 and all(r.score is None for r in infra)
    assert all(NAMESPACE_FAILURE in r.problems[0] for r in infra)
    assert graded and all(r.score == 1.0 and r.passed for r in graded)


def test_the_tests_nested_sandbox_failing_to_start_is_infra(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_task(ROMAN)
    _on_path(monkeypatch, standin_bwrap(tmp_path / "bin", nested=True))
    result = Grader(BwrapSandbox()).grade(GradeRequest(task, Phase.REFERENCE))
    assert result.isolation == "two-process"
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None
    assert NAMESPACE_FAILURE in result.problems[0]


def test_warm_grading_under_a_failing_bwrap_is_infra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_task(ROMAN)
    _on_path(monkeypatch, standin_bwrap(tmp_path / "bin"))
    with Grader(BwrapSandbox(), warm=True) as grader:
        result = grader.grade(GradeRequest(task, Phase.REFERENCE))
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None
    assert NAMESPACE_FAILURE in result.problems[0]


def test_check_tasks_reports_infrastructure_not_a_failing_reference(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_task(ROMAN)
    _on_path(monkeypatch, standin_bwrap(tmp_path / "bin", fail_every=3))
    [report] = check_tasks([task], Grader(BwrapSandbox()), CheckOptions(repeats=4, jobs=1, first_wave=3))
    by_name = {c.name: c for c in report.checks}
    assert by_name["infrastructure"].status.value == "error"
    assert NAMESPACE_FAILURE in by_name["infrastructure"].message
    assert "reference fails" not in " ".join(c.message for c in report.checks)
    assert by_name["reference-passes"].status.value == "pass"


def test_a_failed_probe_is_asked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_sandbox, "_PROBED", [])
    monkeypatch.setattr(bwrap_sandbox, "PROBE_TRIES", 1)
    _on_path(monkeypatch, standin_bwrap(tmp_path / "bin"))
    failed = BwrapSandbox.availability()
    assert not failed.available and "namespace" in failed.reason
    monkeypatch.undo()  # the host has namespaces again: the backend is back
    monkeypatch.setattr(bwrap_sandbox, "_PROBED", [])
    assert BwrapSandbox.availability().available


def test_a_probe_retries_a_namespace_shortage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_sandbox, "_PROBED", [])
    folder = standin_bwrap(tmp_path / "bin", fail_every=3)  # the first start fails, the next works
    _on_path(monkeypatch, folder)
    assert BwrapSandbox.availability().available
    assert standin_starts(folder) == 2


def test_a_session_whose_bwrap_cannot_start_is_an_infra_error(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from verify_cli.sandbox.sessions.base import SessionInfraError

    sandbox = BwrapSandbox()
    _on_path(monkeypatch, standin_bwrap(tmp_path / "bin"))
    try:
        with pytest.raises(SessionInfraError, match="Creating new namespace failed"):
            sandbox.open_session()
    finally:
        sandbox.close()
