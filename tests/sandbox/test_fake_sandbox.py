"""The packaged sandbox test double: runs end as configured, are counted, and can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from verify_cli.sandbox import RunResult, RunSpec, Verdict, create_sandbox, sandbox_names
from verify_cli.sandbox.kit.testing import INJECTED_FAILURE, FakeSandbox


def _spec(tmp_path: Path, task: str = "t") -> RunSpec:
    return RunSpec(command=["/bin/sh", "-c", "echo hi"], workdir=tmp_path, labels={"task": task})


def test_a_given_result_is_returned_and_every_spec_recorded(tmp_path: Path) -> None:
    given = RunResult(Verdict.NONZERO_EXIT, "fake", exit_code=1)
    box = FakeSandbox(given)
    first, second = _spec(tmp_path, "a"), _spec(tmp_path, "b")
    assert box.run(first) is given and box.run(second) is given
    assert box.specs == [first, second] and box.runs == 2 and box.failed == []


def test_a_result_can_be_computed_from_the_spec(tmp_path: Path) -> None:
    box = FakeSandbox(lambda spec: RunResult(Verdict.OK, spec.labels["task"]))
    assert box.run(_spec(tmp_path, "x")).backend == "x"


def test_the_first_runs_fail_as_infrastructure_then_the_inner_backend_runs(tmp_path: Path) -> None:
    with create_sandbox("process") as inner:
        box = FakeSandbox(inner=inner, fail_first=2, fail_message="daemon hiccup")
        got = [box.run(_spec(tmp_path)) for _ in range(3)]
    assert [r.verdict for r in got] == [Verdict.INFRA_ERROR, Verdict.INFRA_ERROR, Verdict.OK]
    assert got[0].message == "daemon hiccup" and got[2].stdout.text == "hi\n"
    assert box.runs == 3 and len(box.failed) == 2


def test_fail_if_picks_the_runs_that_fail(tmp_path: Path) -> None:
    box = FakeSandbox(RunResult(Verdict.OK, "fake"), fail_if=lambda s: s.labels["task"] == "bad")
    assert box.run(_spec(tmp_path, "bad")).verdict is Verdict.INFRA_ERROR
    assert box.run(_spec(tmp_path, "good")).verdict is Verdict.OK
    assert [s.labels["task"] for s in box.failed] == ["bad"]


def test_broken_raises_and_failing_reports(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="fell over"):
        FakeSandbox.broken(RuntimeError("fell over")).run(_spec(tmp_path))
    failing = FakeSandbox.failing()
    assert failing.run(_spec(tmp_path)).message == INJECTED_FAILURE and failing.runs == 1


def test_it_is_not_a_registered_backend_and_takes_one_source_of_results() -> None:
    assert FakeSandbox.name not in sandbox_names()
    with create_sandbox("process") as inner, pytest.raises(ValueError):
        FakeSandbox(RunResult(Verdict.OK, "fake"), inner=inner)
