"""verl's compute_score, called as verl's reward managers call it.

verl is not imported here (``pip install verl`` 0.9.1 would replace transformers 5.24.0 with
5.10.4; test_verl_framework.py runs the real verl beside the venv). The calls below are the
ones of verl's reward managers (keyword arguments
``data_source``, ``solution_str``, ``ground_truth``, ``extra_info``; the batch manager's plural
names), with rows as ``verify-cli export --format verl`` writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_TASKS
from verify_cli.adapters.grading import RewardInfraError
from verify_cli.adapters.verl import compute_score, compute_score_batch
from verify_cli.errors import UsageError

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


def fenced(task_dir: Path) -> str:
    (path,) = sorted((task_dir / "solution").iterdir())
    return f"```python {path.name}\n{path.read_text()}```\n"


def test_compute_score_grades_in_process_and_in_batches() -> None:
    roman = SAMPLE_TASKS / "coding-roman-numerals"
    merge = SAMPLE_TASKS / "coding-interval-merge"
    one = compute_score(data_source="coding", solution_str=fenced(roman), ground_truth="{}",
                        extra_info={"task_id": "coding/roman-numerals", "index": 0},
                        tasks=str(SAMPLE_TASKS), sandbox="bwrap")
    assert one == {"score": 1.0, "passed": True, "status": "graded"}
    batch = compute_score_batch(
        data_sources=["coding"] * 3, solution_strs=[fenced(merge), "no code here", fenced(roman)],
        ground_truths=[json.dumps({})] * 3,
        extra_infos=[{"task_id": "coding/interval-merge"}, {"task_id": "coding/interval-merge"},
                     {"task_id": "coding/roman-numerals"}], tasks=str(SAMPLE_TASKS), sandbox="bwrap")
    assert [b["score"] for b in batch] == [1.0, 0.0, 1.0]
    with pytest.raises(UsageError, match="extra_info has no task_id"):
        compute_score("coding", "x", "{}", {}, tasks=str(SAMPLE_TASKS), sandbox="bwrap")


def test_an_infrastructure_error_raises_never_scores_zero() -> None:
    from tests.service.conftest import start_server

    s = start_server([SAMPLE_TASKS / "coding-roman-numerals"], "--jobs", "1")
    try:
        text = fenced(SAMPLE_TASKS / "coding-roman-numerals")
        info = {"task_id": "coding/roman-numerals"}
        assert compute_score("coding", text, "{}", info, url=s.url)["score"] == 1.0
        with pytest.raises(RewardInfraError, match="deadline"):
            compute_score("coding", text, "{}", info, url=s.url, deadline_seconds=0.001, infra_retries=0)
    finally:
        s.stop()
