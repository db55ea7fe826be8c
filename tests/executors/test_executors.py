"""The executor layer without a cluster: the local executor, task shipping, node health, errors."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TaskFactory
from verify_cli.cli.app import main
from verify_cli.executors import ExecutorUnavailableError, LocalExecutor, create_executor, import_ray
from verify_cli.executors.health import NodeHealth
from verify_cli.executors.shipping import TaskDepot, pack_task, unpack_task
from verify_cli.grading import Grader, GradeRequest, Phase
from verify_cli.tasks import load_task


def _requests(task_dir: Path, n: int) -> list[GradeRequest]:
    task = load_task(task_dir)
    return [GradeRequest(task, Phase.REFERENCE if i % 2 else Phase.STARTER, label=str(i)) for i in range(n)]


def _key(r: Any) -> tuple[Any, ...]:
    return (r.label, r.status, r.score, r.passed, tuple((t.id, t.outcome) for t in r.tests))


def test_local_executor_grades_exactly_as_the_grader(make_task: TaskFactory) -> None:
    requests = _requests(make_task(fast=True), 6)
    with LocalExecutor("process", warm=False) as executor:
        seen: list[str] = []
        ours = sorted(_key(r) for r in executor.grade_many(requests, jobs=2, on_result=lambda r: seen.append(r.label)))
        assert executor.backend == "process" and executor.isolation == executor.sandbox.isolation
    with create_executor("local", sandbox="process", warm=False) as other, Grader(other.sandbox) as grader:
        theirs = sorted(_key(r) for r in grader.grade_many(requests, jobs=2))
    assert ours == theirs
    assert sorted(seen) == sorted(r.label for r in requests)
    assert [k[3] for k in sorted(ours)] == [i % 2 == 1 for i in range(6)]  # references pass, starters fail


def test_async_forms_stream_every_result(make_task: TaskFactory) -> None:
    requests = _requests(make_task(fast=True), 4)

    async def run(executor: LocalExecutor) -> tuple[list[str], bool]:
        labels = [r.label async for r in executor.agrade_many(requests, jobs=2)]
        one = await executor.agrade(requests[1])
        return labels, one.passed

    with LocalExecutor("process", warm=False) as executor:
        labels, passed = asyncio.run(run(executor))
    assert sorted(labels) == ["0", "1", "2", "3"] and passed


def test_task_bundle_round_trip_keeps_files_modes_and_hash(make_task: TaskFactory, tmp_path: Path) -> None:
    task_dir = make_task(files={"tests/run.sh": "#!/bin/sh\necho hi\n"})
    os.chmod(task_dir / "tests/run.sh", 0o755)
    task = load_task(task_dir)
    bundle = pack_task(task)
    depot = TaskDepot(tmp_path / "depot")
    folder = depot.add(bundle)
    assert depot.add(bundle) == folder  # unpacked once per content hash
    shipped = depot.localise(task, bundle.content_hash)
    assert shipped.root == folder and shipped.content_hash() == task.content_hash()
    assert shipped == load_task(folder).__class__(**{**task.__dict__, "root": folder})
    assert stat.S_IMODE((folder / "tests/run.sh").stat().st_mode) == 0o755
    depot.close()
    assert not folder.exists()


def test_a_bundle_cannot_write_outside_its_folder(make_task: TaskFactory, tmp_path: Path) -> None:
    bundle = pack_task(load_task(make_task()))
    bundle.files["../escaped.txt"] = (0o644, b"x")
    with pytest.raises(ValueError, match="unsafe path"):
        unpack_task(bundle, tmp_path / "dest")
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "dest").exists()


def test_a_node_that_keeps_failing_is_drained_and_a_success_forgives() -> None:
    health = NodeHealth(drain_after=3)
    assert not health.failure("a", "actor died") and not health.failure("a", "actor died")
    health.success("a")  # strikes count failures in a row
    assert not health.failure("a", "x") and not health.failure("a", "x")
    assert health.failure("a", "x") and health.drained("a")
    assert not health.failure("a", "x")  # drained once, reported once
    assert not health.drained("b")
    record = next(r for r in health.records() if r.node == "a")
    assert record.failures == 6 and record.successes == 1


def test_missing_ray_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the distributed extra were not installed
    with pytest.raises(ExecutorUnavailableError) as info:
        import_ray()
    assert "verify-cli[distributed]" in str(info.value)


def test_unknown_executor_exits_2(sample_tasks_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-tasks", str(sample_tasks_dir / "coding-interval-merge"), "--executor", "slurm",
                 "--no-cache"])
    out = capsys.readouterr()
    assert code == 2 and "unknown executor 'slurm'" in out.err and "Traceback" not in out.err


def test_ray_executor_without_ray_exits_3_with_a_hint(sample_tasks_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    code = main(["check-tasks", str(sample_tasks_dir / "coding-interval-merge"), "--executor", "ray", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 3 and "install 'verify-cli[distributed]'" in err and "Traceback" not in err


@pytest.mark.ray
def test_an_address_where_no_cluster_answers_fails_fast_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    assert main(["cluster", "status", "--ray-address", f"127.0.0.1:{port}"]) == 3
    err = capsys.readouterr().err
    assert "no Ray cluster answers" in err and "ray start --head" in err and "Traceback" not in err
