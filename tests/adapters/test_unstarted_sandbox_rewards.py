"""Correct answers under a bwrap that fails to start one run in three: none is rewarded 0.

Through the reward functions a trainer calls (TRL's, verl's), a run whose sandbox never began is
"no reward" (TRL: None; verl: RewardInfraError after the retries), or, retried, the true grade.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.adapters.test_trl import answer_task
from verify_cli.adapters.grading import CompletionGrader, RewardInfraError
from verify_cli.adapters.trl import VerifyCliReward
from verify_cli.adapters.verl import compute_score_batch
from verify_cli.sandbox.kit.standins import standin_bwrap, standin_starts

pytestmark = [pytest.mark.bwrap]


def _standin_first(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Path:
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return folder


def test_trl_gets_none_never_0_for_an_unstarted_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = answer_task(tmp_path / "tasks")
    folder = _standin_first(monkeypatch, standin_bwrap(tmp_path / "bin", fail_every=3))
    with CompletionGrader(tasks=tasks, sandbox="bwrap", warm=False, infra_retries=0, jobs=1) as grader:
        reward = VerifyCliReward(grader)
        got = reward(["p"] * 6, ["abcde"] * 6, task_id=["test/answer-length"] * 6)
    assert standin_starts(folder) >= 6
    assert None in got and 0.0 not in got
    assert all(r is None or r == pytest.approx(1.0) for r in got)


def test_retries_give_the_true_grade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = answer_task(tmp_path / "tasks")
    _standin_first(monkeypatch, standin_bwrap(tmp_path / "bin", fail_every=3))
    with CompletionGrader(tasks=tasks, sandbox="bwrap", warm=False, infra_retries=2, jobs=1) as grader:
        results = grader.grade([("test/answer-length", "abcde")] * 6)
    assert [r["score"] for r in results] == [pytest.approx(1.0)] * 6


def test_verl_fails_loudly_rather_than_scoring_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = answer_task(tmp_path / "tasks")
    _standin_first(monkeypatch, standin_bwrap(tmp_path / "bin"))  # every start fails
    with pytest.raises(RewardInfraError, match="Creating new namespace failed"):
        compute_score_batch(["d"] * 2, ["abcde"] * 2, [None] * 2, [{"task_id": "test/answer-length"}] * 2,
                            tasks=str(tasks), sandbox="bwrap", infra_retries=0)
