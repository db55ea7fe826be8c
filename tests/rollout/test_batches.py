"""Batch choice: seeded and resumable, difficulty buckets skipped unless asked for."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from verify_cli.errors import UsageError
from verify_cli.rollout.batches import BatchSchedule, select_tasks
from verify_cli.tasks.loader import load_task_set
from verify_cli.tasks.model import Task

TOY_TASKS = Path(__file__).resolve().parent.parent / "fixtures" / "toy_sums"


def bucketed_tasks(tmp_path: Path, buckets: dict[str, str]) -> list[Task]:
    root = tmp_path / "tasks"
    shutil.copytree(TOY_TASKS, root)
    for folder, bucket in buckets.items():
        with (root / folder / "task.toml").open("a") as f:
            f.write(f'\n[difficulty]\npass_rate = 1.0\nbucket = "{bucket}"\nn = 8\nmodel = "m"\ndate = "2026-11-30"\n')
    return [t for t in load_task_set(root) if isinstance(t, Task)]


def test_solved_and_unsolved_tasks_are_skipped_unless_asked(tmp_path: Path) -> None:
    tasks = bucketed_tasks(tmp_path, {"sum-1-plus-x-is-8": "solved", "sum-2-plus-x-is-5": "unsolved",
                                      "sum-4-plus-x-is-5": "medium"})
    sel = select_tasks(tasks)
    assert [t.id for t in sel.tasks] == ["toy/sum-4-plus-x-is-5", "toy/sum-6-plus-x-is-8"]
    assert sel.skipped == {"toy/sum-1-plus-x-is-8": "solved", "toy/sum-2-plus-x-is-5": "unsolved"}
    assert len(select_tasks(tasks, include_buckets=["solved"]).tasks) == 3
    with pytest.raises(UsageError, match="no task left"):
        select_tasks([t for t in tasks if t.id in sel.skipped])


def test_batches_are_a_function_of_seed_and_step_and_cover_every_task_each_epoch(tmp_path: Path) -> None:
    tasks = [t for t in load_task_set(TOY_TASKS) if isinstance(t, Task)]
    a, b = BatchSchedule(tasks, 3, seed=5), BatchSchedule(tasks, 3, seed=5)
    assert [[t.id for t in b.batch(s)] for s in (3, 0, 1)] == [[t.id for t in a.batch(s)] for s in (3, 0, 1)]
    first_epoch = [t.id for s in range(4) for t in a.batch(s)][:4]
    assert sorted(first_epoch) == sorted(t.id for t in tasks)
