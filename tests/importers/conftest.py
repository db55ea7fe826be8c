"""Fixtures of the importer tests: small data sets in each layout, and a warm bwrap grader."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from verify_cli.checks.report import TaskReport
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.grading.grader import Grader
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task_set


@pytest.fixture(scope="session")
def bwrap_grader() -> Iterator[Grader]:
    """check-tasks' grader as the CLI runs it: bwrap, warm."""
    with create_sandbox("bwrap") as box, Grader(box, warm=True) as grader:
        yield grader


CheckSet = Callable[[Path], dict[str, TaskReport]]


@pytest.fixture
def check_set(bwrap_grader: Grader) -> CheckSet:
    """check-tasks' library API (warm, bwrap) over a folder: task id -> report."""

    def run(folder: Path) -> dict[str, TaskReport]:
        reports = check_tasks(load_task_set(folder), bwrap_grader, CheckOptions(repeats=2, jobs=2))
        return {r.task_id: r for r in reports}

    return run


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[[str, list[dict[str, Any]]], Path]:
    def write(name: str, rows: list[dict[str, Any]]) -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return path

    return write
