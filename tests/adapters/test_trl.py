"""TRL's GRPOTrainer trains a few steps on CPU with verify-cli rewards (the real TRL from PyPI)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the trl extra is not installed: pip install 'verify-cli[trl]'")
pytest.importorskip("torch", reason="the train extra is not installed")

from verify_cli.adapters.grading import CompletionGrader
from verify_cli.adapters.trl import VerifyCliReward

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

TASK_TOML = """schema_version = 1
id = "test/answer-length"
title = "An answer whose length has some properties"
domain = "coding"
language = "python"
editable = ["answer.txt"]
isolation = "in-process"

[environment]
image = "verify-cli/python:3.11"
runtime = "python"

[test]
command = 'python -m pytest -q -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests'
framework = "pytest"
results = "junit.xml"

[scoring]
policy = "fraction"

[limits]
wall_seconds = 30
memory_mb = 512
processes = 64
output_bytes = 1048576
"""

TESTS = '''from pathlib import Path

ANSWER = Path(__file__).resolve().parent.parent / "answer.txt"


def test_even_length():
    assert len(ANSWER.read_bytes()) % 2 == 0


def test_length_divisible_by_three():
    assert len(ANSWER.read_bytes()) % 3 == 0


def test_mentions_a_vowel():
    assert any(c in ANSWER.read_text(errors="replace") for c in "aeiou")
'''


def answer_task(root: Path) -> Path:
    """A task a random model's text earns varied scores on: fraction of three length checks."""
    d = root / "answer-length"
    (d / "starter").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "tests").mkdir()
    (d / "task.toml").write_text(TASK_TOML)
    (d / "prompt.md").write_text("Write an answer.\n")
    (d / "starter" / "answer.txt").write_text("x\n")
    (d / "solution" / "answer.txt").write_text("abcde\n")
    (d / "tests" / "test_answer.py").write_text(TESTS)
    return root


def test_grpo_trainer_logs_the_verify_cli_grades_of_its_completions(tmp_path: Path) -> None:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from verify_cli.models.tiny import build_tiny_model

    tasks = answer_task(tmp_path / "tasks")
    model_dir = build_tiny_model(tmp_path / "model", hidden_size=32, layers=1, heads=2)
    dataset = Dataset.from_dict({"prompt": ["Write an answer:", "Another answer:"] * 4,
                                 "task_id": ["test/answer-length"] * 8})
    reward = VerifyCliReward(tasks=tasks, sandbox="bwrap", jobs=2)
    config = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, max_steps=2, logging_steps=1,
                        per_device_train_batch_size=4, num_generations=4, max_completion_length=24,
                        report_to="none", save_strategy="no", temperature=1.0, seed=0)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=[reward], args=config, train_dataset=dataset,
                          processing_class=AutoTokenizer.from_pretrained(model_dir))
    trainer.train()
    logged = [e["rewards/verify_cli/mean"] for e in trainer.state.log_history if "rewards/verify_cli/mean" in e]
    assert len(logged) == 2 and len(reward.history) == 2
    # The same completions graded again, independently, in a fresh grader.
    with CompletionGrader(tasks=tasks, sandbox="bwrap", warm=False) as fresh:
        for mean, (task_ids, texts, _results) in zip(logged, reward.history, strict=True):
            again = [r["score"] for r in fresh.grade(list(zip(task_ids, texts, strict=True)))]
            assert mean == pytest.approx(sum(again) / len(again), abs=1e-6)
    scores = {r["score"] for _, _, results in reward.history for r in results}
    assert len(scores) > 1, scores  # the rewards vary: the check above can tell them apart
    reward.close()


def test_an_infrastructure_error_is_none_not_zero(tmp_path: Path) -> None:
    from tests.service.conftest import start_server

    tasks = answer_task(tmp_path / "tasks")
    s = start_server([tasks], "--jobs", "1")
    try:
        late = VerifyCliReward(url=s.url, deadline_seconds=0.001, infra_retries=0)
        on_time = VerifyCliReward(url=s.url)
        columns = {"task_id": ["test/answer-length"] * 2}
        assert late(["p", "p"], ["abcdef", "ab"], **columns) == [None, None]
        assert on_time(["p", "p"], ["abcde", "b"], **columns) == [pytest.approx(1.0), pytest.approx(1 / 3)]
    finally:
        s.stop()
