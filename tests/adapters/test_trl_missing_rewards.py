"""What TRL 1.16's GRPOTrainer really does with verify-cli's missing reward (``None``), with the
service down: alone, the completions are masked (no reward, no advantage); beside a second
reward function, TRL sums with nansum and trains on the other function alone. docs/trainers.md
states both; these tests hold TRL to it."""

from __future__ import annotations

import math
import socket
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the trl extra is not installed: pip install 'verify-cli[trl]'")
pytest.importorskip("torch", reason="the train extra is not installed")

from verify_cli.adapters.trl import VerifyCliReward

pytestmark = [pytest.mark.slow]


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _missing(value: float | None) -> bool:
    """TRL logs a NaN mean as None."""
    return value is None or math.isnan(value)


def length_bonus(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
    return [min(1.0, len(str(c)) / 100) for c in completions]


def _train(tmp_path: Path, reward_funcs: list[Any]) -> tuple[list[dict[str, Any]], Any]:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from verify_cli.models.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "model", hidden_size=32, layers=1, heads=2)
    dataset = Dataset.from_dict({"prompt": ["Write an answer:"] * 4, "task_id": ["coding/interval-merge"] * 4})
    config = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, max_steps=1, logging_steps=1,
                        per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
                        report_to="none", save_strategy="no", temperature=1.0, seed=0)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=reward_funcs, args=config, train_dataset=dataset,
                          processing_class=AutoTokenizer.from_pretrained(model_dir))
    trainer.train()
    return [e for e in trainer.state.log_history if "reward" in e], trainer


def test_alone_a_missing_reward_is_masked_not_zero(tmp_path: Path) -> None:
    reward = VerifyCliReward(url=_dead_url(), max_retries=0, max_wait=0.1)
    logs, _ = _train(tmp_path, [reward])
    assert reward.history and all(r["status"] == "infra_error" for r in reward.history[0][2])
    entry = logs[0]
    assert _missing(entry["reward"]) and _missing(entry["rewards/verify_cli/mean"])  # no reward: not a 0
    assert entry["grad_norm"] == 0.0  # every advantage 0: the step learned nothing from them
    reward.close()


def test_beside_a_second_reward_function_trl_trains_on_the_other_alone(tmp_path: Path) -> None:
    reward = VerifyCliReward(url=_dead_url(), max_retries=0, max_wait=0.1)
    logs, _ = _train(tmp_path, [reward, length_bonus])
    entry = logs[0]
    assert _missing(entry["rewards/verify_cli/mean"])
    # nansum: the completion's reward is the length bonus alone, as if verify-cli had said 0
    assert entry["reward"] == pytest.approx(entry["rewards/length_bonus/mean"], abs=1e-6)
    assert not _missing(entry["reward"])
    reward.close()
