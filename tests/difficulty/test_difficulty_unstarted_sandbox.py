"""difficulty under a bwrap that never starts: every sample is an infra error with a null score
in samples.parquet and in no pass rate, never a failed sample scored 0."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.difficulty.test_runner import PacedBackend, tasks_in
from verify_cli.difficulty.outputs import write_tables
from verify_cli.difficulty.runner import DifficultyOptions, run_difficulty
from verify_cli.grading.grader import Grader
from verify_cli.sandbox.bwrap.sandbox import BwrapSandbox
from verify_cli.sandbox.kit.standins import standin_bwrap

pytestmark = [pytest.mark.bwrap]


def test_unstarted_sandboxes_are_null_scores_never_zeros(task_set, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    folder, _ = task_set({"a": []})
    sandbox = BwrapSandbox()
    monkeypatch.setenv("PATH", f"{standin_bwrap(tmp_path / 'bin')}:{os.environ['PATH']}")
    report = run_difficulty(tasks_in(folder), PacedBackend(0), Grader(sandbox), DifficultyOptions(samples=2, jobs=1))
    (task,) = report.tasks
    assert task.stats.n == 0 and task.stats.status_counts["infra_error"] == 2 and task.stats.mean_score is None
    _, samples = write_tables(report, tmp_path / "out")
    rows = pq.read_table(samples).to_pylist()
    assert [(r["status"], r["score"]) for r in rows] == [("infra_error", None)] * 2
    assert all(any("Creating new namespace failed" in p for p in r["problems"]) for r in rows)
