"""Prompts longer than the model's context, end to end with the hf backend and a real tiny model
of 3,000 positions on the sample tasks (whose prompts run from about 2,500 to 15,000 byte tokens):
``tasks stats`` says each prompt's length, ``difficulty`` buckets the tasks that do not fit
``prompt_too_long`` without sampling them, and ``train`` masks their samples in the shards. Before,
the model was run past its positions (an IndexError after minutes of generating)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from verify_cli.cli.app import main

#: The two sample tasks whose prompts (visible tests shown) fit 3,000 byte tokens.
FITTING = {"coding/interval-merge", "coding/roman-numerals"}


@pytest.fixture(scope="module")
def model_3k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from verify_cli.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("model-3k"), hidden_size=32, layers=1, heads=2,
                            max_positions=3000)


def test_tasks_stats_says_each_prompts_length_in_tokens(model_3k: Path, sample_tasks_dir: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "stats", str(sample_tasks_dir), "--tokenizer", str(model_3k), "--sandbox", "process",
                 "--json", "-"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["context_length"] == 3000
    prompts = {p["task_id"]: p for p in stats["prompts"]}
    assert len(prompts) == 11 and all(p["tokens"] > 2000 for p in prompts.values())
    assert {t for t, p in prompts.items() if p["fits"]} == FITTING
    assert stats["prompt_too_long"] == 9
    assert prompts["repository/orders-etl"]["tokens"] > 14000
    # A context given without a tokenizer: characters only, nothing can be decided.
    assert main(["tasks", "stats", str(sample_tasks_dir), "--context-length", "3000", "--sandbox", "process",
                 "--json", "-"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert all(p["tokens"] is None and p["fits"] is None and p["chars"] > 0 for p in plain["prompts"])
    assert main(["tasks", "stats", str(sample_tasks_dir), "--tokenizer", str(sample_tasks_dir / "nope")]) == 2


@pytest.mark.slow
def test_difficulty_buckets_prompts_too_long_without_sampling_them(
        model_3k: Path, sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["difficulty", str(sample_tasks_dir), "-b", "hf", "-m", str(model_3k), "--device", "cpu",
                 "-n", "2", "--max-tokens", "8", "--out", str(out), "--sandbox", "process", "--no-cache",
                 "--json", "-"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert code == 0, captured.err
    assert summary["prompt_too_long"] == 9 and summary["buckets"]["prompt_too_long"] == 9
    assert summary["generated"] == 4  # the two tasks that fit, two samples each
    assert "do not fit the model's context" in captured.err
    by_task = {t["task_id"]: t for t in summary["tasks"]}
    assert {t for t, row in by_task.items() if row["bucket"] != "prompt_too_long"} == FITTING
    assert by_task["repository/orders-etl"]["prompt_tokens"] > 14000
    rows = {r["task_id"]: r for r in pq.read_table(out / "difficulty.parquet").to_pylist()}
    assert rows["repository/orders-etl"]["bucket"] == "prompt_too_long" and rows["repository/orders-etl"]["n"] == 0
    assert rows["coding/roman-numerals"]["prompt_tokens"] < 3000
    assert {s["task_id"] for s in pq.read_table(out / "samples.parquet").to_pylist()} == FITTING


@pytest.mark.slow
def test_train_masks_prompts_too_long_in_the_shards(model_3k: Path, sample_tasks_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    code = main(["train", str(sample_tasks_dir), "--backend", "hf", "--model", str(model_3k), "--out", str(run),
                 "-G", "2", "-B", "11", "--steps", "1", "--max-tokens", "8", "--sandbox", "process"])
    assert code == 0, capsys.readouterr().err
    rows = [r for shard in sorted((run / "shards").glob("*.parquet")) for r in pq.read_table(shard).to_pylist()]
    assert len(rows) == 22
    too_long = [r for r in rows if r["status"] == "prompt_too_long"]
    # The default system prompt makes each prompt a little longer: the nine long ones never fit.
    assert {r["task_id"] for r in too_long} >= {"repository/orders-etl", "repository/inventory-package"}
    assert all(r["masked"] and r["reward"] is None and r["advantage"] is None and r["response_token_ids"] == []
               for r in too_long)
    assert {r["task_id"] for r in rows if r["status"] != "prompt_too_long"} <= FITTING
    capsys.readouterr()
    assert main(["trajectories", "inspect", str(run), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status_counts"]["prompt_too_long"] == len(too_long) and summary["masked"] >= len(too_long)
