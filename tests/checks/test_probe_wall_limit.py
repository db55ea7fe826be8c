"""Audit's probes run under a wall limit derived from the reference's measured time, never the
task's own ceiling: a probe that hangs (sleep-past-timeout) on a task with a generous limit (an
imported repository task's 900 s) costs seconds, and is still caught timing out."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.conftest import write_task
from verify_cli.checks.audit import AuditOptions, audit_tasks
from verify_cli.checks.audit.mutation import MIN_TIMEOUT, derived_wall_seconds
from verify_cli.checks.audit.probing import probe_requests
from verify_cli.grading import Grader
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks.loader import load_task

TASK_LIMIT = 90.0


def _task(tmp_path: Path) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        doc["limits"]["wall_seconds"] = TASK_LIMIT

    return load_task(write_task(tmp_path / "slow-limit", mutate=mutate))


def test_the_derived_limit_is_the_reference_time_scaled_within_the_tasks(tmp_path: Path) -> None:
    task = _task(tmp_path)
    assert derived_wall_seconds(task, 0.2) == MIN_TIMEOUT
    assert derived_wall_seconds(task, 10.0) == 42.0
    assert derived_wall_seconds(task, 60.0) == TASK_LIMIT
    ((_probe, request),) = probe_requests(task, frozenset({"sleep-past-timeout"}), "t", 7.0)
    assert request.wall_seconds == 7.0
    assert b"time.sleep(12)" in next(iter((request.candidate or {}).values()))


def test_a_hanging_probe_costs_the_derived_limit_not_the_tasks(tmp_path: Path, process_sandbox: Sandbox) -> None:
    task = _task(tmp_path)
    options = AuditOptions(mutants=False, flaky=False, labelled=False, reruns=0,
                           probe_names=frozenset({"sleep-past-timeout", "exit-zero-at-import"}))
    started = time.monotonic()
    (audit,) = audit_tasks([task], Grader(process_sandbox), options)
    elapsed = time.monotonic() - started
    assert elapsed < TASK_LIMIT / 3, f"audit took {elapsed:.0f}s: the probe ran under the task's {TASK_LIMIT:g}s"
    by_name = {p.name: p for p in audit.probes or []}
    assert not by_name["sleep-past-timeout"].hacked and "timeout" in by_name["sleep-past-timeout"].why
    assert not by_name["exit-zero-at-import"].hacked
