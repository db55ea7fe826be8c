"""Batches of any size through each adapter in URL mode, and rewards while the service is down:
the clients split a batch to the service's capacity (jobs + queue size: 66 at the defaults,
where 67 completions used to raise 422 batch_too_large), and TRL's reward answers None while
the service is away, then real scores when it is back."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_TASKS
from tests.service.conftest import Served, start_server
from verify_cli.adapters.grading import CompletionGrader
from verify_cli.adapters.trl import VerifyCliReward
from verify_cli.adapters.verl import compute_score_batch

N = 1000
TASKS = ["coding/interval-merge", "coding/roman-numerals"]
NO_ANSWER = "I refuse to answer."  # no code: parse_error, score 0, without a sandbox run


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    s = start_server([SAMPLE_TASKS], "--jobs", "2")
    yield s
    s.stop()


def _items() -> list[tuple[str, str]]:
    return [(TASKS[i % 2], f"{NO_ANSWER} ({i})") for i in range(N)]


def test_completion_grader_grades_1000_items_through_the_service(served: Served) -> None:
    with CompletionGrader(url=served.url) as grader:
        results = grader.grade(_items())
    assert len(results) == N
    assert [r["task_id"] for r in results] == [TASKS[i % 2] for i in range(N)]
    assert {r["status"] for r in results} == {"parse_error"}


def test_verls_compute_score_batch_takes_1000_completions(served: Served) -> None:
    items = _items()
    scores = compute_score_batch(["verify-cli"] * N, [t for _, t in items], [None] * N,
                                 [{"task_id": task} for task, _ in items], url=served.url)
    assert len(scores) == N and {s["status"] for s in scores} == {"parse_error"}
    assert all(s["score"] == 0.0 for s in scores)


def test_trls_reward_takes_1000_completions(served: Served) -> None:
    items = _items()
    reward = VerifyCliReward(url=served.url)
    try:
        out = reward(["p"] * N, [t for _, t in items], task_id=[task for task, _ in items])
    finally:
        reward.close()
    assert out == [0.0] * N
    assert [r["task_id"] for r in reward.history[0][2]] == [task for task, _ in items]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_trls_reward_is_none_while_the_service_is_down_and_scores_when_it_is_back() -> None:
    port = _free_port()
    reward = VerifyCliReward(url=f"http://127.0.0.1:{port}", max_retries=2, max_wait=0.5)
    ref = (SAMPLE_TASKS / "coding-interval-merge" / "solution" / "intervals.py").read_text()
    completions = [f"```python\n{ref}\n```", NO_ANSWER]
    columns = {"task_id": ["coding/interval-merge"] * 2}
    try:
        t0 = time.monotonic()
        assert reward(["p", "p"], completions, **columns) == [None, None]  # before: raised after 338 s
        assert time.monotonic() - t0 < 10
        s = start_server([SAMPLE_TASKS / "coding-interval-merge"], "--jobs", "1", port=port)
        try:
            assert reward(["p", "p"], completions, **columns) == [1.0, 0.0]
        finally:
            s.stop()
        assert reward(["p", "p"], completions, **columns) == [None, None]
    finally:
        reward.close()


def test_an_exported_jsonl_feeds_trls_reward_as_documented(served: Served, tmp_path: Path) -> None:
    """docs/trainers.md's TRL example: the exported rows, loaded with datasets, give GRPOTrainer
    the chat verify-cli sends and the task_id column the reward grades by."""
    import datasets

    from verify_cli.exporters.run import export_tasks

    out = export_tasks(SAMPLE_TASKS / "coding-interval-merge", "jsonl", tmp_path / "tasks.jsonl").out
    ds = datasets.load_dataset("json", data_files=str(out), split="train")
    ds = ds.select_columns(["messages", "task_id"]).rename_column("messages", "prompt")
    assert ds[0]["prompt"][0]["role"] == "system" and "## Answer format" in ds[0]["prompt"][1]["content"]
    ref = (SAMPLE_TASKS / "coding-interval-merge" / "solution" / "intervals.py").read_text()
    reward = VerifyCliReward(url=served.url)
    try:
        assert reward(ds["prompt"], [f"```python intervals.py\n{ref}```"], task_id=ds["task_id"]) == [1.0]
    finally:
        reward.close()
